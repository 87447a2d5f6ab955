"""``tinyhw bench copy`` on the emulated boards: verified copies, modelled time, the link limit (issue 12)."""

from __future__ import annotations

import json

import pytest
from clihelp import run

import tinyhw
from tinyhw.bench import copy_bench, link_limit, parse_sizes
from tinyhw.bench.copy import PCIE_LANE_MBPS, USB_LINK_MBPS
from tinyhw.errors import Refused

KEYS = {"direction", "size", "repeat", "mbps_min", "mbps_median", "mbps_max", "verified", "link_limit_mbps",
        "fraction_of_limit", "modelled"}


@pytest.mark.parametrize("board", ["navi31", "navi31-usb"])
def test_json_results_are_verified_and_labelled_modelled(board: str) -> None:
    r = run("--device", f"mock:{board}", "--json", "bench", "copy", "--sizes", "4K,12", "--repeat", "2")
    assert r.code == 0, r.err
    rows = json.loads(r.out)["results"]
    assert [(x["direction"], x["size"]) for x in rows] == [("h2d", 4096), ("d2h", 4096), ("h2d", 12), ("d2h", 12)]
    for x in rows:
        assert set(x) >= KEYS
        assert x["modelled"] is True and x["repeat"] == 2
        assert x["verified"] == 2 * x["size"]
        assert 0 < x["mbps_min"] <= x["mbps_median"] <= x["mbps_max"]
        assert x["fraction_of_limit"] == pytest.approx(x["mbps_median"] / x["link_limit_mbps"], rel=1e-2)


def test_usb_figures_follow_the_spec_streamed_rates() -> None:
    """Streamed BAR writes ~3.6 MB/s and reads ~1.8 MB/s (specs/asm24-usb-bridge.md §1); the emulated bridge sits on a
    10 Gbps port (superspeed-plus), the link the spec's figures were measured on."""
    with tinyhw.open("mock:navi31-usb") as dev:
        res = {r.direction: r.as_dict() for r in copy_bench(dev.transport, [65536], repeat=1)}
    assert 3.0 < res["h2d"]["mbps_median"] < 4.0
    assert 1.5 < res["d2h"]["mbps_median"] < 2.0
    assert res["h2d"]["link_limit_mbps"] == pytest.approx(USB_LINK_MBPS["superspeed-plus"], rel=1e-3)


def test_direct_board_limit_is_its_pcie_link() -> None:
    with tinyhw.open("mock:navi31") as dev:
        limit, how = link_limit(dev.transport)
    assert how == "pcie 16GT/s x16" and limit == pytest.approx(PCIE_LANE_MBPS[4] * 16)


def test_direct_board_times_a_bar_copy_as_a_memcpy_over_its_link() -> None:
    """mock:navi31: write-combined bursts stream at the link's rate less 64-byte TLP overhead; uncached reads
    are 32-byte round trips of 1 us (tinyhw.mocks.amd.direct.burst_seconds) -- not a loop of register accesses."""
    r = run("--device", "mock:navi31", "--json", "bench", "copy", "--sizes", "1M", "--repeat", "1")
    assert r.code == 0, r.err
    res = {x["direction"]: x for x in json.loads(r.out)["results"]}
    assert all(x["modelled"] for x in res.values())
    limit = PCIE_LANE_MBPS[4] * 16
    size = 1 << 20  # one flush round trip of 1 us per burst
    assert res["h2d"]["mbps_median"] == pytest.approx(size / (1e-6 + size * 88 / 64 / (limit * 1e6)) / 1e6, rel=1e-3)
    assert res["d2h"]["mbps_median"] == pytest.approx(32.0, rel=0.01)


def test_a_size_that_does_not_fit_is_reported_skipped() -> None:
    r = run("--device", "mock:navi31", "--json", "bench", "copy", "--sizes", "4K,256M", "--offset", "4",
            "--repeat", "1")
    # bar0 is 256 MiB: 4K at offset 4 is copied, 256M at offset 4 is not, and its rows say why
    assert r.code == 0, r.err
    rows = {(x["direction"], x["size"]): x for x in json.loads(r.out)["results"]}
    assert all(rows[d, 4096]["verified"] == 4096 and rows[d, 4096]["skipped"] is None for d in ("h2d", "d2h"))
    assert all("does not fit" in rows[d, 256 << 20]["skipped"] and rows[d, 256 << 20]["verified"] == 0
               for d in ("h2d", "d2h"))


