"""tinyhw's copy-in host with its bulk worker thread (issue 12): deterministic on the emulator, errors from the worker
surface on the caller as one tinyhw error, the worker never outlives the call (tinyhw.transport.submitq,
tinyhw.mocks.common.vclock; asm24-usb-bridge.md §4.7, §9.3, §12 item 12)."""

from __future__ import annotations

import random
import threading
import time

import pytest
from usbcopyhelp import rig

from tinyhw.boot.amd.usbcopy import CHUNK
from tinyhw.errors import DeviceTimeout, Disconnected, TransportError
from tinyhw.mocks.common.vclock import VirtualClock
from tinyhw.transport.clock import WallClock
from tinyhw.transport.submitq import SubmitQueue

DST = 0x8000000
WORKERS = ("tinyhw-usb-bulk-queue", "tinyhw-usb-bulk-worker")  # the emulated queue's thread, the fallback's


def _workers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name in WORKERS]


def _run(tmp_path, protocol: str, data: bytes) -> tuple:
    with rig(tmp_path) as r:
        r.copier.copy_in(DST, data, protocol)
        assert r.board.vram.read(DST, len(data)) == data
        log = [(x.kind, x.setup, x.length, x.status, x.crc32) for x in r.bridge.log]
        return r.t.clock.now(), log, dict(r.copier.stats), r.board.sdma.now, r.t.counters.as_dict()


@pytest.mark.parametrize("protocol", ["seed", "tinyhw"])
def test_threaded_copy_is_deterministic(tmp_path, protocol, queue):
    """Two runs: the same virtual time to the last bit, the same transfers in the same order, the same counters."""
    data = random.Random(5).randbytes(5 * CHUNK + 77)
    first = _run(tmp_path, protocol, data)
    second = _run(tmp_path, protocol, data)
    assert first == second
    assert not _workers()


def _bulk_numbers(tmp_path, data: bytes) -> list[int]:
    """Transfer numbers of the copy-in's data transfers (made by the worker) in a clean run."""
    with rig(tmp_path) as r:
        r.copier._prime()
        n0 = r.bridge.counters["usb_transfers"]
        r.copier.copy_in(DST, data, "tinyhw")
        return [x.number for x in r.bridge.log if x.number > n0 and x.kind == "bulk_out" and x.length > 1000]


@pytest.fixture(params=["emulated", "worker"])
def queue(request, monkeypatch):
    """Both bulk queues tinyhw can run on the emulator: the backend's native one and the worker-thread fallback."""
    if request.param == "worker":
        monkeypatch.setenv("TINYHW_USB_QUEUE", "worker")
    return request.param


@pytest.mark.parametrize("which", [0, 2, 3])  # first, middle, last data transfer (one per full chunk)
def test_disconnect_in_the_worker_is_one_clear_error(tmp_path, which, queue):
    data = random.Random(1).randbytes(3 * CHUNK)
    n = _bulk_numbers(tmp_path, data)[which]
    with pytest.raises((Disconnected, TransportError)) as e, rig(tmp_path, faults=f"disconnect@{n}") as r:
        r.copier._prime()
        r.copier.copy_in(DST, data, "tinyhw")
    assert "disconnected" in str(e.value).lower() and "replug" in (e.value.hint or "")
    assert not _workers()
    with rig(tmp_path) as r:  # the next command works
        r.copier.copy_in(DST, data[:5000], "tinyhw")
        assert r.copier.copy_out(DST, 5000) == data[:5000]


def test_timeout_in_the_worker_is_one_clear_error(tmp_path, queue):
    data = random.Random(2).randbytes(3 * CHUNK)
    n = _bulk_numbers(tmp_path, data)[2]
    with rig(tmp_path, faults=f"timeout@{n}") as r:
        r.copier._prime()
        with pytest.raises(DeviceTimeout, match="timed out"):
            r.copier.copy_in(DST, data, "tinyhw")
    assert not _workers()


# -- the queue and the clock on their own ------------------------------------------------------------------------
@pytest.mark.parametrize("clock", [WallClock(), VirtualClock()], ids=["wall", "virtual"])
def test_queue_runs_in_order_and_latches_the_first_error(clock):
    seen: list[int] = []

    def item(i: int) -> None:
        if i == 5:
            raise TransportError("item 5 failed")
        seen.append(i)

    q = SubmitQueue(clock, depth=2, name="q-test")
    with pytest.raises(TransportError, match="item 5"):
        for i in range(10):
            q.submit(item, i)
        q.close()
    q.abort()
    assert seen == [0, 1, 2, 3, 4]
    assert not q.worker.is_alive()
    with pytest.raises(TransportError, match="item 5"):
        q.wait(1)


def test_virtual_time_is_handed_over_both_ways():
    """The worker starts an item at the caller's time when it was submitted; the caller that waits for it goes on
    at the worker's time when it finished; meanwhile each thread keeps its own cursor."""
    clock = VirtualClock(1.0)
    starts: list[float] = []

    def work() -> None:
        starts.append(clock.now())
        clock.advance(0.5)

    with SubmitQueue(clock, name="q-test") as q:
        a = q.submit(work)  # worker: 1.0 -> 1.5
        clock.advance(0.1)  # caller: 1.1
        b = q.submit(work)  # worker: max(1.5, 1.1) -> 2.0
        assert clock.now() == pytest.approx(1.1)
        q.wait(a)
        assert clock.now() == pytest.approx(1.5)
        q.wait(b)
        assert clock.now() == pytest.approx(2.0)
    assert starts == pytest.approx([1.0, 1.5])


def test_gate_orders_the_threads_by_virtual_time_whatever_the_os_does():
    """Two threads' 'transfers' pass the gate in virtual-time order even when the worker is slowed down in real
    time, so what an emulator sees does not depend on scheduling."""
    clock = VirtualClock()
    order: list[tuple[str, float]] = []

    def transfer(who: str, cost: float) -> None:
        clock.gate()
        order.append((who, round(clock.now(), 6)))
        clock.advance(cost)

    def worker_item() -> None:
        for _ in range(3):
            time.sleep(0.01)  # the operating system is slow to run the worker
            transfer("worker", 0.375)

    with SubmitQueue(clock, name="q-test") as q:
        q.submit(worker_item)
        for _ in range(4):
            transfer("caller", 0.25)
    assert order == sorted(order, key=lambda x: (x[1], x[0] != "caller"))
    assert [w for w, _ in order] == ["caller", "worker", "caller", "worker", "caller", "caller", "worker"]
