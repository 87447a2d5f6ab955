"""The farm tier: tinyhw through a real labgrid coordinator and exporter on loopback (docs/labgrid.md).

One coordinator (``labgrid-coordinator -l 127.0.0.1:PORT``), one exporter (no ``-i``) publishing a TinyhwRemote,
one ``tinyhw serve remote`` on an emulated Navi31 (behind a byte-counting relay, tests/helpers/farmhelp.py), and a
place, started once for the module in a temporary directory; every wait is bounded in seconds. ``labgrid:PLACE`` must
give the same results as the direct run, refuse a second client naming who holds the place, and survive the
exporter host dying mid-dump and mid-write (a clear error; ``--resume`` finishes the write).

Skipped only when labgrid is not installed; the test extra installs it, so CI runs this tier.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from testpaths import ROOT

pytest.importorskip("labgrid", reason="the labgrid farm tier needs labgrid (pip install -e '.[test]')")

from amfake import FW_DIR
from farmhelp import Farm

from tinyhw.remote.secret import write_secret


@pytest.fixture(scope="module")
def farm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Farm]:
    root = tmp_path_factory.mktemp("farm")
    key = write_secret(root / "remote.key")
    f = Farm(root=root, key=key, flash=root / "flash.bin")
    f.env = {**os.environ, "XDG_STATE_HOME": str(root / "state"), "XDG_CACHE_HOME": str(root / "cache"),
             "TINYHW_LOCK_DIR": str(root / "locks"), "TINYHW_STRICT": "1", "TINYHW_CLOCK": "device",
             "TINYHW_AMDGPU_FIRMWARE": str(FW_DIR)}
    for name in ("LG_PROXY", "LG_TOKEN", "LG_HOSTNAME", "LG_USERNAME", "LG_ENV", "TINYHW_DEVICE"):
        f.env.pop(name, None)
    started = time.monotonic()
    try:
        f.start_coordinator()
        f.start_server()
        f.start_exporter()
        f.create_place()
        f.env["TINYHW_FARM_START_S"] = f"{time.monotonic() - started:.2f}"
        yield f
    finally:
        f.stop()


def _ok(r: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert r.returncode == 0, (r.returncode, r.stderr)
    return r


def _place(farm: Farm) -> str:
    return f"labgrid:{farm.place}"


def _firmware() -> str:
    if not (FW_DIR / "psp_13_0_0_sos.bin").is_file():
        pytest.fail(f"firmware missing in {FW_DIR}: run bash tests/fetch_firmware.sh", pytrace=False)
    return str(FW_DIR)


#: what differs between transports by nature: wall times, and the wire counters (the remote frames carry headers
#: and batch several steps' accesses into one flush)
TRANSPORT_KEYS = {"seconds", "elapsed_s", "bytes_out", "bytes_in", "usb_transfers", "round_trips"}


def _cold(farm: Farm) -> None:
    """Power-cycle the served board (its flash back to the pristine image, no firmware running): the tests after a
    boot read the flash through the ROM_SW engine, which a booted PSP gates."""
    _ok(farm.tinyhw("--device", farm.served, "mock", "reset", "--yes", "--force"))


def _without_times(doc: object) -> object:
    """A document without what differs between transports (:data:`TRANSPORT_KEYS`)."""
    if isinstance(doc, dict):
        return {k: _without_times(v) for k, v in doc.items() if k not in TRANSPORT_KEYS}
    if isinstance(doc, list):
        return [_without_times(v) for v in doc]
    return doc


def test_dump_and_verify_through_the_place_equal_the_direct_run(farm: Farm) -> None:
    via, direct = farm.root / "via.bin", farm.root / "direct.bin"
    r = _ok(farm.tinyhw("--device", _place(farm), "flash", "dump", str(via), "--force"))
    d = _ok(farm.tinyhw("--device", farm.served, "flash", "dump", str(direct), "--force"))
    assert via.read_bytes() == direct.read_bytes() and len(via.read_bytes()) == 2 << 20
    assert r.stdout.splitlines()[-1] == d.stdout.splitlines()[-1]  # the sha256 line
    assert farm.holder() == "None"  # released when the command ended
    v = _ok(farm.tinyhw("--device", _place(farm), "--json", "flash", "verify", str(direct)))
    dv = _ok(farm.tinyhw("--device", farm.served, "--json", "flash", "verify", str(direct)))
    assert json.loads(v.stdout) == json.loads(dv.stdout) and json.loads(v.stdout)["match"] is True
    changed = bytearray(direct.read_bytes())
    changed[0x1F0004] ^= 0x01
    other = farm.root / "other.bin"
    other.write_bytes(bytes(changed))
    bad = farm.tinyhw("--device", _place(farm), "--json", "flash", "verify", str(other))
    assert bad.returncode == 1 and json.loads(bad.stdout)["first_mismatch"] == 0x1F0004, bad.stderr


def test_am_boot_and_bench_copy_through_the_place_equal_the_direct_run(farm: Farm) -> None:
    fw = _firmware()
    try:
        _boot_and_copy(farm, fw)
    finally:
        _cold(farm)


def _boot_and_copy(farm: Farm, fw: str) -> None:
    (farm.root / "fresh").mkdir(exist_ok=True)
    fresh = f"mock:navi31,flash={farm.root / 'fresh' / 'flash.bin'},timing=instant"  # a second board, not booted
    boots = [json.loads(_ok(farm.tinyhw("--device", dev, "--json", "am", "boot", "--yes", "--firmware-dir", fw,
                                        timeout=300)).stdout) for dev in (_place(farm), fresh)]
    assert boots[0]["boot"] == "full" and boots[0]["device"] == "mock:navi31"
    assert _without_times(boots[0]) == _without_times({**boots[1], "device": boots[0]["device"]})
    copies = [json.loads(_ok(farm.tinyhw("--device", dev, "--json", "bench", "copy", "--sizes", "4K,64K", "--path",
                                         "bar", "--repeat", "2")).stdout)["results"]
              for dev in (_place(farm), fresh)]
    assert [(r["direction"], r["size"], r["path"], r["verified"]) for r in copies[0]] == \
           [("h2d", 4096, "bar", True), ("h2d", 65536, "bar", True), ("d2h", 4096, "bar", True),
            ("d2h", 65536, "bar", True)] or copies[0]
    # the copies' results; the rates are not compared: through the place (remote:) each copy is timed on the
    # client's wall clock (measured, the link included), beside the server's own modelled time of its batches
    results = ("direction", "size", "repeat", "path", "verified", "link_limit_mbps", "verified_by",
               "verified_independent", "path_name", "path_auto", "skipped")
    assert [{k: r[k] for k in results} for r in copies[0]] == [{k: r[k] for k in results} for r in copies[1]]
    for placed, direct in zip(*copies, strict=True):
        assert (placed["timer"], placed["modelled"], placed["server_clock"]) == ("client", False, "virtual"), placed
        assert placed["mbps_median"] > 0 and placed["server_mbps_median"] > 0, placed
        assert (direct["timer"], direct["modelled"], direct["server_clock"]) == ("host", True, None), direct
    assert farm.holder() == "None"


def test_a_second_client_is_refused_with_who_holds_the_place(farm: Farm, monkeypatch: pytest.MonkeyPatch) -> None:
    import tinyhw

    monkeypatch.setenv("LG_COORDINATOR", farm.coordinator)
    with tinyhw.open(_place(farm)) as dev:  # from Python: the place, then the server's device lock
        assert dev.transport.identity().device_id == 0x744C
        holder = farm.holder()
        assert holder not in ("None", "?"), holder
        other = farm.tinyhw("--device", _place(farm), "probe", env={"LG_USERNAME": "intruder"})
        assert other.returncode == 3, other.stderr
        assert other.stderr.count("\n") == 1 and f"labgrid place {farm.place} is acquired by {holder}" in other.stderr
        same = farm.tinyhw("--device", _place(farm), "probe")  # this user again: the place is ours, the device not
        assert same.returncode == 3 and "in use by pid" in same.stderr and same.stderr.count("\n") == 1, same.stderr
        assert farm.holder() == holder  # the refused clients released nothing
    assert farm.holder() == "None"
    _ok(farm.tinyhw("--device", _place(farm), "probe", env={"LG_USERNAME": "intruder"}))  # free again


def test_a_place_held_before_is_used_and_left_held(farm: Farm) -> None:
    _ok(farm.client("-p", farm.place, "acquire"))
    try:
        _ok(farm.tinyhw("--device", _place(farm), "probe"))
        assert farm.holder() not in ("None", "?")
    finally:
        _ok(farm.client("-p", farm.place, "release"))


def test_bad_places_and_coordinators_are_clear_errors(farm: Farm) -> None:
    missing = farm.tinyhw("--device", "labgrid:no-such-place", "probe")
    assert missing.returncode == 3 and missing.stderr.count("\n") == 1 and farm.place in missing.stderr, missing.stderr
    gone = farm.tinyhw("--device", f"{_place(farm)},coordinator=127.0.0.1:1", "probe", timeout=60)
    assert gone.returncode == 3 and gone.stderr.count("\n") == 1, gone.stderr
    assert "cannot reach the labgrid coordinator at 127.0.0.1:1" in gone.stderr


def _restart_exporter_host(farm: Farm) -> None:
    farm.start_server()
    farm.start_exporter()


def test_exporter_host_killed_mid_dump_is_a_clear_error(farm: Farm) -> None:
    out = farm.root / "cut.bin"
    assert farm.relay is not None

    def die() -> None:  # the exporter host goes down: its server and its exporter
        farm.kill("server")
        farm.kill("exporter")

    farm.relay.arm("down", 512 * 1024, die)
    try:
        r = farm.tinyhw("--device", _place(farm), "flash", "dump", str(out))
        assert r.returncode == 1, (r.returncode, r.stderr)
        assert r.stderr.count("\n") == 1 and "closed" in r.stderr, r.stderr
        assert not out.exists()  # nothing half-written
        assert farm.holder() == "None"  # the client released the place on its way out
    finally:
        _restart_exporter_host(farm)
    _ok(farm.tinyhw("--device", _place(farm), "flash", "dump", str(out)))


def test_exporter_host_killed_mid_write_then_resume_finishes(farm: Farm) -> None:
    before = farm.root / "before.bin"
    _ok(farm.tinyhw("--device", farm.served, "flash", "dump", str(before), "--force"))
    image = bytearray(before.read_bytes())
    for sector in range(0x1C0, 0x1E0):  # 32 sectors of the image's free tail
        image[sector * 4096:sector * 4096 + 16] = b"farm-resume-test"
    path = farm.root / "image.bin"
    path.write_bytes(bytes(image))
    journals = farm.root / "state" / "tinyhw"

    def die_after_three_sectors() -> None:  # the journal is saved before each sector's erase
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for j in journals.glob("flash-write-*.json"):
                with contextlib.suppress(ValueError, OSError):
                    if len(json.loads(j.read_text())["sectors_done"]) >= 3:
                        farm.kill("server")
                        farm.kill("exporter")
                        return
            time.sleep(0.01)

    killer = threading.Thread(target=die_after_three_sectors, daemon=True)
    killer.start()
    try:
        r = farm.tinyhw("--device", _place(farm), "flash", "write", str(path), "--yes", "--no-backup")
        killer.join(60)
        assert r.returncode == 1, (r.returncode, r.stderr)
        assert "closed" in r.stderr and "--resume" in r.stderr, r.stderr
    finally:
        _restart_exporter_host(farm)
    found = list(journals.glob("flash-write-*.json"))
    assert len(found) == 1 and len(json.loads(found[0].read_text())["sectors_done"]) >= 3, found
    resumed = _ok(farm.tinyhw("--device", _place(farm), "--json", "flash", "write", str(path), "--resume", "--yes",
                              "--no-backup"))
    doc = json.loads(resumed.stdout)
    assert doc["resumed"] is True and 0 < doc["sectors_changed"] < 32, doc
    _ok(farm.tinyhw("--device", _place(farm), "flash", "verify", str(path)))
    after = farm.root / "after.bin"
    _ok(farm.tinyhw("--device", farm.served, "flash", "dump", str(after), "--force"))
    assert after.read_bytes() == bytes(image)
    _cold(farm)  # the pristine image back


ENV_YAML = """\
imports: [tinyhw.labgrid]
options:
  coordinator_address: {coordinator}
