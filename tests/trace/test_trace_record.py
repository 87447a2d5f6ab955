"""Recording sessions (``--record FILE``, ``tinyhw.open(record=)``) and replaying them on a fresh emulated board.

The record is the seam's every operation; a replay of an emulated ``am boot`` on a fresh board must see every read
come back as recorded, and one recorded read value changed must be reported exactly (record, mark, expected,
actual, register). A recording cut by SIGKILL or a full disk stays readable; output paths are checked first.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import struct
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest
from amfake import FW_DIR
from clihelp import run
from testpaths import ROOT

import tinyhw
from tinyhw.errors import Refused
from tinyhw.formats import tracefile as tf
from tinyhw.trace import load, replay
from tinyhw.transport import record as rec_mod
from tinyhw.transport.abilities import TRANSPORT_ABILITIES, BridgeSram, DmaBuffers, TransferTap, ability_methods
from tinyhw.transport.base import Transport, require
from tinyhw.transport.batch import R32, W32, Batching, CfgW, run_ops

SCRATCH = 0x30118  # gc.SCRATCH_REG6 on navi31 (a plain register of the model)


def _boot(tmp: Path, name: str, device: str = "mock:navi31", *extra: str) -> Path:
    out = tmp / f"{name}.pcapng"
    r = run("--device", f"{device},strict,flash={tmp / name}.bin", "--record", str(out), "am", "boot", "--yes",
            "--firmware-dir", str(FW_DIR), *extra)
    assert r.code == 0, r.err
    return out


@pytest.fixture(scope="module")
def boot_direct(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("boot")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TINYHW_LOCK_DIR", str(tmp / "locks"))
        mp.setenv("XDG_CACHE_HOME", str(tmp / "cache"))
        return _boot(tmp, "direct")


def test_a_recorded_boot_has_the_header_the_accesses_and_the_boot_steps_as_marks(boot_direct: Path) -> None:
    trace = load(boot_direct)
    h = trace.header
    assert h["format"] == "tinyhw-trace" and h["version"] == 1 and h["tinyhw_version"] == tinyhw.__version__
    assert h["identity"]["vendor_id"] == 0x1002 and h["identity"]["device_id"] == 0x744C
    assert {b["index"] for b in h["bars"]} >= {0, 2, 5}
    assert h["command"][:2] == ["tinyhw", "--device"] and h["command"][-5:-3] == ["am", "boot"]
    kinds = Counter(r.name for r in trace.records)
    assert kinds["read32"] > 1000 and kinds["write32"] > 1000 and kinds["bulk_write"] > 10
    starts = [m.text for m in trace.marks() if m.fields["phase"] == "start"]
    assert "boot: psp bootloader SOS" in starts and len(starts) > 10
    assert [r.seq for r in trace.records] == list(range(len(trace.records)))  # no gap: nothing lost
    assert all(r.vtime_ns is not None for r in trace.records)  # emulated board: virtual time on every record
    assert trace.truncated is None


def test_replaying_a_recorded_boot_on_a_fresh_board_has_no_divergence(boot_direct: Path, tmp_path: Path) -> None:
    r = run("--device", f"mock:navi31,strict,flash={tmp_path / 'fresh.bin'}", "--json", "trace", "replay",
            str(boot_direct))
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["divergences"] == 0 and doc["reads_checked"] > 2000 and doc["replayed"] > 5000


def _patch_read(src: Path, dst: Path, index: int, value: int) -> tf.Record:
    data = bytearray(src.read_bytes())
    trace = tf.read_trace(bytes(data))
    target = trace.records[index]
    assert target.op == tf.READ32
    at = target.at + 8 + 20 + tf.HEAD.size + 8  # block head, EPB fields, record head, the offset field
    struct.pack_into("<I", data, at, value)
    dst.write_bytes(bytes(data))
    return target


def test_a_changed_recorded_read_is_reported_exactly(boot_direct: Path, tmp_path: Path) -> None:
    trace = load(boot_direct)
    # a read inside a boot step, of a register the database names
    from tinyhw.trace.decode import Decoder, mark_of, mark_path

    dec = Decoder(trace.header)
    inside = [r for path, r in mark_path(trace) if path and r.op == tf.READ32 and dec.register(r) is not None]
    index = inside[len(inside) // 2].index
    original = trace.records[index]
    changed = tmp_path / "changed.pcapng"
    _patch_read(boot_direct, changed, index, original.fields["value"] ^ 0x1)
    r = run("--device", f"mock:navi31,strict,flash={tmp_path / 'fresh.bin'}", "--json", "trace", "replay",
            str(changed))
    assert r.code == 1, r.err
    doc = json.loads(r.out)
    d = doc["divergence"]
    assert d["access"]["index"] == index and d["access"]["offset"] == original.fields["offset"]
    assert d["expected"] == original.fields["value"] ^ 0x1 and d["actual"] == original.fields["value"]
    assert d["mark"] == mark_of(trace, index) and d["mark"].startswith("boot: ")
    assert d["register"] == dec.register(original).name
    human = run("--device", f"mock:navi31,strict,flash={tmp_path / 'fresh2.bin'}", "trace", "replay", str(changed))
    assert human.code == 1
    assert f"divergence at record {index}" in human.out and d["register"] in human.out
    assert f"0x{original.fields['value']:08x}" in human.out


def test_tolerated_registers_are_read_but_not_compared(boot_direct: Path, tmp_path: Path) -> None:
    trace = load(boot_direct)
    from tinyhw.trace.decode import Decoder

    dec = Decoder(trace.header)
    index = next(r.index for r in trace.records if r.op == tf.READ32 and dec.register(r) is not None)
    name = dec.register(trace.records[index]).name
    changed = tmp_path / "changed.pcapng"
    _patch_read(boot_direct, changed, index, trace.records[index].fields["value"] ^ 0x80000000)
    r = run("--device", f"mock:navi31,strict,flash={tmp_path / 'fresh.bin'}", "--json", "trace", "replay",
            str(changed), "--tolerate", name)
    assert r.code == 0, r.err
    assert json.loads(r.out)["tolerated"] >= 1


def test_replay_refuses_another_kind_of_device_before_touching_it(boot_direct: Path) -> None:
    r = run("--device", "mock:ad102", "trace", "replay", str(boot_direct))
    assert r.code == 2 and "1002:744c" in r.err


def test_a_boot_over_the_usb_bridge_records_the_vendor_requests_and_replays(tmp_path: Path) -> None:
    # the firmware through the bridge controller: staging it in the bridge's sram (the default) is an ability call
    # a replay cannot issue (the next test)
    path = _boot(tmp_path, "usb", "mock:navi31-usb", "--firmware-path", "bar")
    trace = load(path)
    kinds = Counter(r.name for r in trace.records)
    assert kinds["usb_control"] > 100 and kinds["usb_bulk"] > 10
    ctrl = next(r for r in trace.records if r.op == tf.USB_CONTROL)
    assert ctrl.fields["request_type"] in (0x40, 0xC0)
    with tinyhw.open(f"mock:navi31-usb,strict,flash={tmp_path / 'fresh.bin'}") as dev:
        result = replay.replay(trace, dev.transport)
    assert result.divergence is None and result.reads_checked > 100


def test_a_usb_boot_that_staged_firmware_in_the_bridge_sram_is_refused_by_replay_saying_how_to_record(
        tmp_path: Path) -> None:
    path = _boot(tmp_path, "usb-sram", "mock:navi31-usb")
    fresh = f"mock:navi31-usb,strict,flash={tmp_path / 'fresh.bin'}"
    with tinyhw.open(fresh) as dev, pytest.raises(Refused) as e:
        replay.replay(load(path), dev.transport)
    assert "write_sram" in str(e.value) and "--firmware-path bar" in (e.value.hint or "")


def test_the_recording_keeps_the_wrapped_transports_abilities(tmp_path: Path) -> None:
    with tinyhw.open(f"mock:navi31-usb,flash={tmp_path / 'u.bin'}", record=tmp_path / "u.pcapng") as dev:
        t = dev.transport
        assert isinstance(t, rec_mod.RecordingTransport) and isinstance(t, BridgeSram)
        assert not isinstance(t, DmaBuffers)
        require(t, BridgeSram, "copy")
        t.read_xdata(0xA800, 1)
    trace = load(tmp_path / "u.pcapng")
    calls = [r for r in trace.records if r.op == tf.ABILITY]
    assert calls and calls[0].fields["call"] == "read_xdata"
    with tinyhw.open(f"mock:navi31,flash={tmp_path / 'd.bin'}", record=tmp_path / "d.pcapng") as dev:
        assert isinstance(dev.transport, DmaBuffers) and not isinstance(dev.transport, BridgeSram)
        assert not isinstance(dev.transport.inner, TransferTap)


def _fake_with(ability: type, opened: list) -> Transport:
    """The emulated board's transport seen through a stand-in that has exactly ``ability`` (its methods answer a
    marker), to check what a recording passes on."""
    from tinyhw.connect import open_device
    from tinyhw.transport.devstr import parse_device

    methods = {m: (lambda self, *a, _m=m, **k: f"answer of {_m}") for m in ability_methods(ability)}
    cls = type(f"With{ability.__name__}", (FakeBatching,), methods)
    if ability is not Batching:  # FakeBatching batches; another ability's stand-in must not
        cls.submit = None
        cls.__abstractmethods__ = frozenset()
    opened.append(open_device(parse_device("mock:navi31-usb")))
    return cls(opened[-1].transport)


@pytest.mark.parametrize("ability", [a for a in TRANSPORT_ABILITIES if a is not TransferTap],
                         ids=lambda a: a.__name__)
def test_every_ability_of_the_wrapped_transport_survives_recording(ability: type, tmp_path: Path) -> None:
    """Every ability in the one list of them (:data:`TRANSPORT_ABILITIES`) that the wrapped transport has, the
    recording has too, and its calls reach the wrapped transport; TransferTap is the recording's own use of it."""
    opened: list = []
    inner = _fake_with(ability, opened)
    assert isinstance(inner, ability)
    t = rec_mod.recording(inner, tmp_path / "a.pcapng")
    try:
        assert isinstance(t, ability), ability.__name__
        if ability is not Batching:
            first = ability_methods(ability)[0]
            assert getattr(t, first)() == f"answer of {first}"
    finally:
        t.writer.close()
        opened[0].close()
    others = [a for a in TRANSPORT_ABILITIES if a not in (ability, Batching, TransferTap)]
    assert not any(isinstance(t, a) for a in others)


