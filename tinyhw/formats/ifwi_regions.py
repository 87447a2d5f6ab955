"""The regions of a raw Navi31 IFWI as a flash layout: names, start, end, from the image's own tables.

Spec: specs/navi31-spi-flash.md §g.1 (landmarks: header, the $SGN pointer, the $PSP directories, ISH
A/B and the payloads they name, metadata near 0x1EF000), §g.2 (the item resolver that turns each
table into exact byte ranges, :func:`tinyhw.formats.ifwi_layout.resolve_item`) and §g.3 (the VBIOS
at a 128 KiB boundary: ``55 AA``, the ATI magic, length byte x 512). flashrom's FMAP layouts are the
model: a region is a named byte range, a region read or write touches nothing else, and two layouts
are compared region by region (``--fmap-verify``).

Pure: the input is ``bytes`` or a ``read(address, size)`` callable (:class:`LazyImage`), so the
same code gives an image file's layout and a chip's, the chip read only where its tables are (a
few KiB). Overlapping regions are allowed (the VBIOS sits inside an ISH payload).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tinyhw.errors import Refused
from tinyhw.formats.ifwi_layout import ISH_OFFSETS, ITEMS, METADATA, resolve_item
from tinyhw.formats.vbios import is_vbios

Reader = Callable[[int, int], bytes]
#: §g.3: Linux reads the VBIOS at ROM_OFFSET x 128 KiB; the layout looks for one at each such boundary.
VBIOS_ALIGN = 0x20000
#: Bytes read per block when a layout is read through a device (one ROM_SW window).
BLOCK = 0x100

#: §g.2 item -> region name (the name ``--region`` takes).
ITEM_NAMES = {0x01: "ifwi-header", 0x80: "sgn-pointer", 0x02: "psp-dir-1", 0x03: "psp-dir-2", 0x81: "sgn-table",
              **{0x81 + t: f"sgn-type-{t}" for t in range(1, 8)}, 0x04: "item-04", 0x05: "item-05",
              0x06: "ish-a", 0x07: "ish-b", 0x08: "ish-a-payload", 0x89: "item-89"}


class LazyImage:
    """A flash of ``size`` bytes read through ``read`` only where it is sliced, in cached 256-byte blocks:
    what :func:`flash_regions` parses when the layout comes from a device."""

    def __init__(self, read: Reader, size: int) -> None:
        self._read, self._size = read, size
        self._blocks: dict[int, bytes] = {}

    def __len__(self) -> int:
        return self._size

    def __getitem__(self, key: slice) -> bytes:
        if not isinstance(key, slice) or key.step not in (None, 1):
            raise TypeError("a LazyImage is read by contiguous slices only")
        start, stop, _ = key.indices(self._size)
        if stop <= start:
            return b""
        first, last = start // BLOCK, (stop - 1) // BLOCK
        missing = [b for b in range(first, last + 1) if b not in self._blocks]
        if missing:  # one read for the missing span
            lo, hi = missing[0] * BLOCK, min(self._size, (missing[-1] + 1) * BLOCK)
            data = self._read(lo, hi - lo)
            for b in range(missing[0], missing[-1] + 1):
                self._blocks[b] = data[(b - missing[0]) * BLOCK:(b - missing[0] + 1) * BLOCK]
        blob = b"".join(self._blocks[b] for b in range(first, last + 1))
        return blob[start - first * BLOCK:stop - first * BLOCK]


@dataclass(frozen=True)
class FlashRegion:
    """One named byte range of the flash: ``start`` inclusive, ``end`` exclusive, and what it is."""

    name: str
    start: int
    end: int
    what: str

    @property
    def size(self) -> int:
        """The region's length in bytes."""
        return self.end - self.start

    def to_doc(self) -> dict[str, Any]:
        """The region as a JSON-ready dict (end exclusive)."""
        return {"name": self.name, "start": self.start, "end": self.end, "size": self.size, "what": self.what}


