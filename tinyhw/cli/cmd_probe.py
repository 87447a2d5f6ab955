"""``tinyhw probe``: identify the chosen device."""

from __future__ import annotations

import click

from tinyhw.cli.app import App


@click.command()
@click.pass_obj
def probe(app: App) -> None:
    """Identify the device: transport, vendor/device/subsystem ids and names (from pci.ids, as
    lspci names them), revision, class, BARs (size, kind, 64-bit, prefetchable), PCIe link
    (current and maximum speed and width), Resizable BAR sizes; for a USB bridge also its
    product string and link state.

    Read-only on the GPU: only config space is read. Over the USB bridge, opening the
    device programs the bridges and places the BARs (config-space writes), as it must.

    \b
    Examples:
      tinyhw --device mock:navi31-usb probe
      tinyhw --device usb:0 --json probe
    """
    from tinyhw.formats.pciids import PciIds
    from tinyhw.probe import probe as do_probe

    t = app.open_transport()
    doc = do_probe(t, PciIds.load())
    app.emit(doc, lambda: _human(app, doc))


def _size(n: int) -> str:
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


def _human(app: App, doc: dict) -> None:
    from rich.text import Text

    def say(text: str) -> None:  # names and strings read from the device print as they are (no markup, no emoji)
        app.out.print(text, markup=False, emoji=False)

    app.out.print(Text(doc["location"], style="bold") + Text(
        f"  ({doc['transport']}{', emulated' if doc['emulated'] else ''})"))
    say(f"  {doc['name']}")
    say(f"  ids {doc['vendor_id']:04x}:{doc['device_id']:04x} rev {doc['revision']:02x}  "
              f"class {doc['class_code']:06x} ({doc['class_name']})")
    if doc.get("subsystem_name"):
        say(f"  subsystem {doc['subsystem_vendor_id']:04x}:{doc['subsystem_id']:04x} {doc['subsystem_name']}")
    for b in doc["bars"]:
        flags = ", ".join(f for f, on in (("64-bit", b["is_64bit"]), ("prefetchable", b["prefetchable"])) if on)
        where = f"at 0x{b['address']:x}" if b["address"] else "unassigned"
        say(f"  bar{b['index']}: {b['kind']} {_size(b['size'])} {where}" + (f" ({flags})" if flags else ""))
    link = doc.get("link")
    if link:
        say(f"  pcie link: {link['current_speed']} x{link['current_width']} "
                  f"(max {link['max_speed']} x{link['max_width']})")
    rebar = doc.get("resizable_bar")
    if rebar:
        for e in rebar:
            sizes = " ".join(_size(s) for s in e["supported"])
            say(f"  resizable bar{e['bar']}: current {_size(e['current'])}, supported {sizes}")
    bridge = doc.get("bridge")
    if bridge:
        say(f"  usb bridge {bridge['bridge']} {bridge['usb_id']} {bridge['product']!r} serial {bridge['serial']} "
                  f"{bridge['usb_speed']}, ltssm 0x{bridge['ltssm']:02x} ({bridge['link_state']})")
