"""``tinyhw link power on|off|status``: the ASM24 bridge's PCIe power toggle (front end of the PciePower ability).

specs/asm24-usb-bridge.md §4.6: vendor request 0xF3 powers the PCIe side on (rails, PERST# released, link training)
or off (PERST# asserted, training stopped, rails dropped); the LTSSM register (XDATA 0xB450) reads 0x78 once the
link is trained. Only a device behind the bridge (``usb``, ``mock:navi31-usb``, or ``remote:`` serving one) has it.
"""

from __future__ import annotations

import click

from tinyhw.cli.app import App

_POWER_HINT = "only a gpu behind the asm24 usb bridge (usb, mock:navi31-usb, or remote: serving one) has it"


@click.group("link")
def link() -> None:
    """The PCIe link behind the ASM24 USB bridge: power it on or off, show its LTSSM state.

    \b
    Examples:
      tinyhw --device mock:navi31-usb link power status
      tinyhw --device mock:navi31-usb --json link power off --yes
    """


@link.command("power")
@click.argument("action", type=click.Choice(["on", "off", "status"]))
@click.option("--yes", is_flag=True, help="Power off without asking (the GPU loses all its state).")
@click.option("--timeout", type=click.FloatRange(min=0.001, max=60.0), default=None, metavar="S",
              help="Longest wait for the link to train (on, default 5) or to leave L0 (off, default 2), seconds.")
@click.pass_obj
def power_cmd(app: App, action: str, yes: bool, timeout: float | None) -> None:
    """Switch the bridge's PCIe power (vendor request 0xF3) or show the link's LTSSM state.

    status reads the LTSSM register (one XDATA read). on powers the rails, trains the link and enumerates the GPU
    again; opening the device already does this, so on a device this command opened it reports the state. off
    asserts PERST# and drops the rails: the GPU loses its state (needs --yes); it stays off until the next open
    powers it on, or `link power on` in the same session (Python: the PciePower ability, labgrid: TinyhwPowerDriver).
    While off, every register or config access fails with "the bridge's pcie side is powered off".

    \b
    Examples:
      tinyhw --device mock:navi31-usb link power status
      tinyhw --device mock:navi31-usb link power off --yes
    """
    from tinyhw.transport.abilities import PciePower
    from tinyhw.transport.base import require

    transport = app.open_transport(writes=action != "status", example="mock:navi31-usb")
    power = require(transport, PciePower, "switch the pcie power", refuse=True, hint=_POWER_HINT)
    if action == "off":
        app.confirm(yes, f"plan: power off the pcie side behind {transport.identity().location} (perst# asserted, "
                         "rails dropped): the gpu loses all its state until it is powered on again")
    if action == "status":
        state = power.link_state()
    elif action == "on":
        state = power.power_on(timeout or 5.0)
    else:
        state = power.power_off(timeout or 2.0)
    doc = {"action": action, **state.as_dict()}
    app.emit(doc, lambda: app.out.print(
        f"pcie {'powered' if state.powered else 'powered off'}, ltssm 0x{state.ltssm:02x} ({state.name})"))
