"""The GSP message queues and the RPC framing over them.

Spec: specs/nv-bringup.md §13.1 (one host allocation: a page table of all 129 pages, a 256 KiB command
queue at 0x1000, a 256 KiB status queue at 0x41000), §13.2 (``msgqTxHeader`` fields; the command-queue
header the CPU writes; each queue's page holds, at ``rxHdrOff``, the read pointer of the opposite queue; the
CPU waits for the status header's ``entryOff`` to read 0x1000), §13.3 (the 48-byte element header, the
32-byte ``rpc_message_header_v03_00``, ``elemCount``, the XOR checksum, ring wrap, the doorbell write of 0 to
``NV_PGSP_QUEUE_HEAD[0]``, continuation records above 65456 bytes; receiving advances by the element's
``elemCount``, the robust choice), §13.4 (function and event numbers) and §13.6 (the first two RPCs).

The element header (authTagBuffer[16], aadBuffer[16], checkSum u32 @32, seqNum @36, elemCount @40, the RPC
header 8-aligned @48), the RPC header (header_version, signature, length, function, rpc_result,
rpc_result_private, sequence, a spare u32: 32 bytes) and ``msgqTxHeader`` (eight u32) are the same in the 535
and 570 headers. ``GET_GSP_STATIC_INFO`` (function 65) is not in the spec: its number is from NVIDIA's
published ``rpc_global_enums.h``; its reply is a ``GspStaticConfigInfo``, and it and ``GspSystemInfo`` lay
their fields out by GSP-RM branch (:mod:`~tinyhw.boot.nv.structs`; the derivation is docs/nv-gsp-layouts.md).
None of it has met a real GSP-RM.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tinyhw.boards.nvidia import GSP_QUEUE_HEAD0
from tinyhw.boot.nv.structs import GspLayouts
from tinyhw.errors import DeviceTimeout, OperationFailed

if TYPE_CHECKING:
    from tinyhw.boot.nv.gpu import NvGpu

PAGE = 0x1000
QUEUE_SIZE = 0x40000
CMD_OFFSET, STAT_OFFSET = 0x1000, 0x41000
SHARED_SIZE = STAT_OFFSET + QUEUE_SIZE
PT_ENTRIES = SHARED_SIZE // PAGE  # 129
MSG_COUNT = (QUEUE_SIZE - PAGE) // PAGE  # 63
ENTRY_OFF, RX_HDR_OFF = 0x1000, 32
ELEMENT, RPC_HEADER = 48, 32
HEADER_VERSION, SIGNATURE = 0x03000000, 0x43505256
PENDING = 0xFFFFFFFF
MAX_RECORD = 16 * PAGE - ELEMENT - RPC_HEADER  # 65456
TX = struct.Struct("<8I")  # version, size, msgSize, msgCount, writePtr, flags, rxHdrOff, entryOff

NOP, CONTINUATION_RECORD, GSP_SET_SYSTEM_INFO, SET_REGISTRY = 0, 71, 72, 73
GET_GSP_STATIC_INFO = 65
UNLOADING_GUEST_DRIVER = 47
EVENT_INIT_DONE, EVENT_RUN_CPU_SEQUENCER = 0x1001, 0x1002
EVENT_MMU_FAULT, EVENT_OS_ERROR_LOG = 0x1005, 0x1006
QUIET_EVENTS = (0x1003, 0x1004, 0x100C, 0x100F, 0x101C, 0x1020)
NAMES = {GSP_SET_SYSTEM_INFO: "gsp_set_system_info", SET_REGISTRY: "set_registry",
         GET_GSP_STATIC_INFO: "get_gsp_static_info", EVENT_INIT_DONE: "gsp_init_done",
         EVENT_RUN_CPU_SEQUENCER: "run_cpu_sequencer"}
RPC_TIMEOUT = 10.0  # §13.3: tinygrad waits up to 10 s for a function
QUEUE_HINT = "the gsp stopped answering; reset the gpu (nv reset) and boot again"
MAX_USER_VA = 0x7FFFFFFFF000  # §13.6
CONFIG_MIRROR_BASE, CONFIG_MIRROR_SIZE = 0x88000, 0x1000  # §13.6, pre-Blackwell
NAME_LENGTH = 64  # NV2080_GPU_MAX_NAME_STRING_LENGTH


def checksum(data: bytes) -> int:
    """§13.3: XOR of the little-endian u64 words (zero padded to 8 bytes), high half XOR low half."""
    data = bytes(data) + bytes(-len(data) % 8)
    acc = 0
    for (word,) in struct.iter_unpack("<Q", data):
        acc ^= word
    return (acc >> 32) ^ (acc & 0xFFFFFFFF)


def element(seq: int, function: int, payload: bytes) -> bytes:
    """One queue element: element header (checksum filled in), RPC header and ``payload``."""
    rpc = struct.pack("<8I", HEADER_VERSION, SIGNATURE, len(payload) + RPC_HEADER, function, PENDING, PENDING, 0, 0)
    count = -(-(ELEMENT + RPC_HEADER + len(payload)) // PAGE)
    head = bytearray(bytes(32) + struct.pack("<IIII", 0, seq, count, 0))
    body = bytes(head) + rpc + payload
    struct.pack_into("<I", head, 32, checksum(body))
    return bytes(head) + rpc + payload


@dataclass(frozen=True)
class Message:
    """A record read from the status queue."""

    function: int
    result: int
    payload: bytes

    @property
    def name(self) -> str:
        """The function or event name (numbers for ones tinyhw does not name)."""
        return NAMES.get(self.function, f"0x{self.function:x}")


class GspQueues:
    """The command and status queues in one host buffer ``buf`` (§13.1), on ``gpu``'s clock."""

    def __init__(self, gpu: NvGpu, buf: Any) -> None:
        self.gpu = gpu
        self.buf = buf
        self.seq = 0
        buf.write(0, struct.pack(f"<{PT_ENTRIES}Q", *(buf.addr(i * PAGE) for i in range(PT_ENTRIES))))
        buf.write(CMD_OFFSET, TX.pack(0, QUEUE_SIZE, PAGE, MSG_COUNT, 0, 1, RX_HDR_OFF, ENTRY_OFF))

    def arguments(self) -> tuple[int, int, int, int]:
        """(sharedMemPhysAddr, pageTableEntryCount, cmdQueueOffset, statQueueOffset) for the RM arguments."""
        return self.buf.addr(0), PT_ENTRIES, CMD_OFFSET, STAT_OFFSET

    def _u32(self, off: int) -> int:
        return int.from_bytes(self.buf.read(off, 4), "little")

    def _ring_write(self, queue: int, slot: int, data: bytes) -> int:
        """Copy ``data`` into the ring of ``queue`` from ``slot``, wrapping; returns the slots used."""
        n = -(-len(data) // PAGE)
        data = data + bytes(n * PAGE - len(data))
        for i in range(n):
            at = queue + ENTRY_OFF + ((slot + i) % MSG_COUNT) * PAGE
            self.buf.write(at, data[i * PAGE:(i + 1) * PAGE])
        return n

    def _ring_read(self, queue: int, slot: int, length: int) -> bytes:
        n = -(-length // PAGE)
        out = b"".join(self.buf.read(queue + ENTRY_OFF + ((slot + i) % MSG_COUNT) * PAGE, PAGE) for i in range(n))
        return out[:length]

    def post(self, function: int, payload: bytes) -> None:
        """Write one RPC (and its continuation records) into the command queue, without the doorbell."""
        chunks = [payload[:MAX_RECORD]] + [payload[i:i + MAX_RECORD] for i in range(MAX_RECORD, len(payload),
                                                                                      MAX_RECORD)]
        for i, chunk in enumerate(chunks):
            elem = element(self.seq, function if i == 0 else CONTINUATION_RECORD, chunk)
            wp = self._u32(CMD_OFFSET + 16)
            used = self._ring_write(CMD_OFFSET, wp, elem)
            self.buf.write(CMD_OFFSET + 16, struct.pack("<I", (wp + used) % MSG_COUNT))
            self.seq += 1

    def send(self, function: int, payload: bytes) -> None:
        """:meth:`post`, then ring the doorbell (``NV_PGSP_QUEUE_HEAD[0]`` <- 0)."""
        self.post(function, payload)
        self.gpu.wr(GSP_QUEUE_HEAD0, 0)

    def wait_status_queue(self, timeout: float = RPC_TIMEOUT) -> None:
        """§13.2: wait until the GSP has initialised the status queue (its ``entryOff`` reads 0x1000)."""
        deadline = self.gpu.clock.now() + timeout
        while self._u32(STAT_OFFSET + 28) != ENTRY_OFF:
            if self.gpu.clock.now() >= deadline:
                raise DeviceTimeout(f"the gsp did not initialise its status queue in {timeout:g} s", hint=QUEUE_HINT)
            self.gpu.clock.sleep(0.001)

    def _receive(self) -> Message | None:
        rp = self._u32(CMD_OFFSET + RX_HDR_OFF)
        if rp == self._u32(STAT_OFFSET + 16):
            return None
        head = self._ring_read(STAT_OFFSET, rp, ELEMENT + RPC_HEADER)
        count = struct.unpack_from("<I", head, 40)[0]
        ver, sig, length, function, result = struct.unpack_from("<5I", head, ELEMENT)
        if sig != SIGNATURE or not 1 <= count <= 16 or length < RPC_HEADER or ELEMENT + length > count * PAGE:
            raise OperationFailed(f"the gsp's status queue holds a malformed record at slot {rp} (signature "
                                  f"0x{sig:08x}, {count} slots, length 0x{length:x})", hint=QUEUE_HINT)
        whole = self._ring_read(STAT_OFFSET, rp, ELEMENT + length)
        body = bytearray(whole)
        body[32:36] = bytes(4)
        if checksum(bytes(body)) != struct.unpack_from("<I", whole, 32)[0]:
            raise OperationFailed(f"the gsp's status-queue record at slot {rp} fails its checksum", hint=QUEUE_HINT)
        self.buf.write(CMD_OFFSET + RX_HDR_OFF, struct.pack("<I", (rp + count) % MSG_COUNT))
        return Message(function, result, bytes(whole[ELEMENT + RPC_HEADER:]))

    def wait_for(self, function: int, on_event: Callable[[Message], None], *, timeout: float = RPC_TIMEOUT,
                 what: str | None = None) -> Message:
        """Receive until ``function`` arrives, handing every other record to ``on_event``; a non-zero
        ``rpc_result`` is an error."""
        name = what or NAMES.get(function, f"function 0x{function:x}")
        deadline = self.gpu.clock.now() + timeout
        while True:
            msg = self._receive()
            if msg is None:
                if self.gpu.clock.now() >= deadline:
                    raise DeviceTimeout(f"no {name} from the gsp in {timeout:g} s", hint=QUEUE_HINT)
                self.gpu.clock.sleep(0.001)
                continue
            if msg.function == function:
                if msg.result:
                    raise OperationFailed(f"the gsp answered {name} with rpc_result 0x{msg.result:x}",
                                          hint=QUEUE_HINT)
                return msg
            on_event(msg)


def system_info(bar_bus: dict[int, int], bdf: tuple[int, int, int], ids: dict[str, int], abi: GspLayouts) -> bytes:
    """``GspSystemInfo`` of the ``abi`` branch with the fields of §13.6: the BAR0/BAR1/BAR3 bus addresses (u64
    @0, @8, @16), nvDomainBusDeviceFunc, maxUserVa, the PCI config mirror (base, size), bIsPassthru, and on 570
    the PCI ids (PCIDeviceID, PCISubDeviceID, PCIRevisionID); 535's structure has no PCI id fields."""
    out = bytearray(abi.system_info_size)
    bus, dev, fn = bdf
    struct.pack_into("<QQQ", out, 0, bar_bus.get(0, 0), bar_bus.get(1, 0), bar_bus.get(3, 0))
    struct.pack_into("<Q", out, abi.sys_bdf_at, (bus << 8) + (dev << 3) + fn)
    struct.pack_into("<Q", out, abi.sys_max_user_va_at, MAX_USER_VA)
    struct.pack_into("<II", out, abi.sys_config_mirror_at, CONFIG_MIRROR_BASE, CONFIG_MIRROR_SIZE)
    if abi.sys_pci_ids_at is not None:
        struct.pack_into("<III", out, abi.sys_pci_ids_at, ids["pci_device_id"], ids["pci_sub_device_id"],
                         ids["pci_revision_id"])
    out[abi.sys_passthru_at] = 1
    return bytes(out)


def registry(entries: dict[str, int]) -> bytes:
    """``PACKED_REGISTRY_TABLE`` of DWORD entries (§13.6): header, 16-byte entries, then the names."""
    names = b"".join(k.encode() + b"\0" for k in entries)
    header = 8 + 16 * len(entries)
    out = bytearray(struct.pack("<II", header + len(names), len(entries)))
    at = header
    for k, v in entries.items():
        out += struct.pack("<IB3xII", at, 1, v, 4)
        at += len(k) + 1
    return bytes(out + names)


def static_info_request(abi: GspLayouts) -> bytes:
    """The GET_GSP_STATIC_INFO request: a zeroed ``GspStaticConfigInfo`` the GSP fills in (nouveau sends the
    structure's size in the request; an empty request is not known to work)."""
    return bytes(abi.static_info_size)


def parse_static_info(payload: bytes, abi: GspLayouts) -> dict[str, Any]:
    """The GET_GSP_STATIC_INFO reply, a ``GspStaticConfigInfo`` of the ``abi`` branch: gpuNameString and
    gpuShortNameString (64 bytes each), fb_length (the FB size, u64) and fbRegionInfoParams.numFBRegions. A reply
    of any other size than the branch's structure is refused. The structure carries no GSP-RM version: that is the
    firmware file's ``.fwversion``."""
    if len(payload) != abi.static_info_size:  # another branch's structure reads as zeros or garbage here
        raise OperationFailed(f"the gsp's static info is {len(payload)} bytes, the {abi.branch} branch's "
                              f"GspStaticConfigInfo is {abi.static_info_size}: the gsp-rm runs another branch's "
                              "layout than the one booted", hint=QUEUE_HINT)

    def text(at: int) -> str:
        return payload[at:at + NAME_LENGTH].split(b"\0")[0].decode("ascii", "replace")

    return {"gpu_name": text(abi.gpu_name_at), "gpu_short_name": text(abi.gpu_short_name_at),
            "fb_size": struct.unpack_from("<Q", payload, abi.fb_length_at)[0],
            "fb_regions": struct.unpack_from("<I", payload, abi.fb_regions_at)[0]}
