"""Copy-in / copy-out over the emulated USB board (asm24-usb-bridge.md §9.3, §9.4; amd-bringup.md §4.2, §4.5)."""

from __future__ import annotations

import os

import pytest
from usbcopyhelp import rig

from tinyhw.boot.amd import copyengine, sdmapkt
from tinyhw.boot.amd.usbcopy import CHUNK, SENTINEL, UsbCopier
from tinyhw.boot.amd.usbcopy_model import copy_in as model_in
from tinyhw.errors import DeviceTimeout, Disconnected, TransportError

DST = 0x8000000


@pytest.mark.parametrize("protocol", ["seed", "tinyhw"])
@pytest.mark.parametrize("size", [1, 3, 510, 513, 1021, CHUNK, CHUNK + 1, 2 * CHUNK, 0x40000, 1 << 20 | 0x123])
def test_copy_in_then_out(tmp_path, protocol, size):
    data = os.urandom(size)
    with rig(tmp_path) as r:
        got = r.copier.copy_in(DST, data, protocol)
        assert got["chunks"] == -(-size // CHUNK)
        assert r.board.vram.read(DST, size) == data  # the emulator's own VRAM, not the driver's view
        assert r.board.vram.read(DST + size, 4) == bytes(4)  # nothing written past the end
        assert r.copier.copy_out(DST, size) == data
        assert r.board.sdma.error is None


def test_full_window_chunk_uses_whole_window(tmp_path):
    """payload 0x40000-4: the wire image is exactly 16 slots and the sentinel is the window's last dword."""
    data = os.urandom(CHUNK)
    with rig(tmp_path) as r:
        r.copier.copy_in(DST, data, "seed")
        assert bytes(r.bridge.memory.sram[0x3FFFC:0x40000]) == (SENTINEL | 0).to_bytes(4, "little")
        assert r.board.vram.read(DST, CHUNK) == data
        assert int.from_bytes(r.bridge.memory.sq[0x800:0x808], "little") == 1  # drain fence = seq + 1


def test_seq_persists_and_stale_sentinel_is_not_trusted(tmp_path):
    """SRAM holding an old sentinel value of another seq never releases a chunk early."""
    with rig(tmp_path) as r:
        r.copier.copy_in(DST, b"A" * 4096, "tinyhw")  # seq 0 -> window 0, sentinel at wire end 4608 - 4
        r.copier.copy_in(DST, b"B" * 4096, "tinyhw")  # seq 1 -> window 1
        assert r.copier.seq == 2
        stale = (SENTINEL | 0).to_bytes(4, "little")  # chunk 0's sentinel is still where chunk 2 puts its own
        assert bytes(r.bridge.memory.sram[4604:4608]) == stale
        data = os.urandom(4096)
        r.copier.copy_in(DST, data, "tinyhw")  # seq 2: must wait for sentinel 2, not accept sentinel 0
        assert r.board.vram.read(DST, 4096) == data
        assert r.board.sdma.stats["poll_retries"] >= 1  # the engine really waited on stale SRAM


def test_gpu_poll_waits_until_data_lands(tmp_path):
    """The SDMA parks on its POLL until the bulk OUT carrying the sentinel lands, then copies."""
    with rig(tmp_path) as r:
        r.copier._prime()
        r.engine.submit(sdmapkt.poll_mem_equal(copyengine.bridge_va(0x200000 + 508), 0x51000007) +
                        sdmapkt.copy_linear(copyengine.bridge_va(0x200000), r.gpu.mc(DST), 508))
        assert r.board.sdma.waiting
        payload = os.urandom(508) + (0x51000007).to_bytes(4, "little")
        r.t.bridge.sram_write(0, payload)
        assert not r.board.sdma.waiting
        assert r.board.vram.read(DST, 508) == payload[:508]


@pytest.mark.parametrize("after", [3, 12, 20, 24, 27])
@pytest.mark.parametrize("direction", ["in", "out"])
def test_disconnect_mid_copy_then_next_command_works(tmp_path, after, direction):
    """A disconnect at the N-th transfer of a copy (priming, ring write, arm, data, fence read, release) is one
    clear error; the next command (a fresh open, bring-up and copy) works."""
    data = os.urandom(3 * CHUNK)
    with rig(tmp_path) as r:
        n = r.bridge.counters["usb_transfers"]
        if direction == "out":
            r.copier.copy_in(DST, data, "tinyhw")
            n = r.bridge.counters["usb_transfers"]  # copy-out starts after the copy-in's transfers
            after = 1 + after % 9  # a copy-out of two pieces takes about a dozen transfers
    with pytest.raises((Disconnected, TransportError)) as e, rig(tmp_path, faults=f"disconnect@{n + after}") as r:
        if direction == "out":
            r.copier.copy_in(DST, data, "tinyhw")
            r.copier.copy_out(DST, len(data))
        else:
            r.copier.copy_in(DST, data, "tinyhw")
    assert "disconnected" in str(e.value).lower()
    assert "replug" in (e.value.hint or "")
    with rig(tmp_path) as r:  # the next command: a fresh open, bring-up and copy work
        r.copier.copy_in(DST, data[:5000], "tinyhw")
        assert r.copier.copy_out(DST, 5000) == data[:5000]


def test_hung_sdma_copy_in_times_out_clearly(tmp_path):
    with rig(tmp_path, sdma="hang") as r:
        with pytest.raises(DeviceTimeout, match="did not drain"):
            r.copier.copy_in(DST, os.urandom(3 * CHUNK), "tinyhw")
        assert r.board.sdma.stats["packets"] == 0


def test_hung_sdma_copy_out_times_out_clearly(tmp_path):
    with rig(tmp_path, sdma="hang") as r:
        r.copier.engine.wptr = 0  # nothing submitted yet
        with pytest.raises(DeviceTimeout, match="never arrived|hung"):
            r.copier.copy_out(DST, 4096)


def test_vm_2m_pages_and_timestamp(tmp_path):
    """A 2 MiB mapping (PDE-is-PTE) reaches VRAM; TIMESTAMP and TRAP execute."""
    with rig(tmp_path) as r:
        copyengine.map_vram_2m(r.gpu, 2 << 20, 0x9000000, 4 << 20)
        r.board.vram.write(0x9000000 + (3 << 20), b"Z" * 64)
        r.engine.submit(sdmapkt.copy_linear(copyengine.VA_BASE + (2 << 20) + (3 << 20), r.gpu.mc(DST), 64) +
                        sdmapkt.timestamp(r.gpu.mc(DST + 128)) + sdmapkt.trap())
        r.engine.wait_idle(0.5)
        assert r.board.vram.read(DST, 64) == b"Z" * 64
        assert int.from_bytes(r.board.vram.read(DST + 128, 8), "little") > 0
        assert r.board.sdma.stats["traps"] == 1
        assert r.board.gpuvm.invalidations >= 2


def test_the_copy_engine_puts_physical_vram_addresses_in_the_page_tables(tmp_path):
    """amd-bringup.md §4.5, read back from the emulator's own register file and VRAM after the copy engine came up on
    mock:navi31-usb: both hubs' PAGE_TABLE_BASE_ADDR, the PDEs and the default-address registers hold physical VRAM
    addresses (here: offsets), the system aperture MC addresses (FB base + offset) >> 18."""
    from vmregs import check_physical_vm

    with rig(tmp_path) as r:
        check_physical_vm(r.board, r.gpu.vram_size)
        assert copyengine.summary(r.engine)["page_table"] == copyengine.PT_BASE


def test_the_host_side_walker_reads_physical_page_tables(tmp_path):
    """tinyhw.boot.amd.vmread walks the same tables from the host: PT base and PDEs as physical VRAM addresses
    (§4.5)."""
    from tinyhw.boot.amd.vmread import VmReader

    with rig(tmp_path) as r:
        copyengine.map_vram_2m(r.gpu, 2 << 20, 0x9000000, 2 << 20)
        r.board.vram.write(0x9000000 + 0x1230, b"walk")
        vm = VmReader(r.gpu)
        assert vm.translate(copyengine.VA_BASE + (2 << 20) + 0x1230) == 0x9001230
        assert vm.read(copyengine.VA_BASE + (2 << 20) + 0x1230, 4) == b"walk"


def test_page_table_change_needs_invalidation(tmp_path):
    with rig(tmp_path) as r:
        copyengine.map_vram_2m(r.gpu, 2 << 20, 0x9000000, 2 << 20)
        r.board.vram.write(0x9000000, b"1" * 16)
        r.board.vram.write(0xA000000, b"2" * 16)
        r.engine.submit(sdmapkt.copy_linear(copyengine.VA_BASE + (2 << 20), r.gpu.mc(DST), 16))
        r.engine.wait_idle(0.5)
        pdb0 = copyengine.PT_BASE + 2 * 4096
        entry = copyengine.phys(0xA000000) | copyengine.RW | copyengine.HUGE | copyengine.MTYPE_UC
        r.gpu.vram_write(pdb0 + 8, entry.to_bytes(8, "little"))  # remap without invalidating: old mapping
        r.engine.submit(sdmapkt.copy_linear(copyengine.VA_BASE + (2 << 20), r.gpu.mc(DST + 16), 16))
        r.engine.wait_idle(0.5)
        copyengine.invalidate(r.gpu)
        r.engine.submit(sdmapkt.copy_linear(copyengine.VA_BASE + (2 << 20), r.gpu.mc(DST + 32), 16))
        r.engine.wait_idle(0.5)
        assert r.board.vram.read(DST, 48) == b"1" * 32 + b"2" * 16


def test_ring_wrap_fills_tail_with_nops(tmp_path):
    with rig(tmp_path) as r:
        r.engine.wptr = copyengine.SDMA_RING_SIZE - 8  # pretend the ring is nearly full (engine rptr follows below)
        r.board.regfile.values[r.gpu.offset("gc.SDMA0_QUEUE0_RB_RPTR")] = copyengine.SDMA_RING_SIZE - 8
        r.engine.submit(sdmapkt.fence(r.gpu.mc(DST), 0x1234))
        r.engine.wait_idle(0.5)
        assert r.engine.stats["wraps"] == 1
        assert int.from_bytes(r.board.vram.read(DST, 4), "little") == 0x1234


def test_model_calibration():
    """Seed lands inside 250-350 MB/s (published 276-323); tinyhw's protocol >= 600 MB/s modelled copy-in."""
    seed = model_in(64 << 20, "seed")["mb_s"]
    own = model_in(64 << 20, "tinyhw")["mb_s"]
    assert 250 <= seed <= 350
    assert own >= 600


def test_unknown_protocol_refused(tmp_path):
    with rig(tmp_path) as r, pytest.raises(Exception, match="unknown copy-in protocol"):
        UsbCopier(r.engine).copy_in(DST, b"x", "fast")


def test_full_boot_with_copy_engine_then_copy(tmp_path):
    """`boot(..., copy_engine=True)` on the emulated USB board: PSP/SMU boot, then the copy engine step; copies work."""
    from amfake import FW_DIR

    from tinyhw.boot.amd import firmware, sequence

    if not (FW_DIR / "psp_13_0_0_sos.bin").is_file():
        pytest.fail(f"firmware missing in {FW_DIR}: run bash tests/fetch_firmware.sh", pytrace=False)
    fw = firmware.load(FW_DIR, {"mp0": (13, 0, 0), "mp1": (13, 0, 0), "gc": (11, 0, 0), "sdma0": (6, 0, 0)})
    results = []
    with rig(tmp_path, boot=lambda gpu: results.append(sequence.boot(gpu, fw, copy_engine=True))) as r:
        steps = [s["step"] for s in results[0].steps]
        assert steps[-2:] == ["copy engine", "flags"]
        data = os.urandom(CHUNK + 999)
        r.copier.copy_in(DST, data, "tinyhw")
        assert r.copier.copy_out(DST, len(data)) == data


@pytest.mark.parametrize("protocol", ["seed", "tinyhw"])
def test_copied_out_vram_holding_the_next_sentinel(tmp_path, protocol):
    """Copy-out leaves VRAM bytes in the SRAM; if they hold 0x51000000|seq exactly where the next chunk's sentinel
    goes, the published protocol copies stale bytes (hazard, shown here); tinyhw's switches to its other tag."""
    src = 0xA000000
    with rig(tmp_path) as r:
        r.copier.copy_in(DST, b"x" * 64, protocol)  # seq 0 (window 0); the next chunk is seq 1 in window 1
        vram = bytearray(os.urandom(512 * 1024))
        vram[0x40000 + 4604:0x40000 + 4608] = (SENTINEL | 1).to_bytes(4, "little")  # window 1, wire 4608 - 4
        r.board.vram.write(src, bytes(vram))
        assert r.copier.copy_out(src, len(vram)) == vram
        data = os.urandom(4096)
        r.copier.copy_in(DST, data, protocol)
        if protocol == "tinyhw":
            assert r.board.vram.read(DST, 4096) == data
            assert r.copier.stats["alt_sentinels"] == 1
        else:
            assert r.board.vram.read(DST, 4096) == bytes(vram[0x40000:0x40000 + 4096])  # stale bytes copied


@pytest.mark.parametrize("protocol", ["seed", "tinyhw"])
def test_older_payload_holding_a_later_sentinel(tmp_path, protocol):
    """Within one call: chunk 0's payload holds 0x51000002 where the short chunk 2 (same window) puts its sentinel."""
    data = bytearray(os.urandom(2 * CHUNK + 4096))
    data[4604:4608] = (SENTINEL | 2).to_bytes(4, "little")
    with rig(tmp_path) as r:
        r.copier.copy_in(DST, bytes(data), protocol)
        got = r.board.vram.read(DST + 2 * CHUNK, 4096)
        if protocol == "tinyhw":
            assert got == data[2 * CHUNK:]
            assert r.copier.stats["alt_sentinels"] == 1
        else:
            assert got != data[2 * CHUNK:]  # the published protocol took chunk 0's bytes for chunk 2


def test_large_copy_is_split_into_ring_sized_submissions(tmp_path, monkeypatch):
    from tinyhw.boot.amd import usbcopy

    monkeypatch.setattr(usbcopy, "BATCH", 2)
    data = os.urandom(5 * CHUNK + 77)
    with rig(tmp_path) as r:
        r.copier.copy_in(DST, data, "tinyhw")
        assert r.board.vram.read(DST, len(data)) == data
        assert r.engine.stats["submissions"] == 3


@pytest.mark.parametrize("protocol", ["seed", "tinyhw"])
@pytest.mark.parametrize(("queue", "host"), [("emulated", "async"), ("worker", "worker")])
def test_model_costs_match_the_emulator(tmp_path, monkeypatch, protocol, queue, host):
    """The model's per-transfer costs are the emulator's: the emulator's marginal virtual time per full chunk equals
    the model's within 1 %, with the same number of fence reads, for tinyhw's host with queued bulk transfers (the
    emulated backend's native queue: the model's "async" host) and with its fallback (one bulk worker thread: the
    model's "worker" host), both without host CPU costs."""
    if queue == "worker":
        monkeypatch.setenv("TINYHW_USB_QUEUE", "worker")
    times, reads, model = [], [], []
    for chunks in (2, 6):
        with rig(tmp_path) as r:
            r.copier._prime()
            t0, f0 = r.t.clock.now(), r.copier.stats["fence_reads"]
            r.copier.copy_in(DST, os.urandom(chunks * CHUNK), protocol)
            assert r.copier.stats["queue"] == queue
            times.append(r.t.clock.now() - t0)
            reads.append(r.copier.stats["fence_reads"] - f0)
        model.append(model_in(chunks * CHUNK, protocol, host=host, host_costs=False))
    per_chunk = (times[1] - times[0]) / 4
    expect = (model[1]["seconds"] - model[0]["seconds"]) / 4
    assert reads == [m["fence_reads"] for m in model]
    assert abs(per_chunk - expect) / expect < 0.01, (per_chunk, expect)


@pytest.mark.parametrize("protocol", ["seed", "tinyhw"])
def test_copy_out_model_matches_the_emulator(tmp_path, protocol):
    """Copy-out is synchronous piece by piece; the emulated SDMA's copy into the SRAM takes time on the board clock
    (3 GB/s, inferred) and the bulk IN's data waits for its release, so the model with its GPU rate equals the
    emulator's marginal cost per 512 KiB piece within 1 %: the seed's per-piece submission (7 transfers a piece)
    and tinyhw's one submission with a go byte per piece (3 transfers a piece)."""
    from tinyhw.boot.amd.usbcopy_model import LinkModel, copy_out

    times, transfers = [], []
    with rig(tmp_path) as r:
        r.copier.copy_in(DST, os.urandom(4096), "tinyhw")
        r.copier.copy_out(DST, 4096, protocol=protocol)  # the go byte's first write out of the way
        for pieces in (4, 16):
            t0, n0 = r.t.clock.now(), r.bridge.counters["usb_transfers"]
            got = r.copier.copy_out(DST, pieces * 512 * 1024, protocol=protocol)
            assert got[:4096] == r.board.vram.read(DST, 4096)
            times.append(r.t.clock.now() - t0)
            transfers.append(r.bridge.counters["usb_transfers"] - n0)
    per_piece = (times[1] - times[0]) / 12
    m = LinkModel()
    model = (copy_out(16 << 19, m, protocol)["seconds"] - copy_out(4 << 19, m, protocol)["seconds"]) / 12
    assert abs(per_piece - model) / model < 0.01, (per_piece, model)
    assert (transfers[1] - transfers[0]) / 12 == (3 if protocol == "tinyhw" else 7)


def test_whole_window_chunk_with_a_colliding_data_tag_falls_back(tmp_path):
    """tinyhw sends a full chunk as one transfer of the caller's 256 KiB (payload + the next dword as its tag); when
    that dword is what the SRAM already holds where the GPU polls (zeroed SRAM, tag 0), the GPU would copy the
    stale window at once: the chunk falls back to the 0x51000000 | seq sentinel and still lands whole."""
    data = bytearray(os.urandom(3 * CHUNK + 1000))
    data[CHUNK:CHUNK + 4] = bytes(4)  # chunk 0's data tag = 0 = the primed SRAM's last dword of window 0
    with rig(tmp_path) as r:
        r.copier.copy_in(DST, bytes(data), "tinyhw")
        assert r.board.vram.read(DST, len(data)) == data
        assert r.copier.stats["data_tags"] == 2  # chunks 1 and 2; chunk 0 collided, chunk 3 is the short last one
        assert r.copier.stats["bulk_out"] == 5  # chunk 0: body + tail; 1, 2: one each; 3: one staged image
        assert r.board.sdma.error is None


def test_packets_go_over_the_fast_path_as_an_indirect_buffer(tmp_path):
    """From 8 chunks on, tinyhw streams only 25 dwords into the ring (the first chunk's packets and an INDIRECT); the
    other packets travel through the SRAM as that first chunk and run from VRAM."""
    data = os.urandom(8 * CHUNK)
    with rig(tmp_path) as r:
        dwords = r.engine.stats["dwords"]
        got = r.copier.copy_in(DST, data, "tinyhw")
        assert got["chunks"] == 8
        assert r.engine.stats["dwords"] - dwords == 25
        assert r.board.sdma.stats["indirect_buffers"] >= 1
        assert r.board.vram.read(DST, len(data)) == data
        assert r.copier.copy_out(DST, len(data)) == data


def test_copy_out_reads_into_one_result_through_a_reused_buffer(tmp_path):
    """Copy-out allocates its result once (or fills the caller's buffer) and every 512 KiB piece's bulk IN is read
    into the same receive buffer (pyusb fills an array it is handed; nothing is allocated per piece)."""
    import array

    data = os.urandom(3 * 512 * 1024 + 1000)
    with rig(tmp_path) as r:
        r.copier.copy_in(DST, data, "tinyhw")
        dev = r.t.bridge.dev
        reads: list[object] = []
        real = dev.read

        def spy(ep, size_or_buffer, timeout=None):
            reads.append(size_or_buffer)
            return real(ep, size_or_buffer, timeout)

        dev.read = spy
        into = bytearray(len(data))
        got = r.copier.copy_out(DST, len(data), into=into)
        assert got.obj is into and into == data
        assert r.copier.copy_out(DST, len(data)) == data
        pieces = [b for b in reads if not isinstance(b, int) or b >= 512]  # not the read pointer's 8-byte reads
        assert len(pieces) == 8 and all(isinstance(b, array.array) for b in pieces)
        assert len({id(b) for b in pieces if len(b) == 512 * 1024}) == 1  # six full pieces, one buffer
