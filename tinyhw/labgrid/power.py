"""``TinyhwPowerDriver``: labgrid's ``PowerProtocol`` as the ASM24 bridge's PCIe power toggle (docs/labgrid.md).

Bound to the target's ``TinyhwDriver`` (so to the same ``TinyhwRemote``), it switches the board through that
driver's session with the :class:`~tinyhw.transport.abilities.PciePower` ability, forwarded by ``tinyhw serve
remote`` when it serves a GPU behind the bridge (vendor request 0xF3, specs/asm24-usb-bridge.md §4.6): ``off``
asserts PERST# and drops the rails (the GPU loses its state; every register access then fails with "the bridge's
pcie side is powered off"), ``on`` trains the link and enumerates the GPU again, ``cycle`` is off, ``delay``
seconds on the device's clock, on. The power state lasts as long as nobody opens the device: opening it (a new
session) powers the PCIe side on, as every tinyhw command does. A board without the bridge (a native PCI
function, an emulated board attached directly) has no such toggle: ``on``/``off`` are refused with exit 2's
error; :class:`~tinyhw.labgrid.strategy.TinyhwStrategy` then only closes and reopens the session. Each ``off``
(a ``cycle``'s too) tells the target's drivers that keep a record of the board's state (``power_lost()``: the
strategy's status) that the GPU lost it, so a strategy that counted it booted walks link-up, firmware and boot
again.
"""

from __future__ import annotations

import math
from typing import Any

import attr
from labgrid.driver import Driver
from labgrid.exceptions import NoDriverFoundError
from labgrid.factory import target_factory
from labgrid.protocol import PowerProtocol
from labgrid.step import step

from tinyhw.errors import Refused
from tinyhw.transport.abilities import LinkState, PciePower
from tinyhw.transport.base import has, require

MAX_DELAY = 60.0


def _check_delay(_instance: Any, _attribute: Any, value: float) -> None:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and 0 <= value <= MAX_DELAY):
        raise ValueError(f"delay must be 0 to {MAX_DELAY:g} seconds (got {value!r})")


@target_factory.reg_driver
@attr.s(eq=False)
class TinyhwPowerDriver(Driver, PowerProtocol):
    """The board's PCIe power behind the ASM24 bridge, switched through the ``TinyhwDriver``'s session."""

    bindings = {"tinyhw": "TinyhwDriver"}
    delay = attr.ib(default=1.0, converter=float, validator=_check_delay)

    def available(self) -> bool:
        """Whether the board has the toggle (the served transport forwards the PciePower ability); activates the
        tinyhw driver to ask."""
        self.target.activate(self.tinyhw)
        return has(self.tinyhw.transport, PciePower)

    def _power(self) -> Any:
        return require(self.tinyhw.transport, PciePower, "switch the pcie power", refuse=True,
                       hint="only a gpu behind the asm24 usb bridge has it; give the strategy the farm's power driver")

    @Driver.check_active
    @step(title="power_on")
    def on(self) -> LinkState:
        """Power the PCIe side on, train the link and enumerate the GPU (nothing sent when it is already up)."""
        return self._power().power_on()

    @Driver.check_active
    @step(title="power_off")
    def off(self) -> LinkState:
        """Power the PCIe side off (PERST#, rails dropped); checked against the LTSSM register."""
        state = self._power().power_off()
        self._state_lost()
        return state

    def _state_lost(self) -> None:
        """The GPU lost its state with its power: every other driver of the target that keeps a record of it
        (``power_lost()``, :meth:`TinyhwStrategy.power_lost <tinyhw.labgrid.strategy.TinyhwStrategy.power_lost>`)
        forgets it."""
        for driver in list(self.target.drivers):
            hook = getattr(driver, "power_lost", None)
            if driver is not self and callable(hook):
                hook()

    @Driver.check_active
    @step(title="power_cycle")
    def cycle(self) -> LinkState:
        """Off, ``delay`` seconds on the device's clock, on."""
        power = self._power()
        power.power_off()
        self._state_lost()
        if self.delay:
            self.tinyhw.transport.clock.sleep(self.delay)
        return power.power_on()

    @Driver.check_active
    def get(self) -> bool:
        """Whether the PCIe side is powered (labgrid's optional ``get`` of power drivers)."""
        return self._power().link_state().powered


def default_power(target: Any) -> TinyhwPowerDriver:
    """The target's ``TinyhwPowerDriver``, made (bound to its ``TinyhwDriver``) when the environment names none."""
    try:
        found = target.get_driver("TinyhwPowerDriver", activate=False)
    except NoDriverFoundError:
        found = None
    if found is None:
        found = TinyhwPowerDriver(target, "tinyhw-power")
    if not isinstance(found, TinyhwPowerDriver):
        raise Refused(f"the target's TinyhwPowerDriver is a {type(found).__name__}")
    return found
