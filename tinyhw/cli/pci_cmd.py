"""``tinyhw pci``: native PCIe functions through sysfs (``pci:``) and VFIO (``vfio:``).

list/show/config only read; read maps a BAR; write, bind, unbind and resize change the device
and need ``--yes``. Spec: specs/pci-vfio-remote.md §2, §4 (lspci formats), §6-§8.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from tinyhw.cli.app import App
from tinyhw.cli.numbers import parse_number
from tinyhw.errors import Refused
from tinyhw.transport.abilities import ConfigSize, OsPciFunction, ResizableBars
from tinyhw.transport.base import has

if TYPE_CHECKING:
    from tinyhw.transport.base import BarRegion, Transport

FORCE_BOUND_HELP = ("Map or write a function even though a kernel driver is bound to it. RISKY: that driver keeps "
                    "programming the device too; writing behind its back can corrupt its state, hang the device or "
                    "the machine, and lose data on a disk or network device.")


def _open(app: App, *, writes: bool = False, force_bound: bool = False) -> Any:
    """Open the --device transport; ``--force-bound`` becomes the device string option of the same name."""
    if force_bound:
        spec = app.device_spec(writes=writes)
        if spec.kind != "pci":
            raise Refused("--force-bound applies to pci: devices only")
        app.device = str(type(spec)(spec.kind, spec.target, {**spec.options, "force-bound": True}, spec.text))
    return app.open_transport(writes=writes)


def _checked_region(t: Transport, index: int, offset: int, length: int) -> BarRegion:
    """The BAR region, after checking the access against the BAR's size (before mapping anything)."""
    from tinyhw.transport.base import BarRegion

    info = next((b for b in t.bars() if b.index == index and b.size), None)
    if info is not None and info.kind == "memory":
        BarRegion(info).check(offset, length)
    return t.bar(index)


def _ids() -> Any:
    from tinyhw.boards.pcinames import load_names

    return load_names(cached=True)


@click.group()
def pci() -> None:
    """Native PCIe functions: list them as lspci does, decode config space, peek and poke BAR registers,
    bind a function to vfio-pci.

    \b
    Examples:
      tinyhw pci list
      tinyhw --device pci:0000:03:00.0 pci show
      tinyhw --device vfio:0000:03:00.0 pci read 0 0x0
    """


@pci.command("list")
@click.pass_obj
def list_cmd(app: App) -> None:
    """List every PCI function in sysfs, one line each in exactly the format of `lspci -Dnn`.

    Read-only: lists sysfs directories and reads their attribute files. --json gives the same as
    objects (address, ids, class, revision, names, driver, iommu_group, line).

    \b
    Examples:
      tinyhw pci list
      tinyhw --json pci list
    """
    from tinyhw.pci.scan import lspci_line, scan
    from tinyhw.pci.sysfs import devices_dir, sysfs_root

    app.refuse_device("it lists every PCI function in sysfs (pci show decodes one)")
    ids = _ids()
    devs = scan(devices_dir(sysfs_root()))
    lines = [lspci_line(d, ids) for d in devs]
    if app.json:
        doc = [{"address": d.address, "vendor_id": d.vendor_id, "device_id": d.device_id,
                "class_code": d.class_code, "revision": d.revision, "subsystem_vendor_id": d.subsystem_vendor_id,
                "subsystem_id": d.subsystem_id, "class_name": ids.class_text(d.class_code >> 8, False),
                "vendor_name": ids.vendor(d.vendor_id), "device_name": ids.device(d.vendor_id, d.device_id),
                "name_source": ids.name_source(d.vendor_id, d.device_id),
                "driver": d.driver, "iommu_group": d.iommu_group, "line": line} for d, line in zip(devs, lines,
                                                                                                    strict=True)]
        app.emit(doc, lambda: None)
    else:
        click.echo("\n".join(lines) if lines else "", nl=bool(lines))
    if any(ids.name_origin(d.vendor_id, d.device_id, d.class_code)["name_hint"] for d in devs):
        _names_note(app, ids)


def _names_note(app: App, ids: Any) -> None:
    from tinyhw.formats.pciids import INSTALL_HINT

    app.log(f"note: no pci.ids file was read ({ids.path or 'none found'}), so some names are ids; {INSTALL_HINT}")


def _config_and_function(app: App) -> tuple[Any, bytes, Any]:
    """The transport, its function's config space (through the transport's config access) and a
    :class:`PciFunction` describing it: sysfs's for pci:/vfio:, else one built from the transport's
    identity (emulated boards, the usb bridge), whose location stands in for the address."""
    t = _open(app)
    fn = t.pci_function() if has(t, OsPciFunction) else None
    if fn is None:
        from tinyhw.pci.scan import PciFunction

        ident = t.identity()
        fn = PciFunction(address=ident.location, domain=0, bus=0, slot=0, function=0, path="",
                         vendor_id=ident.vendor_id, device_id=ident.device_id, class_code=ident.class_code,
                         revision=ident.revision, subsystem_vendor_id=ident.subsystem_vendor_id,
                         subsystem_id=ident.subsystem_id)
    size = t.config_size() if has(t, ConfigSize) else 4096
    return t, t.config_bytes(0, size), fn


