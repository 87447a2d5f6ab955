"""``tinyhw firmware inspect|diff``: look inside firmware images (no device is touched)."""

from __future__ import annotations

import sys
from typing import Any

import click

from tinyhw.cli.app import App


@click.group()
def firmware() -> None:
    """Inspect and compare firmware images: Navi31 IFWI flash images, ATOM VBIOS ROMs, amdgpu
    firmware files (/lib/firmware/amdgpu/*.bin) and NVIDIA GSP-RM ELF files.

    Reads files only; no device is opened.

    \b
    Examples:
      tinyhw firmware inspect /lib/firmware/amdgpu/psp_13_0_0_sos.bin
      tinyhw --json firmware inspect navi31-dump.bin
      tinyhw firmware diff before.bin after.bin
    """


@firmware.command("inspect")
@click.argument("file", type=click.Path(dir_okay=True, path_type=str))
@click.pass_obj
def inspect_cmd(app: App, file: str) -> None:
    """Detect FILE's type and show its structure as a tree: offsets, sizes, versions, checksums.

    Types: a raw Navi31 IFWI image (2 MiB, AA 55 AA 55: $PSP and $SGN directories, ISH A/B, the
    PSP item table, the embedded VBIOS), an ATOM VBIOS (55 AA: PCIR, ATOM ROM header, part number,
    version, checksum), an amdgpu firmware file (common header, type-specific header, PSP/TA
    components, crc32 "matches payload" or "not verifiable"), an NVIDIA GSP-RM ELF (sections,
    version, what a loader needs). Malformed input is shown as far as it could be read, with each
    problem's offset. --json gives one document (amdgpu: common_header, header, components).
    Exit 0 for a clean file, 1 when problems are listed (a truncated VBIOS, an IFWI with only
    its magic), 2 when FILE cannot be read (not a regular file, larger than 256 MiB) or is of
    no known type.

    \b
    Examples:
      tinyhw firmware inspect /lib/firmware/amdgpu/gc_11_0_0_mec.bin
      tinyhw --json firmware inspect /lib/firmware/nvidia/535.261.03/gsp_ga10x.bin
      tinyhw firmware inspect navi31-dump.bin
    """
    from tinyhw.firmware import inspect_file

    app.refuse_device("it reads image files only (read a board's flash with tinyhw flash read)")
    result = inspect_file(file)
    app.emit(result.doc, lambda: _print_tree(app, result.tree))
    if not result.ok:
        sys.exit(1)


@firmware.command("diff")
@click.argument("a", type=click.Path(path_type=str))
@click.argument("b", type=click.Path(path_type=str))
@click.option("--all", "show_all", is_flag=True, help="Also list the regions that are the same.")
@click.pass_obj
def diff_cmd(app: App, a: str, b: str, show_all: bool) -> None:
    """Compare two firmware images by their named items and regions.

    Shows which items/regions differ and by how many bytes (plus bytes outside every region, and
    the decoded header fields that changed). Exit 0 when the files are equal, 1 when they differ,
    2 when either cannot be read (not a regular file, larger than 256 MiB) or is of no known type.

    \b
    Examples:
      tinyhw firmware diff stock.bin dump.bin
      tinyhw --json firmware diff psp_13_0_0_sos.bin psp_13_0_0_sos.new.bin
    """
    from tinyhw.firmware import diff_bytes, read_image

    app.refuse_device("it compares image files only")
    result = diff_bytes(read_image(a), a, read_image(b), b)
    app.emit(result.doc, lambda: _print_diff(app, result.doc, show_all))
    if not result.equal:
        sys.exit(1)


#: The most children of one tree node printed for people (the --json document has them all); the parsers bound
#: their counts too, this keeps any list readable.
MAX_SHOWN = 100


def _print_tree(app: App, node: Any) -> None:
    from rich.text import Text
    from rich.tree import Tree

    def build(parent: Any, n: Any) -> None:
        for c in n.children[:MAX_SHOWN]:
            build(parent.add(Text(c.label)), c)  # Text: labels (file names, strings from the file) are literal
        if len(n.children) > MAX_SHOWN:
            parent.add(Text(f"... and {len(n.children) - MAX_SHOWN} more (--json lists them all)"))

    tree = Tree(Text(node.label, style="bold"))
    build(tree, node)
    _console(app).print(tree)


def _console(app: App) -> Any:
    """On a terminal rich wraps long lines; in a pipe keep each tree node and table row on one line. Emoji codes
    (``:smile:`` in a file name) stay text; markup in names is escaped where it is printed."""
    from rich.console import Console

    if app.out.is_terminal:
        return Console(highlight=False, emoji=False)
    return Console(highlight=False, emoji=False, width=1000)


def _print_diff(app: App, doc: dict, show_all: bool) -> None:
    from rich.markup import escape
    from rich.table import Table

    out = _console(app)
    a, b = doc["a"], doc["b"]
    if doc["equal"]:
        out.print(f"{escape(a['file'])} and {escape(b['file'])} are identical ({a['type']}, {a['size']} bytes)")
        return
    out.print(f"[bold]{escape(a['file'])}[/bold] ({a['type']}, {a['size']} bytes) vs "
              f"[bold]{escape(b['file'])}[/bold] ({b['type']}, {b['size']} bytes): "
              f"{doc['differing_bytes']} bytes differ, first at 0x{doc['first_difference']:x}")
    if not doc["same_type"]:
        out.print("the files are of different types; only the byte count is compared")
    rows = [r for r in doc["regions"] if show_all or r["status"] != "same"]
    same = sum(r["status"] == "same" for r in doc["regions"])
    if rows:
        t = Table(show_edge=False, pad_edge=False)
        for col in ("region", "status", "offset a", "offset b", "size a", "size b", "bytes differ", "first"):
            t.add_column(col, justify="left" if col in ("region", "status") else "right")
        for r in rows:
            ra, rb = r["a"] or {}, r["b"] or {}
            t.add_row(escape(r["name"]), r["status"], _h(ra.get("offset")), _h(rb.get("offset")), _h(ra.get("size")),
                      _h(rb.get("size")), "" if r["differing_bytes"] is None else str(r["differing_bytes"]),
                      _h(r["first_difference"]))
        out.print(t)
    out.print(f"{same} of {len(doc['regions'])} regions are the same")
    outside = doc.get("outside_regions")
    if outside and outside["differing_bytes"]:
        out.print(f"{outside['differing_bytes']} differing bytes lie outside every region")
    for f in doc["fields"][:40]:
        out.print(f"  {escape(f['name'])}: {_h(f['a'])} -> {_h(f['b'])}")
    if len(doc["fields"]) > 40:
        out.print(f"  ... and {len(doc['fields']) - 40} more fields")


def _h(v: Any) -> str:
    if v is None:
        return "-"
    return f"0x{v:x}" if isinstance(v, int) and not isinstance(v, bool) else str(v)
