"""The hybrid virtual clock (issue 20 item 5): host CPU time between device interactions on each thread's time
line, the emulator's own work off it, and the switch between it and the pure device-time clock.

Figures on the hybrid clock are measured: these tests assert relations with margins, never exact values.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest
from clihelp import run
from usbcopyhelp import rig

from tinyhw.mocks.common.vclock import VirtualClock


def burn(seconds: float) -> None:
    """Spend about ``seconds`` of this thread's CPU time."""
    end = time.thread_time() + seconds
    x = 0
    while time.thread_time() < end:
        x += 1


def hybrid_clock() -> VirtualClock:
    c = VirtualClock(mode="device")
    c.hybrid_ok = True
    c.set_mode("hybrid")
    return c


def test_hybrid_clock_charges_the_threads_cpu_time_between_contacts() -> None:
    c = hybrid_clock()
    t0 = c.now()
    burn(0.02)
    t1 = c.now()
    assert 0.018 <= t1 - t0 < 0.2  # the 20 ms of cpu, and not wall time of other processes
    c.sleep(0.5)
    assert c.now() - t1 == pytest.approx(0.5, abs=0.01)


def test_device_clock_charges_nothing() -> None:
    c = VirtualClock()
    t0 = c.now()
    burn(0.02)
    assert c.now() == t0
    assert c.mode == "device"


def test_work_inside_service_is_the_emulators_not_the_hosts() -> None:
    c = hybrid_clock()
    acc = c.track()
    t0 = c.now()
    with c.service():
        burn(0.03)  # the emulator's python
        c.advance(0.001)  # its modelled cost
        with c.service():  # re-entrant
            burn(0.01)
    burn(0.005)  # the driver again
    t1 = c.now()
    assert 0.001 + 0.004 <= t1 - t0 < 0.001 + 0.02
    mine = acc["MainThread"]
    assert mine["device"] == pytest.approx(0.001) and 0.004 <= mine["cpu"] < 0.02


def test_a_device_side_thread_is_never_charged_but_a_host_thread_is() -> None:
    c = hybrid_clock()
    got: dict[str, float] = {}

    def work(name: str) -> None:
        a = c.now()
        burn(0.02)
        got[name] = c.now() - a
        c.handover().delist(threading.current_thread())

    for name, host in (("device-side", False), ("host", True)):
        t = threading.Thread(target=work, args=(name,), name=name)
        c.handover().enlist(t, host=host)
        t.start()
        t.join()
        c.handover().delist()
    assert got["device-side"] == 0.0
    assert got["host"] >= 0.018


def test_modes_and_the_measurement_preference() -> None:
    c = VirtualClock()
    with pytest.raises(ValueError, match="does not mark"):
        c.set_mode("hybrid")  # a board whose emulator does not bracket its work
    with c.measuring("hybrid") as mode:
        assert mode == "device"
    c.hybrid_ok = True
    with c.measuring("hybrid") as mode:
        assert mode == "hybrid" and c.hybrid
    assert not c.hybrid  # restored
    fixed = VirtualClock(mode="device")
    fixed.hybrid_ok = True
    with fixed.measuring("hybrid") as mode:
        assert mode == "device"  # the user's choice wins
    with pytest.raises(ValueError, match="not one of"):
        VirtualClock(mode="wall")