def test_an_ability_added_to_the_list_is_passed_on_with_no_edit_of_the_recording(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A new ability (a protocol added to :mod:`tinyhw.transport.abilities` and to its one list) is passed on by a
    recording as it is: the recording reads the list, it keeps none of its own."""
    from typing import Protocol, runtime_checkable

    from tinyhw.transport import abilities

    @runtime_checkable
    class Dimming(Protocol):
        def dim(self, level: int) -> int:
            """Dim the board's lights to ``level``."""

    monkeypatch.setattr(abilities, "Dimming", Dimming, raising=False)
    monkeypatch.setattr(abilities, "TRANSPORT_ABILITIES", (*abilities.TRANSPORT_ABILITIES, Dimming))
    opened: list = []
    inner = _fake_with(Dimming, opened)
    t = rec_mod.recording(inner, tmp_path / "n.pcapng")
    try:
        assert isinstance(t, Dimming)
        assert require(t, Dimming, "dim").dim(3) == "answer of dim"
    finally:
        t.writer.close()
        opened[0].close()
    calls = [r for r in load(tmp_path / "n.pcapng").records if r.op == tf.ABILITY]
    assert [(c.fields["call"], c.fields["args"]) for c in calls] == [("dim", [3])]


def test_the_list_of_abilities_names_every_ability_of_the_module() -> None:
    """Every runtime-checkable protocol of :mod:`tinyhw.transport.abilities` is in its one list (or is a pyusb
    backend's, not a transport's), so a new ability cannot be forgotten by a wrapper."""
    from tinyhw.transport import abilities

    protocols = {v for v in vars(abilities).values()
                 if isinstance(v, type) and getattr(v, "_is_runtime_protocol", False)}
    assert protocols - {abilities.QueuedBulk} == set(TRANSPORT_ABILITIES)


def test_a_recording_over_remote_keeps_its_batch_timing(tmp_path: Path) -> None:
    from remotehelp import served

    from tinyhw.transport.batch import BatchTimes

    with served(f"mock:navi31,flash={tmp_path / 'f.bin'}") as s, \
            tinyhw.open(s.device(), record=tmp_path / "r.pcapng") as dev:
        t = dev.transport
        assert isinstance(t.inner, BatchTimes) and isinstance(t, BatchTimes)
        t.submit([R32(0, SCRATCH)]).get()
        timed = t.batch_time()
        assert timed is not None and timed[1] == 0 and timed[2] is True


class FakeBatching(Transport):
    """A Batching transport over the emulated board: queued operations run only when a ticket is collected or a
    read sends them (the remote client's contract), so the recording must keep them in the device's order."""

    name = "fake-batch"

    def __init__(self, inner: Transport) -> None:
        super().__init__(inner.clock)
        self.inner = inner
        self.queue: list[tuple[list, SimpleNamespace]] = []

    def send(self) -> None:
        queue, self.queue = self.queue, []
        for ops, ticket in queue:
            ticket.results = run_ops(self.inner, ops)

    def submit(self, ops):
        ticket = SimpleNamespace(results=None)
        ticket.get = lambda: (self.send(), ticket.results)[1]
        self.queue.append((list(ops), ticket))
        return ticket

    def config_read(self, offset, size=4):
        self.send()
        return self.inner.config_read(offset, size)

    def config_write(self, offset, size, value):
        self.submit([CfgW(offset, size, value)])

    def bars(self):
        return self.inner.bars()

    def _make_region(self, info):
        return self.inner.bar(info.index)

    def identity(self):
        return self.inner.identity()


def test_batched_accesses_are_recorded_in_the_order_the_device_ran_them(tmp_path: Path) -> None:
    with tinyhw.open(f"mock:navi31,flash={tmp_path / 'd.bin'}") as dev:
        fake = FakeBatching(dev.transport)
        rec = rec_mod.recording(fake, tmp_path / "b.pcapng", command=["test"])
        assert isinstance(rec, Batching)
        t1 = rec.submit([W32(5, SCRATCH, 0x11), R32(5, SCRATCH)])
        rec.config_write(0x4, 2, 0x6)  # queued after the batch
        t2 = rec.submit([W32(5, SCRATCH, 0x22)])
        assert t2.get() == [] and t1.get() == [0x11]
        command = rec.config_read(0x4, 2)
        rec.writer.close()
    got = [(r.name, r.fields.get("offset"), r.fields.get("value")) for r in load(tmp_path / "b.pcapng").records]
    assert got == [("write32", SCRATCH, 0x11), ("read32", SCRATCH, 0x11), ("cfg_write", 0x4, 0x6),
                   ("write32", SCRATCH, 0x22), ("cfg_read", 0x4, command)]


def test_flash_phases_are_marks(tmp_path: Path) -> None:
    out = tmp_path / "dump.pcapng"
    r = run("--device", f"mock:navi31-usb,strict,flash={tmp_path / 'f.bin'}", "--record", str(out), "flash", "dump",
            str(tmp_path / "dump.bin"))
    assert r.code == 0, r.err
    marks = [(m.text, m.fields["phase"]) for m in load(out).marks()]
    assert ("dump", "start") in marks and ("dump", "done") in marks


# -- crash safety ---------------------------------------------------------------------------------------------------
CHILD = textwrap.dedent("""
    import sys, tinyhw
    from tinyhw import progress
    with tinyhw.open(sys.argv[1], record=sys.argv[2], flush_each=True) as dev:
        bar = dev.transport.bar(5)
        n = 0
        while True:
            progress.step(f"loop {n}")
            for _ in range(50):
                bar.read32(0x30118)
            n += 1
            if n == 20:
                print("ready", flush=True)
""")


def test_a_recording_killed_by_sigkill_reads_up_to_its_last_complete_record(tmp_path: Path) -> None:
    out = tmp_path / "killed.pcapng"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen([sys.executable, "-c", CHILD, f"mock:navi31,flash={tmp_path / 'k.bin'}", str(out)],
                         stdout=subprocess.PIPE, env=env, cwd=tmp_path)
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == b"ready"
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)
    assert p.returncode == -signal.SIGKILL
    trace = load(out)
    assert len(trace.records) >= 20 * 51
    assert [r.seq for r in trace.records] == list(range(len(trace.records)))


