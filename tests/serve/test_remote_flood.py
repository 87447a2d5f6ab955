"""An unauthenticated connection flood from another local user against `tinyhw serve remote` on loopback TCP: the
owner still gets through every time (per-source limits on unauthenticated connections, a deep accept queue, and
the client's retry with backoff)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from flashhelp import dev as mockdev
from remotehelp import served

from tinyhw.connect import open_device
from tinyhw.remote.secret import load_secret, write_secret

FLOOD = """
import select, socket, sys, time
port, n, held = int(sys.argv[1]), 0, []
print("flooding", flush=True)
while not select.select([sys.stdin], [], [], 0)[0]:
    for _ in range(8):  # about 800 connections a second, each left silent, without waiting for the server
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
        held.append(s)
        n += 1
    while len(held) > 256:
        held.pop(0).close()
    time.sleep(0.01)
print(n, flush=True)
"""


def _python_for_nobody() -> str:
    for cand in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.path.exists(cand) and os.stat(cand).st_mode & 0o001:
            return cand
    pytest.skip("no python interpreter that user nobody may run")


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to flood as another uid")
def test_the_owner_gets_through_an_unauthenticated_flood(tmp_path: Path) -> None:
    key = write_secret(tmp_path / "k.key")
    with served(mockdev(tmp_path), listen="127.0.0.1:0", secret=load_secret(key)) as s:
        port = s.address.rsplit(":", 1)[1]
        p = subprocess.Popen([_python_for_nobody(), "-c", FLOOD, port], user=65534, group=65534, extra_groups=[],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd="/")
        try:
            assert p.stdout is not None and p.stdout.readline() == "flooding\n"
            got = []
            for _ in range(9):
                with open_device(f"remote:{s.address},key={key}") as o:
                    got.append(o.transport.config_read(0))
        finally:
            out, _ = p.communicate("stop\n", timeout=60)
        assert got == [0x744C1002] * 9
        flood = int(out.split()[-1])
        assert flood > 100, flood  # the flood was real: that many connections while the owner ran
        cut = [ln for ln in s.audit.lines if "handshake cut" in ln]
        assert cut and all("uid 65534" in ln for ln in cut), cut[:5]  # only the flood's handshakes were cut
