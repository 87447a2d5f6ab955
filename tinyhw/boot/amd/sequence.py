"""``am boot`` and ``am reset``: the ordered steps, each timed on the transport's clock.

Spec: specs/amd-bringup.md §4.1 (full / partial / reset-first decision, flags written last), §4.2
steps 1 (mode-1 reset), 5 (PSP bootloader), 6 (KM ring), 7 (TOC, LOAD_IP_FW(SMU) before SETUP_TMR,
every other image, AUTOLOAD_RLC), 8 (SMU driver table, EnableAllSmuFeatures), 9 (wait for RLC
autoload: CP_STAT == 0 and bootload_complete == 1, the Linux form of Q2), 11 (highest DPM level),
13 (flags); §4.3 (partial boot); §7.2 (reset: SMU debug mailbox, PSP MODE1_RST as the fallback,
500 ms, bootloader ready again). The copy engine (steps 2-4, 9a, 9d, 10: page tables, hubs, IH, MEC,
SDMA0 queue 0; :mod:`tinyhw.boot.amd.copyengine`) comes up just before the flags when ``copy_engine`` is set;
clock gating (12) is not done. Firmware is checked (:mod:`tinyhw.boot.amd.firmware`) by the caller before any write.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tinyhw.boot.amd import copyengine, fwstage, layout
from tinyhw.boot.amd.firmware import FirmwareSet
from tinyhw.boot.amd.gpu import BOOTLOAD_COMPLETE, CP_STAT, SCRATCH5, SCRATCH6, SCRATCH7, AmGpu
from tinyhw.boot.amd.psp import RESET_HINT, Psp, PspError
from tinyhw.boot.amd.smu import Smu
from tinyhw.boot.amd.state import BoardState, read_state
from tinyhw.boot.common.steps import StepLog
from tinyhw.errors import DeviceTimeout, OperationFailed
from tinyhw.transport.abilities import Resettable
from tinyhw.transport.base import has, require, set_bus_master
from tinyhw.transport.wait import poll

RESET_SETTLE = 0.5  # §7.2: sleep 500 ms after the reset message


@dataclass
class BootResult:
    """What ``am boot`` did: the kind of boot ("full", "partial", "reset+full") and why, its steps, the TMR size, the
    pinned clocks, the SMU version and the firmware copied."""

    kind: str  # "full", "partial", "reset+full"
    reason: str
    steps: list[dict[str, Any]] = field(default_factory=list)
    tmr_size: int = 0
    clocks: dict[str, int] = field(default_factory=dict)
    smu_version: int = 0
    firmware_bytes: int = 0
    copy: dict[str, int] = field(default_factory=dict)
    copy_engine: bool = False  # also bring up page tables, hubs, IH, MEC and SDMA0 (tinyhw.boot.amd.copyengine)
    firmware_path: str = "auto"  # where the PSP reads firmware: the bridge sram ("sram") or vram ("bar")

    def to_doc(self) -> dict[str, Any]:
        """The result as a JSON-ready dict (what ``am boot`` reports)."""
        return {"boot": self.kind, "reason": self.reason, "tmr_size": self.tmr_size, "smu_version": self.smu_version,
                "clocks_mhz": self.clocks, "firmware_bytes": self.firmware_bytes,
                "firmware_copy": {**self.copy, "path": self.firmware_path}, "steps": self.steps}


def plan(state: BoardState) -> tuple[str, str]:
    """The boot ``am boot`` will do from ``state`` (kind, reason)."""
    return state.decision()


def boot(gpu: AmGpu, fw: FirmwareSet, on_step: Callable[[str, str, dict[str, Any]], None] | None = None,
         state: BoardState | None = None, *, copy_engine: bool = False, firmware_path: str = "auto") -> BootResult:
    """Bring the PSP secure OS and the SMU up (full boot), or re-check a board tinyhw booted (partial).

    ``firmware_path`` says where the PSP reads the firmware of a full boot (:mod:`tinyhw.boot.amd.fwstage`): "auto" (the
    usb bridge's sram when the transport has it, else vram), "sram" (refused without it) or "bar" (vram, written
    through the bar)."""
    log = StepLog(gpu, on_step)
    state = state or read_state(gpu)
    kind, reason = plan(state)
    fwstage.open_stage(gpu, firmware_path)  # unknown, or "sram" without the bridge sram: refused before any write
    psp, smu = Psp(gpu), Smu(gpu)
    result = BootResult(kind, reason, copy_engine=copy_engine, firmware_path=firmware_path)
    if kind == "partial":
        if log.run("smu alive", lambda: {"alive": smu.alive()})["alive"]:
            _partial(gpu, smu, log, result, state)
            result.steps = log.steps
            return result
        result.kind, result.reason = "reset+full", "tinyhw flags are set but the smu does not answer"
    if result.kind == "reset+full":
        log.run("mode-1 reset", lambda: reset_gpu(gpu, psp, smu))
    _full(gpu, fw, psp, smu, log, result)
    result.steps = log.steps
    return result


def _partial(gpu: AmGpu, smu: Smu, log: StepLog, result: BootResult, state: BoardState) -> None:
    gpu.wr(SCRATCH6, 1)
    result.tmr_size = state.tmr_size
    result.smu_version = log.run("smu version", lambda: {"smu_version": smu.version()})["smu_version"]
    result.clocks = log.run("clocks", lambda: {"clocks_mhz": smu.highest_clocks()})["clocks_mhz"]
    if result.copy_engine:
        log.run("copy engine", lambda: copyengine.summary(copyengine.bring_up(gpu)))
    log.run("flags", lambda: _flags(gpu, state.tmr_size))


def _full(gpu: AmGpu, fw: FirmwareSet, psp: Psp, smu: Smu, log: StepLog, result: BootResult) -> None:
    moved = 0
    stage = fwstage.open_stage(gpu, result.firmware_path)
    result.firmware_path = "bar" if stage is None else "sram"
    if not gpu.sos_alive():
        comps = fw.bootloader()
        if stage is not None and stage.bootloader_fits(comps):
            slots: dict[str, int] = {}
            log.run("psp firmware copy", lambda: {"components": len(comps), "slots": len(set(
                    slots.update(stage.bootloader(comps)) or slots.values()))},
                    path="sram", bytes=sum(len(d) for d in {c.data for c in comps}))
        else:
            slots = _bootloader_copy(gpu, comps, log)
        moved += sum(len(d) for d in {c.data for c in comps})
        for i, img in enumerate(comps):
            last = i == len(comps) - 1
            log.run(f"psp bootloader {img.label}",
                    functools.partial(psp.load_component, img.label, img.code, slots[img.label], last=last))
    log.run("km ring", psp.create_ring)
    toc = fw.toc()
    tmr = 0
    if toc is not None:
        moved += len(toc)
        tmr = log.run("load toc", lambda: {"tmr_size": _load_toc(gpu, psp, toc, stage)}, bytes=len(toc))["tmr_size"]
    if tmr > layout.TMR_MAX:
        raise PspError(f"the psp asks for a tmr of 0x{tmr:x} bytes, more than the 0x{layout.TMR_MAX:x} reserved",
                       hint=RESET_HINT)
    images = fw.ip_images()
    # the SMU first, then SETUP_TMR, then every other image in its order (§4.2 step 7)
    order = [i for i in images if i.label == "SMU"] + [i for i in images if i.label != "SMU"]
    batches = _sram_batches(stage, order)
    if batches is None:
        addrs = _vram_copy(gpu, images, log)
        batches = [list(range(len(order)))]
    for b, batch in enumerate(batches):
        if stage is not None:
            datas = [order[i].data for i in batch]
            vas = log.run("firmware copy" if b == 0 else f"firmware copy {b + 1}",
                          functools.partial(stage.place, datas), path="sram", bytes=sum(len(d) for d in datas))
            addrs = {id(order[i]): va for i, va in zip(batch, vas, strict=True)}
        for i in batch:
            img, at = order[i], addrs[id(order[i])]
            log.run(f"load {img.label.lower()}",
                    functools.partial(psp.load_ip_fw, at, len(img.data), img.code, img.label), bytes=len(img.data))
            if img.label == "SMU" and tmr:
                log.run("setup tmr", lambda: psp.setup_tmr(gpu.mc(layout.TMR), tmr), tmr_size=tmr)
    moved += sum(len(i.data) for i in images)
    log.run("autoload rlc", lambda: _autoload(gpu, psp))
    result.smu_version = log.run("smu alive", lambda: {"smu_version": smu.version()})["smu_version"]
    log.run("smu driver table", lambda: smu.set_driver_table(gpu.mc(layout.SMU_TABLE)),
            address=gpu.mc(layout.SMU_TABLE))
    log.run("smu features", smu.enable_features)
    result.clocks = log.run("clocks", lambda: {"clocks_mhz": smu.highest_clocks()})["clocks_mhz"]
    if result.copy_engine:
        log.run("copy engine", lambda: copyengine.summary(copyengine.bring_up(gpu)))
    log.run("flags", lambda: _flags(gpu, tmr))
    result.tmr_size = tmr
    result.firmware_bytes = moved
    result.copy = dict(gpu.copy_stats)


def _sram_batches(stage: fwstage.SramStage | None, order: list) -> list[list[int]] | None:
    """The LOAD_IP_FW images (in ``order``) in batches that fit the bridge sram, or None for the vram path (no sram
    stage, or an image larger than the sram)."""
    if stage is None:
        return None
    try:
        return fwstage.pack([len(i.data) for i in order])
    except ValueError:
        return None


def _vram_copy(gpu: AmGpu, images: list, log: StepLog) -> dict[int, int]:
    """Every LOAD_IP_FW image into the vram staging area in one streamed write; their MC addresses by ``id``."""
    offsets = layout.stage([len(i.data) for i in images])
    end = offsets[-1] + len(images[-1].data)
    blob = bytearray(end)
    for img, off in zip(images, offsets, strict=True):
        blob[off:off + len(img.data)] = img.data
    log.run("firmware copy", lambda: gpu.copy_firmware(layout.STAGING, bytes(blob)), bytes=len(blob))
    gpu.hdp_flush()
    return {id(img): gpu.mc(layout.STAGING + off) for img, off in zip(images, offsets, strict=True)}


def _bootloader_copy(gpu: AmGpu, comps: list, log: StepLog) -> dict[str, int]:
    """Copy every bootloader component to its own 1 MiB slot before the first command; same bytes share a slot.
    Returns each component's MC address by label."""
    slots: dict[str, int] = {}
    placed: dict[bytes, int] = {}

    def copy() -> dict[str, Any]:
        for img in comps:
            if img.data not in placed:
                at = layout.BL_SLOTS + len(placed) * layout.BL_SLOT_SIZE
                if len(img.data) > layout.BL_SLOT_SIZE or len(placed) >= layout.BL_SLOT_COUNT:
                    raise PspError(f"psp component {img.label} of 0x{len(img.data):x} bytes does not fit a slot")
                padded = bytes(img.data) + bytes(4) + bytes(-(len(img.data) + 4) % 16)  # §5.1 padding
                gpu.copy_firmware(at, padded)
                placed[img.data] = at
            slots[img.label] = placed[img.data]
        gpu.hdp_flush()
        return {"components": len(comps), "slots": len(placed)}

    log.run("psp firmware copy", copy, bytes=sum(len(d) for d in {i.data for i in comps}))
    return {label: gpu.mc(at) for label, at in slots.items()}


