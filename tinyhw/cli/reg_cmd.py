"""``tinyhw reg``: registers by name (find, read, write, decode), from the databases generated
from the Linux amdgpu headers (tinyhw.regs).

Names are ``block.REGISTER`` or ``block.REGISTER.FIELD``, case-insensitive
(``smuio.ROM_SW_CNTL``, ``mp0.MP0_SMN_C2PMSG_81``); offsets are byte offsets in the ASIC's
register BAR (BAR5 on Navi31). find and decode work offline with ``--asic``. With a device,
find/read/write place registers with the segment bases of the device's IP discovery table
(falling back to the profile's fact table with a warning); ``reg discovery`` shows that table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from tinyhw.cli.app import App
from tinyhw.cli.numbers import parse_number
from tinyhw.errors import Refused

if TYPE_CHECKING:  # imported when a device is opened, not for --help
    from tinyhw.transport.base import Transport

_ASIC_HELP = "ASIC profile: navi31, gfx1200 (aliases gfx1100, navi48, navi44, gfx1201). Default: from the device."


def _asic(app: App, name: str | None, transport: Transport | None = None) -> Any:
    """The ASIC from --asic, else from the device's PCI id (opening the device if needed)."""
    from tinyhw import regs

    if name:
        return regs.asic(name)
    if transport is None:
        if app.device is None:
            raise Refused("no asic given", hint=f"give --asic NAME ({', '.join(regs.all_profiles())}) or --device")
        transport = app.open_transport()
    ident = transport.identity()
    return regs.asic_for_device(ident.vendor_id, ident.device_id)


def _warn(line: str) -> None:
    click.echo(line, err=True)


def _device_asic(app: App, name: str | None, transport: Transport) -> Any:
    """The device's register space with the bases of its IP discovery table (facts, with a warning, if unusable)."""
    from tinyhw.regs.discovery import asic_from_device

    placed = asic_from_device(transport, name, warn=_warn)
    if placed.source == "discovery" and hasattr(app, "log") and getattr(app, "verbose", 0):
        app.log(f"register bases from the device's ip discovery table ({placed.discovery.path})")
    return placed


def _offset_text(reg: Any) -> str:
    return "(base unknown)" if reg.offset is None else f"0x{reg.offset:05x}"


def _field_docs(reg: Any, value: int | None = None) -> list[dict[str, int | str]]:
    docs: list[dict[str, int | str]] = []
    for f in reg.fields:
        d: dict[str, int | str] = {"name": f.name, "shift": f.shift, "mask": f.mask}
        if value is not None:
            d["value"] = f.extract(value)
        docs.append(d)
    return docs


def _print_fields(app: App, reg: Any, value: int) -> None:
    from rich.table import Table

    table = Table(box=None, pad_edge=False, padding=(0, 2, 0, 2), show_header=True, header_style="bold")
    for col in ("bits", "field", "value"):
        table.add_column(col, justify="right" if col == "value" else "left")
    for f in sorted(reg.fields, key=lambda f: f.shift):
        v = f.extract(value)
        table.add_row(f.bits, f.name, f"0x{v:x}" if v > 9 else str(v))
    app.out.print(f"[bold]{reg.name}[/bold] @ {_offset_text(reg)} = 0x{value:08x}")
    if reg.fields:
        app.out.print(table)


@click.group("reg")
def reg() -> None:
    """Registers by name: find them, read and write them on a device, decode values offline.

    Names are block.REGISTER or block.REGISTER.FIELD, case-insensitive; blocks are smuio,
    mp0, mp1, gc, sdma, nbio, mmhub, osssys, hdp. Register and field definitions come from
    the Linux amdgpu headers; offsets are byte offsets in the register BAR of the ASIC,
    placed with the segment bases of the device's IP discovery table when a device is used,
    else (--asic, offline) with the profile's fact table.

    \b
    Examples:
      tinyhw reg find 'smuio.ROM*' --asic navi31
      tinyhw --device mock:navi31 reg read smuio.ROM_SW_STATUS
      tinyhw --device mock:navi31-usb reg discovery
    """


