"""An NVIDIA GPU handed to the boot engine, and the checks made before anything is written to it.

Spec: specs/nv-bringup.md §4 (early state checks: WPR2_ADDR_HI non-zero means a previous driver or run left
WPR2 locked; GFW boot finished; VRAM size in MiB), §3 (chip identification) and §15 (a GPU a driver owns is
never written). :func:`preflight_boot` reads sysfs-style attributes and BAR0 registers only: the binding
(no ``nvidia``/``nouveau``, nor any driver but ``vfio-pci``), the power state (D0, runtime-active), the
chip (an Ampere GA10x or Ada AD10x: the FWSEC + booter flavour), GFW completion and WPR2, then where host
memory for the GSP comes from (a transport that maps DMA buffers, or physical addresses on ``pci:``). Only
when all pass does the caller get an :class:`NvGpu` whose writes are allowed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tinyhw.boards.nvidia import (
    GFW_COMPLETED,
    NVIDIA_VENDOR,
    REG_BOOT_0,
    REG_BOOT_42,
    REG_GFW_PRIV_LEVEL_MASK,
    REG_GFW_PROGRESS,
    REG_VRAM_MIB,
    REG_WPR2_ADDR_HI,
    REG_WPR2_ADDR_LO,
    chip_name,
    decode_boot42,
    register_problem,
)
from tinyhw.errors import OperationFailed, Refused
from tinyhw.transport.abilities import DeviceAttributes, DmaBuffers, PhysicalDma
from tinyhw.transport.base import Transport, has
from tinyhw.transport.wait import poll

#: Drivers that own an NVIDIA GPU: a boot would fight them (§15).
OWNING_DRIVERS = ("nvidia", "nouveau")
#: The one driver a function may be bound to for ``nv boot``: vfio-pci hands it to user space.
USER_SPACE_DRIVERS = ("vfio-pci",)
RESET_HINT = ("reset the function: tinyhw --device {device} nv reset --yes (a function-level reset through vfio "
              "or the sysfs reset file), then boot again")


def reset_hint(device: str) -> str:
    """The hint that names the reset clearing what a boot left on ``device``."""
    return RESET_HINT.format(device=device)
GFW_TIMEOUT = 4.0  # seconds to wait for the VBIOS devinit (GFW) to finish (inferred: it completes at power-on)


@dataclass(frozen=True)
class ChipParams:
    """What the boot needs to know about a chip family: its firmware directory and GSP-RM signature family
    (§3.4), and the WPR layout's sizes (§10.1; Ampere and Ada share them)."""

    name: str
    firmware_dir: str
    signature_family: str
    heap_size: int = 0x8100000
    vga_workspace_size: int = 1 << 20
    frts_size: int = 1 << 20
    non_wpr_heap_size: int = 1 << 20


def chip_params(architecture: int, implementation: int) -> ChipParams | None:
    """The boot parameters of an Ampere GA10x (0x17) or Ada AD10x (0x19) chip; None for any other (GA100,
    Hopper and Blackwell boot differently, §12.2-§12.3)."""
    name = chip_name((architecture << 4) | implementation)
    if architecture == 0x17 and implementation >= 2 and name:
        return ChipParams(name, "ga102", "ga10x")
    if architecture == 0x19 and name:
        return ChipParams(name, "ad102", "ad10x")
    return None