@pci.command()
@click.pass_obj
def show(app: App) -> None:
    """Decode the function's config space: header, command/status, BARs, capabilities and
    extended capabilities (PCIe link and device control/status, Resizable BAR, AER, SR-IOV, ACS,
    MSI/MSI-X, power management), in the words of `lspci -vvv -nn -D`.

    Read-only: reads the config space only (all of it as root, 64 bytes otherwise). Works on
    every transport with a config space: pci:, vfio:, the usb bridge and the emulated boards
    (their location stands in for the PCI address).

    \b
    Examples:
      tinyhw --device pci:0000:03:00.0 pci show
      tinyhw --device mock:navi31-usb pci show
      tinyhw --device vfio:0000:03:00.0 --json pci show
    """
    from tinyhw.formats.pciconfig import parse_config
    from tinyhw.pci.describe import show_doc, show_lines

    t, data, fn = _config_and_function(app)
    cfg = parse_config(data)
    bars = t.bars()
    ids = _ids()
    doc = show_doc(fn, cfg, bars, ids, t.name)
    app.emit(doc, lambda: click.echo("\n".join(show_lines(fn, cfg, bars, ids))))
    if doc["name_hint"]:
        _names_note(app, ids)


@pci.command()
@click.option("--full", is_flag=True, help="All 4096 bytes (as lspci -xxxx) instead of 256.")
@click.pass_obj
def config(app: App, full: bool) -> None:
    """Hex dump of config space exactly as `lspci -D -xxx` prints it (device line, rows of 16 bytes,
    a blank line); --full dumps the extended space too.

    Read-only, on every transport with a config space (pci:, vfio:, usb, the emulated boards).
    --json gives {"address", "length", "data"} with data as a lowercase hex string.

    \b
    Examples:
      tinyhw --device pci:0000:03:00.0 pci config
      tinyhw --device pci:0000:03:00.0 pci config --full
    """
    from tinyhw.pci.describe import hex_dump

    t, data, fn = _config_and_function(app)
    data = data[:4096 if full else 256]
    app.emit({"address": fn.address, "length": len(data), "data": data.hex()},
             lambda: click.echo("\n".join(hex_dump(fn, data, _ids()))))


@pci.command()
@click.argument("bar")
@click.argument("offset")
@click.option("--count", default="1", show_default=True, help="Number of consecutive dwords to read.")
@click.option("--force-bound", is_flag=True, help=FORCE_BOUND_HELP)
@click.pass_obj
def read(app: App, bar: str, offset: str, count: str, force_bound: bool) -> None:
    """Read 32-bit registers of a memory BAR: single aligned 32-bit loads at byte OFFSET.

    Maps the BAR (sysfs resourceN, or the VFIO region) and takes the device lock. A function
    bound to a kernel driver is refused unless --force-bound.

    \b
    Examples:
      tinyhw --device pci:0000:00:05.0 pci read 0 0x0
      tinyhw --device vfio:0000:00:05.0 --json pci read 0 0x4 --count 2
    """
    index = parse_number(bar, "bar", maximum=5)
    off = parse_number(offset, "offset", maximum=(1 << 64) - 4)
    n = parse_number(count, "count", minimum=1, maximum=1 << 20)
    region = _checked_region(_open(app, force_bound=force_bound), index, off, 4 * n)
    values = [region.read32(off + 4 * i) for i in range(n)]
    doc: Any = {"bar": index, "offset": off, "value": values[0]} if n == 1 else \
        {"bar": index, "offset": off, "values": values}
    app.emit(doc, lambda: click.echo("\n".join(
        f"0x{values[0]:08x}" if n == 1 else f"0x{off + 4 * i:06x}: 0x{v:08x}" for i, v in enumerate(values))))


