"""The pure parts of the NVIDIA boot (specs/nv-bringup.md §16): WPR layout and meta, radix-3 tables, LibOS
arguments, queue framing and checksum, registry and system-info packing, the CPU sequencer, firmware cutting."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from tinyhw.boot.nv import layout, rpc, sequencer
from tinyhw.boot.nv.fwfiles import cut_booter, cut_bootloader
from tinyhw.boot.nv.gpu import chip_params
from tinyhw.boot.nv.gspmem import ENTRY, id8, libos_arguments, radix3
from tinyhw.boot.nv.structs import BRANCH_535
from tinyhw.errors import DeviceTimeout, OperationFailed, Refused
from tinyhw.mocks.common.iommu import HostBuffer
from tinyhw.mocks.common.vclock import VirtualClock
from tinyhw.mocks.nvidia import nv_gspfw

MIB = 1 << 20


class FakeMemory:
    """Sequential host buffers from 1 MiB (the fake allocator of §16)."""

    def __init__(self) -> None:
        self.next = MIB
        self.buffers: list[HostBuffer] = []

    def alloc(self, size: int, **kw: object) -> HostBuffer:
        buf = HostBuffer(size)
        buf.iova = self.next
        self.next += buf.size
        self.buffers.append(buf)
        return buf

    def read(self, addr: int, n: int) -> bytes:
        for b in self.buffers:
            if b.iova <= addr < b.iova + b.size:
                return b.read(addr - b.iova, n)
        raise AssertionError(f"no buffer at 0x{addr:x}")


def test_wpr_layout_golden_numbers_for_24_gib() -> None:
    """Numbers worked by hand from the §10.1 table (bootloader 8 KiB, GSP-RM image 32 MiB)."""
    for arch, impl in ((0x19, 2), (0x17, 2)):  # Ada and Ampere share the sizes
        w = layout.compute(24 << 30, 0x2000, 0x2000000, chip_params(arch, impl))
        assert (w.vga_workspace_offset, w.frts_offset, w.boot_bin_offset, w.gsp_fw_offset) == \
            (0x5FFF00000, 0x5FFE00000, 0x5FFDFE000, 0x5FDDF0000)
        assert (w.heap_offset, w.wpr_start, w.non_wpr_heap_offset, w.wpr_end) == \
            (0x5F5C00000, 0x5F5B00000, 0x5F5A00000, 0x5FFF00000)
    assert chip_params(0x17, 2).firmware_dir == "ga102" and chip_params(0x17, 2).signature_family == "ga10x"
    assert chip_params(0x17, 0) is None and chip_params(0x1B, 2) is None and chip_params(0x18, 0) is None


def test_wpr_meta_fields_at_their_offsets() -> None:
    w = layout.compute(24 << 30, 0x2000, 0x2000000, chip_params(0x19, 2))
    src = layout.WprSources(0x100000, 0x2000000, 0x200000, 0x2000, 0x10, 0x20, 0x30, 0x300000)
    meta = layout.pack(w, src)
    assert len(meta) == 256
    magic, rev, r3, r3size, bl = struct.unpack_from("<5Q", meta, 0)
    assert (magic, rev, r3, r3size, bl) == (0xDC3AAE21371A60B3, 1, 0x100000, 0x2000000, 0x200000)
    assert struct.unpack_from("<Q", meta, 80)[0] == 0x1000  # sizeOfSignature
    assert struct.unpack_from("<Q", meta, 152)[0] == 0x5FFE00000  # frtsOffset
    assert struct.unpack_from("<Q", meta, 176)[0] == 24 << 30  # fbSize


def test_radix3_levels_point_at_the_next_level() -> None:
    mem = FakeMemory()
    image = bytes(range(256)) * (4096 * 3 // 256) + b"tail"  # 4 pages
    buf, pages = radix3(mem, image)  # type: ignore[arg-type]
    assert pages == {"level0": 1, "level1": 1, "level2": 1, "image": 4, "total": 7}
    l1 = struct.unpack_from("<Q", buf.read(0, 8))[0]
    l2 = struct.unpack_from("<Q", mem.read(l1, 8))[0]
    pg = struct.unpack("<4Q", mem.read(l2, 32))
    assert l1 == MIB + 0x1000 and l2 == MIB + 0x2000 and pg == tuple(MIB + 0x3000 + 0x1000 * i for i in range(4))
    assert mem.read(pg[3], 4) == b"tail"


def test_libos_arguments_page() -> None:
    mem = FakeMemory()
    page, logs = libos_arguments(mem, b"Q" * 48, BRANCH_535)  # type: ignore[arg-type]
    entries = [ENTRY.unpack_from(page.read(0, 6 * 32), 32 * i) for i in range(6)]
    assert [e[0] for e in entries] == [id8(n) for n in ("LOGINIT", "LOGINTR", "LOGRM", "LOGMNOC", "LOGKRNL", "RMARGS")]
    assert id8("LOGINIT") == 0x004C4F47494E4954
    assert [e[1] for e in entries[:5]] == [logs.iova + i * 0x10000 for i in range(5)]
    assert all(e[2] == 0x10000 and e[3:] == (1, 1) for e in entries[:5])
    assert mem.read(entries[5][1], 48) == b"Q" * 48 and entries[5][2] == 0x1000


def test_checksum_and_element_framing() -> None:
    assert rpc.checksum(struct.pack("<QQ", 0x1111222233334444, 0x0F0F0F0F00000000)) == \
        (0x1111222233334444 ^ 0x0F0F0F0F00000000) >> 32 ^ ((0x1111222233334444 ^ 0x0F0F0F0F00000000) & 0xFFFFFFFF)
    e = rpc.element(5, 72, b"x" * 10)
    assert len(e) == 48 + 32 + 10
    assert struct.unpack_from("<III", e, 36) == (5, 1, 0)
    assert struct.unpack_from("<5I", e, 48) == (0x03000000, 0x43505256, 42, 72, 0xFFFFFFFF)
    body = e[:32] + bytes(4) + e[36:]
    assert rpc.checksum(body) == struct.unpack_from("<I", e, 32)[0]


class _Gpu:
    def __init__(self) -> None:
        self.clock = VirtualClock()
        self.doorbells = 0

    def wr(self, reg: int, value: int) -> None:
        self.doorbells += reg == 0x110C00


def test_queue_wraps_and_continues_large_payloads() -> None:
    buf = HostBuffer(rpc.SHARED_SIZE)
    buf.iova = 0x40000000
    gpu = _Gpu()
    q = rpc.GspQueues(gpu, buf)
    assert struct.unpack_from("<129Q", buf.read(0, 129 * 8))[128] == 0x40000000 + 128 * 0x1000
    assert rpc.TX.unpack_from(buf.read(0x1000, 32)) == (0, 0x40000, 0x1000, 63, 0, 1, 32, 0x1000)
    buf.write(0x1000 + 16, struct.pack("<I", 61))  # two slots before the end of the ring
    big = bytes(range(256)) * 300  # 76800 bytes: one full record and one continuation
    q.send(rpc.SET_REGISTRY, big)
    assert gpu.doorbells == 1
    wp = struct.unpack_from("<I", buf.read(0x1000 + 16, 4))[0]
    assert wp == (61 + 16 + 3) % 63  # 16 slots, then ceil((11344 + 80) / 4096) = 3
    first = buf.read(0x1000 + 0x1000 + 61 * 0x1000, 0x1000) + buf.read(0x1000 + 0x1000 + 62 * 0x1000, 0x1000) + \
        buf.read(0x1000 + 0x1000, 0x1000)  # wrapped into slot 0
    assert struct.unpack_from("<I", first, 60)[0] == rpc.SET_REGISTRY and first[80:80 + 8192 - 80] == big[:8192 - 80]
    cont = buf.read(0x1000 + 0x1000 + 14 * 0x1000, 80)
    assert struct.unpack_from("<I", cont, 60)[0] == rpc.CONTINUATION_RECORD


def _status_message(buf: HostBuffer, slot: int, function: int, payload: bytes, result: int = 0) -> None:
    e = bytearray(rpc.element(0, function, payload))
    struct.pack_into("<I", e, 48 + 16, result)
    struct.pack_into("<I", e, 32, 0)
    struct.pack_into("<I", e, 32, rpc.checksum(bytes(e)))
    buf.write(0x41000 + 0x1000 + slot * 0x1000, bytes(e))


def test_receive_services_events_and_checks_results() -> None:
    buf = HostBuffer(rpc.SHARED_SIZE)
    buf.iova = 0
    q = rpc.GspQueues(_Gpu(), buf)
    with pytest.raises(DeviceTimeout, match="did not initialise its status queue"):
        q.wait_status_queue(timeout=0.01)
    buf.write(0x41000, rpc.TX.pack(0, 0x40000, 0x1000, 63, 2, 0, 32, 0x1000))
    q.wait_status_queue()
    _status_message(buf, 0, 0x100C, b"log")
    _status_message(buf, 1, rpc.EVENT_INIT_DONE, b"")
    events: list[int] = []
    assert q.wait_for(rpc.EVENT_INIT_DONE, lambda m: events.append(m.function)).function == 0x1001
    assert events == [0x100C]
    _status_message(buf, 2, 65, b"", result=0x1F)
    buf.write(0x41000 + 16, struct.pack("<I", 3))
    with pytest.raises(OperationFailed, match="rpc_result 0x1f"):
        q.wait_for(65, events.append)
    with pytest.raises(DeviceTimeout, match="no get_gsp_static_info"):
        q.wait_for(65, events.append, timeout=0.01)
    _status_message(buf, 3, 65, b"x" * 8)
    raw = bytearray(buf.read(0x41000 + 0x1000 + 3 * 0x1000, 100))
    raw[84] ^= 1  # a flipped payload bit
    buf.write(0x41000 + 0x1000 + 3 * 0x1000, bytes(raw))
    buf.write(0x41000 + 16, struct.pack("<I", 4))
    with pytest.raises(OperationFailed, match="fails its checksum"):
        q.wait_for(65, events.append)


def test_registry_packing() -> None:
    reg = rpc.registry({"RMForcePcieConfigSave": 1, "RMSecBusResetEnable": 1})
    size, n = struct.unpack_from("<II", reg)
    assert size == len(reg) and n == 2
    name_off, typ, data, length = struct.unpack_from("<IB3xII", reg, 8)
    assert (typ, data, length) == (1, 1, 4) and reg[name_off:].startswith(b"RMForcePcieConfigSave\0")
    name_off = struct.unpack_from("<I", reg, 24)[0]
    assert reg[name_off:] == b"RMSecBusResetEnable\0"
    # GspSystemInfo per branch: tests/nvidia/test_nv_gsp_layouts.py


def test_sequencer_interpreter_on_a_fake_register_file() -> None:
    regs = {0x10: 0xFFFF00F0, 0x20: 0x5}
    clock = VirtualClock()
    calls: list[int] = []
    # REG_MODIFY is addr, mask, val (NVIDIA's rmgspseq.h GSP_SEQ_BUF_PAYLOAD_REG_MODIFY): mask 0xFF, val 0xAB
    cmds = [0, 0x30, 0x1234, 1, 0x10, 0x00FF, 0x00AB, 2, 0x20, 0x4, 0x4, 100, 0x77, 3, 50, 4, 0x20, 7, 5, 6, 7, 8]
    payload = struct.pack("<II8I", 64, len(cmds), *[0] * 8) + struct.pack(f"<{len(cmds)}I", *cmds)
    t0 = clock.now()
    got = sequencer.run(payload, regs.__getitem__, regs.__setitem__, clock,
                        {k: (lambda k=k: calls.append(k)) for k in (5, 6, 7, 8)})
    assert regs[0x30] == 0x1234 and regs[0x10] == 0xFFFF00AB
    assert got["reg_save"][7] == 0x5 and calls == [5, 6, 7, 8] and clock.now() - t0 >= 50e-6
    bad = struct.pack("<II8I", 64, 6, *[0] * 8) + struct.pack("<6I", 2, 0x20, 0xF0, 0x10, 10, 0x99)
    with pytest.raises(DeviceTimeout, match="sequencer error 0x99"):
        sequencer.run(bad, regs.__getitem__, regs.__setitem__, clock)
    with pytest.raises(OperationFailed, match="unknown opcode 9"):
        sequencer.run(struct.pack("<II8II", 64, 1, *[0] * 8, 9), regs.__getitem__, regs.__setitem__, clock)
    with pytest.raises(OperationFailed, match="cut short"):
        sequencer.run(struct.pack("<II8III", 64, 2, *[0] * 8, 0, 0x30), regs.__getitem__, regs.__setitem__, clock)


def test_booter_and_bootloader_cutting(tmp_path: Path) -> None:
    u, image = cut_booter(tmp_path / "b", nv_gspfw.booter_load())
    at = nv_gspfw.BOOTER_PATCH_LOC
    assert image[at:at + 384] == nv_gspfw.BOOTER_SIGNATURE  # the production signature patched in
    assert (u.code_offset, u.imem_virt, u.data_offset, u.dmem_size, u.pkc_offset, u.engine_mask, u.ucode_id) == \
        (nv_gspfw.APP_OFFSET, nv_gspfw.APP_OFFSET, nv_gspfw.DATA_OFFSET, nv_gspfw.DATA_SIZE, 0x10, 1, 3)
    desc, bl = cut_bootloader(tmp_path / "l", nv_gspfw.bootloader())
    assert len(bl) == nv_gspfw.BOOTLOADER_IMAGE and desc["monitor_data_offset"] == nv_gspfw.MONITOR_DATA
    bad = bytearray(nv_gspfw.booter_load())
    struct.pack_into("<I", bad, 60 + 2 * 384 + 20, 0)  # num_sig 0
    with pytest.raises(Refused, match="says 0 signatures"):
        cut_booter(tmp_path / "b", bytes(bad))


def test_sequencer_poll_timeout_zero_is_the_default_timeout() -> None:
    """A REG_POLL with timeout 0 waits the default (nouveau's r535 sequencer: 4 s), not 1 us."""
    clock = VirtualClock()
    t0 = clock.now()

    def rd(addr: int) -> int:
        return 0x4 if clock.now() - t0 >= 1e-3 else 0  # ready after 1 ms

    payload = struct.pack("<II8I", 64, 6, *[0] * 8) + struct.pack("<6I", 2, 0x20, 0x4, 0x4, 0, 0x66)
    assert sequencer.run(payload, rd, lambda a, v: None, clock)["commands"] == {"poll": 1}
    assert clock.now() - t0 < 0.1
    never = struct.pack("<II8I", 64, 6, *[0] * 8) + struct.pack("<6I", 2, 0x20, 0x8, 0x8, 0, 0x66)
    with pytest.raises(DeviceTimeout, match="sequencer error 0x66"):
        sequencer.run(never, rd, lambda a, v: None, clock)
    assert clock.now() - t0 >= sequencer.DEFAULT_POLL_US / 1e6
