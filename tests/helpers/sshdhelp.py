"""A real OpenSSH server on 127.0.0.1 for the tests, run as the current user from a temporary directory.

Debian's openssh-server (tests/setup-system.sh installs it) is started as ``/usr/sbin/sshd -D -e -f CONFIG -p PORT``
with a host key, an authorized key and a config made here: it listens on 127.0.0.1 only, accepts only that key,
and reads no system configuration (the config names every file; ``-f`` replaces /etc/ssh/sshd_config). The client
side is ``ssh -F /dev/null`` with the key, a known_hosts file holding the host key, and strict host key checking.
"""

from __future__ import annotations

import getpass
import os
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

SSHD = Path("/usr/sbin/sshd")
PRIVSEP_DIR = Path("/run/sshd")  # sshd run as root needs it (Debian's service creates it; so does setup-system.sh)
READY_TIMEOUT = 60.0


@dataclass
class Sshd:
    """A running sshd and the ssh command line that reaches it."""

    root: Path
    port: int
    user: str
    key: Path
    known_hosts: Path
    proc: subprocess.Popen

    def ssh_command(self) -> str:
        """What ``$TINYHW_SSH`` holds: ssh with this server's port, key and host key, and nothing else."""
        return shlex.join(["ssh", "-F", "/dev/null", "-p", str(self.port), "-i", str(self.key),
                           "-o", "IdentitiesOnly=yes", "-o", f"UserKnownHostsFile={self.known_hosts}",
                           "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10"])


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "tinyhw-test", "-f", str(path)],
                   check=True, capture_output=True, timeout=30)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def running_sshd() -> Iterator[Sshd]:
    """Start sshd on a free loopback port; stop it (by its pid) and remove its files afterwards."""
    if not SSHD.is_file() or shutil.which("ssh") is None or shutil.which("ssh-keygen") is None:
        pytest.fail("openssh-server (sshd) or openssh-client is missing: run bash tests/setup-system.sh",
                    pytrace=False)
    if os.geteuid() == 0 and not PRIVSEP_DIR.is_dir():
        pytest.fail(f"sshd run as root needs {PRIVSEP_DIR}: run bash tests/setup-system.sh", pytrace=False)
    root = Path(tempfile.mkdtemp(prefix="thw-sshd-", dir="/tmp"))
    try:
        host, user_key = root / "host_ed25519", root / "user_ed25519"
        _keygen(host)
        _keygen(user_key)
        (root / "authorized_keys").write_text((root / "user_ed25519.pub").read_text())
        user = getpass.getuser()
        port = _free_port()
        config = root / "sshd_config"
        config.write_text("\n".join([
            "ListenAddress 127.0.0.1", f"HostKey {host}", f"AuthorizedKeysFile {root / 'authorized_keys'}",
            "PidFile none", "StrictModes no", "UsePAM no", "PasswordAuthentication no",
            "KbdInteractiveAuthentication no", "PubkeyAuthentication yes", f"AllowUsers {user}",
            "PermitRootLogin prohibit-password", "X11Forwarding no", "AllowTcpForwarding yes", "PrintMotd no",
            "LogLevel DEBUG1", ""]))  # DEBUG1 logs each forwarded connection (direct-tcpip)
        pub = (root / "host_ed25519.pub").read_text().split()
        known = root / "known_hosts"
        known.write_text(f"[127.0.0.1]:{port} {pub[0]} {pub[1]}\n")
        log = (root / "sshd.log").open("wb")
        proc = subprocess.Popen([str(SSHD), "-D", "-e", "-f", str(config), "-p", str(port)], stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        try:
            deadline = time.monotonic() + READY_TIMEOUT
            while "Server listening on 127.0.0.1" not in (root / "sshd.log").read_text(errors="replace"):
                assert proc.poll() is None, (root / "sshd.log").read_text(errors="replace")
                assert time.monotonic() < deadline, f"sshd did not start within {READY_TIMEOUT:.0f} s"
                time.sleep(0.05)
            yield Sshd(root, port, user, user_key, known, proc)
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
    finally:
        shutil.rmtree(root, ignore_errors=True)
