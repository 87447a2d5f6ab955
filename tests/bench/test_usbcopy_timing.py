"""Time of the USB copies on the emulator (issue 12): the SDMA takes time on the board clock, the host sees the GPU's
writes into the bridge only at their modelled time, and the emulator's figure is tinyhw's real host (queued bulk
transfers: the model's ``host="async"``; its fallback, one bulk worker thread: ``host="worker"``)
(asm24-usb-bridge.md §1, §9.3, §9.4; tinyhw.boot.amd.usbcopy_model)."""

from __future__ import annotations

import os

import pytest
from usbcopyhelp import rig

from tinyhw.boot.amd import copyengine, sdmapkt
from tinyhw.boot.amd.usbcopy import FENCE_XDATA
from tinyhw.boot.amd.usbcopy_model import LinkModel, copy_in
from tinyhw.mocks.amd.sdma import SdmaTiming

DST = 0x8000000


def _fence(r) -> int:
    return int.from_bytes(r.t.bridge.xdata_read(FENCE_XDATA, 8), "little")


def test_sdma_copy_takes_time_and_its_fence_lands_then(tmp_path):
    """A chunk's POLL passes when the bulk carrying its sentinel ends; the COPY then takes bytes / 3 GB/s (inferred)
    and the fence write reaches the bridge at that modelled time: a fence read (the firmware reads XDATA half way
    through the 100 us round trip) before it sees the old value, the next one the new."""
    n = 256 * 1024
    with rig(tmp_path) as r:
        r.copier._prime()
        r.engine.submit(sdmapkt.poll_mem_equal(copyengine.bridge_va(0x200000 + n - 4), 0x51000000) +
                        sdmapkt.copy_linear(copyengine.bridge_va(0x200000), r.gpu.mc(DST), n - 4) +
                        sdmapkt.write64(copyengine.bridge_va(0x820800), 7))
        payload = os.urandom(n - 4) + (0x51000000).to_bytes(4, "little")
        r.t.bridge.sram_write(0, payload)
        landed = r.t.clock.now()
        t = SdmaTiming()
        copy_s = (n - 4) / t.system_read_rate + (n - 4) / t.vram_rate  # 87 us
        assert r.bridge.next_pending() == pytest.approx(landed + t.poll_s + 2 * t.packet_s + copy_s, abs=1e-9)
        assert r.board.vram.read(DST, n - 4) == payload[:n - 4]  # functionally copied at the kick
        assert _fence(r) == 0  # read at landed + 50 us
        assert _fence(r) == 7  # read at landed + 150 us
        assert r.bridge.next_pending() is None


def test_fence_stays_invisible_until_the_engine_time_reaches_it(tmp_path):
    """A long job ahead of the fence write (64 MiB VRAM->VRAM at 400 GB/s read + write, inferred) keeps it held."""
    with rig(tmp_path) as r:
        r.copier._prime()
        big = 64 << 20
        busy = r.board.sdma.busy_s
        r.engine.submit(sdmapkt.copy_linear(r.gpu.mc(DST), r.gpu.mc(DST + big), big) +
                        sdmapkt.write64(copyengine.bridge_va(0x820800), 5))
        assert r.board.sdma.busy_s - busy == pytest.approx(2 * big / SdmaTiming().vram_rate, rel=0.01)  # 336 us
        due = r.bridge.next_pending()
        assert due is not None and due - r.t.clock.now() > 250e-6
        assert _fence(r) == 0
        r.t.clock.sleep(due - r.t.clock.now())
        assert _fence(r) == 5


def test_copy_out_waits_for_the_gpu_release(tmp_path):
    """The bulk IN of a copy-out piece NAKs until the SDMA's release write lands at its modelled time."""
    with rig(tmp_path) as r:
        r.copier.copy_in(DST, os.urandom(4096), "tinyhw")
        before = r.board.sdma.busy_s
        r.copier.copy_out(DST, 512 * 1024)
        assert r.board.sdma.busy_s - before >= 512 * 1024 / SdmaTiming().system_write_rate
        assert r.t.clock.now() >= r.board.sdma.now  # the host got the data after the GPU wrote it
        assert r.bridge.next_pending() is None