@dataclass
class FlashLayout:
    """The regions found (sorted by start) and what could not be resolved."""

    size: int
    regions: list[FlashRegion] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def names(self) -> list[str]:
        """The region names, in layout order."""
        return [r.name for r in self.regions]

    def find(self, name: str) -> FlashRegion:
        """The region called ``name``; refused (exit 2) with the list of names when there is none."""
        for r in self.regions:
            if r.name == name.lower():
                return r
        raise Refused(f"no region {name!r} in the layout", hint=f"regions: {', '.join(self.names()) or 'none'}")

    def to_doc(self) -> dict[str, Any]:
        """The layout as a JSON-ready dict."""
        return {"size": self.size, "regions": [r.to_doc() for r in self.regions], "problems": list(self.problems)}


def _u32(data: bytes | LazyImage, off: int) -> int | None:
    raw = data[off:off + 4]
    return int.from_bytes(raw, "little") if len(raw) == 4 else None


def flash_regions(data: bytes | LazyImage) -> FlashLayout:
    """The layout of a raw IFWI (bytes, or a :class:`LazyImage` over a device): every §g.2 item the tables
    resolve, the ISH B payload, the VBIOS images at 128 KiB boundaries and the metadata sector."""
    size = len(data)
    lay = FlashLayout(size)
    out: list[FlashRegion] = []
    for item, name in ITEM_NAMES.items():
        it = resolve_item(data, item)
        if it.error is None and it.offset is not None and it.size:
            out.append(FlashRegion(name, it.offset, it.offset + it.size, f"{ITEMS[item]} (item 0x{item:02x})"))
        elif item not in (0x04, 0x05, 0x89):  # the fixed items always resolve in a full-size image
            lay.problems.append(f"{name}: {it.error or 'empty'}")
    loc, slot = _u32(data, ISH_OFFSETS[1] + 0x10), _u32(data, ISH_OFFSETS[1] + 0x18)
    if loc is not None and slot and loc + slot <= size:
        out.append(FlashRegion("ish-b-payload", loc, loc + slot, "payload named by ISH B"))
    payloads = {r.name[4]: r for r in out if r.name in ("ish-a-payload", "ish-b-payload")}
    for off in range(0, size, VBIOS_ALIGN):
        head = data[off:off + 0x40]
        if is_vbios(head) and head[2]:
            # named by the payload that holds it (vbios-a, vbios-b), else by its offset
            holder = next((k for k, p in payloads.items() if p.start <= off < p.end), None)
            name = f"vbios-{holder}" if holder and all(r.name != f"vbios-{holder}" for r in out) \
                else f"vbios-{off:06x}"
            where = f" in the ISH {holder.upper()} payload" if holder else ""
            out.append(FlashRegion(name, off, min(size, off + head[2] * 512),
                                   f"ATOM VBIOS option ROM{where} (length byte x 512)"))
    if size >= METADATA.end:
        out.append(FlashRegion("metadata", METADATA.offset, METADATA.end, "metadata a PSP update rewrites"))
    lay.regions = sorted(out, key=lambda r: (r.start, r.end, r.name))
    return lay


def layout_difference(image: FlashLayout, flash: FlashLayout) -> tuple[str | None, list[str]]:
    """Compare two layouts region by region: (the first region, by start, that sits elsewhere in the two or that
    only the flash has, in words; None when there is none) and the names of the regions only the image has
    (a damaged or erased flash lacks them; writing the image restores them, so they are no conflict)."""
    a, b = {r.name: r for r in image.regions}, {r.name: r for r in flash.regions}
    diffs = []
    for name in a.keys() | b.keys():
        x, y = a.get(name), b.get(name)
        if y is None or (x is not None and (x.start, x.end) == (y.start, y.end)):
            continue
        at = min(r.start for r in (x, y) if r is not None)

        def where(r: FlashRegion | None) -> str:
            return "absent" if r is None else f"0x{r.start:06x}-0x{r.end - 1:06x}"

        diffs.append((at, name, f"region {name}: image {where(x)}, flash {where(y)}"))
    lacking = [r.name for r in image.regions if r.name not in b]
    return (min(diffs)[2] if diffs else None), lacking