@pytest.mark.parametrize("args, message", [
    (("--sizes", "256M", "--offset", "4"), "no size fits in bar0 (0x10000000 bytes) at offset 0x4"),
    (("--bar", "2", "--sizes", "4K", "--offset", "0x10000000"), "offset 0x10000000 is past the end of bar2"),
])
def test_nothing_fits_is_refused_before_any_copy(args: tuple[str, ...], message: str) -> None:
    """Issue 21 item 9: a run of which no row can be copied exits 2 with one line, and touches nothing."""
    r = run("--device", "mock:navi31", "bench", "copy", *args, "--repeat", "1")  # --path auto picks bar here
    assert r.code == 2 and r.out == ""
    (line,) = [x for x in r.err.splitlines() if x.startswith("error: ")]
    assert line.startswith(f"error: nothing to copy: {message}") and ("--offset" in line)
    r = run("--device", "mock:navi31", "--stats", "bench", "copy", *args, "--repeat", "1", "--path", "bar")
    assert r.code == 2 and r.stats["reg_writes"] == 0 and r.stats["bytes_out"] == 0  # not one access


def test_256m_copies_on_the_direct_board() -> None:
    """Issue 21 item 9: 256 MiB (in the default size list for real boards) no longer overflows the pattern
    generator; it fills bar0 of mock:navi31 exactly."""
    r = run("--device", "mock:navi31", "--json", "bench", "copy", "--sizes", "256M", "--repeat", "1",
            "--direction", "h2d")
    assert r.code == 0, r.err
    (row,) = json.loads(r.out)["results"]
    assert row["verified"] == 256 << 20 and row["skipped"] is None


def test_pattern_is_one_stream_and_sizes_are_bounded() -> None:
    from tinyhw.bench.copy import MAX_SIZE, PATTERN_BLOCK, _pattern

    big = _pattern(PATTERN_BLOCK + 8, 7)
    assert big[:PATTERN_BLOCK] == _pattern(PATTERN_BLOCK, 7)  # the same stream, drawn in blocks
    assert big[PATTERN_BLOCK:] != big[:8]  # the second block does not repeat the first
    with pytest.raises(Refused, match="larger than the 1 GiB"):
        parse_sizes("2G")
    assert parse_sizes("1G") == [MAX_SIZE]
    r = run("--device", "mock:navi31", "bench", "copy", "--sizes", "4K,2G")
    assert r.code == 2 and "1 GiB" in r.err


def test_a_disconnect_mid_copy_is_a_clear_error_and_the_next_command_works() -> None:
    r = run("--device", "mock:navi31,faults=disconnect@600", "bench", "copy", "--sizes", "4K", "--repeat", "1")
    assert r.code == 1 and "went away" in r.err and r.err.splitlines()[-1].startswith("error: ")
    assert run("--device", "mock:navi31", "bench", "copy", "--sizes", "4K", "--repeat", "1").code == 0


def test_human_output_has_table_and_chart() -> None:
    r = run("--device", "mock:navi31", "bench", "copy", "--sizes", "4K", "--repeat", "1")
    assert r.code == 0 and "modelled" in r.out and "median MB/s by size" in r.out and "#" in r.out


@pytest.mark.parametrize("text, message", [("0", "not a positive size"), ("4K,x", "not a positive size"),
                                           ("6", "multiple of 4"), ("", "not a positive size")])
def test_bad_sizes_are_refused(text: str, message: str) -> None:
    with pytest.raises(Refused, match=message):
        parse_sizes(text)
    r = run("--device", "mock:navi31", "bench", "copy", "--sizes", text or ",")
    assert r.code == 2


