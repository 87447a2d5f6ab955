"""The remote: transport end to end against `tinyhw serve remote` in a thread (issue 16 items 1-2).

Every command works unchanged through remote: (probe, reg, flash read/dump/write), a flash read costs
at most 2 network round trips per 4 KiB, TCP needs the key (HMAC), the device lock is the local one,
server errors come back as the same exit codes, and remote:ssh:// runs the stdio server through
$TINYHW_SSH (a fake ssh here that runs the command locally).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest
from clihelp import run
from flashhelp import dev as mockdev
from remotehelp import served
from testpaths import ROOT

from tinyhw.boards.navi31 import NAVI31
from tinyhw.connect import open_device
from tinyhw.errors import DeviceLocked, Disconnected, Refused
from tinyhw.remote.secret import load_secret, write_secret


def _probe_without_transport(doc: dict) -> dict:
    return {k: v for k, v in doc.items() if k not in ("transport", "emulated", "location", "bridge")}


def test_list_through_remote_lists_the_served_device_not_the_local_ones(tmp_path: Path) -> None:
    with served(mockdev(tmp_path)) as s:
        r = run("--device", s.device(), "--json", "list")
        assert r.code == 0, r.err
        rows = json.loads(r.out)
        assert len(rows) == 1, rows
        row = rows[0]
        assert row["device"] == s.device() and row["kind"] == "remote" and row["emulated"] is True
        assert (row["vendor_id"], row["device_id"]) == (0x1002, 0x744C)
        assert row["served_transport"] == "mock" and row["location"].startswith("mock:navi31")
        human = run("--device", s.device(), "list")
        assert human.code == 0 and "remote" in human.out and "mock:ad102" not in human.out, human.err
    gone = run("--device", s.device(), "list")  # the server has stopped: a clear error, not the local list
    assert gone.code != 0 and "mock:ad102" not in gone.out and gone.err.count("\n") == 1, gone.err


def test_probe_and_reg_read_work_unchanged(tmp_path: Path) -> None:
    local = run("--device", mockdev(tmp_path), "--json", "probe")
    assert local.code == 0, local.err
    with served(mockdev(tmp_path)) as s:
        r = run("--device", s.device(), "--json", "probe")
        assert r.code == 0, r.err
        doc = json.loads(r.out)
        assert doc["transport"] == "remote" and doc["emulated"] is True
        assert _probe_without_transport(doc) == _probe_without_transport(json.loads(local.out))
        reg = run("--device", s.device(), "--json", "reg", "read", "smuio.ROM_CNTL")
        assert reg.code == 0, reg.err
    lreg = run("--device", mockdev(tmp_path), "--json", "reg", "read", "smuio.ROM_CNTL")
    assert json.loads(reg.out) == json.loads(lreg.out)


def test_flash_read_is_at_most_two_round_trips_per_4k(tmp_path: Path) -> None:
    size = 256 * 1024
    local = tmp_path / "local.bin"
    assert run("--device", mockdev(tmp_path), "flash", "read", "0", str(size), "-o", str(local)).code == 0
    with served(mockdev(tmp_path)) as s:
        out = tmp_path / "remote.bin"
        r = run("--device", s.device(), "--stats", "flash", "read", "0", str(size), "-o", str(out))
        assert r.code == 0, r.err
    assert out.read_bytes() == local.read_bytes()
    trips = r.stats["round_trips"]
    assert trips <= 2 * size // 4096, trips
    assert r.stats["modelled_s"] > 0  # the server's virtual clock, reported with every reply


def test_flash_write_through_remote(tmp_path: Path) -> None:
    from tinyhw.mocks.amd.ifwi_image import build_image

    image = bytearray(build_image(board=NAVI31))
    image[0x1F0000:0x1F0010] = b"remote-write-ok!"
    path = tmp_path / "new.bin"
    path.write_bytes(image)
    with served(mockdev(tmp_path)) as s:
        r = run("--device", s.device(), "flash", "write", str(path), "--no-backup", "--yes")
        assert r.code == 0, r.err
        v = run("--device", s.device(), "--json", "flash", "verify", str(path))
        assert v.code == 0, v.err
    assert (tmp_path / "flash.bin").read_bytes() == bytes(image)


def test_tcp_needs_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = tmp_path / "k" / "remote.key"
    r = run("serve", "keygen", "--out", str(key))
    assert r.code == 0 and oct(key.stat().st_mode & 0o777) == "0o600"
    assert run("serve", "keygen", "--out", str(key)).code == 2  # never overwritten silently
    other = write_secret(tmp_path / "other.key")
    with served(mockdev(tmp_path), listen="127.0.0.1:0", secret=load_secret(key)) as s:
        ok = run("--device", s.device(f",key={key}"), "--json", "probe")
        assert ok.code == 0, ok.err
        bad = run("--device", s.device(f",key={other}"), "probe")
        assert bad.code == 2 and "authentication failed" in bad.err
        monkeypatch.setenv("TINYHW_REMOTE_KEY", str(tmp_path / "missing.key"))
        missing = run("--device", s.device(), "probe")
        assert missing.code == 3 and "serve keygen" in missing.err
        assert s.server.opened_count == 1  # failed authentication never opened the device
        assert any("authentication failed" in line for line in s.audit.lines)
    os.chmod(key, 0o644)
    with pytest.raises(Refused, match="must be private"):
        load_secret(key)


def test_plain_tcp_off_loopback_is_refused_on_both_sides(tmp_path: Path) -> None:
    """Issue 21 item 2: no plain TCP off this machine (it would be readable); ssh is the way there."""
    r = run("serve", "remote", "--device", "mock:navi31", "--listen", "192.0.2.1:0")
    assert r.code == 2 and "loopback only" in r.err and "ssh" in r.err and r.err.count("\n") == 1, r.err
    old = run("serve", "remote", "--device", "mock:navi31", "--listen", "192.0.2.1:0", "--allow-network")
    assert old.code == 2, old.err  # the option that allowed it is gone
    key = write_secret(tmp_path / "k.key")
    c = run("--device", f"remote:192.0.2.1:7788,key={key}", "probe")  # refused before connecting anywhere
    assert c.code == 2 and "plain tcp off this machine is refused" in c.err and "remote:ssh://" in c.err, c.err


def test_one_client_at_a_time_with_the_local_lock(tmp_path: Path) -> None:
    with served(mockdev(tmp_path)) as s:
        a = open_device(s.device())
        try:
            with pytest.raises(DeviceLocked, match="remote: device .* is in use"):
                open_device(s.device())
            local = run("--device", mockdev(tmp_path), "probe")
            assert local.code == 3 and "in use" in local.err
        finally:
            a.close()
        b = open_device(s.device())  # released on disconnect
        b.close()


def test_server_errors_keep_their_exit_code(tmp_path: Path) -> None:
    with served(mockdev(tmp_path, extra="faults=timeout@40")) as s:
        r = run("--device", s.device(), "flash", "info")
    assert r.code == 1 and "remote: register access 40" in r.err and "timed out" in r.err


def test_config_writes_to_bars_are_refused(tmp_path: Path) -> None:
    with served(mockdev(tmp_path)) as s, open_device(s.device()) as o:
        t = o.transport
        t.config_write(0x10, 4, 0xFFFFFFFF)
        with pytest.raises(Refused, match="bar registers"):
            t.config_read(0x00)  # the queued write is refused when the batch is sent
        assert t.config_read(0x00) & 0xFFFF == 0x1002  # the connection goes on


def test_idle_connections_are_closed(tmp_path: Path) -> None:
    with served(mockdev(tmp_path), idle_timeout=0.3) as s:
        o = open_device(s.device())
        time.sleep(1.0)
        with pytest.raises(Disconnected):
            o.transport.config_read(0)
        o.transport._broken = True
        o.close()
        deadline = time.monotonic() + 60  # a hang bound, not a speed check
        while not any("idle for 0.3 s" in line for line in s.audit.lines) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert any("idle for 0.3 s" in line for line in s.audit.lines)


def test_ssh_runs_the_stdio_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "fake-ssh"
    fake.write_text(
        f"#!{sys.executable}\n"
        "import os, sys\n"
        "args = sys.argv[1:]\n"
        "i = args.index('--')\n"
        "host, command = args[i + 1], ' '.join(args[i + 2:])\n"
        "os.execvp('sh', ['sh', '-c', command])\n")
    fake.chmod(0o755)
    monkeypatch.setenv("TINYHW_SSH", str(fake))
    monkeypatch.setenv("TINYHW_REMOTE_TINYHW", f"{sys.executable} -m tinyhw")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    r = run("--device", f"remote:ssh://user@lab1/{mockdev(tmp_path)}", "--json", "--stats", "probe")
    assert r.code == 0, r.err
    assert json.loads(r.out)["device_id"] == 0x744C and r.stats["round_trips"] >= 1
    assert (tmp_path / "flash.bin").exists()  # the options reached the device on the "other machine"
    bad = run("--device", "remote:ssh://lab1/mock:navi99", "probe")
    assert bad.code == 2 and "remote: bad device string" in bad.err
    log = Path(os.environ["XDG_STATE_HOME"]) / "tinyhw" / "serve-audit.log"
    assert "connect over stdio" in log.read_text()  # the stdio server audits to a file, not the ssh stream


def test_ipv6_loopback_and_the_batching_ability(tmp_path: Path) -> None:
    from tinyhw.transport.batch import Batching

    with served(mockdev(tmp_path), listen="[::1]:0", secret=b"k" * 32) as s:
        key = tmp_path / "k.key"
        key.write_bytes(b"k" * 32)
        key.chmod(0o600)
        assert s.address.startswith("[::1]:")
        with open_device(s.device(f",key={key}")) as o:
            assert isinstance(o.transport, Batching)
            assert o.transport.identity().device_id == 0x744C
    with open_device(mockdev(tmp_path)) as o:
        assert not isinstance(o.transport, Batching)  # local transports keep the driver's plain path


def test_unix_peer_of_another_user_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tinyhw.serve import listen

    monkeypatch.setattr(listen, "peer_uid", lambda _sock: os.geteuid() + 1)
    with served(mockdev(tmp_path)) as s:
        r = run("--device", s.device(), "probe")
        assert r.code == 1 and "closed" in r.err
        assert s.server.opened_count == 0
        assert any("refused unix peer uid" in line for line in s.audit.lines)


def test_socket_is_private(tmp_path: Path) -> None:
    with served(mockdev(tmp_path)) as s:
        st = os.stat(s.address)
        assert st.st_mode & 0o777 == 0o600
        assert os.stat(Path(s.address).parent).st_mode & 0o777 == 0o700


@pytest.mark.parametrize("cmd", [["serve"], ["serve", "remote"], ["serve", "serprog"], ["serve", "keygen"]])
def test_serve_help_has_an_example(cmd: list[str]) -> None:
    r = run(*cmd, "--help")
    assert r.code == 0 and "Example" in r.out


def test_serve_remote_cli_runs_until_sigterm(tmp_path: Path) -> None:
    import signal
    import subprocess
    import tempfile

    sock = Path(tempfile.mkdtemp(prefix="thw", dir="/tmp")) / "run" / "s.sock"
    p = subprocess.Popen([sys.executable, "-m", "tinyhw", "--json", "serve", "remote", "--device", mockdev(tmp_path),
                          "--socket", str(sock), "--audit", str(tmp_path / "audit.log")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None
        doc = json.loads(p.stdout.readline())
        assert doc == {"serving": mockdev(tmp_path), "address": str(sock), "auth": "peer-uid"}
        r = run("--device", f"remote:unix:{sock}", "--json", "reg", "read", "smuio.ROM_CNTL")
        assert r.code == 0, r.err
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=20) == 0
        log = (tmp_path / "audit.log").read_text()
        assert "connect from unix uid" in log and "device released (client said bye)" in log
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    no_device = run("serve", "remote")
    assert no_device.code == 2 and "explicit device" in no_device.err


def test_ctrl_c_while_waiting_keeps_the_stream_in_step(tmp_path: Path) -> None:
    with served(mockdev(tmp_path)) as s, open_device(s.device()) as o:
        t = o.transport
        real = t.channel.recv_exact
        calls = {"n": 0}

        def interrupted_once(n: int, timeout: float | None) -> bytes:
            calls["n"] += 1
            if calls["n"] == 1:
                raise KeyboardInterrupt
            return real(n, timeout)

        t.channel.recv_exact = interrupted_once  # type: ignore[method-assign]
        with pytest.raises(KeyboardInterrupt):
            t.config_read(0)
        assert t.config_read(0) == 0x744C1002  # the late answer was taken; the next one is its own
        assert not t._broken


def test_keygen_and_audit_log_refuse_a_fifo(tmp_path) -> None:
    """A user-named key file or audit log that is a fifo is refused at once (opening it would block)."""
    import os

    import pytest as _pytest

    from tinyhw.errors import Refused
    from tinyhw.remote.secret import write_secret
    from tinyhw.serve import audit_stream

    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    with _pytest.raises(Refused, match="not a regular file"):
        write_secret(fifo, force=True)
    with _pytest.raises(Refused, match="not a regular file"):
        audit_stream(str(fifo), stdio=False)


def _tinyhw_subprocess(*args: str, timeout: float = 30) -> tuple[int, str]:
    """The CLI in a child process (a hang ends in TimeoutExpired, failing the test, instead of hanging it)."""
    import subprocess

    root = str(ROOT)
    env = {**os.environ, "PYTHONPATH": root}
    p = subprocess.run([sys.executable, "-m", "tinyhw", *args], capture_output=True, text=True, timeout=timeout,
                       env=env, cwd=root, stdin=subprocess.DEVNULL, check=False)
    return p.returncode, p.stderr


def test_a_fifo_key_file_is_refused_at_once(tmp_path: Path) -> None:
    """A key file that is a fifo (no writer: opening it would block forever) is refused, exit 2, not waited on
    (the subprocess timeout is the hang bound)."""
    import subprocess

    fifo = tmp_path / "key.fifo"
    os.mkfifo(fifo)
    probe_code = ("import sys, time\n"
                  "from tinyhw.errors import Refused\n"
                  "from tinyhw.remote.secret import load_secret\n"
                  "t0 = time.monotonic()\n"
                  "try:\n"
                  "    load_secret(sys.argv[1])\n"
                  "except Refused as e:\n"
                  "    print(e.exit_code, time.monotonic() - t0, e.message)\n")
    p = subprocess.run([sys.executable, "-c", probe_code, str(fifo)], capture_output=True, text=True, timeout=30,
                       cwd=str(ROOT), check=False)
    code, seconds, message = p.stdout.split(" ", 2)
    assert code == "2" and "is a fifo, not a regular file" in message, p
    print(f"fifo key refused after {float(seconds):.3f} s wall")
    # the server's --key
    rc, err = _tinyhw_subprocess("serve", "remote", "--device", mockdev(tmp_path), "--listen", "127.0.0.1:0",
                                 "--key", str(fifo))
    assert rc == 2 and "not a regular file" in err and err.count("\n") == 1, err
    # the client's key=
    with served(mockdev(tmp_path), listen="127.0.0.1:0", secret=load_secret(write_secret(tmp_path / "k.key"))) as s:
        rc, err = _tinyhw_subprocess("--device", s.device(f",key={fifo}"), "probe")
    assert rc == 2 and "not a regular file" in err and err.count("\n") == 1, err


@pytest.mark.parametrize("kind", ["directory", "large", "symlink"])
def test_a_key_that_is_no_small_regular_file_is_refused(tmp_path: Path, kind: str) -> None:
    key = write_secret(tmp_path / "real.key")
    path = tmp_path / kind
    if kind == "directory":
        path.mkdir()
    elif kind == "large":
        with open(path, "wb") as f:
            f.truncate(1 << 30)  # sparse: costs nothing, but is no key
        path.chmod(0o600)
    else:
        path.symlink_to(key)
    with pytest.raises(Refused, match="refusing to read the remote key") as e:
        load_secret(path)
    assert e.value.exit_code == 2


# Each guarded register of the emulated Navi31 (capabilities: PM 0x50, Express 0x64, MSI 0xa0; extended: AER
# 0x100, Resizable BAR 0x200, ACS 0x240), written with the value it holds (a no-op where it is allowed).
GUARDED_WRITES = [(0x208, 4, "resizable bar control"), (0x34, 1, "capability pointer"),
                  (0x74, 2, "pcie link control"), (0x65, 1, "capability 0x10 header and next pointer"),
                  (0x202, 2, "extended capability 0x0015 header and next pointer")]


@pytest.mark.parametrize(("offset", "size", "what"), GUARDED_WRITES)
def test_guarded_config_writes_are_refused_unless_allowed(tmp_path: Path, offset: int, size: int,
                                                          what: str) -> None:
    with served(mockdev(tmp_path)) as s, open_device(s.device()) as o:
        t = o.transport
        value = t.config_read(offset, size)
        t.config_write(offset, size, value)
        with pytest.raises(Refused, match=f"config write at 0x{offset:x} \\({what}\\) is refused") as e:
            t.config_read(0x00)  # the queued write is refused when the batch is sent
        assert e.value.exit_code == 2 and "--allow-config-writes" in str(e.value)
        assert t.config_read(offset, size) == value  # nothing was written; the connection goes on
    with served(mockdev(tmp_path), allow_config_writes=True) as s, open_device(s.device()) as o:
        t = o.transport
        value = t.config_read(offset, size)
        t.config_write(offset, size, value)
        assert t.config_read(offset, size) == value


def test_bus_mastering_stays_writable_without_allow_config_writes(tmp_path: Path) -> None:
    """COMMAND's bus master bit (the boot, the dma copier: set_bus_master) is in the safe set, and so is writing
    COMMAND back unchanged."""
    from tinyhw.transport.base import set_bus_master

    with served(mockdev(tmp_path)) as s, open_device(s.device()) as o:
        t = o.transport
        value = t.config_read(0x04, 2)
        t.config_write(0x04, 2, value)
        assert t.config_read(0x04, 2) == value
        set_bus_master(t, not value & 0x4)
        assert t.config_read(0x04, 2) == value ^ 0x4
        set_bus_master(t, bool(value & 0x4))
        assert t.config_read(0x04, 2) == value


# What issue-listed writes did without --allow-config-writes (emulated Navi31: Express at 0x64, AER at 0x100, ACS
# at 0x240): (offset, size, value from the current one, what the refusal names).
OUTSIDE_THE_SAFE_SET = [
    (0x04, 2, lambda v: v & ~0x6, "command"),  # memory decode and bus master off (0x6 -> 0x0)
    (0x04, 1, lambda v: v & ~0x2, "command"),  # memory decode off, one byte wide
    (0x04, 2, lambda v: v ^ 0x4 ^ 0x100, "command"),  # bus master together with serr enable
    (0x06, 2, lambda v: 0xFFFF, "status"),  # rw1c: clears every error bit
    (0x64 + 0x08, 2, lambda v: v | 0x8000, "pcie device control"),  # initiate flr
    (0x64 + 0x08, 2, lambda v: v, "pcie device control"),  # even unchanged: not in the safe set
    (0x64 + 0x28, 2, lambda v: v ^ 0xF, "pcie device control 2"),  # completion timeout
    (0x100 + 0x08, 4, lambda v: 0xFFFFFFFF, "aer"),  # uncorrectable error mask
    (0x100 + 0x14, 4, lambda v: 0xFFFFFFFF, "aer"),  # correctable error mask
    (0x240 + 0x06, 2, lambda v: 0, "acs control"),
    (0x3C, 1, lambda v: v, "interrupt line/pin"),
]


@pytest.mark.parametrize(("offset", "size", "value", "what"), OUTSIDE_THE_SAFE_SET)
def test_writes_outside_the_safe_set_are_refused(tmp_path: Path, offset: int, size: int, value, what: str) -> None:
    with served(mockdev(tmp_path)) as s, open_device(s.device()) as o:
        t = o.transport
        before = t.config_read(offset, size)
        t.config_write(offset, size, value(before))
        with pytest.raises(Refused, match=f"config write at 0x{offset:x} \\({what}\\) is refused") as e:
            t.config_read(0x00)
        assert e.value.exit_code == 2 and "--allow-config-writes" in str(e.value)
        assert t.config_read(offset, size) == before  # nothing was written; the connection goes on


def test_the_safe_set_is_one_table_of_disjoint_rows() -> None:
    from tinyhw.formats.pciguard import SAFE_WRITES, write_refusal

    rows = sorted(SAFE_WRITES)
    assert all(a.offset + a.size <= b.offset for a, b in zip(rows, rows[1:], strict=False))
    def never(off: int, n: int) -> int:
        raise AssertionError("read outside the safe set")

    assert write_refusal(0x64 + 0x08, 2, 0, never) == "not in the safe set"
    assert write_refusal(0x04, 2, 0x0406, lambda off, n: 0x0002) is None
    assert write_refusal(0x05, 1, 0x04, lambda off, n: 0x00) is None  # the high byte: intx disable
    assert "bits 0x2 of command" in write_refusal(0x04, 2, 0x0004, lambda off, n: 0x0006)


def test_refused_writes_are_named_from_both_capability_lists() -> None:
    """The pure namer on the emulated board's config image: header registers, capability headers, PCI Express
    registers and extended capabilities."""
    from tinyhw.formats.pciconfig import parse_config
    from tinyhw.formats.pciguard import register_name

    with open_device("mock:navi31") as o:
        cfg = parse_config(o.transport.config_bytes(0, 4096))
    assert register_name(0x208, 4, cfg) == "resizable bar control"
    assert register_name(0x74, 2, cfg) == "pcie link control"
    assert register_name(0x94, 2, cfg) == "pcie link control 2"
    assert register_name(0x34, 1, cfg) == "capability pointer"
    for c in cfg.capabilities:
        assert "header and next pointer" in register_name(c.offset + 1, 1, cfg)
    for c in cfg.ext_capabilities:
        assert "header and next pointer" in register_name(c.offset + 2, 2, cfg)
    assert register_name(0x04, 2, cfg) == "command" and register_name(0x10, 4, cfg) == "bar registers"


def test_bar_offsets_past_4g_travel_as_wide_operations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A resized 32 GiB VRAM BAR (mock:navi31-usb) is reached past 4 GiB over remote (the offsets64 ability): block and
    dword accesses, a poll, and the IP discovery table at VRAM size - 64 KiB, so AmGpu works; a server without the
    ability gets a clear refusal (exit 2) instead of a broken frame."""
    import tinyhw.serve.remote as serve_remote
    from tinyhw.boot.amd.gpu import AmGpu
    from tinyhw.transport.batch import Poll32
    from tinyhw.transport.devstr import parse_device

    far = (5 << 30) + 0x40
    with served(mockdev(tmp_path, board="navi31-usb")) as s:
        with open_device(parse_device(s.device())) as opened:
            t = opened.transport
            assert next(b for b in t.bars() if b.index == 0).size > far
            t.bar(0).write32(far, 0x5EED1234)
            t.bar(0).write(far + 0x40, bytes(range(64)))
            assert t.bar(0).read32(far) == 0x5EED1234 and t.bar(0).read(far + 0x40, 64) == bytes(range(64))
            assert t.submit([Poll32(0, far, 0xFFFFFFFF, 0x5EED1234, 1.0, 0.001, "the far dword")]).get() == [0x5EED1234]
            assert AmGpu(t).ip_version("gc")[0] == 11
        real_describe = serve_remote.describe
        monkeypatch.setattr(serve_remote, "describe", lambda dev: {
            **real_describe(dev), "abilities": [a for a in real_describe(dev)["abilities"] if a != "offsets64"]})
        with open_device(parse_device(s.device())) as opened:
            with pytest.raises(Refused, match=r"bar0 offset 0x140000040 is past 4 GiB"):
                opened.transport.bar(0).read32(far)
            assert opened.transport.config_read(0) == 0x744C1002  # the connection is still good