def test_a_file_cut_at_any_byte_reads_up_to_its_last_complete_record(boot_direct: Path) -> None:
    data = boot_direct.read_bytes()[:200_000]
    full = tf.read_trace(data)  # itself cut inside a block
    ends = {r.seq: r.at + struct.unpack_from("<I", data, r.at + 4)[0] for r in full.records}
    for cut in (ends[3], ends[3] + 1, ends[10] - 3, ends[40] + 7, len(data) - 1):
        got = tf.read_trace(data[:cut])
        assert [r.seq for r in got.records] == [s for s, end in ends.items() if end <= cut]
        assert (got.truncated is None) == (cut in ends.values())
    with pytest.raises(tf.TraceError, match="cut inside"):
        tf.read_trace(data[:ends[3] + 1], strict=True)


def test_a_full_disk_stops_the_recording_not_the_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_write = os.write
    budget = {"left": 20_000}

    def write(fd: int, data) -> int:
        if fd == writer_fd["fd"]:
            if budget["left"] <= 0:
                raise OSError(errno.ENOSPC, "No space left on device")
            n = min(len(data), budget["left"])
            budget["left"] -= n
            return real_write(fd, bytes(data[:n]))
        return real_write(fd, data)

    writer_fd: dict[str, int] = {"fd": -1}
    with tinyhw.open(f"mock:navi31,flash={tmp_path / 'd.bin'}", record=tmp_path / "full.pcapng") as dev:
        writer_fd["fd"] = dev.transport.writer._fd
        monkeypatch.setattr(rec_mod.os, "write", write)
        for _ in range(5000):
            dev.transport.bar(5).read32(SCRATCH)
        note = rec_mod.finish_note(dev.transport)
    monkeypatch.setattr(rec_mod.os, "write", real_write)
    assert note is not None and "no space left" in note and "not written" in note
    trace = load(tmp_path / "full.pcapng")
    assert 100 < len(trace.records) < 5000 and trace.truncated is not None


