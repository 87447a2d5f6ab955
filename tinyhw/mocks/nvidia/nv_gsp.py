"""The emulated AD102's secure boot: FWSEC and booter as black boxes, and a scripted GSP-RM.

From specs/nv-bringup.md §7, §9.3, §10-§13 and §16's "scripted BAR0 model". Nothing here runs ucode: each HS
ucode is a check of what the host gave the falcon, answered with success or an error code in MAILBOX0.

**FWSEC-FRTS** (GSP falcon, falcon core): the boot-ROM parameters must be MOD_SEL RSA3K, the FWSEC_PROD
descriptor's ucode id and engine mask, PARAADDR[0] = its PKCDataOffset; IMEM must hold the ucode's code;
DMEM must hold at the PKC offset the last 384 bytes of the descriptor's signatures, the DMEM mapper's
init_cmd must be 0x15 and its command-in buffer the FRTS command (READ_VBIOS v1/24, gfw image offset u64 @8 and
size @16 zero, flags @20 = 2, then FRTS region v1/20 at (VRAM - 2 MiB) >> 12, 0x100 pages, media type 2). Then
WPR2 covers the FRTS region.
**Booter** (SEC2): PARAADDR[0] 0x10, engine mask 1, ucode id 3, DMEM at 0x10 holding the invented booter's
production signature (:data:`tinyhw.mocks.nvidia.nv_gspfw.BOOTER_SIGNATURE`); WPR2 up; the GSP falcon reset into
RISC-V mode with a LibOS argument address in its mailboxes; MAILBOX0/1 pointing at a valid WPR meta (magic,
revision 1, fbSize, frtsOffset = VRAM - 2 MiB, the §10.1 order of offsets, a readable radix-3 chain, bootloader
and signature). Then WPR2 spans gspFwWprStart .. gspFwWprEnd and GSP-RM runs.

Error codes (MAILBOX0; invented, the spec documents only "non-zero = booter error code"): FWSEC 0xF5EC0001
signature, 0xF5EC0002 not the FRTS command, 0xF5EC0003 bad FRTS region, 0xF5EC0004 boot-ROM parameters,
0xF5EC0005 the injected ``fwsec-error``; booter 0xB0070001 signature / boot-ROM parameters, 0xB0070002 WPR2
down, 0xB0070003 bad WPR meta, 0xB0070004 GSP not in RISC-V mode or no LibOS arguments, 0xB0070005 the
radix-3 image, bootloader or signature unreadable (IOMMU fault).

**GSP-RM** (scripted): finds RMARGS among the LibOS entries, the queue arguments and the shared page table; initialises
the status queue (§13.2); consumes the command queue (element checksum, RPC header, then GSP_SET_SYSTEM_INFO: a
``GspSystemInfo`` of its branch's size with the §13.6 config mirror and, on 570, the board's PCI ids; SET_REGISTRY: a
well-formed table); posts a CPU sequencer event whose script saves BOOT_0, runs the core operations (core reset: the GSP
falcon reset, then its DMA context requirement off; core start and wait for halt; core resume: the GSP reset into RISC-V
with the LibOS arguments, SEC2 started through CPUCTL_ALIAS since the booter left SEC2's CPUCTL aliased, the handoff bit
26 of BSI_SECURE_SCRATCH_14 raised), polls the GSP's RISC-V active_stat with timeout 0 (the default timeout; the core
comes up only after :data:`RISCV_WAKE_READS` reads), sets bit 26 by a read-modify-write, delays 20 us and writes
:data:`SEQUENCER_DONE` to the GSP's FALCON_OS; on that write, when every core operation was done as asked, posts
GSP_INIT_DONE. At each doorbell it answers GET_GSP_STATIC_INFO (function 65) with a ``GspStaticConfigInfo``
(gpuNameString, gpuShortNameString, fb_length, one FB region); GSP_RM_ALLOC (103) and GSP_RM_CONTROL (76) through a
small RM object model (clients, devices, subdevices, VA spaces, channels and their compute and copy objects; the
controls of a golden-image setup) answered NV_OK or the NV_STATUS the RM gives a bad request; ALLOC_MEMORY,
SET_PAGE_DIRECTORY and UNLOADING_GUEST_DRIVER NV_OK; any other function NV_ERR_NOT_SUPPORTED (nvstatuscodes.h).

The structures follow the GSP-RM branch the emulated GSP-RM runs (:data:`LAYOUTS`, the offsets derived in
docs/nv-gsp-layouts.md from NVIDIA's published 535.113.01 and 570.144 headers): its version is what the
invented image's marker names, or, for a real image (which carries no marker), the release whose signature
(:data:`GSP_RM_SIGNED`) the booter found with it; an image no known signature covers is refused by the booter.

These blocks reach the board only through :class:`~tinyhw.mocks.common.services.NvServices` (FB reads for the falcons'
DMA, WPR2 as BAR0 register storage, host memory through the IOMMU, the VRAM size and PCI ids); the secure-boot
component owns the GSP and SEC2 falcons and the GSP-RM it starts. It never holds the board.
"""

from __future__ import annotations

import hashlib
import struct

