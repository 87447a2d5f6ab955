"""``TinyhwStrategy``: off -> link_up -> firmware_verified -> booted, each reached idempotently (docs/labgrid.md).

* ``off``: the board powered off and the tinyhw driver deactivated (its session closed, the device lock released).
  With a farm's own ``PowerProtocol`` driver bound, the session is closed first and that driver turns the board
  off; without one, the strategy uses the target's ``TinyhwPowerDriver`` (made when the environment names none):
  the bridge's PCIe power toggle, switched off through the session before it is closed (a board without the
  bridge only has its session closed).
* ``link_up``: powered (the farm's power driver on; the bridge's PCIe side is powered on by opening the session,
  and checked on), the tinyhw driver activated, and the board answers config reads.
* ``firmware_verified``: the flash equals ``image`` (written with the journaled, verified ``load`` when it
  does not); without an ``image`` attribute, a dump of the flash passes tinyhw's image checks (IFWI magic, a
  ``$PSP`` directory, an ATOM VBIOS).
* ``booted``: ``am boot`` done; a board tinyhw already booted gets the partial boot (a re-check), never a second
  full one.

Asking for the state the target is in does nothing; asking for a later one walks through the states before it
that are not reached yet; ``off`` always goes back. A failure marks the strategy broken (labgrid's
``never_retry``): a board that failed to boot is looked at, not booted again blindly.
"""

from __future__ import annotations

import enum

import attr
from labgrid.factory import target_factory
from labgrid.step import step
from labgrid.strategy import Strategy, StrategyError, never_retry

from tinyhw.labgrid.power import TinyhwPowerDriver, default_power


class Status(enum.Enum):
    """The states, in order."""

    unknown = 0
    off = 1
    link_up = 2
    firmware_verified = 3
    booted = 4


@target_factory.reg_driver
@attr.s(eq=False)
class TinyhwStrategy(Strategy):
    """Walks a tinyhw board through :class:`Status`."""

    bindings = {"tinyhw": "TinyhwDriver", "power": {"PowerProtocol", None}}
    image = attr.ib(default=None, validator=attr.validators.optional(attr.validators.instance_of(str)))
    status = attr.ib(default=Status.unknown)

    @never_retry
    @step(args=["status"])
    def transition(self, status: Status | str, *, step: object = None) -> None:
        """Bring the target to ``status`` (a :class:`Status` or its name)."""
        if not isinstance(status, Status):
            try:
                status = Status[str(status)]
            except KeyError:
                raise StrategyError(f"no state {status!r} (states: {', '.join(s.name for s in Status)})") from None
        if status is Status.unknown:
            raise StrategyError("cannot transition to unknown")
        if status is self.status:
            return
        if status is Status.off or self.status.value > status.value:
            self._off()
        for wanted in list(Status)[max(self.status.value + 1, Status.link_up.value):status.value + 1]:
            {Status.link_up: self._link_up, Status.firmware_verified: self._firmware,
             Status.booted: self._boot}[wanted]()
            self.status = wanted

    def power_lost(self) -> None:
        """The board's power went off behind the strategy's back (:class:`TinyhwPowerDriver` ``off``/``cycle``): a
        board counted past ``off`` is ``unknown`` again (its session may still be open), so the next transition
        goes through ``off`` or links, checks the firmware and boots anew instead of trusting a boot the GPU no
        longer holds."""
        if self.status.value > Status.off.value:
            self.status = Status.unknown

    def _bridge_power(self) -> TinyhwPowerDriver | None:
        """The bridge's PCIe toggle when no farm power driver is bound (or the bound one is tinyhw's), if the board
        has it."""
        power = self.power if self.power is not None else default_power(self.target)
        if not isinstance(power, TinyhwPowerDriver):
            return None
        return power if power.available() else None

    def _off(self) -> None:
        if self.power is None or isinstance(self.power, TinyhwPowerDriver):
            bridge = self._bridge_power()
            if bridge is not None:
                self.target.activate(bridge)
                bridge.off()
            self.target.deactivate(self.tinyhw)
        else:
            self.target.deactivate(self.tinyhw)
            self.target.activate(self.power)
            self.power.off()
        self.status = Status.off

    def _link_up(self) -> None:
        if self.power is not None and not isinstance(self.power, TinyhwPowerDriver):
            self.target.activate(self.power)
            self.power.on()
        self.target.activate(self.tinyhw)
        if self.power is None or isinstance(self.power, TinyhwPowerDriver):
            bridge = self._bridge_power()
            if bridge is not None:
                self.target.activate(bridge)
                bridge.on()
        if not self.tinyhw.link_up():
            raise StrategyError("the board does not answer config reads (link down)")

    def _firmware(self) -> None:
        if self.image is None:
            from tinyhw.errors import TinyhwError
            from tinyhw.formats.ifwi import require_flashable

            try:
                require_flashable(self.tinyhw.flash_dump())
            except TinyhwError as e:
                raise StrategyError(f"the flash does not hold a bootable image: {e.message}") from None
            return
        if not self.tinyhw.flash_verify(self.image)["match"]:
            self.tinyhw.load(self.image)
            if not self.tinyhw.flash_verify(self.image)["match"]:
                raise StrategyError(f"the flash does not equal {self.image} after writing it")

    def _boot(self) -> None:
        self.tinyhw.am_boot()
