"""The farm tier's machinery: a real labgrid coordinator and exporter, a `tinyhw serve remote`, all on loopback.

Every process is started here with its own log file, waited for by a line in that log with a deadline in
seconds, and stopped by its own pid (terminate, then kill). A byte-counting TCP relay sits between clients and
the server, so a test can kill the server at a chosen point of a transfer (mid-dump, mid-write), which a timer
could not do reproducibly. The exporter publishes the relay's port as the TinyhwRemote resource.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from subprocess import CompletedProcess

VENV_BIN = Path(sys.executable).parent
START_TIMEOUT = 60.0  # seconds a coordinator, exporter or server may take to say it is ready (2 shared cores)


def tool(name: str) -> str:
    """A console script of this environment (labgrid-coordinator, tinyhw, ...)."""
    path = VENV_BIN / name
    return str(path) if path.exists() else (shutil.which(name) or name)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Proc:
    """A started process, its log and how to wait for a line in it."""

    name: str
    popen: subprocess.Popen
    log: Path

    def text(self) -> str:
        """The log so far."""
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def wait_for(self, needle: str, timeout: float = START_TIMEOUT) -> None:
        """Wait until the log holds ``needle``; fail (with the log) when the process exits or the time is up."""
        deadline = time.monotonic() + timeout
        while needle not in self.text():
            if self.popen.poll() is not None:
                raise AssertionError(f"{self.name} exited ({self.popen.returncode}) before {needle!r}:\n{self.text()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name} did not print {needle!r} within {timeout:g} s:\n{self.text()}")
            time.sleep(0.05)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Send ``sig`` to this process (by its pid), wait for it; SIGKILL after 10 s."""
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.popen.pid, sig)
            try:
                self.popen.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.popen.pid, signal.SIGKILL)
                self.popen.wait(10)