from tinyhw.boards.nvidia import REG_WPR2_ADDR_HI, REG_WPR2_ADDR_LO
from tinyhw.commands import CommandTable
from tinyhw.mocks.common.faults import BusFault
from tinyhw.mocks.common.services import NvServices
from tinyhw.mocks.nvidia import nv_gspfw, nv_vbios
from tinyhw.mocks.nvidia.nv_falcon import (
    DMACTL,
    ENGIDMASK,
    FBIF_CTL,
    MAILBOX0,
    MAILBOX1,
    MOD_SEL,
    OS,
    PARAADDR0,
    RISCV_CPUCTL,
    UCODE_ID,
    EmulatedFalcon,
)

FWSEC_SIGNATURE, FWSEC_NOT_FRTS, FWSEC_REGION, FWSEC_BROM, FWSEC_INJECTED = (0xF5EC0001, 0xF5EC0002, 0xF5EC0003,
                                                                             0xF5EC0004, 0xF5EC0005)
BOOTER_SIGNATURE, BOOTER_NO_WPR2, BOOTER_META, BOOTER_NO_GSP, BOOTER_UNREADABLE = (0xB0070001, 0xB0070002, 0xB0070003,
                                                                                   0xB0070004, 0xB0070005)
BOOTER_GSP_UNSIGNED = 0xB0070006
#: The booters the emulated SEC2 boot ROM accepts: SHA-256 of the 384-byte RSA-3K signature at the PKC offset ->
#: SHA-256 of the first 256 bytes of IMEM that signature was issued for. The boot ROM checks the signature over
#: the loaded ucode with the key fused into the chip (§8, §9.3); without NVIDIA's key the emulator keeps the
#: (signature, code) pairs NVIDIA issued instead: the invented booter's and the production signature of
#: linux-firmware's ad102 ``booter_load-570.144.bin`` (the one at sig_prod_offset + patch_sig, patched in at
#: patch_loc = DMEM 0x10). Any other signature, or a signature over other code, is refused.
BOOTER_SIGNED = {
    "ef8e74ae10634a5b50e88da4a75a664063a8e457901097e8701dbef60a12b7fd":  # invented (nv_gspfw)
        "fcc7c9fa912bf428850908a135e39d3381cb3ed96c42bf6aa0cd1e7bbe3899ab",
    "5486209e8239da2d2b6c9190e836a76881a6d070a9b5840f845c575333b84bbf":  # ad102/gsp/booter_load-570.144.bin
        "8afc66203d5304b9e14a56519a68aa9fbd829426459c0b5ddb8e6f1498b7413a",
}
#: Real GSP-RM images the booter loads, identified as the booter does, by their signature (a real ``.fwimage``
#: carries no version marker): SHA-256 of the 4 KiB ``.fwsignature_ad10x`` the WPR meta points at ->
#: (version, SHA-256 of the image's first 4 KiB page). Debian firmware-nvidia-gsp's 535.261.03 ``gsp_ga10x.bin`` and
#: linux-firmware's ``gsp-570.144.bin``.
GSP_RM_SIGNED = {
    "774e047356c1db7116ec823767e4cfb90ad684b32e4524784d1a71a3cbaccf3a":
        ("535.261.03", "5c9254804c8edc28e28239542d68252804db83fc1e9a5cda53db4152698c5cf4"),
    "98b18fb9f2de1d445bfa9055810398c129decdb231b156333e8865bad28022ce":
        ("570.144", "767b13453c2ffdeeae0ed1374f1ad55c0c9cc13a2dccac81e1a9d74b39d33c4c"),
}


def booter_signed(imem_head: bytes, signature: bytes) -> bool:
    """True when ``signature`` (the 384 bytes at the booter's PKC offset) is one NVIDIA issued for the code whose
    first 256 IMEM bytes are ``imem_head`` (:data:`BOOTER_SIGNED`)."""
    want = BOOTER_SIGNED.get(hashlib.sha256(signature).hexdigest())
    return want is not None and want == hashlib.sha256(imem_head).hexdigest()


def gsp_rm_version(head: bytes, signature: bytes, first_page: bytes) -> str | None:
    """The GSP-RM version of the image the booter loads: the invented image's marker, else the release whose
    signature (:data:`GSP_RM_SIGNED`) matches with its first page; None for an image no known signature covers."""
    if head.startswith(nv_gspfw.GSPRM_MARKER):
        return head[len(nv_gspfw.GSPRM_MARKER):].split(b"\0")[0].decode("ascii", "replace")
    known = GSP_RM_SIGNED.get(hashlib.sha256(signature).hexdigest())
    if known is not None and known[1] == hashlib.sha256(first_page).hexdigest():
        return known[0]
    return None
