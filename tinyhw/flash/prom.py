"""Read an NVIDIA board's VBIOS through the PROM window of BAR0 (specs/nv-bringup.md §6.1: 1 MiB at BAR0
0x300000, read as 32-bit words, with no PROM-enable or shadow write first).

Only on a board no kernel driver owns: the window belongs to the driver's boot path (§15 lists it among
what a probe must never touch), so a bound driver is refused (exit 2) before anything is mapped. Read-only:
nothing is written to the board. The dump is checked with the VBIOS parser: a window that reads all ones
(GFW boot not finished, the window disabled, or the device off) or holds no ROM image chain is refused
as a failed read (exit 1) rather than saved as if it were a VBIOS.
"""

from __future__ import annotations

from collections.abc import Callable

from tinyhw.boards.nvidia import NVIDIA_VENDOR, PROM_SIZE, PROM_WINDOW
from tinyhw.errors import OperationFailed, Refused
from tinyhw.formats.nvbios import parse_nv_vbios
from tinyhw.transport.abilities import DeviceAttributes
from tinyhw.transport.base import Transport, has

CHUNK = 0x1000


def check_owner(t: Transport) -> None:
    """Refuse (exit 2) a device that is not an NVIDIA GPU, or that a kernel driver owns."""
    ident = t.identity()
    if ident.vendor_id != NVIDIA_VENDOR:
        raise Refused(f"--method prom reads an nvidia gpu's vbios; {ident.location} is "
                      f"{ident.vendor_id:04x}:{ident.device_id:04x}")
    driver = t.attribute("driver") if has(t, DeviceAttributes) else None
    if driver is not None:
        raise Refused(f"{ident.location} is owned by the kernel driver {driver}: its prom window is not read",
                      hint="the driver keeps a copy: `tinyhw probe` shows the vbios version; unbind it only if "
                           "nothing uses the gpu")


def dump_prom(t: Transport, *, size: int = PROM_SIZE, advance: Callable[[int], None] | None = None) -> bytes:
    """The PROM window's ``size`` bytes (1 MiB), read in 4 KiB blocks of dword reads."""
    check_owner(t)
    bar = t.bar(0)
    if bar.size < PROM_WINDOW + size:
        raise Refused(f"bar0 is 0x{bar.size:x} bytes: too small for the prom window at 0x{PROM_WINDOW:x}")
    out = bytearray()
    for off in range(0, size, CHUNK):
        out += bar.read(PROM_WINDOW + off, min(CHUNK, size - off))
        if advance is not None:
            advance(min(CHUNK, size - off))
    data = bytes(out)
    if data[:4] == b"\xff\xff\xff\xff":
        raise OperationFailed("the prom window reads 0xffffffff: the vbios is not readable (gfw boot not finished, "
                              "the window disabled, or the device off)", hint="nothing was saved")
    v = parse_nv_vbios(data)
    if not v.images:
        raise OperationFailed("the prom window holds no rom image chain: " + "; ".join(v.problems[:2]),
                              hint="nothing was saved")
    return data