def start(name: str, argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> Proc:
    """Start ``argv`` in ``cwd`` with stdout and stderr in ``cwd/NAME.log``."""
    log = cwd / f"{name}.log"
    out = log.open("ab")
    popen = subprocess.Popen(argv, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             env=env or os.environ.copy())
    out.close()
    return Proc(name, popen, log)


class Relay:
    """Loopback TCP relay ``port`` -> ``target``; counts bytes each way and calls ``trip`` once, from the relay
    thread, when the armed direction has carried ``threshold`` bytes (then holds that direction's data)."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.counts = {"up": 0, "down": 0}
        self.armed: tuple[str, int, Callable[[], None]] | None = None
        self.lock = threading.Lock()
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def arm(self, direction: str, threshold: int, trip: Callable[[], None]) -> None:
        """Call ``trip`` once ``direction`` (``up``: to the server, ``down``: to the client) carried ``threshold``
        bytes from now on."""
        with self.lock:
            self.counts = {"up": 0, "down": 0}
            self.armed = (direction, threshold, trip)

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(("127.0.0.1", self.target), timeout=5)
            except OSError:
                client.close()
                continue
            server.settimeout(None)  # the connect was bounded; an idle session is not
            for a, b, d in ((client, server, "up"), (server, client, "down")):
                threading.Thread(target=self._pump, args=(a, b, d), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, direction: str) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                trip = None
                with self.lock:
                    self.counts[direction] += len(data)
                    if self.armed and self.armed[0] == direction and self.counts[direction] >= self.armed[1]:
                        trip, self.armed = self.armed[2], None
                if trip is not None:
                    trip()  # the server dies here; what it had sent so far is all the client gets
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()

    def close(self) -> None:
        """Stop accepting connections."""
        self.closed = True
        self.sock.close()


@dataclass
class Farm:
    """One coordinator, one exporter, one tinyhw server behind a relay, and a place matching the exporter's group."""

    root: Path
    key: Path
    flash: Path
    place: str = "gpu-bench"
    coordinator_port: int = 0
    server_port: int = 0
    relay: Relay | None = None
    procs: dict[str, Proc] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)

    @property
    def coordinator(self) -> str:
        """The coordinator's address, HOST:PORT."""
        return f"127.0.0.1:{self.coordinator_port}"

    @property
    def served(self) -> str:
        """The device the server serves (and the direct runs open)."""
        return f"mock:navi31,flash={self.flash},timing=instant"

    def client(self, *args: str, env: dict[str, str] | None = None, timeout: float = 120) -> CompletedProcess:
        """``labgrid-client -x COORDINATOR ARGS``."""
        return subprocess.run([tool("labgrid-client"), "-x", self.coordinator, *args], capture_output=True,
                              text=True, timeout=timeout, env={**self.env, **(env or {})}, cwd=self.root, check=False)

    def tinyhw(self, *args: str, env: dict[str, str] | None = None, timeout: float = 120) -> CompletedProcess:
        """The tinyhw CLI as its own process, with LG_COORDINATOR set to this farm's coordinator."""
        return subprocess.run([tool("tinyhw"), *args], capture_output=True, text=True, timeout=timeout, check=False,
                              env={**self.env, "LG_COORDINATOR": self.coordinator, **(env or {})}, cwd=self.root)

    def start_coordinator(self) -> None:
        """labgrid-coordinator on a free loopback port, in the farm's directory (its places.yaml lives there)."""
        self.coordinator_port = free_port()
        p = start("coordinator", [tool("labgrid-coordinator"), "-l", self.coordinator], self.root, self.env)
        self.procs["coordinator"] = p
        p.wait_for("listening on")

    def start_server(self) -> None:
        """tinyhw serve remote on a free loopback port with the farm's key, and a fresh relay in front of it (a
        server still running from before is stopped first: none is left behind)."""
        if "server" in self.procs:
            self.procs["server"].stop()
        self.server_port = free_port()
        p = start("server", [tool("tinyhw"), "serve", "remote", "--device", self.served, "--listen",
                             f"127.0.0.1:{self.server_port}", "--key", str(self.key), "--audit", "-"],
                  self.root, self.env)
        self.procs["server"] = p
        p.wait_for(f"on 127.0.0.1:{self.server_port}")
        if self.relay is not None:
            self.relay.close()
        self.relay = Relay(self.server_port)

    def exporter_config(self) -> Path:
        """The exporter's YAML: one group with the TinyhwRemote at the relay's port."""
        assert self.relay is not None
        cfg = self.root / "exporter.yaml"
        cfg.write_text(f"""bench1:
  location: loopback-ci
  TinyhwRemote:
    host: 127.0.0.1
    port: {self.relay.port}
    key_file: {self.key}
    device: "mock:navi31"
""")
        return cfg

    def start_exporter(self) -> None:
        """labgrid-exporter (no -i) named ci (one still running is stopped first); returns once the coordinator
        lists the resource."""
        if "exporter" in self.procs:
            self.procs["exporter"].stop()
        cfg = self.exporter_config()
        p = start("exporter", [tool("labgrid-exporter"), "-c", self.coordinator, "-n", "ci", str(cfg)], self.root,
                  self.env)
        self.procs["exporter"] = p
        p.wait_for("Exporter ready")
        self.wait_resource(available=True)

    def wait_resource(self, available: bool, timeout: float = START_TIMEOUT) -> None:
        """Wait until the coordinator lists the exporter's TinyhwRemote (``available``) or no longer does."""
        deadline = time.monotonic() + timeout
        while True:
            out = self.client("resources").stdout
            if ("ci/bench1/TinyhwRemote" in out) == available:
                return
            assert time.monotonic() < deadline, f"the resource did not {'appear' if available else 'go'}: {out}"
            time.sleep(0.2)

    def create_place(self) -> None:
        """The place, its match on the exporter's group and its tags."""
        for args in (("-p", self.place, "create"), ("-p", self.place, "add-match", "ci/bench1/*"),
                     ("-p", self.place, "set-tags", "board=navi31", "gpu=emu")):
            r = self.client(*args)
            assert r.returncode == 0, r.stderr

    def kill(self, name: str) -> None:
        """SIGKILL a farm process (the exporter host going down)."""
        self.procs[name].stop(signal.SIGKILL)

    def holder(self) -> str:
        """Who holds the place now, as ``labgrid-client show`` says (``None`` when free)."""
        for line in self.client("-p", self.place, "show").stdout.splitlines():
            if line.strip().startswith("acquired:"):
                return line.split(":", 1)[1].strip()
        return "?"

    def stop(self) -> None:
        """Stop the exporter, the server and the coordinator, in that order, and the relay."""
        for name in ("exporter", "server", "coordinator"):
            if name in self.procs:
                self.procs[name].stop()
        if self.relay is not None:
            self.relay.close()