SEQUENCER_DONE = 0x5E9D0E
RISCV_WAKE_READS = 8  # RISC-V CPUCTL reads after a core resume before active_stat reads 1 (invented start-up)
BSI_SCRATCH_14 = 0x1180F8
BOOT_0 = 0x0
PAGE = 0x1000
GPU_NAME = "NVIDIA GeForce RTX 4090 (emulated AD102)"
RPCS: CommandTable[int] = CommandTable("gsp rpc")
WPR_MAGIC = 0xDC3AAE21371A60B3
GPU_SHORT_NAME = "AD102"
CONFIG_MIRROR = (0x88000, 0x1000)  # §13.6: pciConfigMirrorBase, pciConfigMirrorSize
#: docs/nv-gsp-layouts.md, per branch: MESSAGE_QUEUE_INIT_ARGUMENTS size; GspSystemInfo size and the offsets of
#: pciConfigMirrorBase and PCIDeviceID (None: 535 has no PCI id fields); GspStaticConfigInfo size and the offsets
#: of fbRegionInfoParams, fb_length, gpuNameString and gpuShortNameString
LAYOUTS: dict[int, dict[str, int | None]] = {
    535: {"queue_args": 48, "system_info": 664, "config_mirror": 64, "pci_ids": None, "static_info": 2168,
          "fb_regions": 840, "fb_length": 1752, "name": 1820, "short_name": 1884},
    570: {"queue_args": 32, "system_info": 928, "config_mirror": 80, "pci_ids": 88, "static_info": 1656,
          "fb_regions": 344, "fb_length": 1224, "name": 1260, "short_name": 1324},
}


def branch_of(version: str) -> int:
    """The GSP-RM branch whose structures a GSP-RM of ``version`` uses (535 for an unknown version)."""
    head = version.split(".", 1)[0]
    return int(head) if head.isdigit() and int(head) in LAYOUTS else 535


#: NV_STATUS values (NVIDIA open-gpu-kernel-modules src/common/sdk/nvidia/inc/nvstatuscodes.h)
NV_OK, NV_ERR_INSERT_DUPLICATE_NAME, NV_ERR_INVALID_CLASS, NV_ERR_INVALID_CLIENT = 0x00, 0x19, 0x22, 0x23
NV_ERR_INVALID_ARGUMENT, NV_ERR_INVALID_OBJECT_HANDLE, NV_ERR_INVALID_OBJECT_PARENT = 0x1F, 0x33, 0x36
NV_ERR_NOT_SUPPORTED = 0x56
#: RPC function numbers GSP-RM answers (rpc_global_enums.h, §13.4)
RPC_ALLOC_MEMORY, RPC_UNLOADING_GUEST_DRIVER, RPC_SET_PAGE_DIRECTORY = 4, 47, 54
RPC_GSP_RM_CONTROL, RPC_GSP_RM_ALLOC = 76, 103
#: RM classes (cl0000.h, cl0080.h, cl2080.h, cl90f1.h, clc56f.h, clc9c0.h, clc7b5.h, clc6b5.h, cl003e.h, cl0040.h) the
#: emulated RM allocates, and the parent class each needs (None: a client, the root)
NV01_ROOT, NV01_DEVICE_0, NV20_SUBDEVICE_0, FERMI_VASPACE_A = 0x0000, 0x0080, 0x2080, 0x90F1
AMPERE_CHANNEL_GPFIFO_A, ADA_COMPUTE_A, AMPERE_DMA_COPY_B = 0xC56F, 0xC9C0, 0xC7B5
RM_CLASSES: dict[int, tuple[int | None, ...]] = {
    NV01_DEVICE_0: (None,), NV20_SUBDEVICE_0: (NV01_DEVICE_0,), FERMI_VASPACE_A: (NV01_DEVICE_0,),
    AMPERE_CHANNEL_GPFIFO_A: (NV01_DEVICE_0,), ADA_COMPUTE_A: (AMPERE_CHANNEL_GPFIFO_A,),
    AMPERE_DMA_COPY_B: (AMPERE_CHANNEL_GPFIFO_A,), 0x003E: (NV01_DEVICE_0,), 0x0040: (NV01_DEVICE_0,),
}
#: RM controls the emulated RM answers NV_OK to (ctrl2080fifo.h, ctrl2080gpu.h, ctrl2080internal.h, ctrl90f1.h,
#: ctrlc36f.h, ctrl0080fifo.h): the reply carries the params back, filled in where :meth:`GspRm.rm_control` says
CTRL_FIFO_GET_DEVICE_INFO_TABLE, CTRL_GPU_PROMOTE_CTX = 0x20801112, 0x2080012B
CTRL_KGR_GET_CONTEXT_BUFFERS_INFO, CTRL_VASPACE_COPY_SERVER_RESERVED_PDES = 0x20800A32, 0x90F10106
CTRL_GPFIFO_GET_WORK_SUBMIT_TOKEN = 0xC36F0108
RM_CONTROLS = {CTRL_FIFO_GET_DEVICE_INFO_TABLE, CTRL_GPU_PROMOTE_CTX, CTRL_KGR_GET_CONTEXT_BUFFERS_INFO,
               CTRL_VASPACE_COPY_SERVER_RESERVED_PDES, CTRL_GPFIFO_GET_WORK_SUBMIT_TOKEN}