def _load_toc(gpu: AmGpu, psp: Psp, toc: bytes, stage: fwstage.SramStage | None) -> int:
    if stage is not None:
        return psp.load_toc(stage.place([toc])[0], len(toc))
    at = layout.MSG_BUF
    gpu.copy_firmware(at, toc)
    gpu.hdp_flush()
    return psp.load_toc(gpu.mc(at), len(toc))


def _autoload(gpu: AmGpu, psp: Psp) -> None:
    psp.autoload_rlc()
    poll(gpu.clock, lambda: (gpu.rd(CP_STAT), gpu.regs.read(BOOTLOAD_COMPLETE)),
         lambda v: v[0] == 0 and v[1] == 1, timeout=psp.timeout, interval=0.01,
         what="rlc autoload (cp_stat == 0 and bootload_complete == 1)", hint=RESET_HINT)


def _flags(gpu: AmGpu, tmr: int) -> None:
    gpu.wr(SCRATCH5, tmr)
    gpu.wr(SCRATCH7, layout.BOOT_MAGIC)
    gpu.wr(SCRATCH6, 0)


# -- reset (§7.2) ------------------------------------------------------------------------------------------------
def _bus_master(gpu: AmGpu, on: bool) -> None:
    set_bus_master(gpu.transport, on)