@reg.command("find")
@click.argument("pattern")
@click.option("--asic", "asic_name", metavar="NAME", help=_ASIC_HELP)
@click.pass_obj
def find_cmd(app: App, pattern: str, asic_name: str | None) -> None:
    """List the registers matching PATTERN with their byte offset and fields.

    PATTERN is a glob: REG (every block), block.REG, or block.REG.FIELD (only matching
    fields). Works offline with --asic (offsets from the profile's fact table); without it
    the ASIC comes from the device's PCI id and the offsets from its IP discovery table
    (reads VRAM size and the table, see 'reg discovery'). Writes no register.

    \b
    Examples:
      tinyhw reg find 'smuio.ROM_SW*' --asic navi31
      tinyhw --json reg find 'mp0.MP0_SMN_C2PMSG_11?' --asic navi31
      tinyhw reg find '*.*.DATA_SIZE' --asic gfx1200
    """
    if asic_name or app.device is None:
        placed = _asic(app, asic_name)
    else:
        placed = _device_asic(app, None, app.open_transport())
    found = placed.find(pattern)
    doc = [{"name": r.name, "offset": r.offset, "fields": _field_docs(r)} for r in found]

    def human() -> None:
        lines = []
        for r in found:
            lines.append(f"{r.name}  {_offset_text(r)}  (segment {r.segment} + 0x{r.dword:x})")
            lines.extend(f"    {f.bits:>5}  {f.name}" for f in sorted(r.fields, key=lambda f: f.shift))
        click.echo("\n".join(lines))

    app.emit(doc, human)


@reg.command("read")
@click.argument("names", nargs=-1, required=True)
@click.option("--asic", "asic_name", metavar="NAME", help=_ASIC_HELP)
@click.pass_obj
def read_cmd(app: App, names: tuple[str, ...], asic_name: str | None) -> None:
    """Read registers by name and show each value with its decoded fields.

    Reads one dword of the register BAR per NAME (a block.REGISTER.FIELD name reads its
    register and shows that field). Reading some registers has side effects (ROM_DATA
    advances ROM_INDEX when auto-increment is on). Offsets come from the device's IP
    discovery table (read first; see 'reg discovery'); --json adds "source": "discovery"
    or "facts" (the profile's table, used with a warning when discovery is unusable).

    \b
    Examples:
      tinyhw --device mock:navi31 reg read smuio.ROM_SW_STATUS smuio.ROM_CNTL
      tinyhw --device mock:navi31 --json reg read mp0.MP0_SMN_C2PMSG_81
    """
    from tinyhw.regs import Mmio

    transport = app.open_transport()
    facts = _asic(app, asic_name, transport)
    for n in names:  # all names checked before any access
        facts.resolve(n)
    asic = _device_asic(app, facts.name, transport)
    targets = [asic.resolve(n) for n in names]
    mmio = Mmio(transport, asic)
    results = []
    for reg_, fld in targets:
        shown = reg_ if fld is None else _only(reg_, fld)
        results.append((shown, mmio.read(reg_)))
    doc = [{"name": r.name, "offset": r.offset, "value": v, "fields": _field_docs(r, v), "source": asic.source}
           for r, v in results]
    app.emit(doc, lambda: [_print_fields(app, r, v) for r, v in results])


def _only(reg_: Any, fld: Any) -> Any:
    from dataclasses import replace

    return replace(reg_, fields=(fld,))


@reg.command("write")
@click.argument("assignments", nargs=-1, required=True, metavar="NAME=VALUE...")
@click.option("--asic", "asic_name", metavar="NAME", help=_ASIC_HELP)
@click.option("--yes", is_flag=True, help="Do it without asking (needed when not on a terminal).")
@click.pass_obj
def write_cmd(app: App, assignments: tuple[str, ...], asic_name: str | None, yes: bool) -> None:
    """Write registers (NAME=VALUE) or single fields (NAME.FIELD=VALUE, read-modify-write).

    Changes device state: prints the plan and needs --yes (or a 'y' on a terminal; refused
    with exit 2 otherwise). Every register named is read once first (its old value is shown,
    and field writes keep the other bits), then written once with all its assignments applied
    in order; prints the old and new value of each. Needs --device: writes never guess.
    Offsets come from the device's IP discovery table (see 'reg discovery').

    \b
    Examples:
      tinyhw --device mock:navi31 reg write smuio.ROM_CNTL.SCK_PRESCALE_REFCLK=8 --yes
      tinyhw --device mock:navi31 reg write mp0.MP0_SMN_C2PMSG_116=0 --yes
    """
    from tinyhw.regs import Mmio, WritePlan

    parsed = []
    for text in assignments:
        name, sep, value = text.partition("=")
        if not sep or not name.strip():
            raise Refused(f"bad assignment {text!r}", hint="write NAME=VALUE, e.g. smuio.ROM_CNTL.DUMMY_CYCLE_NUM=8")
        parsed.append((name.strip(), parse_number(value, f"value for {name.strip()}")))
    if app.device is None:
        raise Refused("reg write needs --device", hint="commands that write never pick a device themselves")
    transport = app.open_transport(writes=True)
    facts = _asic(app, asic_name, transport)
    WritePlan.build(facts, parsed)  # every name and value checked before any access
    asic = _device_asic(app, facts.name, transport)
    plan = WritePlan.build(asic, parsed)
    app.confirm(yes, f"reg write on {asic.name} ({app.device}):\n" + "\n".join(_plan_lines(plan)))
    done = Mmio(transport, asic).apply(plan)

    def human() -> None:
        for w in done:
            click.echo(f"{w.register.name} @ {_offset_text(w.register)}: 0x{w.old:08x} -> 0x{w.new:08x}")

    app.emit([w.as_dict() for w in done], human)