targets:
  main:
    resources:
      RemotePlace:
        name: {place}
    drivers:
      TinyhwDriver: {{}}
      TinyhwStrategy:
        image: {image}
"""

BOARD_TEST = '''\
from labgrid.step import steps

pytest_plugins = ["tinyhw.labgrid.fixtures"]
SEEN = []
steps.subscribe(lambda event: SEEN.append(event.step.title) if event.data.get("state") == "start" else None)


def test_booted_navi31(booted_navi31, target):
    strategy = target.get_driver("TinyhwStrategy")
    assert strategy.status.name == "booted"
    assert booted_navi31.boot_state() == "partial"  # booted: am boot would only re-check
    assert booted_navi31.probe()["device_id"] == 0x744C
    vendor = booted_navi31.read(0, 4, 1)
    assert len(vendor) == 4
    strategy.transition("booted")  # the state it is in: nothing done
    assert SEEN.count("am_boot") == 1 and "flash_verify" in SEEN and "probe" in SEEN, SEEN
    strategy.transition("off")
    assert booted_navi31.opened is None
    strategy.transition("link_up")
    assert booted_navi31.link_up()
'''


def test_pytest_fixtures_give_a_booted_navi31(farm: Farm) -> None:
    _firmware()
    image = farm.root / "golden.bin"
    _ok(farm.tinyhw("--device", farm.served, "flash", "dump", str(image), "--force"))
    work = farm.root / "userproj"
    work.mkdir(exist_ok=True)
    _ok(farm.client("-p", farm.place, "acquire"))  # labgrid's RemotePlace wants the place acquired
    try:
        _board_tests(farm, work, ENV_YAML.format(coordinator=farm.coordinator, place=farm.place, image=image),
                     BOARD_TEST)
    finally:
        _ok(farm.client("-p", farm.place, "release"))
        _cold(farm)


def _board_tests(farm: Farm, work: Path, env_yaml: str, test_source: str) -> None:
    """Run ``test_source`` as a user's test module with labgrid's pytest plugin and ``env_yaml`` (its one test must
    pass)."""
    (work / "env.yaml").write_text(env_yaml)
    (work / "test_board.py").write_text(test_source)
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(work),
                        "--lg-env", str(work / "env.yaml"), "--lg-coordinator", farm.coordinator,
                        str(work / "test_board.py")], capture_output=True, text=True, timeout=300,
                       cwd=work, env=farm.env, check=False)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert "1 passed" in r.stdout


BRIDGE_EXPORT = """\
bench2:
  TinyhwBridge:
    serial: "TINYHW-CI-0001"
  TinyhwPCI:
    address: "0000:03:00.0"
