"""``nv boot`` and ``nv reset``: the Ampere/Ada GSP boot chain as named, timed steps.

Spec: specs/nv-bringup.md §12.1 (the order: software preparation, queue pre-fill with GSP_SET_SYSTEM_INFO and
SET_REGISTRY, FWSEC-FRTS on the GSP falcon and the WPR2 check, the GSP falcon reset in RISC-V mode with the
LibOS arguments in its mailboxes, the booter on SEC2 with the WPR meta address and SEC2 MAILBOX0 = 0 after,
FALCON_OS <- 0 and RISC-V active, the status queue, GSP_INIT_DONE servicing events, BAR1 physical mode),
§7 (FWSEC-FRTS), §10.1 (layout), §11 (arguments), §13 (queues, sequencer, first RPCs) and §4 (a GPU whose
WPR2 is up is reset: bus mastering off, function reset). Steps are run and timed by
:class:`tinyhw.boot.common.steps.StepLog`, as ``am boot``'s are: each is named in the progress output and in
any error. After the first write, a failure's hint names the reset that clears what the boot left.

What GSP-RM reported is kept in a small record file (:mod:`tinyhw.boot.nv.record`) for ``nv info``: the
host memory the GSP's queues live in is freed when the booting process ends.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tinyhw.boards.nvidia import (
    BSI_SECURE_SCRATCH_14,
    FALCON_GSP,
    FALCON_MAILBOX0,
    FALCON_OS,
    FALCON_SEC2,
    PBUS_BAR1_BLOCK,
    PROM_SIZE,
    PROM_WINDOW,
    RISCV_CPUCTL,
    RISCV_CPUCTL_ACTIVE,
)
from tinyhw.boot.common.steps import StepLog
from tinyhw.boot.nv import layout, record, rpc, sequencer
from tinyhw.boot.nv.falcon import Falcon, HsUcode
from tinyhw.boot.nv.fwfiles import NvFirmware
from tinyhw.boot.nv.gpu import NvGpu, reset_hint
from tinyhw.boot.nv.gspmem import HostMemory, host_sizes, libos_arguments, queue_arguments, radix3
from tinyhw.boot.nv.structs import GspLayouts, layouts_for
from tinyhw.errors import OperationFailed, Refused, TinyhwError
from tinyhw.formats.nvbios import fwsec_frts_image, parse_nv_vbios
from tinyhw.transport.abilities import Resettable
from tinyhw.transport.base import has, set_bus_master
from tinyhw.transport.wait import poll

FWSEC_AT = 0x200000  # FB offset of the patched FWSEC image (the 2 MiB boot area, §5; inferred placement)
BOOTER_AT = 0x400000  # FB offset of the booter image
REGISTRY = {"RMForcePcieConfigSave": 1, "RMSecBusResetEnable": 1}  # §13.6
RESET_SETTLE = 0.1  # §4: tinygrad sleeps 100 ms after the reset
STEPS = ("read vbios", "patch fwsec", "fwsec-frts", "wpr layout", "load firmware", "gsp arguments", "start gsp",
         "status queue", "cpu sequencer", "init done", "static info")


@dataclass
class BootResult:
    """What ``nv boot`` did: its steps, the WPR layout, WPR2, the firmware used and what the GSP reported."""

    steps: list[dict[str, Any]] = field(default_factory=list)
    layout: dict[str, int] = field(default_factory=dict)
    wpr2: tuple[int, int] = (0, 0)
    firmware: dict[str, Any] = field(default_factory=dict)
    gsp: dict[str, Any] = field(default_factory=dict)
    sequencer_runs: int = 0

    def to_doc(self) -> dict[str, Any]:
        """The result as a JSON-ready dict."""
        return {"gsp": self.gsp, "wpr2_addr_lo": self.wpr2[0], "wpr2_addr_hi": self.wpr2[1], "layout": self.layout,
                "firmware": self.firmware, "sequencer_runs": self.sequencer_runs, "steps": self.steps}


def _identity_words(gpu: NvGpu) -> dict[str, int]:
    t = gpu.transport
    return {"pci_device_id": t.config_read(0x00), "pci_sub_device_id": t.config_read(0x2C),
            "pci_revision_id": t.config_read(0x08, 1)}


def _bdf(location: str) -> tuple[int, int, int]:
    """(bus, device, function) of a ``[vfio:|pci:]DDDD:BB:DD.F`` location; 0 for other transports (§13.6)."""
    tail = location.split(":", 1)[-1] if location.startswith(("vfio:", "pci:")) else location
    parts = tail.replace(".", ":").split(":")
    try:
        return int(parts[-3], 16), int(parts[-2], 16), int(parts[-1], 16)
    except (IndexError, ValueError):
        return 0, 0, 0


def boot(gpu: NvGpu, fw: NvFirmware, on_step: Callable[[str, str, dict[str, Any]], None] | None = None
         ) -> BootResult:
    """Boot GSP-RM on a GPU that passed :func:`~tinyhw.boot.nv.gpu.preflight_boot`, up to its static info."""
    if gpu.chip is None or not gpu.vram_size:
        raise Refused("the gpu has not passed the boot preflight (preflight_boot)")
    layouts_for(fw.version)  # refused before any access for a branch whose structures tinyhw does not know
    log = StepLog(gpu, on_step)
    result = BootResult(firmware=fw.to_doc())
    mem = HostMemory(gpu.transport, None if gpu.host is gpu.transport else gpu.host)
    location = gpu.transport.identity().location
    try:
        mem.reserve(host_sizes(len(fw.gsp_image), len(fw.bootloader_image), rpc.SHARED_SIZE))
        _boot(gpu, fw, log, result, mem, location)
    except TinyhwError as e:
        if e.exit_code == 1:
            e.hint = reset_hint(location)
        raise
    finally:
        result.steps = log.steps
        with contextlib.suppress(TinyhwError):  # a gone device: its memory is freed all the same
            set_bus_master(gpu.transport, False)  # the gsp's queues are freed now: no dma may reach them after
        mem.release()
    return result


def _boot(gpu: NvGpu, fw: NvFirmware, log: StepLog, result: BootResult, mem: HostMemory, location: str) -> None:
    chip = gpu.chip
    assert chip is not None
    rom = log.run("read vbios", lambda: gpu.bar0.read(PROM_WINDOW, PROM_SIZE), bytes=PROM_SIZE)
    frts_offset = gpu.vram_size - chip.vga_workspace_size - chip.frts_size
    held: dict[str, Any] = {}
    log.run("patch fwsec", lambda: _patch_fwsec(rom, frts_offset, held))
    fwsec, ucode = held["image"], held["ucode"]
    gsp, sec2 = Falcon(gpu, FALCON_GSP, "gsp"), Falcon(gpu, FALCON_SEC2, "sec2")
    set_bus_master(gpu.transport, True)
    result.wpr2 = log.run("fwsec-frts", lambda: _run_fwsec(gpu, gsp, fwsec, ucode), bytes=len(fwsec))["wpr2"]
    wpr = log.run("wpr layout", lambda: layout.compute(gpu.vram_size, len(fw.bootloader_image), len(fw.gsp_image),
                                                      chip))
    if wpr.frts_offset != frts_offset:
        raise OperationFailed(f"the wpr layout's frts offset 0x{wpr.frts_offset:x} is not fwsec's 0x{frts_offset:x}")
    result.layout = wpr.to_doc()
    sources = log.run("load firmware", lambda: _load_firmware(gpu, fw, mem),
                      bytes=len(fw.gsp_image) + len(fw.booter_image))
    args: dict[str, Any] = {}
    log.run("gsp arguments", lambda: _arguments(gpu, mem, wpr, sources, args, fw.version))
    log.run("start gsp", lambda: _start(gpu, gsp, sec2, fw, args))
    queues: rpc.GspQueues = args["queues"]
    log.run("status queue", queues.wait_status_queue)

    def on_event(msg: rpc.Message) -> None:
        if msg.function == rpc.EVENT_RUN_CPU_SEQUENCER:
            log.run("cpu sequencer", lambda: _sequencer(gpu, gsp, sec2, msg, args))
            result.sequencer_runs += 1
        elif msg.function in (rpc.EVENT_OS_ERROR_LOG, rpc.EVENT_MMU_FAULT):
            text = msg.payload[12:].split(b"\0")[0].decode("ascii", "replace")
            what = "an error" if msg.function == rpc.EVENT_OS_ERROR_LOG else "an mmu fault"
            raise OperationFailed(f"the gsp reported {what} while booting: {text or msg.name}")

    log.run("init done", lambda: _init_done(gpu, queues, on_event))
    abi = layouts_for(fw.version)
    info = log.run("static info", lambda: rpc.parse_static_info(queues_call(queues, on_event, abi), abi))
    result.gsp = info
    result.wpr2 = gpu.wpr2()
    record.save(location, {"gsp": info, "wpr2": list(result.wpr2),
                                                    "firmware_version": fw.version})


def queues_call(queues: rpc.GspQueues, on_event: Callable[[rpc.Message], None], abi: GspLayouts) -> bytes:
    """Send GET_GSP_STATIC_INFO (a zeroed ``GspStaticConfigInfo`` of ``abi``'s branch) and return its reply."""
    queues.send(rpc.GET_GSP_STATIC_INFO, rpc.static_info_request(abi))
    return queues.wait_for(rpc.GET_GSP_STATIC_INFO, on_event).payload


def _patch_fwsec(rom: bytes, frts_offset: int, held: dict[str, Any]) -> dict[str, Any]:
    v = parse_nv_vbios(rom)
    d = v.fwsec("FWSEC_PROD")
    if d is None or not d.fields:
        raise OperationFailed("the vbios holds no decodable fwsec_prod descriptor "
                              f"({(v.problems or ['no falcon ucode table'])[0]})",
                              hint="dump the vbios (tinyhw flash dump --method prom) and inspect it")
    try:
        image = fwsec_frts_image(rom, v, frts_offset)
    except ValueError as e:
        raise OperationFailed(f"the fwsec image cannot be patched for frts: {e}") from None
    f = d.fields
    u = HsUcode(FWSEC_AT, 0, f["imem_load_size"], f["imem_phys_base"], f["imem_virt_base"], f["imem_load_size"],
                f["dmem_phys_base"], f["dmem_load_size"], f["pkc_data_offset"], f["engine_id_mask"], f["ucode_id"])
    held.update(image=image, ucode=u)
    return {"frts_offset": frts_offset, "image_bytes": len(image), "vbios": v.bios_version}


def _run_fwsec(gpu: NvGpu, gsp: Falcon, image: bytes, u: HsUcode) -> dict[str, Any]:
    gpu.vram_write(FWSEC_AT, image)
    gsp.reset()
    mb0, _ = gsp.run_hs(u)
    lo, hi = gpu.wpr2()
    if not hi:
        raise OperationFailed(f"fwsec-frts did not raise wpr2 (wpr2_addr_hi 0, gsp falcon mailbox0 0x{mb0:08x})")
    return {"wpr2": (lo, hi), "mailbox0": mb0}


def _load_firmware(gpu: NvGpu, fw: NvFirmware, mem: HostMemory) -> layout.WprSources:
    gpu.vram_write(BOOTER_AT, fw.booter_image)
    r3, pages = radix3(mem, fw.gsp_image)
    bl = mem.alloc(len(fw.bootloader_image), contiguous=True, what="gsp bootloader")
    bl.write(0, fw.bootloader_image)
    sig = mem.alloc(layout.SIGNATURE_SIZE, contiguous=True, what="gsp-rm signature")
    sig.write(0, fw.gsp_signature[:layout.SIGNATURE_SIZE])
    d = fw.bootloader_desc
    return layout.WprSources(r3.addr(0), len(fw.gsp_image), bl.addr(0), len(fw.bootloader_image),
                             d["monitor_code_offset"], d["monitor_data_offset"], d["manifest_offset"], sig.addr(0))


def _arguments(gpu: NvGpu, mem: HostMemory, wpr: layout.WprLayout, src: layout.WprSources,
               args: dict[str, Any], fw_version: str) -> dict[str, Any]:
    abi = layouts_for(fw_version)
    shared = mem.alloc(rpc.SHARED_SIZE)
    queues = rpc.GspQueues(gpu, shared)
    t = gpu.transport
    bar_bus = {b.index: b.address for b in t.bars()}
    queues.post(rpc.GSP_SET_SYSTEM_INFO, rpc.system_info(bar_bus, _bdf(t.identity().location),
                                                         _identity_words(gpu), abi))
    queues.post(rpc.SET_REGISTRY, rpc.registry(REGISTRY))
    shared_at, entries, cmd_at, stat_at = queues.arguments()
    args_page, _ = libos_arguments(mem, queue_arguments(shared_at, cmd_at, stat_at, entries, abi), abi)
    meta = mem.alloc(layout.WPR_META_SIZE)
    meta.write(0, layout.pack(wpr, src))
    args.update(queues=queues, libos=args_page.addr(0), wpr_meta=meta.addr(0))
    return {"libos_args": args_page.addr(0), "wpr_meta": meta.addr(0), "queues": shared.addr(0)}


def _start(gpu: NvGpu, gsp: Falcon, sec2: Falcon, fw: NvFirmware, args: dict[str, Any]) -> dict[str, Any]:
    gsp.reset(riscv=True)
    gsp.set_mailboxes(args["libos"])
    sec2.reset()
    assert fw.booter is not None
    u = HsUcode(BOOTER_AT, *[getattr(fw.booter, k) for k in ("code_offset", "data_offset", "imem_phys", "imem_virt",
                                                            "imem_size", "dmem_phys", "dmem_size", "pkc_offset",
                                                            "engine_mask", "ucode_id")])
    try:
        mb0, _ = sec2.run_hs(u, args["wpr_meta"])
    except TinyhwError as e:
        e.add_context("falcon", "sec2", "(the booter on sec2)")
        raise
    if mb0:
        raise OperationFailed(f"the booter failed: sec2 mailbox0 0x{mb0:08x} (booter error code)")
    gsp.wr(FALCON_OS, 0)
    poll(gpu.clock, lambda: gsp.rd(RISCV_CPUCTL), lambda v: bool(v & RISCV_CPUCTL_ACTIVE), timeout=2.0,
         interval=0.001, what="the gsp risc-v core to run (riscv_cpuctl.active_stat)")
    return {"booter_mailbox0": mb0}


def _sequencer(gpu: NvGpu, gsp: Falcon, sec2: Falcon, msg: rpc.Message, args: dict[str, Any]) -> dict[str, Any]:
    def core_reset() -> None:  # §13.5 opcode 5: reset, then the DMA context requirement off (§8 steps 1-2)
        gsp.reset()
        gsp.disable_ctx_req()

    def resume() -> None:  # opcode 8; SEC2 still runs the booter, its CPUCTL may be aliased (§8 step 8)
        gsp.reset(riscv=True)
        gsp.set_mailboxes(args["libos"])
        sec2.start()
        poll(gpu.clock, lambda: gpu.rd(BSI_SECURE_SCRATCH_14), lambda v: bool(v >> 26 & 1), timeout=2.0, interval=0.001,
             what="boot stage 3 handoff (bsi secure scratch 14 bit 26)")
        if sec2.rd(FALCON_MAILBOX0):
            raise OperationFailed(f"sec2 mailbox0 0x{sec2.rd(FALCON_MAILBOX0):08x} after the core resume")

    core = {5: core_reset, 6: gsp.start, 7: lambda: gsp.wait_halted(2.0), 8: resume}
    return sequencer.run(msg.payload, gpu.rd, gpu.wr, gpu.clock, core)


def _init_done(gpu: NvGpu, queues: rpc.GspQueues, on_event: Callable[[rpc.Message], None]) -> dict[str, Any]:
    queues.wait_for(rpc.EVENT_INIT_DONE, on_event)
    gpu.wr(PBUS_BAR1_BLOCK, 0)  # §12.1 step 9: BAR1 in physical mode
    return {}


def reset(gpu: NvGpu) -> dict[str, Any]:
    """§4: bus mastering off, a function reset (VFIO_DEVICE_RESET or sysfs ``reset``), 100 ms, then WPR2 must read
    0. Forgets the record of what the GSP reported."""
    t = gpu.transport
    if not has(t, Resettable):
        raise Refused(f"the {t.name} transport cannot reset the function",
                      hint="open the gpu as vfio:ADDR (a function-level reset through vfio)")
    before = gpu.wpr2()
    set_bus_master(t, False)
    t.reset()
    gpu.clock.sleep(RESET_SETTLE)
    after = gpu.wpr2()
    record.forget(t.identity().location)
    if after[1]:
        raise OperationFailed(f"wpr2 is still up after the function reset (wpr2_addr_hi 0x{after[1]:08x})",
                              hint="power-cycle the machine: this gpu's reset does not clear wpr2")
    return {"wpr2_before": list(before), "wpr2_after": list(after)}