def test_a_real_host_front_end_lands_gpu_writes_at_once(tmp_path):
    """The FunctionFS front end (a real host, wall-paced clock) turns holding off: nothing would settle them."""
    with rig(tmp_path) as r:
        r.copier._prime()
        r.bridge.hold_bus_writes = False
        r.engine.submit(sdmapkt.copy_linear(r.gpu.mc(DST), r.gpu.mc(DST + (64 << 20)), 64 << 20) +
                        sdmapkt.write64(copyengine.bridge_va(0x820800), 5))
        assert r.bridge.next_pending() is None and _fence(r) == 5


@pytest.mark.parametrize("protocol", ["seed", "tinyhw"])
@pytest.mark.parametrize(("queue", "host"), [("emulated", "async"), ("worker", "worker")])
def test_emulator_figure_is_tinyhws_host_and_the_model_reproduces_it(tmp_path, monkeypatch, protocol, queue, host):
    """The emulator runs tinyhw's real host (its bulk queue included); the model's matching host without host CPU
    costs (which the emulator cannot see) gives the same 8 MiB copy-in time within 3 % (the model's start-up
    differs by ~0.2 ms) and the same fence reads, and it is faster than waiting for every transfer in turn."""
    if queue == "worker":
        monkeypatch.setenv("TINYHW_USB_QUEUE", "worker")
    size = 8 << 20
    with rig(tmp_path) as r:
        r.copier._prime()
        t0 = r.t.clock.now()
        r.copier.copy_in(DST, os.urandom(size), protocol)
        seconds = r.t.clock.now() - t0
        reads = r.copier.stats["fence_reads"]
    model = copy_in(size, protocol, host=host, host_costs=False)
    assert reads == model["fence_reads"]
    assert abs(seconds - model["seconds"]) / model["seconds"] < 0.03, (seconds, model["seconds"])
    assert seconds < 0.9 * copy_in(size, protocol, host="sync", host_costs=False)["seconds"]  # transfers overlap


def test_tinyhws_host_reaches_the_issue_target_on_the_emulator(tmp_path):
    """tinyhw's protocol with queued bulk transfers moves 64 MiB at >= 665 MB/s (95 % of the 700 MB/s SRAM DMA
    ceiling) on the emulator's device clock (verified byte for byte), within 1 % of the model's async host without
    host CPU costs: one bulk transfer per chunk (plus one for the indirect buffer) and the SDMA packets over the fast
    path (the ring gets 25 streamed dwords instead of 19 per chunk)."""
    size = 64 << 20
    data = os.urandom(size)
    with rig(tmp_path) as r:
        r.copier._prime()
        t0, dwords = r.t.clock.now(), r.engine.stats["dwords"]
        r.copier.copy_in(DST, data, "tinyhw")
        mb_s = size / (r.t.clock.now() - t0) / 1e6
        assert r.board.vram.read(DST, size) == data
        assert r.copier.stats["bulk_out"] == r.copier.stats["chunks"] == 258  # 257 data chunks + the packets
        assert r.engine.stats["dwords"] - dwords == 25
        assert r.copier.stats["ib_dwords"] == 257 * 19
    model = copy_in(size, "tinyhw", host="async", host_costs=False)["mb_s"]
    assert mb_s >= 665 and abs(mb_s - model) / model < 0.01, (mb_s, model)


def test_which_host_reaches_the_issue_targets():
    """Issue 12's targets (seed 250-350 MB/s, tinyhw >= 600 MB/s, 64 MiB) hold for the queued (libusb-async) host,
    tinyhw's host now, not for its fallback with one bulk worker thread (one synchronous bulk transfer in flight:
    each pays the full 100 us fixed cost), nor for the fully synchronous host before issue 12."""
    size = 64 << 20
    mb = {(p, h): copy_in(size, p, host=h)["mb_s"] for p in ("seed", "tinyhw") for h in ("sync", "worker", "async")}
    assert 250 <= mb["seed", "async"] <= 350 and mb["tinyhw", "async"] >= 600
    assert mb["tinyhw", "worker"] < 600 and mb["tinyhw", "sync"] < 600
    assert mb["tinyhw", "sync"] > mb["seed", "sync"]  # with the host's staging cost, tinyhw's protocol still gains
    bare = {p: copy_in(size, p, host="sync", host_costs=False)["mb_s"] for p in ("seed", "tinyhw")}
    # ...and without it (the emulator's view) too: one bulk transfer per chunk and the packets over the fast path
    assert bare["tinyhw"] > bare["seed"]
    with pytest.raises(ValueError, match="unknown host"):
        copy_in(size, "tinyhw", LinkModel(), host="threads")
