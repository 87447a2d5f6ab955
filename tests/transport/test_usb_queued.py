"""Queued bulk-OUT transfers (issue 12, tinyhw.usb.queued; specs/asm24-usb-bridge.md §4.7, §12 item 12): order,
exact emulated timing (queued transfers pay the gap, a lone one the full fixed cost), errors on the caller, nothing
left behind; the libusb-async implementation's struct layout against the machine's libusb-1.0."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import random
import sys
import threading
from types import SimpleNamespace

import pytest
from usbcopyhelp import rig

from tinyhw.errors import DeviceTimeout, Disconnected
from tinyhw.mocks.bridge.asm24_endpoints import Asm24Timing
from tinyhw.mocks.common.vclock import VirtualClock
from tinyhw.usb import libusb_async
from tinyhw.usb.queued import open_bulk_queue, queue_kind

PIECE = 64 * 1024
T = Asm24Timing()
RATE = T.usb_rate["ss"]


def _threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("tinyhw-usb-bulk")]


def _arm(r, length: int) -> None:
    """0xF2 host->SRAM arm at slot 0 for ``length`` bytes (§4.5)."""
    r.t.bridge._ctrl(0x40, 0xF2, length // 512, 0 | (-(-length // 0x4000) << 8), b"", 1.0, "test arm")


def _pieces(n: int, seed: int = 1) -> list[bytes]:
    rnd = random.Random(seed)
    return [rnd.randbytes(PIECE) for _ in range(n)]


def _send(r, pieces: list[bytes], depth: int) -> float:
    """Arm, queue the pieces, wait for the last; the virtual time from the first submit to the last completion."""
    _arm(r, PIECE * len(pieces))
    t0 = r.t.clock.now()
    with r.t.bridge.bulk_out_queue(depth, 1.0, "test data") as q:
        tickets = [q.submit(p) for p in pieces]
        assert tickets == list(range(1, len(pieces) + 1))
        q.wait(tickets[-1])
        return r.t.clock.now() - t0


@pytest.mark.parametrize("depth", [2, 4])
def test_queued_transfers_land_in_order_and_pay_only_the_gap(tmp_path, depth):
    pieces = _pieces(4)
    with rig(tmp_path) as r:
        n0, b0 = r.t.counters.usb_transfers, r.t.counters.bytes_out
        took = _send(r, pieces, depth)
        assert r.bridge.memory.sram[:4 * PIECE] == b"".join(pieces)
        bulk = [x for x in r.bridge.log if x.kind == "bulk_out"][-4:]
        assert [x.length for x in bulk] == [PIECE] * 4 and [x.status for x in bulk] == ["ok"] * 4
        assert r.t.counters.usb_transfers - n0 == 5 and r.t.counters.bytes_out - b0 == 4 * PIECE  # arm + 4
    # the first finds the pipe idle (full fixed cost); the other three were queued behind it (gap only)
    assert took == pytest.approx(T.bulk_overhead_s + 3 * T.bulk_gap_s + 4 * PIECE / RATE, rel=1e-9)
    assert not _threads()


def test_depth_one_is_a_synchronous_stream(tmp_path):
    """With one transfer in flight each submit waits for the previous one: every transfer pays the full cost."""
    with rig(tmp_path) as r:
        took = _send(r, _pieces(4), 1)
    assert took == pytest.approx(4 * (T.bulk_overhead_s + PIECE / RATE), rel=1e-9)


def test_worker_fallback_moves_the_same_data_at_the_full_cost(tmp_path, monkeypatch):
    monkeypatch.setenv("TINYHW_USB_QUEUE", "worker")
    pieces = _pieces(3, seed=2)
    with rig(tmp_path) as r:
        assert queue_kind(r.t.bridge.dev) == "worker"
        took = _send(r, pieces, 4)
        assert r.bridge.memory.sram[:3 * PIECE] == b"".join(pieces)
    assert took == pytest.approx(3 * (T.bulk_overhead_s + PIECE / RATE), rel=1e-9)
    assert not _threads()


def test_repeated_runs_are_identical(tmp_path):
    def once() -> tuple:
        with rig(tmp_path) as r:
            took = _send(r, _pieces(6, seed=3), 3)
            return took, [(x.number, x.kind, x.length, x.crc32) for x in r.bridge.log]

    assert once() == once()


@pytest.mark.parametrize("fault", ["disconnect", "timeout"])
@pytest.mark.parametrize("which", [0, 2])
def test_fault_mid_queue_is_one_clear_error_and_nothing_is_left(tmp_path, fault, which):
    with rig(tmp_path) as r:  # where the transfers fall in a clean run
        n = r.bridge.counters["usb_transfers"] + 2 + which  # after the arm
    pieces = _pieces(4, seed=4)
    with rig(tmp_path, faults=f"{fault}@{n}") as r:
        with pytest.raises((Disconnected, DeviceTimeout)) as e:
            _send(r, pieces, 3)
        assert ("disconnected" if fault == "disconnect" else "timed out") in str(e.value)
        assert "\n" not in str(e.value) and str(e.value) == str(e.value).lower()
        assert type(e.value) is (Disconnected if fault == "disconnect" else DeviceTimeout)
        assert not _threads()
        # nothing after the failure reached the device
        assert not [x for x in r.bridge.log if x.number > n and x.kind == "bulk_out"]
    with rig(tmp_path) as r:  # the next command works
        _send(r, pieces[:2], 2)
        assert r.bridge.memory.sram[:2 * PIECE] == b"".join(pieces[:2])


def test_abort_and_close_are_idempotent_and_leave_no_thread(tmp_path):
    with rig(tmp_path) as r:
        _arm(r, 2 * PIECE)
        q = r.t.bridge.bulk_out_queue(2, 1.0, "test data")
        assert q.kind == "emulated"
        q.submit(bytes(PIECE))
        q.abort()
        q.abort()
        assert not _threads()


def test_kind_selection():
    import usb.backend.libusb1

    fake = SimpleNamespace(backend=SimpleNamespace(queue_kind="emulated", open_bulk_queue=lambda *a: None))
    assert queue_kind(fake) == "emulated"
    backend = usb.backend.libusb1.get_backend()
    if backend is not None:  # libusb-1.0 is installed on this machine (the .ci image has it)
        assert queue_kind(SimpleNamespace(backend=backend)) == "libusb-async"
    assert queue_kind(SimpleNamespace(backend=object())) == "worker"
    with pytest.raises(ValueError, match="depth"):
        open_bulk_queue(fake, 0x02, 0, clock=VirtualClock())


def test_libusb_transfer_layout_matches_the_header():
    """struct libusb_transfer on a 64-bit ABI (libusb.h): pointers at 0/32/40/48, the small fields between."""
    if ctypes.sizeof(ctypes.c_void_p) != 8:
        pytest.skip("layout figures below are for a 64-bit ABI")
    f = libusb_async.Transfer
    offsets = {name: getattr(f, name).offset for name, _ in f._fields_}
    assert offsets == {"dev_handle": 0, "flags": 8, "endpoint": 9, "type": 10, "timeout": 12, "status": 16,
                       "length": 20, "actual_length": 24, "callback": 32, "user_data": 40, "buffer": 48,
                       "num_iso_packets": 56}
    assert ctypes.sizeof(libusb_async.Timeval) == 16


def test_libusb_async_symbols_bind():
    name = ctypes.util.find_library("usb-1.0")
    if name is None:
        pytest.skip("libusb-1.0 is not installed here")
    lib = ctypes.CDLL(name)
    for sym in ("libusb_alloc_transfer", "libusb_submit_transfer", "libusb_cancel_transfer", "libusb_free_transfer",
                "libusb_handle_events_timeout_completed"):
        assert libusb_async._bind(lib, sym, ctypes.c_int) is not None
    addr = libusb_async._bind(lib, "libusb_alloc_transfer", ctypes.c_void_p, ctypes.c_int)(0)
    assert addr
    libusb_async._bind(lib, "libusb_free_transfer", None, ctypes.c_void_p)(addr)


def test_copy_in_counters_agree_on_both_sides(tmp_path):
    """A copy-in through the queue: the driver's usb_transfers and bytes_out equal the emulator's own counts; the
    queued bulk transfers are not round trips (nothing waits for each), every control transfer is."""
    data = random.Random(6).randbytes(3 * 0x3FFFC + 4097)
    with rig(tmp_path) as r:
        r.copier._prime()
        d0, e0 = r.t.counters.as_dict(), dict(r.bridge.counters)
        r.copier.copy_in(0x8000000, data, "tinyhw")
        d1, e1 = r.t.counters.as_dict(), dict(r.bridge.counters)
        assert r.board.vram.read(0x8000000, len(data)) == data
    assert d1["usb_transfers"] - d0["usb_transfers"] == e1["usb_transfers"] - e0["usb_transfers"]
    assert d1["bytes_out"] - d0["bytes_out"] == e1["bytes_out"] - e0["bytes_out"]
    bulk = e1["bulk_transfers"] - e0["bulk_transfers"]
    assert bulk == r.copier.stats["bulk_out"] + 1  # + the ring write's streamed bulk out
    assert d1["round_trips"] - d0["round_trips"] == e1["usb_transfers"] - e0["usb_transfers"] - bulk + 1


def _fake_libusb_queue():
    """A LibusbBulkQueue on the machine's libusb whose alloc/submit/free/event calls are stand-ins: each submitted
    transfer is recorded (its buffer address and length) and completes at the next event pump."""
    name = ctypes.util.find_library("usb-1.0")
    if name is None:
        pytest.skip("libusb-1.0 is not installed here")
    q = libusb_async.LibusbBulkQueue(ctypes.CDLL(name), None, None, 0x02, 4, 1000)
    structs: dict[int, libusb_async.Transfer] = {}
    seen: list[tuple[int, int]] = []

    def alloc(_iso):
        t = libusb_async.Transfer()
        structs[ctypes.addressof(t)] = t
        return ctypes.addressof(t)

    def submit(addr):
        t = structs[addr]
        seen.append((t.buffer, t.length))
        return 0

    def events(_ctx, _tv, _completed):
        for addr, t in structs.items():
            if addr in q.by_addr and q.slots[q.by_addr[addr]][2] is None:
                t.status, t.actual_length = libusb_async.COMPLETED, t.length
                q._done(addr)
        return 0

    q._alloc, q._submit, q._free, q._events = alloc, submit, lambda addr: structs.pop(addr, None), events
    return q, seen


def test_libusb_submit_reads_the_callers_bytes_in_place():
    """Zero-copy: libusb is handed the address of the caller's own bytes (bytes, bytearray, a slice of either), not a
    copy, and the buffer is pinned (a bytearray cannot be resized) until its transfer reported back."""
    q, seen = _fake_libusb_queue()
    big = bytearray(os.urandom(1 << 20))
    base = ctypes.addressof((ctypes.c_char * len(big)).from_buffer(big))
    frozen = bytes(os.urandom(4096))
    tickets = [q.submit(memoryview(big)[4096:4096 + 262144]), q.submit(big), q.submit(frozen)]
    assert seen[0] == (base + 4096, 262144)
    assert seen[1] == (base, len(big))
    assert seen[2] == (id(frozen) + sys.getsizeof(b"") - 1, 4096)  # CPython's bytes: the data after the header
    assert q.copies == 0
    with pytest.raises(BufferError):
        big.append(0)  # pinned while in flight
    q.wait(tickets[-1])
    big.append(0)  # released once reported
    q.abort()