def test_copy_in_on_the_hybrid_clock_charges_driver_cpu_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The emulator's work is not the host's: an emulated bridge made 5 ms slower (cpu) per control transfer
    leaves the charged cpu far below those 5 ms per transfer, the emulated queue's worker is never charged, and
    the driver's own cpu makes the copy take longer than on device time."""
    from tinyhw.mocks.bridge.asm24 import Asm24Bridge

    data = os.urandom(1 << 20)
    took = {}
    for mode in ("device", "hybrid"):
        with rig(tmp_path / mode, clock=mode) as r:
            clock = r.t.clock
            assert clock.mode == mode and clock.hybrid_ok
            r.copier._prime()
            r.copier.copy_in(0x8000000, data, "tinyhw")  # first-call effects (imports, caches) out of the way
            acc = clock.track()
            c0 = clock.now()
            r.copier.copy_in(0x8000000, data, "tinyhw")
            took[mode] = clock.now() - c0
            assert r.copier.copy_out(0x8000000, len(data)) == data
            assert acc["tinyhw-usb-bulk-queue"]["cpu"] == 0.0  # the emulated queue's worker is the device side
            assert acc["MainThread"]["cpu"] == 0.0 if mode == "device" else acc["MainThread"]["cpu"] > 0
    assert took["hybrid"] > took["device"]

    slow = Asm24Bridge.control

    def slow_control(self, *args, **kwargs):
        burn(0.005)
        return slow(self, *args, **kwargs)

    monkeypatch.setattr(Asm24Bridge, "control", slow_control)
    with rig(tmp_path / "slow", clock="hybrid") as r:
        r.copier._prime()
        acc = r.t.clock.track()
        n0 = r.bridge.counters["control_transfers"]
        r.copier.copy_in(0x8000000, data, "tinyhw")
        controls = r.bridge.counters["control_transfers"] - n0
        assert controls >= 8
        assert acc["MainThread"]["cpu"] < 0.4 * controls * 0.005


def test_the_seed_protocol_stages_into_two_buffers_allocated_once(tmp_path: Path) -> None:
    data = os.urandom(5 * 0x40000)
    with rig(tmp_path) as r:
        r.copier.copy_in(0x8000000, data, "seed")
        first = r.copier._staging
        r.copier.copy_in(0x8000000, data[:1000], "seed")
        assert r.copier._staging is first and len(first) == 2
        assert r.copier.copy_out(0x8000000, 1000) == data[:1000]
        assert r.copier.stats["staged_bytes"] == 5 * 0x40000 + 512 + 1024  # 5 full chunks, 20 bytes, 1000 bytes


def test_bench_copy_measures_on_the_hybrid_clock_unless_told_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TINYHW_CLOCK")

    def clocks(device: str) -> set[str]:
        r = run("--device", device, "--json", "bench", "copy", "--sizes", "4K", "--repeat", "1")
        assert r.code == 0, r.err
        return {x["clock"] for x in json.loads(r.out)["results"]}

    assert clocks("mock:navi31-usb") == {"hybrid"}
    assert clocks("mock:navi31-usb,clock=device") == {"device"}
    assert clocks("mock:navi31") == {"device"}  # mock:navi31's emulator does not mark its work: device time
    monkeypatch.setenv("TINYHW_CLOCK", "device")
    assert clocks("mock:navi31-usb") == {"device"}
    monkeypatch.delenv("TINYHW_CLOCK")
    r = run("--device", "mock:navi31-usb", "bench", "copy", "--sizes", "4K", "--repeat", "1")
    assert "hybrid clock" in r.out and "measured cpu time" in r.out


def test_bad_clock_choices_are_refused_before_anything_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    r = run("--device", "mock:navi31,clock=hybrid", "bench", "copy", "--sizes", "4K")
    assert r.code == 2 and "the -usb boards only" in r.err and r.no_result
    r = run("--device", "mock:navi31-usb,clock=wall", "bench", "copy", "--sizes", "4K")
    assert r.code == 2 and "clock=wall is not one of device, hybrid" in r.err and r.no_result
    monkeypatch.setenv("TINYHW_CLOCK", "fast")
    r = run("--device", "mock:navi31-usb", "bench", "copy", "--sizes", "4K")
    assert r.code == 2 and "TINYHW_CLOCK=fast" in r.err and r.no_result


def test_the_fallback_worker_hands_pyusb_no_memoryview(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The hybrid clock shows the fallback host's real cost: pyusb converts a memoryview (tinyhw's body slices)
    element by element, ~10 ms of cpu per 256 KiB; the worker hands it an array (one memcpy) instead."""
    monkeypatch.setenv("TINYHW_USB_QUEUE", "worker")
    data = os.urandom(1 << 20)
    with rig(tmp_path, clock="hybrid") as r:
        r.copier._prime()
        acc = r.t.clock.track()
        r.copier.copy_in(0x8000000, data, "tinyhw")
        assert r.copier.stats["queue"] == "worker"
        bulk = r.copier.stats["bulk_out"]
        assert acc["tinyhw-usb-bulk-worker"]["cpu"] < bulk * 0.002  # a host thread: charged, but no 10 ms each
        assert r.copier.copy_out(0x8000000, len(data)) == data