#: NV2080_CTRL_INTERNAL_STATIC_KGR_GET_CONTEXT_BUFFERS_INFO_PARAMS: 8 GR engines (NV2080_CTRL_INTERNAL_GR_MAX_ENGINES) x
#: 26 buffer kinds (NV0080_CTRL_FIFO_GET_ENGINE_CONTEXT_PROPERTIES_ENGINE_ID_COUNT) x {size u32, alignment u32}.
KGR_ENGINES, KGR_BUFFERS = 8, 26
#: The context-buffer size and alignment the emulated RM reports for every kind of GR engine 0 (invented: a real
#: AD102's sizes are not in the spec; what matters to a driver is that they are non-zero and aligned).
KGR_BUFFER_SIZE, KGR_BUFFER_ALIGN = 0x10000, 0x1000


class BusError(BusFault):
    """What GSP-RM found in host memory is unusable (no RMARGS entry, a queue page table out of bounds); the
    IOMMU's own refusals are :class:`~tinyhw.mocks.common.faults.BusFault`, which this derives from."""


def wpr2_field(address: int) -> int:
    """An FB address as WPR2_ADDR_LO/HI hold it: 4 KiB units in bits 31:4 (inferred units)."""
    return ((address >> 12) << 4) & 0xFFFFFFF0


def _checksum(data: bytes) -> int:
    data = data + bytes(-len(data) % 8)
    acc = 0
    for i in range(0, len(data), 8):
        acc ^= int.from_bytes(data[i:i + 8], "little")
    return ((acc >> 32) ^ acc) & 0xFFFFFFFF