def test_serve_remote_checks_the_device_at_start(tmp_path: Path) -> None:
    """A device that is not there (usb:0 with no bridge plugged in) is said at start, one line, exit 3, before
    anything listens; not when the first client connects."""
    sock = tmp_path / "rt" / "s.sock"
    rc, err = _tinyhw_subprocess("serve", "remote", "--device", "usb:0", "--socket", str(sock), timeout=120)
    assert rc == 3 and err.count("\n") == 1 and err.startswith("error: no asm24 usb bridge"), err
    assert not sock.exists()


def test_the_audit_has_connections_and_errors_and_batches_only_when_asked(tmp_path: Path) -> None:
    """By default the server audits connections, refusals and errors, not every batch (a flash read is hundreds
    of batches); ``log_batches`` (serve remote -v) adds a line per batch that writes."""
    def lines(**kwargs: object) -> list[str]:
        with served(mockdev(tmp_path), **kwargs) as s:
            r = run("--device", s.device(), "flash", "read", "0", "64k", "-o", str(tmp_path / "r.bin"), "--force")
            assert r.code == 0, r.err
            s.wait_released()
            return s.audit.lines

    quiet = lines()
    assert not [x for x in quiet if "batch #" in x] and len(quiet) <= 4, quiet
    assert any("authenticated; opened" in x for x in quiet) and any("device released" in x for x in quiet)
    assert len([x for x in lines(log_batches=True) if "batch #" in x]) > 4