def reset_gpu(gpu: AmGpu, psp: Psp | None = None, smu: Smu | None = None) -> dict[str, Any]:
    """Mode-1 reset: first the compute queue is torn down (:func:`tinyhw.boot.amd.compute.teardown_compute`: a queue
    that does not dequeue stops here, exit 1), then the SMU's debug message when it answers, else the PSP's
    MODE1_RST; then wait for the bootloader."""
    from tinyhw.boot.amd.compute import teardown_compute

    queue = teardown_compute(gpu)
    psp, smu = psp or Psp(gpu), smu or Smu(gpu)
    if smu.alive():
        path = "smu"
    elif gpu.sos_alive():
        path = "psp"
    elif has(gpu.transport, Resettable):
        path = "function-reset"  # no firmware to ask: the transport's pci reset, in case the bootloader is mid-way
    else:
        path = "none"
    if path == "function-reset":
        require(gpu.transport, Resettable, "reset the function").reset()
    elif path != "none":
        _bus_master(gpu, False)
        if path == "smu":
            smu.mode1_reset()
        else:
            psp.mode1_reset()
        gpu.clock.sleep(RESET_SETTLE)
        _bus_master(gpu, True)
    try:
        psp.wait_bootloader("to answer after the reset")
    except DeviceTimeout as e:
        why = "after the reset" if path != "none" else "and no firmware runs that could reset the gpu"
        raise OperationFailed(f"the psp bootloader does not answer {why} ({e.message})",
                              hint="power-cycle the board (emulated boards: tinyhw mock reset --yes)") from None
    if gpu.sos_alive():
        raise OperationFailed("the psp secure os still runs after the mode-1 reset",
                              hint="power-cycle the board (emulated boards: tinyhw mock reset --yes)")
    for reg in (SCRATCH7, SCRATCH6, SCRATCH5):
        if gpu.rd(reg):
            gpu.wr(reg, 0)
    return {"path": path, "compute_queue": queue}
