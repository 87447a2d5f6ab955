"""``tinyhw probe``: identify the chosen device."""

from __future__ import annotations

import click

from tinyhw.cli.app import App


@click.command()
@click.option("--registers", is_flag=True,
              help="NVIDIA GPUs: also read PMC_BOOT_0/42, VRAM size, GFW and WPR2 state through read-only "
                   "single-page BAR0 mappings (root; refused unless the GPU is in D0 and runtime-active).")
@click.pass_obj
def probe(app: App, registers: bool) -> None:
    """Identify the device: transport, vendor/device/subsystem ids and names (from pci.ids, as
    lspci names them; without pci.ids, tinyhw's own names for the boards it describes, and a hint
    to install it; --json says which in name_source), revision, class, BARs (size, kind, 64-bit,
    prefetchable), PCIe link (current and maximum speed and width), Resizable BAR sizes; for a USB
    bridge also its product string and link state.

    Read-only on the GPU: only config space is read. Over the USB bridge, opening the
    device programs the bridges and places the BARs (config-space writes), as it must.

    An NVIDIA GPU (pci:ADDR, mock:ad102) is probed in tiers, safe while the nvidia driver owns it:
    tier 0 (default) reads only sysfs attributes (ids, driver, BARs, link, power state) and the
    driver's version from /proc/driver/nvidia; --registers (tier 2, root) adds single reads of
    PMC_BOOT_0/42 (architecture and chip), VRAM size, GFW and GSP (WPR2) state. Nothing is written;
    the VBIOS PROM window and the falcons are never touched.

    \b
    Examples:
      tinyhw --device mock:navi31-usb probe
      tinyhw --device usb:0 --json probe
      tinyhw --device mock:ad102 probe --registers
      sudo tinyhw --device pci:0000:01:00.0 probe --registers
    """
    from tinyhw.boards.pcinames import load_names
    from tinyhw.probe import probe_device

    t = app.open_transport()
    doc = probe_device(t, load_names(), registers=registers)
    app.emit(doc, lambda: _human_nvidia(app, doc) if "tier" in doc else _human(app, doc))
    if doc.get("name_hint"):
        app.log(f"note: no pci.ids file was read, so some names are ids; {doc['name_hint']}")


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
def _human_nvidia(app: App, doc: dict) -> None:
    out = app.out
    out.print(f"[bold]{doc['location']}[/bold]  ({doc['transport']}{', emulated' if doc['emulated'] else ''}, "
              f"tier {doc['tier']})")
    out.print(f"  {doc['name']}")
    out.print(f"  ids {doc['vendor_id']:04x}:{doc['device_id']:04x} rev {doc['revision']:02x}  "
              f"class {doc['class_code']:06x}  subsystem {doc['subsystem_vendor_id']:04x}:{doc['subsystem_id']:04x}")
    out.print(f"  driver {doc['driver'] or 'none'}  power {doc['power_state'] or '?'} "
              f"(runtime {doc['runtime_status'] or '?'})  numa {doc['numa_node']}")
    for b in doc["bars"]:
        flags = ", ".join(f for f, on in (("64-bit", b["is_64bit"]), ("prefetchable", b["prefetchable"])) if on)
        out.print(f"  bar{b['index']}: {b['kind']} {_size(b['size'])} at 0x{b['address']:x}"
                  + (f" ({flags})" if flags else ""))
    link = doc.get("link")
    if link:
        cur = f"{link['current_speed']} x{link['current_width']}" if link["current_speed"] else "current not read"
        width = f" x{link['max_width']}" if link["max_width"] else ""
        out.print(f"  pcie link: {cur} (max {link['max_speed'] or '?'}{width})")
    skipped = doc.get("not_read")
    if skipped:
        out.print(f"  not read: {', '.join(skipped['attributes'])} ({skipped['reason']})", markup=False)
    drv = doc.get("nvidia_driver")
    if drv:
        out.print(f"  nvidia driver {drv['version'] or '?'}  vbios {doc.get('vbios_version') or '?'}")
    chip = doc.get("chip")
    if chip:
        out.print(f"  chip {chip['name'] or 'unknown'} (chipset 0x{chip['chipset']:x}, "
                  f"{chip['architecture_name'] or hex(chip['architecture'])}, rev {chip['revision']})"
                  f"{', tinygrad pci path' if chip['tinygrad_pci_path'] else ''}")
    if doc.get("tier") == 2:
        vram = doc.get("vram_bytes")
        gfw = _tri(doc["gfw_boot_completed"], "completed", "not completed")
        gsp = _tri(doc["gsp_running"], "running (wpr2 up)", "not running")
        out.print(f"  vram {_size(vram) if vram else '?'}  gfw boot {gfw}  gsp {gsp}")
        out.print("  registers " + "  ".join(f"{k} 0x{v:08x}" for k, v in doc["registers"].items()))
    for p in doc.get("problems", []):
        out.print(f"  [yellow]problem:[/yellow] {p}")


def _tri(flag: bool | None, yes: str, no: str) -> str:
    return "?" if flag is None else yes if flag else no