# -- output paths -----------------------------------------------------------------------------------------------------
def test_record_refuses_an_existing_file_a_fifo_and_a_device_node_before_opening_the_device(tmp_path: Path) -> None:
    existing = tmp_path / "exists.pcapng"
    existing.write_bytes(b"keep")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for target in (existing, fifo, Path("/dev/null"), tmp_path):
        flash = tmp_path / f"never-{target.name or 'dir'}.bin"
        r = run("--device", f"mock:navi31,flash={flash}", "--record", str(target), "probe")
        assert r.code == 2, (target, r.err)
        assert not flash.exists()  # refused before the board was opened
    assert existing.read_bytes() == b"keep" and fifo.is_fifo()


def test_record_through_a_symlink_writes_its_target_and_keeps_the_link(tmp_path: Path) -> None:
    link = tmp_path / "link.pcapng"
    link.symlink_to(tmp_path / "target.pcapng")
    r = run("--device", f"mock:navi31,flash={tmp_path / 'f.bin'}", "--record", str(link), "probe")
    assert r.code == 0, r.err
    assert link.is_symlink() and load(tmp_path / "target.pcapng").records


def test_record_with_a_command_that_opens_no_device_is_refused(tmp_path: Path) -> None:
    r = run("--record", str(tmp_path / "x.pcapng"), "trace", "show", str(tmp_path / "none.pcapng"))
    assert r.code == 2 and "--record" in r.err