class NvGpu:
    """BAR0 registers and the BAR1 VRAM window of an NVIDIA GPU, on the transport's clock."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport
        self.clock = transport.clock
        self.bar0 = transport.bar(0)
        self._bar1: Any = None
        self.chip: ChipParams | None = None
        self.boot0 = 0
        self.vram_size = 0
        #: where the GSP's host memory comes from: the transport (DmaBuffers: IOVAs) or, on ``pci:``, the
        #: physical-address allocator :func:`preflight_boot` checked (PhysicalDma)
        self.host: Any = None

    def rd(self, reg: int) -> int:
        """One BAR0 dword read."""
        return self.bar0.read32(reg)

    def wr(self, reg: int, value: int) -> None:
        """One BAR0 dword write."""
        self.bar0.write32(reg, value & 0xFFFFFFFF)

    def vram_write(self, offset: int, data: bytes) -> None:
        """Write ``data`` into VRAM at FB offset ``offset`` through BAR1 (physical mode before GSP-RM sets it up,
        inferred), then read its first dword back so the posted writes land."""
        if self._bar1 is None:
            self._bar1 = self.transport.bar(1)
        if offset + len(data) > self._bar1.info.size:
            raise Refused(f"vram offset 0x{offset:x}+0x{len(data):x} lies beyond the 0x{self._bar1.info.size:x}-byte "
                          "bar1 window")
        padded = bytes(data) + bytes(-len(data) % 4)
        self._bar1.write(offset, padded)
        self._bar1.read32(offset)

    def wpr2(self) -> tuple[int, int]:
        """(WPR2_ADDR_LO, WPR2_ADDR_HI) as read."""
        return self.rd(REG_WPR2_ADDR_LO), self.rd(REG_WPR2_ADDR_HI)


def _binding(t: Transport) -> dict[str, str | None]:
    if not has(t, DeviceAttributes):
        return {"driver": None, "power_state": None, "runtime": None}
    return {"driver": t.attribute("driver"), "power_state": t.attribute("power_state"),
            "runtime": t.attribute("power/runtime_status")}


def check_binding(t: Transport, *, action: str = "boot") -> dict[str, str | None]:
    """Refuse (exit 2) a function a kernel driver owns or one not in D0 and runtime-active; reads sysfs-style
    attributes only (no device access)."""
    b = _binding(t)
    drv = b["driver"]
    ident = t.identity()
    where = ident.location
    if ident.vendor_id != NVIDIA_VENDOR:
        raise Refused(f"{where} is not an nvidia gpu (vendor 0x{ident.vendor_id:04x})",
                      hint="tinyhw am boots amd gpus; tinyhw list shows the devices")
    if drv in OWNING_DRIVERS:
        raise Refused(f"{where} is bound to the {drv} driver; tinyhw does not {action} a gpu a driver owns",
                      hint=f"unbind {drv} and bind vfio-pci (or unload {drv}), then open it as vfio:ADDR")
    if drv and drv not in USER_SPACE_DRIVERS:
        raise Refused(f"{where} is bound to the {drv} driver, not free for user space",
                      hint="unbind it, or bind vfio-pci and open the gpu as vfio:ADDR")
    if b["power_state"] not in (None, "D0") or b["runtime"] not in (None, "active", "unsupported"):
        raise Refused(f"{where} is in {b['power_state'] or '?'} (runtime {b['runtime'] or '?'}), not d0",
                      hint="wake it first (echo on > /sys/bus/pci/devices/ADDR/power/control), then retry")
    return b


def preflight_boot(t: Transport) -> NvGpu:
    """An :class:`NvGpu` that ``nv boot`` may write to, else the refusal that says why. Reads only: sysfs-style
    attributes (:func:`check_binding`), then BOOT_0/BOOT_42, GFW progress, VRAM size and WPR2 (§3, §4)."""
    check_binding(t)
    gpu = NvGpu(t)
    boot42 = gpu.rd(REG_BOOT_42)
    if boot42 == 0xFFFFFFFF:  # §15: all ones = a function not in D0 (or gone); the attributes may not say (vfio)
        raise Refused(f"{t.identity().location}: pmc_boot_42 reads 0xffffffff, the gpu is not in d0 (or gone)",
                      hint="wake it (power/control = on) or re-seat it, then retry")
    problem = register_problem(boot42)
    if problem:
        raise OperationFailed(f"pmc_boot_42 {problem}", hint="check that the gpu is powered and its bars enabled")
    b = decode_boot42(boot42)
    params = chip_params(b.architecture, b.implementation)
    if params is None:
        raise Refused(f"chip 0x{b.chipset:x} ({chip_name(b.chipset) or 'unknown'}) is not an ampere ga10x or ada "
                      "ad10x; tinyhw boots only the fwsec + booter flavour",
                      hint="blackwell and hopper boot through the fsp (fmc chain of trust), not implemented")
    gpu.chip = params
    gpu.boot0 = gpu.rd(REG_BOOT_0)
    _, hi = gpu.wpr2()
    if hi:
        raise Refused(f"wpr2 is already up (wpr2_addr_hi 0x{hi:08x}): a driver or an earlier boot left the gsp "
                      "running or its region locked", hint=reset_hint(t.identity().location))
    poll(gpu.clock, lambda: (gpu.rd(REG_GFW_PRIV_LEVEL_MASK), gpu.rd(REG_GFW_PROGRESS)),
         lambda v: bool(v[0] & 1) and (v[1] & 0xFF) == GFW_COMPLETED, timeout=GFW_TIMEOUT, interval=0.01,
         what="the vbios devinit (gfw boot progress 0xff)", hint="power-cycle the gpu: its vbios did not finish")
    mib = gpu.rd(REG_VRAM_MIB)
    if not mib or register_problem(mib):
        raise OperationFailed(f"the vram size register reads 0x{mib:x}", hint="power-cycle the gpu")
    gpu.vram_size = mib << 20
    gpu.host = host_memory_source(t)
    return gpu


def host_memory_source(t: Transport) -> Any:
    """What gives the GSP host memory on ``t``: the transport itself when it maps DMA buffers (vfio:, IOVAs), else
    its physical-address allocator (pci:, after that allocator's own checks: no translating IOMMU, root, free huge
    pages); refused (exit 2) when it has neither. Touches no BAR."""
    if has(t, DmaBuffers):
        return t
    if has(t, PhysicalDma):
        return t.physical_memory()
    raise Refused(f"{t.identity().location}: the {t.name} transport gives no dma buffers, and the gsp's queues "
                  "and arguments live in host memory",
                  hint="open the gpu through vfio (vfio:ADDR) so tinyhw can map host memory for it")


def preflight_reset(t: Transport) -> NvGpu:
    """An :class:`NvGpu` ``nv reset`` may reset: the same binding and power checks as a boot (attributes only)."""
    check_binding(t, action="reset")
    return NvGpu(t)