@pci.command()
@click.argument("bar")
@click.argument("offset")
@click.argument("value")
@click.option("--yes", is_flag=True, help="Do it without asking.")
@click.option("--force-bound", is_flag=True, help=FORCE_BOUND_HELP)
@click.pass_obj
def write(app: App, bar: str, offset: str, value: str, yes: bool, force_bound: bool) -> None:
    """Write one 32-bit register of a memory BAR: a single aligned 32-bit store of VALUE at byte
    OFFSET, then a read of config space so the posted write has reached the device.

    Changes the device: shows the plan and needs --yes. A function bound to a kernel driver is
    refused unless --force-bound. The value read back is not checked (registers may differ).

    \b
    Examples:
      tinyhw --device pci:0000:00:05.0 pci write 0 0x4 0x12345678 --yes
      tinyhw --device vfio:0000:00:05.0 pci write 0 0x8 5 --yes
    """
    index = parse_number(bar, "bar", maximum=5)
    off = parse_number(offset, "offset", maximum=(1 << 64) - 4)
    val = parse_number(value, "value", maximum=0xFFFFFFFF)
    t = _open(app, writes=True, force_bound=force_bound)
    region = _checked_region(t, index, off, 4)
    app.confirm(yes, f"write 0x{val:08x} to bar{index} offset 0x{off:x} of {t.identity().location} ({t.name})")
    region.write32(off, val)
    t.config_read(0, 4)  # a non-posted read after the posted write (§6.3 rule 3)
    app.emit({"bar": index, "offset": off, "value": val, "written": True},
             lambda: app.log(f"wrote 0x{val:08x} to bar{index} offset 0x{off:x}"))


def _address(app: App) -> str:
    spec = app.device_spec(writes=True)
    if spec.kind not in ("pci", "vfio"):
        raise Refused(f"bind/unbind need a pci: or vfio: device, not {spec.kind}")
    return spec.target


@pci.command()
@click.option("--driver", default="vfio-pci", show_default=True, help="Driver to bind to.")
@click.option("--yes", is_flag=True, help="Do it without asking.")
@click.pass_obj
def bind(app: App, driver: str, yes: bool) -> None:
    """Bind the function to vfio-pci (so vfio: can open it): unbind its current driver, write
    driver_override and probe. Prints what it unbinds first and needs --yes.

    Never bind a function this machine needs (its disk or network controller): it disappears
    from the kernel until unbound.

    \b
    Examples:
      tinyhw --device pci:0000:03:00.0 pci bind --yes
      tinyhw --device vfio:0000:03:00.0 pci unbind --yes
    """
    from tinyhw.pci import bind as binder
    from tinyhw.pci.sysfs import sysfs_root

    address = _address(app)
    p = binder.plan(sysfs_root(), address, driver)
    if not p.needed:
        app.emit({"address": p.address, "driver": driver, "unbound": None, "changed": False},
                 lambda: app.log(p.lines()[0]))
        return
    app.confirm(yes, "\n".join(["plan:", *("  " + line for line in p.lines())]))
    binder.bind(sysfs_root(), address, driver)
    app.emit({"address": p.address, "driver": driver, "unbound": p.current, "changed": True},
             lambda: click.echo(f"{p.address}: unbound {p.current or 'no driver'}, bound {driver}"))


@pci.command()
@click.option("--yes", is_flag=True, help="Do it without asking.")
@click.pass_obj
def unbind(app: App, yes: bool) -> None:
    """Undo `pci bind`: clear driver_override, unbind the function and let the kernel probe its own
    driver again. Needs --yes.

    \b
    Example:
      tinyhw --device pci:0000:03:00.0 pci unbind --yes
    """
    from tinyhw.pci import bind as binder
    from tinyhw.pci.sysfs import open_function, sysfs_root

    address = _address(app)
    fn = open_function(sysfs_root(), address)
    app.confirm(yes, f"plan:\n  unbind {fn.address} from {fn.driver or 'no driver'}, clear driver_override, "
                     "re-probe")
    before, after = binder.release(sysfs_root(), address)
    app.emit({"address": fn.address, "unbound": before, "driver": after},
             lambda: click.echo(f"{fn.address}: unbound {before or 'no driver'}, now {after or 'no driver'}"))


@pci.command()
@click.argument("bar")
@click.argument("size")
@click.option("--yes", is_flag=True, help="Do it without asking.")
@click.pass_obj
def resize(app: App, bar: str, size: str, yes: bool) -> None:
    """Resize a BAR through the kernel (sysfs resourceN_resize; Resizable BAR capability).
    SIZE in bytes (0x10000000) or with a unit (256M, 8G). The function must have no driver.

    \b
    Example:
      tinyhw --device pci:0000:03:00.0 pci resize 0 8G --yes
    """
    nbytes = parse_number(size, "size", minimum=1, units=True)
    t = _open(app, writes=True)
    if not has(t, ResizableBars):
        raise Refused(f"resize needs a pci: device, not {t.name}")
    index = parse_number(bar, "bar", maximum=5)
    sizes = t.resizable_sizes(index)
    app.confirm(yes, f"resize bar{index} of {t.identity().location} to 0x{nbytes:x} bytes "
                     f"(supported: {', '.join(f'0x{s:x}' for s in sizes or [])})")
    info = t.resize_bar(index, nbytes)
    app.emit(info.as_dict(), lambda: click.echo(f"bar{index}: 0x{info.size:x} bytes at 0x{info.address:x}"))
