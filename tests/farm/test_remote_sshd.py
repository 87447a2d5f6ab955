"""remote:ssh:// through a real OpenSSH server on 127.0.0.1 (tests/helpers/sshdhelp.py), not a fake ssh.

The client runs the system ssh (``$TINYHW_SSH``: port, key, known host key); sshd runs ``tinyhw serve remote
--stdio`` as this user; the board's probe and a 2 MiB flash dump through it equal the direct run byte for byte,
and a host key that does not match is refused before anything runs.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from flashhelp import dev as mockdev
from sshdhelp import Sshd, running_sshd

TINYHW = str(Path(sys.executable).parent / "tinyhw")


@pytest.fixture(scope="module")
def sshd() -> Iterator[Sshd]:
    with running_sshd() as server:
        yield server


def _run(server: Sshd, *args: str, ssh: str | None = None) -> subprocess.CompletedProcess:
    # the server side gets its state dirs through env(1) in the remote command (sshd passes no environment)
    far = shlex.join(["env", *(f"{k}={os.environ[k]}" for k in ("TINYHW_LOCK_DIR", "XDG_STATE_HOME",
                                                                 "XDG_CACHE_HOME", "TINYHW_STRICT", "TINYHW_CLOCK")),
                      TINYHW])
    env = {**os.environ, "TINYHW_SSH": ssh or server.ssh_command(), "TINYHW_REMOTE_TINYHW": far}
    return subprocess.run([TINYHW, *args], capture_output=True, text=True, timeout=120, env=env, check=False)


def _local(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([TINYHW, "--device", mockdev(tmp_path), *args], capture_output=True, text=True,
                          timeout=120, check=False)


def test_probe_and_a_2mib_dump_through_a_real_sshd(sshd: Sshd, tmp_path: Path) -> None:
    device = f"remote:ssh://{sshd.user}@127.0.0.1/{mockdev(tmp_path)}"
    r = _run(sshd, "--device", device, "--json", "probe")
    assert r.returncode == 0, r.stderr
    local = _local(tmp_path, "--json", "probe")
    assert local.returncode == 0, local.stderr
    strip = ("transport", "emulated", "location", "bridge")
    far, near = json.loads(r.stdout), json.loads(local.stdout)
    assert far["transport"] == "remote" and {k: v for k, v in far.items() if k not in strip} == \
        {k: v for k, v in near.items() if k not in strip}
    via, direct = tmp_path / "via-sshd.bin", tmp_path / "direct.bin"
    d = _run(sshd, "--device", device, "flash", "dump", str(via))
    assert d.returncode == 0, d.stderr
    assert _local(tmp_path, "flash", "dump", str(direct)).returncode == 0
    assert len(via.read_bytes()) == 2 << 20 and via.read_bytes() == direct.read_bytes()
    assert "Accepted publickey for" in (sshd.root / "sshd.log").read_text()  # it went through sshd


def test_a_host_key_that_does_not_match_is_refused(sshd: Sshd, tmp_path: Path) -> None:
    wrong = tmp_path / "known_hosts"
    wrong.write_text(f"[127.0.0.1]:{sshd.port} ssh-ed25519 "
                     "AAAAC3NzaC1lZDI1NTE5AAAAIOl4jkUsB8tgaGmSLMHh3oPqGQ4JEcTzS3qH8y6Xw1pG\n")
    ssh = sshd.ssh_command().replace(str(sshd.known_hosts), str(wrong))
    r = _run(sshd, "--device", f"remote:ssh://{sshd.user}@127.0.0.1/{mockdev(tmp_path)}", "probe", ssh=ssh)
    assert r.returncode == 1 and not r.stdout, (r.returncode, r.stderr)
    assert "Host key verification failed" in r.stderr, r.stderr  # ssh's own words, then tinyhw's one line
    assert r.stderr.splitlines()[-1].startswith("error: the connection to ssh://"), r.stderr