"""


def test_the_exporter_entry_point_exports_bridges_and_pci_functions(farm: Farm) -> None:
    from farmhelp import start

    cfg = farm.root / "bridges.yaml"
    cfg.write_text(BRIDGE_EXPORT)
    p = start("bridges", [sys.executable, "-m", "tinyhw.labgrid.exporter", "-c", farm.coordinator, "-n", "ci2",
                          str(cfg)], farm.root, farm.env)
    try:
        p.wait_for("Exporter ready")
        deadline = time.monotonic() + 60  # a hang bound, not a speed check
        while True:
            out = farm.client("-vv", "resources").stdout
            if "ci2/bench2/NetworkTinyhwBridge" in out and "ci2/bench2/TinyhwPCI" in out:
                break
            assert time.monotonic() < deadline, out
            time.sleep(0.2)
        assert "0000:03:00.0" in out and "TINYHW-CI-0001" not in out  # no such bridge here: listed, unavailable
        assert out.split("ci2/bench2/NetworkTinyhwBridge")[1].split("Resource")[0].count("'avail': False") == 1, out
    finally:
        p.stop(signal.SIGTERM)


def test_a_place_whose_server_is_reached_over_a_real_sshd(farm: Farm, tmp_path: Path) -> None:
    """A TinyhwRemote with ``via: ssh``: the place's board through remote:ssh:// and a real sshd on loopback."""
    import shlex

    from farmhelp import start, tool
    from sshdhelp import running_sshd

    flash = tmp_path / "ssh-board.bin"
    served = f"mock:navi31,flash={flash},timing=instant"
    with running_sshd() as sshd:
        cfg = tmp_path / "ssh-exporter.yaml"
        cfg.write_text(f'bench3:\n  TinyhwRemote:\n    host: 127.0.0.1\n    via: ssh\n    ssh_user: {sshd.user}\n'
                       f'    device: "{served}"\n')
        p = start("ssh-exporter", [tool("labgrid-exporter"), "-c", farm.coordinator, "-n", "ci3", str(cfg)],
                  tmp_path, farm.env)
        try:
            p.wait_for("Exporter ready")
            for args in (("-p", "gpu-ssh", "create"), ("-p", "gpu-ssh", "add-match", "ci3/bench3/*")):
                _ok(farm.client(*args))
            far = shlex.join(["env", *(f"{k}={farm.env[k]}" for k in ("TINYHW_LOCK_DIR", "XDG_STATE_HOME",
                                                                       "TINYHW_STRICT", "TINYHW_CLOCK")),
                              tool("tinyhw")])
            env = {"TINYHW_SSH": sshd.ssh_command(), "TINYHW_REMOTE_TINYHW": far}
            out, direct = tmp_path / "via-ssh.bin", tmp_path / "direct.bin"
            _ok(farm.tinyhw("--device", "labgrid:gpu-ssh", "flash", "dump", str(out), env=env))
            _ok(farm.tinyhw("--device", served, "flash", "dump", str(direct)))
            assert out.read_bytes() == direct.read_bytes() and len(direct.read_bytes()) == 2 << 20
            assert "Accepted publickey for" in (sshd.root / "sshd.log").read_text()
        finally:
            farm.client("-p", "gpu-ssh", "delete")
            p.stop()