class GspRm:
    """The scripted GSP-RM: reads and writes host memory at bus addresses through ``services``."""

    def __init__(self, services: NvServices, version: str, silent: bool) -> None:
        self.services = services
        self.vram_size = services.vram_size
        self.pci_ids = services.pci_ids
        self.version = version
        self.layout = LAYOUTS[branch_of(version)]
        self.silent = silent
        self.pt: list[int] = []
        self.seq = 0
        self.sequencer_posted = False
        self.init_done = False
        self.received: list[int] = []  # functions consumed from the command queue
        self.objects: dict[tuple[int, int], int] = {}  # (client, handle) -> class; a client is (client, client)
        self.statuses: list[tuple[int, int]] = []  # (function, NV_STATUS) of every answered alloc/control
        self.problems: list[str] = []

    # -- shared memory through the queue page table (§13.1) ---------------------------------------------------
    def _pa(self, off: int) -> int:
        return self.pt[off // PAGE] + off % PAGE

    def _rd(self, off: int, n: int) -> bytes:
        out = b""
        while n:
            k = min(n, PAGE - off % PAGE)
            out += self.services.bus_read(self._pa(off), k)
            off, n = off + k, n - k
        return out

    def _wr(self, off: int, data: bytes) -> None:
        while data:
            k = min(len(data), PAGE - off % PAGE)
            self.services.bus_write(self._pa(off), data[:k])
            off, data = off + k, data[k:]

    def _u32(self, off: int) -> int:
        return int.from_bytes(self._rd(off, 4), "little")

    def start(self, libos_args: int) -> None:
        """Boot: parse the LibOS arguments, attach to the queues, read what the CPU pre-filled."""
        entries = self.services.bus_read(libos_args, 6 * 32)
        rmargs = None
        for i in range(6):
            name, pa, size = struct.unpack_from("<QQQ", entries, 32 * i)
            if name == int.from_bytes(b"RMARGS".rjust(8, b"\0"), "big"):
                rmargs = pa
        if rmargs is None:
            raise BusError("no RMARGS entry among the libos arguments")
        queue_args = self.services.bus_read(rmargs, int(self.layout["queue_args"] or 0))
        shared, count, self.cmd, self.stat = struct.unpack_from("<QI4xQQ", queue_args)
        if any(queue_args[32:]):  # 535's lockless queue offsets: the CPU made no lockless queues
            self.problems.append("the rm arguments name lockless queues")
        if not 1 <= count <= 1024:
            raise BusError(f"queue page table of {count} entries")
        self.pt = list(struct.unpack(f"<{count}Q", self.services.bus_read(shared, 8 * count)))
        if self.silent:
            return
        # status queue header: version 0, size, msgSize, msgCount, writePtr 0, flags 0, rxHdrOff 32, entryOff
        self._wr(self.stat, struct.pack("<8I", 0, 0x40000, PAGE, 63, 0, 0, 32, 0x1000))
        self._wr(self.stat + 32, struct.pack("<I", 0))  # GSP's read pointer of the command queue
        self.doorbell()
        self._post(0x1002, self._sequencer_script())
        self.sequencer_posted = True

    def _sequencer_script(self) -> bytes:
        # save BOOT_0; core reset, core start, wait for halt, core resume (the GSP falcon's reset with its DMA
        # context requirement off, starts honouring CPUCTL_ALIAS); poll the GSP's RISC-V active_stat with timeout 0
        # (the default timeout: the core takes a few reads to come up); a read-modify-write, a delay; FALCON_OS done.
        cmds = [4, BOOT_0, 0,
                5, 6, 7, 8,
                2, 0x110000 + RISCV_CPUCTL, 1 << 7, 1 << 7, 0, 0x55,
                1, BSI_SCRATCH_14, 1 << 26, 1 << 26,
                3, 20,
                0, 0x110000 + 0x80, SEQUENCER_DONE]
        return struct.pack("<II8I", 64, len(cmds), *([0] * 8)) + struct.pack(f"<{len(cmds)}I", *cmds)

    def on_register_write(self, addr: int, value: int) -> None:
        """A host write the GSP watches: the sequencer's last write ends the boot with GSP_INIT_DONE."""
        if addr == 0x110080 and value == SEQUENCER_DONE and self.sequencer_posted and not self.init_done:
            self.init_done = True
            self._post(0x1001, bytes(16))

    # -- queues (§13.2-§13.3) --------------------------------------------------------------------------------
    def _post(self, function: int, payload: bytes, result: int = 0) -> None:
        rpc = struct.pack("<8I", 0x03000000, 0x43505256, 32 + len(payload), function, result, 0, 0, 0)
        count = -(-(48 + 32 + len(payload)) // PAGE)
        head = bytearray(48)
        struct.pack_into("<III", head, 36, self.seq, count, 0)
        struct.pack_into("<I", head, 32, _checksum(bytes(head) + rpc + payload))
        data = bytes(head) + rpc + payload
        data += bytes(count * PAGE - len(data))
        wp = self._u32(self.stat + 16)
        for i in range(count):
            self._wr(self.stat + 0x1000 + ((wp + i) % 63) * PAGE, data[i * PAGE:(i + 1) * PAGE])
        self._wr(self.stat + 16, struct.pack("<I", (wp + count) % 63))
        self.seq += 1

    def doorbell(self) -> None:
        """Consume every record of the command queue and answer it."""
        if self.silent or not self.pt:
            return
        for _ in range(64):
            rp, wp = self._u32(self.stat + 32), self._u32(self.cmd + 16)
            if rp == wp:
                return
            slot = self.cmd + 0x1000 + rp * PAGE
            head = self._rd(slot, 80)
            count = struct.unpack_from("<I", head, 40)[0]
            _, sig, length, function = struct.unpack_from("<4I", head, 48)
            count = max(1, min(count, 16))
            whole = b"".join(self._rd(self.cmd + 0x1000 + ((rp + i) % 63) * PAGE, PAGE) for i in range(count))
            whole = whole[:48 + length]
            body = whole[:32] + bytes(4) + whole[36:]
            if sig != 0x43505256 or _checksum(body) != struct.unpack_from("<I", whole, 32)[0]:
                self.problems.append(f"command record at slot {rp}: bad signature or checksum")
            self._wr(self.stat + 32, struct.pack("<I", (rp + count) % 63))
            self.received.append(function)
            payload = whole[80:]
            if function in RPCS:
                RPCS.dispatch(self, function, payload)
            else:
                self._post(function, b"", result=NV_ERR_NOT_SUPPORTED)

    @RPCS.handles(72)
    def set_system_info(self, payload: bytes) -> None:
        """GSP_SET_SYSTEM_INFO: a ``GspSystemInfo`` of the branch's size, the §13.6 PCI config mirror at its
        offset and, where the branch has the field (570), the board's vendor/device word in PCIDeviceID (no reply)."""
        lay = self.layout
        size, mirror, ids = int(lay["system_info"] or 0), int(lay["config_mirror"] or 0), lay["pci_ids"]
        if len(payload) != size:
            self.problems.append(f"gsp_set_system_info is {len(payload)} bytes, not {size}")
            return
        if struct.unpack_from("<II", payload, mirror) != CONFIG_MIRROR:
            self.problems.append("gsp_set_system_info holds no pci config mirror at pciConfigMirrorBase")
        if ids is not None and struct.unpack_from("<I", payload, ids)[0] != self.pci_ids:
            self.problems.append("gsp_set_system_info's PCIDeviceID is not the board's")

    @RPCS.handles(73)
    def set_registry(self, payload: bytes) -> None:
        """SET_REGISTRY: a packed table whose size and entries fit (no reply)."""
        if len(payload) < 8:
            self.problems.append("set_registry shorter than its header")
            return
        size, n = struct.unpack_from("<II", payload)
        if size != len(payload) or 8 + 16 * n > size:
            self.problems.append(f"set_registry table of {size} bytes / {n} entries in {len(payload)}")

    def _answer(self, function: int, header: bytes, status_at: int, status: int, params: bytes) -> None:
        """Reply to ``function`` with the request's header (its status field set) and ``params``; rpc_result is the
        same NV_STATUS, as GSP-RM returns it."""
        head = bytearray(header)
        struct.pack_into("<I", head, status_at, status)
        self.statuses.append((function, status))
        self._post(function, bytes(head) + params, result=status)

    @RPCS.handles(RPC_GSP_RM_ALLOC)
    def rm_alloc(self, payload: bytes) -> None:
        """GSP_RM_ALLOC (rpc_gsp_rm_alloc_v: hClient, hParent, hObject, hClass, status, paramsSize, flags, 4 reserved
        bytes; params follow): NV01_ROOT makes the client ``hClient``; another class of :data:`RM_CLASSES` needs an
        existing client and a parent of the class it names, and a handle not yet in use. NV_OK, or the NV_STATUS
        the RM gives for each refusal."""
        if len(payload) < 32:
            self._post(RPC_GSP_RM_ALLOC, b"", result=NV_ERR_INVALID_ARGUMENT)
            return
        client, parent, obj, cls, _st, size, _flags = struct.unpack_from("<7I", payload)
        params = payload[32:32 + size]
        status = NV_OK
        if cls == NV01_ROOT:
            if (client, client) in self.objects:
                status = NV_ERR_INSERT_DUPLICATE_NAME
            else:
                self.objects[(client, client)] = NV01_ROOT
        elif cls not in RM_CLASSES:
            status = NV_ERR_INVALID_CLASS
        elif (client, client) not in self.objects:
            status = NV_ERR_INVALID_CLIENT
        elif (client, obj) in self.objects:
            status = NV_ERR_INSERT_DUPLICATE_NAME
        else:
            kind = NV01_ROOT if parent == client else self.objects.get((client, parent))
            if kind is None or (kind if kind != NV01_ROOT else None) not in RM_CLASSES[cls]:
                status = NV_ERR_INVALID_OBJECT_PARENT
            else:
                self.objects[(client, obj)] = cls
        self._answer(RPC_GSP_RM_ALLOC, payload[:32], 16, status, params)

    @RPCS.handles(RPC_GSP_RM_CONTROL)
    def rm_control(self, payload: bytes) -> None:
        """GSP_RM_CONTROL (rpc_gsp_rm_control_v: hClient, hObject, cmd, status, paramsSize, flags; params follow) on
        an existing object: a control of :data:`RM_CONTROLS` is answered NV_OK with its params, the GR context-buffer
        query filled in (:data:`KGR_BUFFER_SIZE`); an unknown one NV_ERR_NOT_SUPPORTED."""
        if len(payload) < 24:
            self._post(RPC_GSP_RM_CONTROL, b"", result=NV_ERR_INVALID_ARGUMENT)
            return
        client, obj, cmd, _st, size, _flags = struct.unpack_from("<6I", payload)
        params = bytearray(payload[24:24 + size])
        if (client, obj) not in self.objects:
            status = NV_ERR_INVALID_OBJECT_HANDLE
        elif cmd not in RM_CONTROLS:
            status = NV_ERR_NOT_SUPPORTED
        else:
            status = NV_OK
            if cmd == CTRL_KGR_GET_CONTEXT_BUFFERS_INFO and len(params) >= KGR_ENGINES * KGR_BUFFERS * 8:
                for i in range(KGR_BUFFERS):
                    struct.pack_into("<II", params, 8 * i, KGR_BUFFER_SIZE, KGR_BUFFER_ALIGN)
        self._answer(RPC_GSP_RM_CONTROL, payload[:24], 12, status, bytes(params))

    @RPCS.handles(RPC_ALLOC_MEMORY)
    def alloc_memory(self, payload: bytes) -> None:
        """ALLOC_MEMORY (a system-memory page list registered as an RM memory object): NV_OK, the request echoed."""
        self.statuses.append((RPC_ALLOC_MEMORY, NV_OK))
        self._post(RPC_ALLOC_MEMORY, payload)

    @RPCS.handles(RPC_SET_PAGE_DIRECTORY)
    def set_page_directory(self, payload: bytes) -> None:
        """SET_PAGE_DIRECTORY (a VA space pointed at the driver's root page table): NV_OK, the request echoed."""
        self.statuses.append((RPC_SET_PAGE_DIRECTORY, NV_OK))
        self._post(RPC_SET_PAGE_DIRECTORY, payload)

    @RPCS.handles(RPC_UNLOADING_GUEST_DRIVER)
    def unloading(self, payload: bytes) -> None:
        """UNLOADING_GUEST_DRIVER (the driver's teardown): NV_OK, the request echoed."""
        self.statuses.append((RPC_UNLOADING_GUEST_DRIVER, NV_OK))
        self._post(RPC_UNLOADING_GUEST_DRIVER, payload)

    @RPCS.handles(65)
    def static_info(self, payload: bytes) -> None:
        """GET_GSP_STATIC_INFO: a ``GspStaticConfigInfo`` with the GPU's names, fb_length (the VRAM size) and
        one FB region (base 0, limit the last VRAM byte); every other field zero."""
        lay = {k: int(v or 0) for k, v in self.layout.items()}
        out = bytearray(lay["static_info"])
        struct.pack_into("<I4xQQ", out, lay["fb_regions"], 1, 0, self.vram_size - 1)
        struct.pack_into("<Q", out, lay["fb_length"], self.vram_size)
        for key, text in (("name", GPU_NAME), ("short_name", GPU_SHORT_NAME)):
            raw = text.encode()[:63]
            out[lay[key]:lay[key] + len(raw)] = raw
        self._post(65, bytes(out))


class SecureBoot:
    """The GSP and SEC2 falcons, the FWSEC and booter black boxes, and the GSP-RM they start (see the module
    docstring); ``fault`` is the board's ``gsp-fault`` option (``none``, ``fwsec-error``, ``booter-timeout``,
    ``queue-silent``)."""

    def __init__(self, services: NvServices, fault: str = "none") -> None:
        self.services = services
        self.fault = fault
        self.gsp = EmulatedFalcon("gsp", services, self.on_start)
        self.sec2 = EmulatedFalcon("sec2", services, self.on_start)
        self.gsp_rm: GspRm | None = None
        self.results: list[tuple[str, int]] = []
        self.libos = 0  # the LibOS argument address GSP-RM was started with
        self.sequenced: dict[str, int] = {}  # what the sequencer script's core operations found

    def power_on(self) -> None:
        """A function-level reset: both falcons back to power-on, GSP-RM gone (WPR2 is the board's register)."""
        self.gsp.power_on()
        self.sec2.power_on()
        self.gsp_rm = None

    def restore(self, running: bool) -> None:
        """Take up the state a board-state file kept: GSP-RM running on the GSP's RISC-V core, or not."""
        self.gsp.running = running
        self.gsp.riscv = running

    def on_gsp_register_write(self, off: int, value: int) -> None:
        """A host write of GSP falcon register ``off`` (after the falcon stored it): GSP-RM watches FALCON_OS. The
        sequencer's last write ends the boot only when the script's core operations were done as §13.5 says
        (a problem is noted otherwise, and GSP_INIT_DONE never comes)."""
        if off == OS and self.gsp_rm is not None:
            if value == SEQUENCER_DONE and not self.gsp_rm.init_done:
                missing = [k for k in ("core reset", "core start", "core resume") if not self.sequenced.get(k)]
                if missing:
                    self.gsp_rm.problems.append(f"the cpu sequencer's {', '.join(missing)} was not done as asked")
                    return
            self.gsp_rm.on_register_write(0x110000 + off, value)

    def _sequenced(self, falcon: EmulatedFalcon) -> int:
        """A falcon started while the CPU runs GSP-RM's sequencer script (§13.5): the GSP in falcon mode is the
        script's core start (its reset must have been followed by the DMA context requirement off: FBIF_CTL
        allow_phys_no_ctx, DMACTL 0); SEC2 is its core resume (the GSP back in RISC-V mode with the LibOS
        arguments in its mailboxes): the handoff bit rises, GSP-RM runs again after a few RISC-V CPUCTL reads."""
        gsp = self.gsp
        if falcon is gsp and not gsp.riscv:
            self.sequenced["core reset"] = gsp.resets > self.sequenced.get("resets at post", 0)
            self.sequenced["core start"] = bool(gsp.regs.get(FBIF_CTL, 0) & (1 << 7)) and gsp.regs.get(DMACTL) == 0
            return 0
        if falcon is self.sec2:
            libos = gsp.regs.get(MAILBOX0, 0) | gsp.regs.get(MAILBOX1, 0) << 32
            if not gsp.riscv or libos != self.libos:
                return BOOTER_NO_GSP
            self.services.reg_write(BSI_SCRATCH_14, self.services.reg_read(BSI_SCRATCH_14) | 1 << 26)
            gsp.running, gsp.wake_after_reads = True, RISCV_WAKE_READS
            self.sequenced["core resume"] = True
            return 0
        return 0

    def doorbell(self) -> None:
        """The GSP doorbell (QUEUE_HEAD[0]) was written: GSP-RM consumes its command queue; a host-memory
        fault on the way is noted among its problems (the reply never comes)."""
        if self.gsp_rm is None:
            return
        try:
            self.gsp_rm.doorbell()
        except BusFault as e:
            self.gsp_rm.problems.append(str(e))

    def wpr2(self) -> tuple[int, int]:
        """(WPR2_ADDR_LO, WPR2_ADDR_HI) as the board's registers hold them."""
        return self.services.reg_read(REG_WPR2_ADDR_LO), self.services.reg_read(REG_WPR2_ADDR_HI)

    def set_wpr2(self, start: int, end: int) -> None:
        """Protect FB ``start`` .. ``end`` (what FWSEC and the booter do)."""
        self.services.reg_write(REG_WPR2_ADDR_LO, wpr2_field(start))
        self.services.reg_write(REG_WPR2_ADDR_HI, wpr2_field(end - 1) or 0x10)

    def on_start(self, falcon: EmulatedFalcon) -> None:
        """A falcon's CPU was started: run the black box for what it is (a booter that succeeds leaves SEC2's CPUCTL
        aliased: its next start must go through CPUCTL_ALIAS)."""
        rm = self.gsp_rm
        if rm is not None and rm.sequencer_posted and not rm.init_done:
            code = self._sequenced(falcon)
        elif falcon is self.sec2:
            if self.fault == "booter-timeout":
                return  # never halts
            code = self._booter(falcon)
            falcon.alias_en = code == 0
        elif not falcon.riscv:
            code = self._fwsec(falcon)
        else:
            code = 0
        falcon.regs[MAILBOX0] = code
        falcon.halted = True
        self.results.append((falcon.name, code))

    # -- FWSEC-FRTS --------------------------------------------------------------------------------------------
    def _fwsec(self, f: EmulatedFalcon) -> int:
        app, ucode_id = nv_vbios.APPS[1]
        r = f.regs
        if (r.get(MOD_SEL) != 1 or r.get(UCODE_ID) != ucode_id or r.get(ENGIDMASK) != 0x0400
                or r.get(PARAADDR0) != nv_vbios.PKC_OFFSET):
            return FWSEC_BROM
        ucode = nv_vbios._ucode(app)
        sigs = nv_vbios.invented_stream(f"signatures {app:#x}", nv_vbios.SIG_COUNT * nv_vbios.SIG_SIZE)
        pkc = nv_vbios.PKC_OFFSET
        if bytes(f.imem[:256]) != ucode[:256] or bytes(f.dmem[pkc:pkc + 384]) != sigs[-384:]:
            return FWSEC_SIGNATURE
        if self.fault == "fwsec-error":
            return FWSEC_INJECTED
        dmap = nv_vbios.DMAP_OFFSET
        if struct.unpack_from("<I", f.dmem, dmap + 44)[0] != 0x15:
            return FWSEC_NOT_FRTS
        # FWSECLIC_READ_VBIOS_DESC: version u32 @0, size u32 @4, gfwImageOffset u64 @8, gfwImageSize u32 @16,
        # flags u32 @20; the FRTS region descriptor (five u32) follows at +24 (§7.1)
        read_vbios = struct.unpack_from("<IIQII", f.dmem, nv_vbios.CMD_IN)
        region = struct.unpack_from("<5I", f.dmem, nv_vbios.CMD_IN + 24)
        frts = self.services.vram_size - (2 << 20)
        if read_vbios != (1, 24, 0, 0, 2) or region != (1, 20, frts >> 12, 0x100, 2):
            return FWSEC_REGION
        self.set_wpr2(frts, frts + (1 << 20))
        return 0

    # -- booter --------------------------------------------------------------------------------------------------
    def _booter(self, f: EmulatedFalcon) -> int:
        bus = self.services
        r = f.regs
        pkc = nv_gspfw.BOOTER_PKC
        if (r.get(PARAADDR0) != pkc or r.get(ENGIDMASK) != 1 or r.get(UCODE_ID) != 3 or r.get(MOD_SEL) != 1
                or not booter_signed(bytes(f.imem[:256]), bytes(f.dmem[pkc:pkc + nv_gspfw.SIG_SIZE]))):
            return BOOTER_SIGNATURE
        if not self.wpr2()[1]:
            return BOOTER_NO_WPR2
        gsp = self.gsp
        libos = gsp.regs.get(MAILBOX0, 0) | gsp.regs.get(MAILBOX1, 0) << 32
        if not gsp.riscv or not libos:
            return BOOTER_NO_GSP
        meta_at = r.get(MAILBOX0, 0) | r.get(MAILBOX1, 0) << 32
        try:
            meta = bus.bus_read(meta_at, 256)
            m = dict(zip(("magic", "revision", "radix3", "radix3_size", "bl", "bl_size", "bl_code", "bl_data",
                          "bl_manifest", "sig", "sig_size", "rsvd", "nonwpr", "nonwpr_size", "wpr_start", "heap",
                          "heap_size", "fw", "boot_bin", "frts", "frts_size", "wpr_end", "fb", "vga", "vga_size"),
                         struct.unpack_from("<25Q", meta), strict=True))
            if not self._meta_ok(m):
                return BOOTER_META
            first = bus.bus_read(self._radix3_page(m["radix3"], 0), min(PAGE, m["radix3_size"]))
            last = (m["radix3_size"] - 1) // PAGE
            tail = m["radix3_size"] - last * PAGE
            bus.bus_read(self._radix3_page(m["radix3"], last), tail)
            bus.bus_read(m["bl"], m["bl_size"])
            signature = bus.bus_read(m["sig"], m["sig_size"])
        except BusFault:
            return BOOTER_UNREADABLE
        version = gsp_rm_version(first[:64], signature, first)
        if version is None:
            return BOOTER_GSP_UNSIGNED
        self.set_wpr2(m["wpr_start"], m["wpr_end"])
        self.gsp_rm = GspRm(self.services, version, self.fault == "queue-silent")
        self.libos = libos
        self.sequenced = {"resets at post": gsp.resets}
        try:
            self.gsp_rm.start(libos)
        except BusFault:
            return BOOTER_UNREADABLE
        gsp.running = True
        return 0

    def _radix3_page(self, level0: int, index: int) -> int:
        """The bus address of image page ``index`` through the three table levels (512 entries per page, §11)."""
        addr = level0
        for shift in (18, 9, 0):
            addr = struct.unpack("<Q", self.services.bus_read(addr + 8 * ((index >> shift) & 511), 8))[0]
        return addr

    def _meta_ok(self, m: dict[str, int]) -> bool:
        vram = self.services.vram_size
        order = (m["nonwpr"] < m["wpr_start"] < m["heap"] < m["fw"] < m["boot_bin"] < m["frts"] < m["wpr_end"]
                 <= m["fb"])
        return (m["magic"] == WPR_MAGIC and m["revision"] == 1 and m["fb"] == vram and order
                and m["frts"] == vram - (2 << 20) and m["frts_size"] == 1 << 20 and m["sig_size"] == PAGE
                and m["radix3_size"] > 0 and m["bl_size"] > 0 and m["boot_bin"] + m["bl_size"] <= m["frts"])