def test_sizes_parse_binary_suffixes() -> None:
    assert parse_sizes("4K,64K,1M,16M,256M,1G") == [4096, 65536, 1 << 20, 16 << 20, 256 << 20, 1 << 30]


def test_sram_path_needs_a_booted_board_and_the_usb_bridge() -> None:
    r = run("--device", "mock:navi31-usb", "bench", "copy", "--path", "sram", "--sizes", "4K")
    assert r.code == 2 and "am boot" in r.err
    r = run("--device", "mock:navi31", "bench", "copy", "--path", "sram", "--sizes", "4K")
    assert r.code == 2 and "usb bridge" in r.err


@pytest.mark.parametrize("protocol", ["tinyhw", "seed"])
def test_sram_path_after_am_boot_copies_verified_with_the_pipelined_model(protocol: str) -> None:
    """Issue 12: h2d through the bridge SRAM + SDMA copy-in, d2h through SDMA + SRAM copy-out, both verified;
    sizes that are not multiples of 512 or 4 are refused by the bench (dwords), so 1 MiB + 4 is the odd one."""
    from amfake import FW_DIR

    if not (FW_DIR / "psp_13_0_0_sos.bin").is_file():
        pytest.fail(f"firmware not extracted in {FW_DIR}: run bash tests/setup-system.sh", pytrace=False)
    assert run("--device", "mock:navi31-usb", "am", "boot", "--yes", "--firmware-dir", str(FW_DIR)).code == 0
    r = run("--device", "mock:navi31-usb", "--json", "bench", "copy", "--path", "sram", "--protocol", protocol,
            "--sizes", "256K,1028", "--repeat", "1")
    assert r.code == 0, r.err
    rows = json.loads(r.out)["results"]
    assert [(x["direction"], x["size"]) for x in rows] == [("h2d", 262144), ("d2h", 262144), ("h2d", 1028),
                                                           ("d2h", 1028)]
    for x in rows:
        assert x["verified"] == x["size"] and x["modelled"] is True and x["skipped"] is None
        assert x["path"] == f"bridge sram + sdma ({protocol} copy-in)" and x["model_mbps"] > 0
        assert x["model_host"] == ("async" if x["direction"] == "h2d" else "sync")  # which host the model is of
        assert x["link_limit_mbps"] == pytest.approx(USB_LINK_MBPS["superspeed-plus"], rel=1e-3)
    # the sram path is far faster than the streamed bar path (3.6 MB/s writes) on the same emulated link
    assert rows[0]["mbps_median"] > 50


