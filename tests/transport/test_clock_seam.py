"""The core clock stays ``now``/``sleep`` (plus the one hand-over a driver's worker thread needs), the virtual-time
machinery (per-thread lanes, the gate, the hybrid mode) is the emulator's (tinyhw/mocks/common/vclock.py), and the
queued
bulk seam asks backends for one documented interface instead of probing pyusb's internals (ARCHITECTURE.md,
"Emulated boards": virtual time for threads is the emulator's business)."""

from __future__ import annotations

import ast
import threading
from pathlib import Path
from types import SimpleNamespace

import usb.backend.libusb1

import tinyhw
import tinyhw.transport.clock as core
from tinyhw.boards.navi31 import NAVI31, Navi31UsbOptions
from tinyhw.mocks.bridge.pyusb_backend import make_backend
from tinyhw.mocks.common.vclock import Phase, VirtualClock
from tinyhw.transport.abilities import QueuedBulk
from tinyhw.usb.libusb_async import LibusbAsync
from tinyhw.usb.queued import queue_kind, queued_bulk

ROOT = Path(tinyhw.__file__).parent
#: the emulator's side of the virtual clock: what nothing outside tinyhw/mocks may touch
EMULATOR_ONLY = {"gate", "service", "hybrid_ok", "set_mode", "track", "accounts", "lanes", "charge_cpu", "cpu_line"}


def _public(cls: type) -> set[str]:
    return {n for c in cls.__mro__ if c is not object for n in vars(c) if not n.startswith("_")}


def test_the_core_clock_is_now_and_sleep_and_the_handover():
    assert _public(core.Clock) == {"now", "sleep", "virtual", "handover"}
    assert _public(core.WallClock) == _public(core.Clock)
    # the hand-over: a lock (``with``), two thread registrations, one condition and one time hand-over
    assert _public(core.Handover) == {"enlist", "delist", "wait_until", "notify", "catch_up"}
    assert not hasattr(core, "VirtualClock")  # the virtual clock is the emulator's (tinyhw.mocks.common.vclock)


def test_the_wall_clock_hands_over_with_a_plain_condition_and_no_time():
    clock = core.WallClock()
    h = clock.handover()
    worker = threading.Thread(target=lambda: None)
    h.enlist(worker)
    t0 = clock.now()
    h.catch_up(t0 + 3600.0)  # real time cannot be moved
    assert clock.now() - t0 < 60.0
    box: list[int] = []

    def produce() -> None:
        with h:
            box.append(1)
            h.notify()

    with h:
        threading.Thread(target=produce).start()
        h.wait_until(lambda: bool(box))
    h.delist(worker)
    h.delist()
    assert box == [1]


def test_the_virtual_clocks_thread_states_are_typed():
    clock = VirtualClock()
    worker = threading.Thread(target=lambda: None)
    clock.handover().enlist(worker)
    lanes = clock.threads.lanes
    assert {lane.phase for lane in lanes.values()} == {Phase.RUN}
    assert lanes[worker].cursor == 0.0 and lanes[threading.current_thread()].cursor is None
    clock.handover().delist(worker)
    clock.handover().delist()
    assert not lanes


def _attributes_and_imports(path: Path) -> tuple[set[str], set[str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    attrs = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    mods = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    mods |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    return attrs, mods


def test_no_module_outside_mocks_touches_the_gate():
    offenders = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        if rel.parts[0] in ("mocks", "autogen"):
            continue
        attrs, mods = _attributes_and_imports(path)
        touched = attrs & EMULATOR_ONLY
        if touched or "tinyhw.mocks.common.vclock" in mods:
            offenders.append(f"{rel}: {sorted(touched) or 'imports tinyhw.mocks.common.vclock'}")
    assert not offenders


def test_only_the_libusb_adapter_reads_pyusb_internals():
    """pyusb's private resource manager (``Device._ctx``) and backend class are read in one place."""
    readers = []
    for path in sorted(ROOT.rglob("*.py")):
        attrs, _ = _attributes_and_imports(path)
        if attrs & {"_ctx", "_LibUSB", "_ResourceManager", "managed_open"}:
            readers.append(str(path.relative_to(ROOT)))
    assert readers == ["usb/libusb_async.py"]


def test_both_backends_offer_the_one_queued_bulk_interface(tmp_path):
    from tinyhw.mocks.amd.board import Navi31Board

    options = Navi31UsbOptions(flash=tmp_path / "f.bin", strict=True)
    board = Navi31Board(options, attach="usb", spec=NAVI31)
    try:
        emulated = make_backend(board, options, board.clock)
        assert isinstance(emulated, QueuedBulk) and emulated.queue_kind == "emulated"
        # the seam reads only pyusb's public Device.backend (no _ctx here)
        assert queued_bulk(SimpleNamespace(backend=emulated)) is emulated
    finally:
        board.close()
    real = usb.backend.libusb1.get_backend()
    if real is not None:  # libusb-1.0 is installed here
        adapter = LibusbAsync.adapt(real)
        assert isinstance(adapter, QueuedBulk) and adapter.queue_kind == "libusb-async"
    # a libusb-1.0 backend without the internals the adapter relies on (another pyusb): the worker fallback
    class Bare(usb.backend.libusb1._LibUSB):
        def __init__(self) -> None:  # no lib, no ctx
            pass

        def __del__(self) -> None:  # nothing to finalize
            pass

    bare = Bare()
    assert LibusbAsync.adapt(bare) is None
    assert queue_kind(SimpleNamespace(backend=bare)) == "worker"