def test_a_flash_read_over_remote_records_its_batches_and_replays_locally(tmp_path: Path) -> None:
    from flashhelp import dev as mockdev
    from remotehelp import served

    out = tmp_path / "remote.pcapng"
    with served(mockdev(tmp_path)) as s:
        r = run("--device", s.device(), "--record", str(out), "flash", "read", "0", "16384", "-o",
                str(tmp_path / "r.bin"))
        assert r.code == 0, r.err
    trace = load(out)
    kinds = Counter(x.name for x in trace.records)
    assert kinds["poll"] > 0 and kinds["bulk_read"] > 0 and trace.header["transport"] == "remote"
    assert [x.seq for x in trace.records] == list(range(len(trace.records)))
    with tinyhw.open(f"mock:navi31,strict,flash={tmp_path / 'fresh.bin'}") as dev:
        result = replay.replay(trace, dev.transport)
    assert result.divergence is None and result.reads_checked > 10


def test_a_hardware_recording_is_paced_on_its_wall_time_on_an_emulated_board(tmp_path: Path) -> None:
    # a recording with no virtual time (as made on hardware): two reads 50 ms apart on its wall clock
    header = {"identity": {"vendor_id": 0x1002, "device_id": 0x744C}, "bars": []}
    blob = tf.file_start(header) + b"".join(
        tf.packet(tf.READ32, i, 1_000_000_000 + i * 50_000_000, None, 5, 4, (SCRATCH, 0)) for i in range(2))
    trace = tf.read_trace(blob)
    with tinyhw.open(f"mock:navi31,strict,flash={tmp_path / 'f.bin'}") as dev:
        t0 = dev.transport.clock.now()
        result = replay.replay(trace, dev.transport)
        elapsed = dev.transport.clock.now() - t0
    assert result.reads_checked == 2 and result.divergence is None
    assert 0.05 <= elapsed < 0.06