def _plan_lines(plan: Any) -> list[str]:
    """One line per assignment of a :class:`tinyhw.regs.WritePlan`."""
    lines = []
    for a in plan.describe():
        where = f"bar{a['bar']} 0x{a['offset']:x}"
        if a["field"] is None:
            lines.append(f"  {a['name']} ({where}) := 0x{a['value']:x}")
        else:
            bits = f"bit{'s' * (':' in a['bits'])} {a['bits']}"
            lines.append(f"  {a['name']} ({bits}, {where}) := 0x{a['value']:x} (read-modify-write)")
    return lines


@reg.command("decode")
@click.argument("name")
@click.argument("value")
@click.option("--asic", "asic_name", metavar="NAME", help=_ASIC_HELP)
@click.pass_obj
def decode_cmd(app: App, name: str, value: str, asic_name: str | None) -> None:
    """Decode VALUE into the fields of register NAME, offline (no device is touched with --asic).

    NAME may also be block.REGISTER.FIELD to show one field.

    \b
    Examples:
      tinyhw reg decode smuio.ROM_SW_CNTL 0x80003 --asic navi31
      tinyhw --json reg decode smuio.ROM_CNTL 0x18000001 --asic navi31
    """
    asic = _asic(app, asic_name)
    number = parse_number(value, "value", maximum=0xFFFFFFFF)
    reg_, fld = asic.resolve(name)
    shown = reg_ if fld is None else _only(reg_, fld)
    doc = {"name": shown.name, "offset": shown.offset, "value": number, "fields": _field_docs(shown, number)}
    app.emit(doc, lambda: _print_fields(app, shown, number))


@reg.command("discovery")
@click.option("--asic", "asic_name", metavar="NAME", help=_ASIC_HELP)
@click.pass_obj
def discovery_cmd(app: App, asic_name: str | None) -> None:
    """Read the device's IP discovery table: IP blocks, versions, segment bases, harvest.

    Reads RCC_CONFIG_MEMSIZE (VRAM size), then 10 KiB at VRAM size - 64 KiB: through BAR0
    when BAR0 covers all of VRAM, else through the MM_INDEX/MM_DATA window (writes
    MM_INDEX_HI and MM_INDEX, nothing else). These bases place registers in reg
    find/read/write. Exit 1 when the table fails its checks (signatures, checksums).

    \b
    Examples:
      tinyhw --device mock:navi31 reg discovery
      tinyhw --device mock:navi31-usb --json reg discovery
    """
    from tinyhw.errors import OperationFailed
    from tinyhw.regs.discovery import read_discovery

    d = read_discovery(app.open_transport(), asic_name)
    doc = d.as_dict()

    def human() -> None:
        click.echo(f"ip discovery at vram 0x{d.address:x} ({d.vram_mib} MiB vram, read via {d.path}): "
                   f"binary v{doc['binary_version']}, ip table v{d.ip_version}"
                   + (f", {d.gfx_target}" if d.gfx_target else ""))
        for ip in d.ips:
            bases = " ".join(f"0x{b:x}" for b in ip.bases)
            click.echo(f"  die {ip.die}  {ip.block or '?':<7} hw_id {ip.hw_id:<3}  #{ip.instance}  "
                       f"{ip.version_text:<8}  {bases}")
        for h in d.harvest:
            click.echo(f"  harvested: {h.block or f'hw_id {h.hw_id}'} #{h.instance}")
        for p in d.problems:
            click.echo(f"  problem: {p}")

    app.emit(doc, human)
    if d.problems:
        raise OperationFailed(f"the ip discovery table fails its checks ({d.problems[0]})",
                              hint="reg read/write use the profile's fact table on this device")