def test_a_failed_release_is_reported_unless_the_connection_already_failed(farm: Farm,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The place that could not be released is an error after a good run; after a lost connection, that loss is
    the error the user sees (the release failure would hide it)."""
    import tinyhw
    from tinyhw.connect import place
    from tinyhw.errors import Disconnected, OperationFailed

    real = place.release

    def failing(lease: place.Lease, timeout: float = 1.0) -> None:
        real(lease)
        raise OperationFailed(f"could not release labgrid place {lease.place}: sabotaged")

    monkeypatch.setenv("LG_COORDINATOR", farm.coordinator)
    monkeypatch.setattr(place, "release", failing)
    dev = tinyhw.open(_place(farm))
    with pytest.raises(OperationFailed, match="could not release"):
        dev.close()
    dev = tinyhw.open(_place(farm))
    dev.transport.channel.abort()  # the connection is lost
    with pytest.raises(Disconnected):
        dev.transport.config_read(0, 4)
    dev.close()  # no second error over the first
    assert farm.holder() == "None"


def test_the_driver_loads_an_image_and_finishes_an_interrupted_load(farm: Farm) -> None:
    """BootstrapProtocol.load is the journaled, verified write: cut mid-write, loading the image again resumes."""
    from labgrid import Target

    from tinyhw.labgrid import TinyhwDriver, TinyhwRemote

    before = farm.root / "load-before.bin"
    _ok(farm.tinyhw("--device", farm.served, "flash", "dump", str(before), "--force"))
    image = bytearray(before.read_bytes())
    for sector in range(0x1A0, 0x1C0):
        image[sector * 4096:sector * 4096 + 16] = b"driver-load-test"
    path = farm.root / "load-image.bin"
    path.write_bytes(bytes(image))

    targets: list[Target] = []

    def driver() -> TinyhwDriver:
        assert farm.relay is not None
        target = Target(f"load-{time.monotonic_ns()}")
        targets.append(target)
        TinyhwRemote(target, "board", host="127.0.0.1", port=farm.relay.port, key_file=str(farm.key))
        board = TinyhwDriver(target, "tinyhw")
        target.activate(board)
        return board

    env_before = dict(os.environ)
    os.environ.update({k: farm.env[k] for k in ("XDG_STATE_HOME", "TINYHW_STRICT", "TINYHW_CLOCK")})
    os.chdir(farm.root)  # the backup goes to the working directory
    try:
        assert farm.relay is not None
        farm.relay.arm("up", 64 * 1024, lambda: (farm.kill("server"), farm.kill("exporter")))
        board = driver()
        from tinyhw.errors import TinyhwError

        with pytest.raises(TinyhwError, match="closed"):
            board.load(str(path))
        _restart_exporter_host(farm)
        done = driver().load(str(path))
        assert done["resumed"] is True and 0 < done["sectors_changed"] <= 32, done
    finally:
        for target in targets:
            target.cleanup()  # deactivates the drivers: the sessions end
        os.chdir(ROOT)
        os.environ.clear()
        os.environ.update(env_before)
    after = farm.root / "load-after.bin"
    _ok(farm.tinyhw("--device", farm.served, "flash", "dump", str(after), "--force"))
    assert after.read_bytes() == bytes(image)
    _cold(farm)


def test_an_isolated_exporter_is_reached_through_labgrids_ssh_forward(farm: Farm, tmp_path: Path) -> None:
    """Exporter ``-i``: clients must tunnel; labgrid's ssh manager forwards the TinyhwRemote's port through a real
    sshd (an ``ssh`` on PATH that adds this test's client config: port, key, host key), and tinyhw's TCP client
    reaches the loopback end of the forward."""
    from farmhelp import start, tool
    from sshdhelp import running_sshd

    with running_sshd() as sshd:
        config = tmp_path / "ssh_config"
        config.write_text(f"Host *\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User {sshd.user}\n"
                          f"  IdentityFile {sshd.key}\n  IdentitiesOnly yes\n  UserKnownHostsFile {sshd.known_hosts}\n"
                          "  BatchMode yes\n")
        bindir = tmp_path / "bin"
        bindir.mkdir()
        (bindir / "ssh").write_text(f"#!/bin/sh\nexec /usr/bin/ssh -F {config} \"$@\"\n")
        (bindir / "ssh").chmod(0o755)
        assert farm.relay is not None
        cfg = tmp_path / "isolated.yaml"
        cfg.write_text(f"bench4:\n  TinyhwRemote:\n    host: 127.0.0.1\n    port: {farm.relay.port}\n"
                       f"    key_file: {farm.key}\n")
        p = start("isolated-exporter", [tool("labgrid-exporter"), "-c", farm.coordinator, "-n", "ci4", "-i",
                                        str(cfg)], tmp_path, farm.env)
        try:
            p.wait_for("Exporter ready")
            for args in (("-p", "gpu-isolated", "create"), ("-p", "gpu-isolated", "add-match", "ci4/bench4/*")):
                _ok(farm.client(*args))
            env = {"PATH": f"{bindir}:{os.environ['PATH']}"}
            r = _ok(farm.tinyhw("--device", "labgrid:gpu-isolated", "--json", "probe", env=env))
            assert json.loads(r.stdout)["device_id"] == 0x744C
            log = (sshd.root / "sshd.log").read_text()
            assert "Accepted publickey for" in log, log
            assert f"target 127.0.0.1 port {farm.relay.port}" in log, log  # sshd opened the forward to the server
        finally:
            farm.client("-p", "gpu-isolated", "delete")
            p.stop()


#: the same environment with no image and no power driver: the strategy makes its TinyhwPowerDriver
POWER_ENV_YAML = ENV_YAML.replace("TinyhwStrategy:\n        image: {image}", "TinyhwStrategy: {{}}")

POWER_TEST = '''\
import pytest

from tinyhw import regs
from tinyhw.boot.amd.layout import BOOT_MAGIC
from tinyhw.errors import LinkDown

pytest_plugins = ["tinyhw.labgrid.fixtures"]
SCRATCH7 = regs.asic("navi31").offset("gc.SCRATCH_REG7")  # tinyhw's boot flag, the record `am boot` leaves


def test_bridge_power_through_the_place(tinyhw_board, target):
    power = target.get_driver("TinyhwPowerDriver")  # made by the strategy: no farm power driver is given
    assert power.get() is True
    tinyhw_board.write(SCRATCH7, 4, BOOT_MAGIC.to_bytes(4, "little"))
    assert tinyhw_board.read(SCRATCH7, 4, 1) == BOOT_MAGIC.to_bytes(4, "little")
    strategy = target.get_driver("TinyhwStrategy")
    assert strategy.status.name == "link_up"
    assert power.off().powered is False
    assert strategy.status.name == "unknown"  # the strategy no longer counts on what the gpu held
    with pytest.raises(LinkDown, match="the bridge's pcie side is powered off"):
        tinyhw_board.read(0, 4, 1)
    assert power.on().up is True
    assert tinyhw_board.probe()["device_id"] == 0x744C
    assert tinyhw_board.read(SCRATCH7, 4, 1) == bytes(4)  # the gpu lost its state with its power
    strategy.transition("link_up")
    assert power.cycle().up is True and tinyhw_board.link_up() and strategy.status.name == "unknown"
    strategy.transition("off")
    assert tinyhw_board.opened is None
    strategy.transition("link_up")
    assert tinyhw_board.link_up()
'''


def test_the_bridges_pcie_power_through_a_place(farm: Farm, tmp_path: Path) -> None:
    """TinyhwPowerDriver through a place whose server serves a GPU behind the emulated bridge: off, a register read
    fails clearly, on, probe works; the strategy switches it by default, and the server audits each switch."""
    from farmhelp import free_port, start, tool

    port = free_port()
    served = f"mock:navi31-usb,flash={tmp_path / 'usb-board.bin'},timing=instant"
    server = start("usb-server", [tool("tinyhw"), "serve", "remote", "--device", served, "--listen",
                                  f"127.0.0.1:{port}", "--key", str(farm.key), "--audit", "-"], tmp_path, farm.env)
    cfg = tmp_path / "usb-exporter.yaml"
    cfg.write_text(f"bench5:\n  TinyhwRemote:\n    host: 127.0.0.1\n    port: {port}\n    key_file: {farm.key}\n"
                   f"    device: \"mock:navi31-usb\"\n")
    exporter = None
    work = tmp_path / "powerproj"
    work.mkdir()
    try:
        server.wait_for(f"on 127.0.0.1:{port}")
        exporter = start("usb-exporter", [tool("labgrid-exporter"), "-c", farm.coordinator, "-n", "ci5", str(cfg)],
                         tmp_path, farm.env)
        exporter.wait_for("Exporter ready")
        for args in (("-p", "gpu-usb", "create"), ("-p", "gpu-usb", "add-match", "ci5/bench5/*"),
                     ("-p", "gpu-usb", "acquire")):
            _ok(farm.client(*args))
        _board_tests(farm, work, POWER_ENV_YAML.format(coordinator=farm.coordinator, place="gpu-usb"), POWER_TEST)
        audit = server.text()
        assert audit.count("pcie power off") == 3, audit  # off, the cycle's off, the strategy's off
    finally:
        farm.client("-p", "gpu-usb", "release")
        farm.client("-p", "gpu-usb", "delete")
        if exporter is not None:
            exporter.stop()
        server.stop()
