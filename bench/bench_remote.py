"""Remote and serprog figures of issue 16, from exact --stats counters.

Starts `tinyhw serve remote` on a private Unix socket (and on loopback TCP with a fresh key) for
mock:navi31, then prints:

- `flash dump` over remote: network round trips per 4 KiB (target <= 2; counted by the client as
  `round_trips`), bytes sent and received per 4 KiB, wall time, and the same dump run locally;
- `flash info` and `probe` over remote: round trips;
- the round-trip latency of an empty request (PING) over the Unix socket and TCP;
- with flashrom installed: wall time of `flashrom -r` through `tinyhw serve serprog` on mock:navi31.

Runs in a private cache/state/lock/runtime directory, so it never touches the user's emulated flash.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SIZE = 2 << 20


def tinyhw(device: str, args: list[str], env: dict[str, str]) -> tuple[float, dict]:
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "tinyhw", "--device", device, "--stats", *args],
                       capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"bench: tinyhw {' '.join(args)} on {device} failed ({r.returncode}): {r.stderr.strip()}")
    return wall, json.loads([ln for ln in r.stderr.splitlines() if ln.startswith("{")][-1])


def start(args: list[str], env: dict[str, str]) -> tuple[subprocess.Popen, dict]:
    p = subprocess.Popen([sys.executable, "-m", "tinyhw", "--json", "-q", *args], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True, env=env)
    assert p.stdout is not None
    return p, json.loads(p.stdout.readline())


def ping_latency(device: str, env: dict[str, str], n: int = 500) -> float:
    code = ("import sys, json, tinyhw\n"
            f"with tinyhw.open({device!r}) as d:\n"
            "    t = d.transport\n"
            "    [t.ping() for _ in range(10)]\n"
            f"    xs = sorted(t.ping() for _ in range({n}))\n"
            "    print(json.dumps(xs[len(xs) // 2]))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return float(r.stdout.strip())


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="thwb", dir="/tmp") as tmp:
        env = dict(os.environ, XDG_CACHE_HOME=f"{tmp}/cache", XDG_STATE_HOME=f"{tmp}/state",
                   TINYHW_LOCK_DIR=f"{tmp}/locks", XDG_RUNTIME_DIR=f"{tmp}/run", TINYHW_REMOTE_KEY=f"{tmp}/key")
        Path(f"{tmp}/run").mkdir(mode=0o700)
        subprocess.run([sys.executable, "-m", "tinyhw", "-q", "serve", "keygen"], env=env, check=True,
                       capture_output=True)
        board = "mock:navi31"
        unix, _ = start(["serve", "remote", "--device", board, "--audit", f"{tmp}/audit.log"], env)
        tcp, tdoc = start(["serve", "remote", "--device", board, "--listen", "127.0.0.1:0",
                           "--audit", f"{tmp}/audit-tcp.log"], env)
        try:
            out = f"{tmp}/dump.bin"
            wall, s = tinyhw("remote:unix", ["flash", "dump", out], env)
            per = SIZE // 4096
            print(f"flash dump over remote:unix (2 MiB): round_trips={s['round_trips']}  "
                  f"round_trips/4KiB={s['round_trips'] / per:.2f} (target <= 2)  "
                  f"bytes_out/4KiB={s['bytes_out'] / per:,.0f}  bytes_in/4KiB={s['bytes_in'] / per:,.0f}  "
                  f"wall={wall:.1f}s (counts exact; wall measured, one run)")
            lwall, ls = tinyhw(board, ["flash", "dump", f"{tmp}/local.bin"], env)
            same = Path(out).read_bytes() == Path(f"{tmp}/local.bin").read_bytes()
            print(f"flash dump locally on {board}: wall={lwall:.1f}s  register round_trips={ls['round_trips']:,}  "
                  f"identical={same}")
            wall, s = tinyhw(f"remote:{tdoc['address']}", ["flash", "dump", f"{tmp}/dump-tcp.bin"], env)
            print(f"flash dump over remote:tcp (hmac): round_trips/4KiB={s['round_trips'] / per:.2f}  wall={wall:.1f}s")
            for args in (["probe"], ["flash", "info"]):
                _, s = tinyhw("remote:unix", args, env)
                print(f"{' '.join(args)} over remote: round_trips={s['round_trips']}")
            print(f"ping latency (median of 500): unix={ping_latency('remote:unix', env) * 1e6:.0f} us  "
                  f"tcp={ping_latency('remote:' + tdoc['address'], env) * 1e6:.0f} us")
        finally:
            for p in (unix, tcp):
                p.terminate()
                p.wait(10)
        flashrom = shutil.which("flashrom") or ("/usr/sbin/flashrom" if os.access("/usr/sbin/flashrom", os.X_OK)
                                                else None)
        if flashrom is None:
            print("flashrom: not installed (apt-get install flashrom); serprog figures skipped")
            return
        sp, sdoc = start(["serve", "serprog", "--device", board, "--listen", "127.0.0.1:0",
                          "--audit", f"{tmp}/audit-sp.log"], env)
        try:
            t0 = time.perf_counter()
            subprocess.run([flashrom, "-p", f"serprog:ip={sdoc['address']}", "-r", f"{tmp}/fr.bin"], check=True,
                           capture_output=True, timeout=600)
            wall = time.perf_counter() - t0
            same = Path(f"{tmp}/fr.bin").read_bytes() == Path(f"{tmp}/local.bin").read_bytes()
            print(f"flashrom -r through serve serprog on {board}: wall={wall:.1f}s  identical to tinyhw dump={same}")
        finally:
            sp.terminate()
            sp.wait(10)


if __name__ == "__main__":
    main()