def test_replaying_a_cut_recording_says_it_replayed_only_a_part(boot_direct: Path, tmp_path: Path) -> None:
    """A recording cut short (a killed command) replays up to its last complete record; replay must say so,
    in text and in --json, instead of a bare "no divergence"."""
    cut = tmp_path / "cut.pcapng"
    cut.write_bytes(boot_direct.read_bytes()[:200_000])
    dev = f"mock:navi31,strict,flash={tmp_path / 'fresh.bin'}"
    r = run("--device", dev, "trace", "replay", str(cut))
    assert r.code == 0, r.err
    assert "cut short" in r.err
    r = run("--device", f"mock:navi31,strict,flash={tmp_path / 'fresh2.bin'}", "--json", "trace", "replay", str(cut))
    doc = json.loads(r.out)
    assert doc["truncated"] and "cut inside" in doc["truncated"]
    full = run("--device", f"mock:navi31,strict,flash={tmp_path / 'fresh3.bin'}", "--json", "trace", "replay",
               str(boot_direct))
    assert json.loads(full.out)["truncated"] is None


def test_a_refused_record_file_is_one_line_naming_the_option_that_replaces_it(tmp_path: Path) -> None:
    """Refusing --record FILE is one error line: an existing file names --force-record (which exists), a directory
    no option at all; no "opened no device" note (the device was not opened because of the refusal), no click
    usage text for a directory."""
    existing = tmp_path / "exists.pcapng"
    existing.write_bytes(b"keep")
    for target in (existing, tmp_path):
        r = run("--device", f"mock:navi31,flash={tmp_path / 'f.bin'}", "--record", str(target), "probe")
        assert r.code == 2, (target, r.err)
        lines = r.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), r.err
        assert ("--force-record replaces it" in r.err) == (target == existing), r.err
    assert existing.read_bytes() == b"keep"
    r = run("--device", f"mock:navi31,flash={tmp_path / 'f.bin'}", "--record", str(existing), "--force-record", "probe")
    assert r.code == 0 and load(existing).records
    r = run("--device", f"mock:navi31,flash={tmp_path / 'f.bin'}", "--force-record", "--record", str(tmp_path), "probe")
    assert r.code == 2 and "--force" not in r.err  # --force-record replaces a regular file only


@pytest.mark.slow
def test_a_command_refused_after_the_device_opened_leaves_no_recording_and_the_retry_runs(tmp_path: Path) -> None:
    """flash write without --yes opens the board to show its plan, then is refused (exit 2): the recording it
    started is removed (saying so), so the same command line with --yes is not blocked by it."""
    flash = tmp_path / "f.bin"
    out = tmp_path / "w.pcapng"
    image = tmp_path / "img.bin"
    assert run("--device", f"mock:navi31,flash={flash}", "flash", "dump", str(image)).code == 0
    args = ["--device", f"mock:navi31,flash={flash}", "--record", str(out), "flash", "write", str(image),
            "--backup", str(tmp_path / "b.bin")]
    r = run(*args)
    assert r.code == 2 and "needs --yes" in r.err, r.err
    assert not out.exists() and f"its recording {out} was removed" in r.err
    r = run(*args, "--yes")
    assert r.code == 0, r.err
    assert load(out).records
    # a failed command (exit 1) keeps its recording: that session is what one wants to look at
    other = tmp_path / "other.bin"
    other.write_bytes(bytes(2 << 20))
    failed = tmp_path / "v.pcapng"
    r = run("--device", f"mock:navi31,flash={flash}", "--record", str(failed), "flash", "verify", str(other),
            "--sector-count", "1")
    assert r.code == 1 and load(failed).records


def test_an_unknown_tolerated_register_is_refused_before_the_board_is_opened(boot_direct: Path, tmp_path: Path) -> None:
    """``--tolerate`` names are checked against the recording's register database before the device is opened
    (exit 2, the emulated board's flash file never created)."""
    flash = tmp_path / "never.bin"
    r = run("--device", f"mock:navi31,strict,flash={flash}", "trace", "replay", str(boot_direct),
            "--tolerate", "nope.NOPE")
    assert r.code == 2 and "no register block 'nope'" in r.err, r.err
    assert not flash.exists()