def test_sram_path_model_column_is_of_the_host_that_ran(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the one-thread fallback forced, copy-in's model figure is the worker host's, not the queued one's."""
    from amfake import FW_DIR

    from tinyhw.boot.amd import usbcopy_model

    if not (FW_DIR / "psp_13_0_0_sos.bin").is_file():
        pytest.fail(f"firmware not extracted in {FW_DIR}: run bash tests/setup-system.sh", pytrace=False)
    assert run("--device", "mock:navi31-usb", "am", "boot", "--yes", "--firmware-dir", str(FW_DIR)).code == 0
    monkeypatch.setenv("TINYHW_USB_QUEUE", "worker")
    r = run("--device", "mock:navi31-usb", "--json", "bench", "copy", "--path", "sram", "--direction", "h2d",
            "--sizes", "1M", "--repeat", "1")
    assert r.code == 0, r.err
    (row,) = json.loads(r.out)["results"]
    assert row["model_host"] == "worker"
    bare = {h: usbcopy_model.copy_in(1 << 20, "tinyhw", host=h, host_costs=False)["mb_s"] for h in ("worker", "async")}
    assert row["model_mbps"] == pytest.approx(bare["worker"], abs=0.1)  # device costs only: no fitted host cost
    assert row["model_mbps"] < bare["async"]


def test_sram_path_from_python_in_one_call() -> None:
    """tinyhw.bench.sram_path(transport): the CLI's sram path and its refusals, without the CLI."""
    from amfake import FW_DIR

    import tinyhw
    from tinyhw.bench import sram_path
    from tinyhw.errors import Refused

    if not (FW_DIR / "psp_13_0_0_sos.bin").is_file():
        pytest.fail(f"firmware not extracted in {FW_DIR}: run bash tests/setup-system.sh", pytrace=False)
    assert run("--device", "mock:navi31-usb", "am", "reset", "--yes").code == 0
    with tinyhw.open("mock:navi31-usb") as dev, pytest.raises(Refused, match="not a gpu tinyhw booted"):
        sram_path(dev.transport)
    assert run("--device", "mock:navi31-usb", "am", "boot", "--yes", "--firmware-dir", str(FW_DIR)).code == 0
    with tinyhw.open("mock:navi31-usb") as dev:
        path = sram_path(dev.transport)
        data = bytes(range(256)) * 16
        path.write(128 << 20, data)
        assert path.read(128 << 20, len(data)) == data
        assert path.label == "bridge sram + sdma (tinyhw copy-in)" and path.model_host("h2d") == "async"


class _WireBytes:
    """A stand-in for the client's wall clock that reads the bytes the remote transport moved so far: a copy's
    "seconds" are then exactly the wire bytes inside its timed region (deterministic, no timed assertion)."""

    virtual = False

    def __init__(self, transport: object) -> None:
        self.t = transport

    def now(self) -> float:
        c = self.t.counters
        return float(c.bytes_out + c.bytes_in)

    def sleep(self, seconds: float) -> None:
        raise AssertionError("the bench does not wait on the client's clock")


def test_remote_copies_time_each_whole_round_trip_on_the_client(tmp_path, monkeypatch) -> None:
    """Over remote: each copy's timed region holds exactly its own batch round trip: the write until its batch was
    answered (not just queued), the read without the untimed pattern fill queued before it."""
    from remotehelp import served

    import tinyhw.bench.copy as copy_mod

    size = 65536
    with served(f"mock:navi31,flash={tmp_path / 'f.bin'},timing=instant") as s, tinyhw.open(s.device()) as dev:
        monkeypatch.setattr(copy_mod, "WallClock", lambda: _WireBytes(dev.transport))
        rows = {r.direction: r for r in copy_bench(dev.transport, [size], repeat=2)}
    for direction, r in rows.items():
        assert r.timer == "client" and r.modelled is False and r.clock == "wall", r
        assert len(r.seconds) == 2
        for wire in r.seconds:  # the copy's payload and its frames' headers, and nothing queued before it
            assert size < wire < size + 1024, (direction, r.seconds)
        # the server timed the same batches on the emulated board's virtual clock (modelled there)
        assert r.server_clock == "virtual" and len(r.server_seconds) == 2 and all(x > 0 for x in r.server_seconds)


def test_the_servers_own_time_needs_every_batch_timed(tmp_path, monkeypatch) -> None:
    """A batch whose results fill a whole reply goes plain (untimed, counted so); an older server (no batch_time in
    its description) gets plain batches only, and the rows no server figure, the client's figure still."""
    from remotehelp import served

    import tinyhw.serve.remote as serve_remote
    from tinyhw.remote import protocol
    from tinyhw.transport.batch import R

    sent: list[bool] = []
    real_batch = serve_remote.RemoteServer._batch

    def spy(self, conn, seq, t, payload, *, timed=False):
        sent.append(timed)
        return real_batch(self, conn, seq, t, payload, timed=timed)

    monkeypatch.setattr(serve_remote.RemoteServer, "_batch", spy)
    real_describe = serve_remote.describe
    half = protocol.MAX_READ_BYTES // 2
    with served(f"mock:navi31,flash={tmp_path / 'f.bin'},timing=instant") as s:
        with tinyhw.open(s.device()) as dev:
            t = dev.transport
            seconds, untimed, virtual = t.batch_time()
            assert (untimed, virtual) == (0, True)
            assert [len(x) for x in t.submit([R(0, 0, half), R(0, half, half)]).get()] == [half, half]
            assert t.batch_time()[1] == 1 and sent[-1] is False
            t.bar(0).read32(0)
            assert t.batch_time()[1] == 1 and t.batch_time()[0] > seconds and sent[-1] is True
        monkeypatch.setattr(serve_remote, "describe", lambda t: {**real_describe(t), "abilities": []})
        sent.clear()
        with tinyhw.open(s.device()) as dev:
            assert dev.transport.batch_time() is None
            old = [r.as_dict() for r in copy_bench(dev.transport, [4096], repeat=1)]
    assert sent and not any(sent)  # the older server was never sent a timed batch
    for row in old:
        assert row["server_mbps_median"] is None and row["server_clock"] is None and row["mbps_median"] > 0, row


def test_remote_copies_of_16m_and_more_are_split_into_pieces(tmp_path) -> None:
    """A BAR block write or read over remote larger than one frame may hold is queued in pieces, so a 16 MiB copy
    works (it used to close the connection) and its row still carries the server's figure."""
    from remotehelp import served

    size = 16 << 20
    with served(f"mock:navi31,flash={tmp_path / 'f.bin'},timing=instant") as s, tinyhw.open(s.device()) as dev:
        rows = [r.as_dict() for r in copy_bench(dev.transport, [size], repeat=1)]
        trips = dev.transport.counters.round_trips
    assert [r["verified"] for r in rows] == [size, size]
    assert all(r["mbps_median"] > 0 and r["server_mbps_median"] > 0 for r in rows), rows
    assert trips >= 16 + 2  # 1 MiB pieces: the h2d write alone is 16 batches


def test_remote_bench_copy_shows_measured_client_rates(tmp_path) -> None:
    """`bench copy` over a loopback remote server on an emulated board: every rate is a number, each row says it is
    the client's measured wall time (not the server's modelled clock), in the table and in the JSON."""
    from remotehelp import served

    args = ("bench", "copy", "--sizes", "4K,64K", "--repeat", "2")
    with served(f"mock:navi31,flash={tmp_path / 'f.bin'},timing=instant") as s:
        doc = run("--device", s.device(), "--json", *args)
        text = run("--device", s.device(), *args)
    assert doc.code == 0 and text.code == 0, doc.err + text.err
    rows = json.loads(doc.out)["results"]
    assert len(rows) == 4
    for x in rows:
        assert x["timer"] == "client" and x["modelled"] is False and x["clock"] == "wall", x
        assert all(isinstance(x[k], float) and x[k] > 0 for k in ("mbps_min", "mbps_median", "mbps_max")), x
        assert x["server_clock"] == "virtual" and isinstance(x["server_mbps_median"], float), x
    table = [ln for ln in text.out.splitlines() if ln.startswith(("h2d", "d2h"))]
    assert len(table) == 4 and all(ln.rstrip().endswith("client") and " - " not in ln for ln in table), table
    assert "time: client = this client's measured wall time" in text.out
    assert "server column: median MB/s on the server's own time" in text.out and "modelled by the emulated" in text.out


def test_local_rows_say_the_host_timed_them() -> None:
    with tinyhw.open("mock:navi31") as dev:
        assert {r.timer for r in copy_bench(dev.transport, [4096], repeat=1)} == {"host"}


def test_the_server_refuses_a_timed_batch_whose_reply_would_not_fit(tmp_path) -> None:
    """A client that asks for a timed batch of a whole reply's worth of reads (ours never does) gets a refusal, not a
    reply frame past the protocol's size limit, and the session goes on."""
    from remotehelp import served

    from tinyhw.errors import TinyhwError
    from tinyhw.remote import protocol
    from tinyhw.transport.batch import R

    with served(f"mock:navi31,flash={tmp_path / 'f.bin'},timing=instant") as s, tinyhw.open(s.device()) as dev:
        t = dev.transport
        whole = [R(0, 0, protocol.MAX_READ_BYTES)]
        with pytest.raises(TinyhwError, match="timed batch's results and time take more than"):
            t.request(protocol.OP_TIMED_BATCH, protocol.encode_ops(whole))
        reply = t.request(protocol.OP_TIMED_BATCH, protocol.encode_ops([R(0, 0, 4096)]))
        assert len(reply) == protocol.BATCH_TIME.size + 4096
