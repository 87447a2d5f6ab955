"""Runs INSIDE the QEMU guest (one boot for the USB tier): the emulated bridge served by
``tinyhw mock gadget`` on dummy_hcd, driven by tinyhw's usb transport through the real libusb and
the kernel's USB host stack (specs/usb-real-stack-harness.md).

Usage: ``python usbguest_main.py OUTDIR``; writes ``OUTDIR/results.json``, one entry per step
(an exception is recorded as ``{"error": traceback}`` so one failure does not hide the others).
The gadget runs as its own process (as users run it); driver commands run in-process where one
process suffices (Python start-up is slow in the emulated guest) and as a second process where
the point is a second process (the lock).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

RESULTS: dict[str, Any] = {}
FLASH = Path("/tmp/usbguest-flash.bin")
GADGET_DIR = Path("/sys/kernel/config/usb_gadget/tinyhw")
UDC = "dummy_udc.0"
RANGE = (0x1F0000, 0x1000)  # sector 496: a small range, few transfers (about 1.7 ms each here)
RESUME_SECTORS = (480, 3)  # the interrupted write: three sectors, unbound while programming
#: how long a gadget may take to enumerate: its Python start-up and board set-up in the TCG guest took 30-50 s
#: when the host was shared by other jobs (a 30 s bound failed the flash step there)
GADGET_START_S = 120.0
#: tinygrad's board: a cold Navi31 of its own (flash file and the board state kept beside it)
TINYGRAD_FLASH = Path("/tmp/usbguest-tinygrad-flash.bin")
#: how long tinygrad's process may run before it is cut (it then reports the step it was in)
TINYGRAD_LIMIT_S = float(os.environ.get("USBGUEST_TINYGRAD_LIMIT_S", "1200"))

#: the driver sends a vendor request the firmware does not know (0xE7): IN with data, then OUT without
UNKNOWN_REQUEST = """
import json
from tinyhw.errors import TinyhwError
from tinyhw.usb.bridge import IN, OUT
from tinyhw.usb.transport import UsbTransport
t = UsbTransport("")
r = {}
try:
    try:
        t.bridge._ctrl(IN, 0xE7, 0, 0, 16, 1.0, "vendor request 0xe7")
        r["in"] = "answered"
    except TinyhwError as e:
        r["in"], r["in_type"] = str(e), type(e).__name__
    try:
        r["out0"] = t.bridge._ctrl(OUT, 0xE7, 0, 0, b"", 1.0, "vendor request 0xe7")
    except TinyhwError as e:
        r["out0"] = str(e)
    r["ltssm_after"] = t.bridge.ltssm()
finally:
    t.close()
print(json.dumps(r))
"""

#: holds the bridge open (and its lock) until stdin closes
HOLD_OPEN = """
import sys
from tinyhw.usb.transport import UsbTransport
t = UsbTransport("")
print("ready", flush=True)
sys.stdin.read()
t.close()
"""


def cli(*args: str, timeout: float = 300) -> dict[str, Any]:
    """``tinyhw ARGS`` as its own process: exit code, stdout, stderr, seconds.

    Not in-process: without udevd (none in the guest) libusb learns of devices only when a process
    starts, and the gadget comes and goes during the run.
    """
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "tinyhw", *args], check=False, capture_output=True, text=True,
                       timeout=timeout)
    return {"args": list(args), "code": r.returncode, "out": r.stdout, "err": r.stderr,
            "s": round(time.monotonic() - t0, 3)}


def subprocess_cli(env: dict[str, str], *args: str, timeout: float = 900) -> dict[str, Any]:
    """Like :func:`cli`, with an environment (a private journal directory)."""
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "tinyhw", *args], check=False, capture_output=True, text=True,
                       timeout=timeout, env=env)
    return {"args": list(args), "code": r.returncode, "out": r.stdout, "err": r.stderr,
            "s": round(time.monotonic() - t0, 3)}


def sh(*args: str) -> dict[str, Any]:
    r = subprocess.run(list(args), check=False, capture_output=True, text=True, timeout=120)
    return {"args": list(args), "code": r.returncode, "out": r.stdout, "err": r.stderr}


#: a development aid: ``USBGUEST_STEPS=tinygrad`` (a comma list, on the host) runs only those steps and setup
ONLY = {s for s in os.environ.get("USBGUEST_STEPS", "").split(",") if s}


def step(name: str):  # decorator
    def wrap(fn):
        if ONLY and name != "setup" and name not in ONLY:
            return fn
        t0 = time.monotonic()
        try:
            RESULTS[name] = fn()
        except Exception:  # recorded for the host-side test to report
            RESULTS[name] = {"error": traceback.format_exc()}
        RESULTS.setdefault("timings", {})[name] = round(time.monotonic() - t0, 3)
        print(f"usbguest: step {name} done in {RESULTS['timings'][name]} s", file=sys.stderr, flush=True)
        return fn

    return wrap


def bridges() -> list[str]:
    """Bridges the kernel enumerated (sysfs; libusb is not asked, see :func:`cli`)."""
    found = []
    for d in Path("/sys/bus/usb/devices").iterdir():
        with contextlib.suppress(OSError):
            if (d / "idVendor").read_text().strip() == "add1":
                found.append(f"usb:{int((d / 'busnum').read_text())}-{int((d / 'devnum').read_text())}")
    return found


def wait_for_bridge(present: bool = True, timeout_s: float = 30.0) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        if bool(bridges()) == present:
            return round(time.monotonic() - t0, 3)
        time.sleep(0.1)
    raise TimeoutError(f"the bridge did not {'appear' if present else 'go away'} within {timeout_s} s")


#: What the guest kernel logs when dummy_hcd's enumeration of the gadget failed with a protocol error
#: (-EPROTO): seen when the TCG guest's CPUs are starved by a loaded host, never from the emulated bridge's
#: descriptors (FunctionFS serves them from the kernel). The gadget is then restarted once, and counted.
ENUMERATION_FAILED = ("can't read configurations", "unable to read config index")
#: Gadget starts that were repeated because enumeration failed (reported in RESULTS, checked by the test).
ENUMERATION_RETRIES: list[str] = []


class Gadget:
    """``tinyhw --json mock gadget`` as a background process (``flash``: its flash file; ``extra``: more options)."""

    def __init__(self, flash: Path = FLASH, extra: tuple[str, ...] = ()) -> None:
        for attempt in range(2):
            dmesg_before = len(sh("dmesg")["out"])
            self.p = subprocess.Popen([sys.executable, "-m", "tinyhw", "--json", "mock", "gadget", "--board",
                                       "navi31", "--flash", str(flash), *extra],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            try:
                self.appeared_s = wait_for_bridge(timeout_s=GADGET_START_S)
                return
            except TimeoutError as e:
                out, err = self._end()
                new_log = sh("dmesg")["out"][dmesg_before:]
                if attempt == 0 and any(m in new_log for m in ENUMERATION_FAILED):
                    ENUMERATION_RETRIES.append(new_log[-600:])
                    continue
                raise RuntimeError(f"{e}; gadget exit {self.p.returncode}\nstdout: {out[-1500:]}\n"
                                   f"stderr: {err[-3000:]}\ndmesg: {sh('dmesg')['out'][-3000:]}") from None

    def _end(self) -> tuple[str, str]:
        """Stop a gadget whose bridge never appeared; its output."""
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGINT)
        try:
            return self.p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            return self.p.communicate()

    def stop(self) -> dict[str, Any]:
        self.p.send_signal(signal.SIGINT)
        try:
            out, err = self.p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.p.kill()
            out, err = self.p.communicate()
            err += "\n[usbguest] the gadget did not stop within 60 s of SIGINT"
        report = None
        with contextlib.suppress(ValueError):
            report = json.loads(out) if out.strip() else None
        return {"code": self.p.returncode, "report": report, "out": out[-2000:] if report is None else "",
                "err": err, "configfs_left": GADGET_DIR.exists(),
                "ffs_mounted": "functionfs" in Path("/proc/mounts").read_text(), "appeared_s": self.appeared_s}


def wait_for_usb_open(p: subprocess.Popen, timeout_s: float = 120.0) -> float | None:
    """Seconds until process ``p`` holds a usbfs device file open (it has opened the bridge), or None."""
    t0 = time.monotonic()
    fd_dir = Path(f"/proc/{p.pid}/fd")
    while p.poll() is None and time.monotonic() - t0 < timeout_s:
        with contextlib.suppress(OSError):
            if any(os.readlink(fd).startswith("/dev/bus/usb/") for fd in fd_dir.iterdir()):
                return round(time.monotonic() - t0, 3)
        time.sleep(0.1)
    return None


def set_udc(name: str) -> None:
    (GADGET_DIR / "UDC").write_text(name + "\n")


def run_all() -> None:  # one linear script, in the order the issue lists the proofs
    @step("setup")
    def _() -> Any:
        mods = [line.split()[0] for line in Path("/proc/modules").read_text().splitlines()]
        mount = sh("mount", "-t", "configfs", "none", "/sys/kernel/config")
        return {"modules": mods, "mount": mount, "udcs": sorted(os.listdir("/sys/class/udc")),
                "gadget_dir": Path("/sys/kernel/config/usb_gadget").is_dir(),
                "python": sys.version, "libusb": bridges() == []}

    @step("probe")
    def _() -> Any:
        g = Gadget()
        r = {"list": cli("list"), "list_json": cli("--json", "list"),
             "probe": cli("--device", "usb", "--json", "--stats", "probe")}
        r["gadget"] = g.stop()
        r["gone_s"] = wait_for_bridge(present=False)
        return r

    gadget: list[Gadget] = []

    @step("flash")
    def _() -> Any:
        gadget.append(Gadget())
        lo, n = RANGE
        r: dict[str, Any] = {"info": cli("--device", "usb", "--json", "flash", "info"),
                             "read": cli("--device", "usb", "flash", "read", hex(lo), hex(n), "-o", "/tmp/read.bin")}
        r["read_equal"] = Path("/tmp/read.bin").read_bytes() == FLASH.read_bytes()[lo:lo + n]
        return r

    @step("unknown_request")
    def _() -> Any:
        r = sh(sys.executable, "-c", UNKNOWN_REQUEST)
        doc = json.loads(r["out"]) if r["code"] == 0 and r["out"].strip() else {}
        return {**doc, "proc": r}

    @step("lock")
    def _() -> Any:
        holder = subprocess.Popen([sys.executable, "-c", HOLD_OPEN], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        try:
            ready = holder.stdout.readline().strip() if holder.stdout else ""
            second = cli("--device", "usb", "probe")
        finally:
            out, err = holder.communicate("", timeout=60)
        return {"ready": ready, "second": second, "holder_err": err}

    @step("disconnect")
    def _() -> Any:
        cmd = [sys.executable, "-m", "tinyhw", "--device", "usb", "flash", "read", "0", "0x100000",
               "-o", "/tmp/big.bin"]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        opened_s = wait_for_usb_open(p)  # Python start-up (~7 s here), then it opens the bridge
        time.sleep(5.0)  # enumeration (~3 s); then it reads (1 MiB takes minutes here)
        r: dict[str, Any] = {"running_at_unbind": p.poll() is None, "opened_after_s": opened_s}
        t0 = time.monotonic()
        set_udc("")
        try:
            out, err = p.communicate(timeout=90)
            r["hung"] = False
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            r["hung"] = True
        r["after_unbind_s"] = round(time.monotonic() - t0, 3)
        r["cmd"] = {"args": cmd, "code": p.returncode, "out": out, "err": err}
        set_udc(UDC)
        r["back_s"] = wait_for_bridge()
        r["probe_after"] = cli("--device", "usb", "probe")
        return r

    @step("flash_write")
    def _() -> Any:
        """A one-sector write (--no-backup: only the range is read back), then verify of that range."""
        lo, n = RANGE
        image = bytearray(FLASH.read_bytes())
        image[lo + 0x100:lo + 0x110] = b"tinyhw usb tier!"
        Path("/tmp/image.bin").write_bytes(image)
        sector = ["--start-sector", str(lo // 0x1000), "--sector-count", "1"]
        r: dict[str, Any] = {"write": cli("--device", "usb", "--stats", "flash", "write", "/tmp/image.bin",
                                          *sector, "--yes", "--no-backup", timeout=1200)}
        r["verify"] = cli("--device", "usb", "--json", "flash", "verify", "/tmp/image.bin", *sector)
        r["read"] = cli("--device", "usb", "flash", "read", hex(lo), hex(n), "-o", "/tmp/after.bin")
        r["read_equal"] = Path("/tmp/after.bin").read_bytes() == bytes(image[lo:lo + n])
        r["file_equal"] = FLASH.read_bytes() == bytes(image)
        return r

    @step("resume")
    def _() -> Any:
        """A write interrupted by unbinding the gadget mid-sector is finished by --resume once it is back."""
        first, count = RESUME_SECTORS
        image = bytearray(FLASH.read_bytes())
        for s in range(first, first + count):
            image[s * 0x1000:(s + 1) * 0x1000] = bytes((s + i) & 0xFF for i in range(0x1000))
        Path("/tmp/resume.bin").write_bytes(image)
        rng = ["--start-sector", str(first), "--sector-count", str(count)]
        env = dict(os.environ, XDG_STATE_HOME="/tmp/state")
        cmd = [sys.executable, "-m", "tinyhw", "--device", "usb", "flash", "write", "/tmp/resume.bin", *rng,
               "--yes", "--no-backup"]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        r: dict[str, Any] = {"phase_at_unbind": None}
        t0 = time.monotonic()
        while p.poll() is None and time.monotonic() - t0 < 600:  # unbind once the journal shows programming
            journals = list(Path("/tmp/state/tinyhw").glob("flash-write-*.json"))
            with contextlib.suppress(OSError, ValueError):
                j = json.loads(journals[0].read_text()) if journals else {}
                if j.get("phase") == "program" and j.get("sector") is not None:
                    r["phase_at_unbind"] = {"phase": j["phase"], "sector": j["sector"]}
                    break
            time.sleep(0.05)
        set_udc("")
        try:
            out, err = p.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
        r["interrupted"] = {"args": cmd, "code": p.returncode, "out": out, "err": err}
        set_udc(UDC)
        r["back_s"] = wait_for_bridge()
        r["resume"] = subprocess_cli(env, "--device", "usb", "flash", "write", "/tmp/resume.bin", *rng, "--resume",
                                     "--yes", "--no-backup")
        r["verify"] = subprocess_cli(env, "--device", "usb", "--json", "flash", "verify", "/tmp/resume.bin", *rng)
        r["file_equal"] = FLASH.read_bytes() == bytes(image)
        return r

    @step("gadget_stop")
    def _() -> Any:
        return gadget.pop().stop()

    @step("queued_bulk")
    def _() -> Any:
        """Issue 12: bulk OUT transfers queued through libusb's asynchronous API (tinyhw.usb.queued), up to four in
        flight, each stream after one 0xF2 arm; the gadget's log shows what arrived (length, crc32, order)."""
        import random
        import zlib

        from tinyhw.errors import TinyhwError
        from tinyhw.usb.queued import queue_kind
        from tinyhw.usb.transport import UsbTransport

        rnd = random.Random(12)
        streams = [[rnd.randbytes(n) for n in sizes]
                   for sizes in ([0x8000] * 8, [0x10000, 0x200, 0x7E00, 0x10000, 0x400])]
        g = Gadget()
        r: dict[str, Any] = {"streams": []}
        try:
            t = UsbTransport("")
            try:
                r["kind"] = queue_kind(t.bridge.dev)
                for pieces in streams:
                    total = sum(map(len, pieces))
                    t.bridge._ctrl(0x40, 0xF2, total // 512, -(-total // 0x4000) << 8, b"", 1.0, "sram write arm")
                    t0 = time.monotonic()
                    with t.bridge.bulk_out_queue(4, 10.0, "queued bulk out") as q:
                        tickets = [q.submit(p) for p in pieces]
                        q.wait(tickets[-1])
                        r["streams"].append({"kind": q.kind, "tickets": tickets, "lengths": [len(p) for p in pieces],
                                             "crc32": [zlib.crc32(p) for p in pieces],
                                             "s": round(time.monotonic() - t0, 3)})
                r["after"] = t.bridge.ltssm()  # the next request is served
                # nothing armed: the bridge NAKs the data, libusb times the first transfer out; the queue latches
                # that, cancels and reaps the others, and raises one tinyhw error on the caller
                t0 = time.monotonic()
                try:
                    with t.bridge.bulk_out_queue(4, 0.5, "unarmed bulk out") as q:
                        last = [q.submit(bytes(0x8000)) for _ in range(3)][-1]
                        q.wait(last)
                    r["unarmed"] = {"error": None}
                except TinyhwError as e:
                    r["unarmed"] = {"error": str(e), "type": type(e).__name__, "lines": len(str(e).splitlines())}
                r["unarmed"]["s"] = round(time.monotonic() - t0, 3)
                r["after_unarmed"] = t.bridge.ltssm()
            finally:
                t.close()
        finally:
            r["gadget"] = g.stop()
        # the gadget sees packets, not the host's transfers (no short packet here): its records after each arm
        # must be the stream's bytes, in order, whole (each record's crc32 against the same slice of the stream)
        log = (r["gadget"].get("report") or {}).get("transfers", [])
        arms = [i for i, x in enumerate(log) if x["kind"] == "control" and x["setup"][:2] == [0x40, 0xF2]]
        r["landed"] = []
        for k, pieces in enumerate(streams):
            data = b"".join(pieces)
            end = arms[k + 1] if k + 1 < len(arms) else len(log)
            recs = [x for x in log[arms[k] + 1:end] if x["kind"] == "bulk_out"] if k < len(arms) else []
            off, ok = 0, []
            for x in recs:
                ok.append(x["status"] == "ok" and x["actual"] == x["length"]
                          and x["crc32"] == zlib.crc32(data[off:off + x["length"]]))
                off += x["length"]
            r["landed"].append({"records": len(recs), "bytes": off, "total": len(data), "all_ok": bool(ok) and all(ok)})
        return r

    step("tinygrad")(tinygrad_step)


def tinygrad_step() -> dict[str, Any]:
    """tinygrad 0.14.0's AMD driver, unmodified and with no adapter, through its own libusb ``USB3``: usbfs, dummy_hcd,
    FunctionFS, ``tinyhw mock gadget --strict``, the emulated bridge and Navi31 (usbguest_tinygrad.py, its own
    process). The gadget's report says what the board did (PSP commands and statuses, SMU messages) and what the
    strict emulation refused; its transfer log is summarised (count, the transfers that did not complete, the
    last ones)."""
    import importlib.util

    if importlib.util.find_spec("tinygrad") is None:
        return {"unavailable": "tinygrad is not installed (the compile extra)"}
    from tinyhw.boards.navi31 import FIRMWARE
    from tinyhw.peers.tinygrad_amd import default_firmware_dir

    missing = [n for n in FIRMWARE.files if not (default_firmware_dir() / n).is_file()]
    if missing:
        return {"unavailable": f"amdgpu firmware {', '.join(missing)} not in {default_firmware_dir()}"}
    out = Path("/tmp/usbguest-tinygrad.json")
    g = Gadget(TINYGRAD_FLASH, ("--strict",))
    r: dict[str, Any] = {"gadget_appeared_s": g.appeared_s, "limit_s": TINYGRAD_LIMIT_S}
    env = dict(os.environ, DEV="USB+AMD", XDG_CACHE_HOME="/tmp/tinygrad-cache")
    for k in ("DEBUG", "AM_DEBUG", "AM_RESET", "HCQ2", "DEV_ID"):
        env.pop(k, None)
    t0 = time.monotonic()
    try:
        p = subprocess.run([sys.executable, str(Path(__file__).with_name("usbguest_tinygrad.py")), str(out),
                            str(TINYGRAD_LIMIT_S)], env=env, check=False, capture_output=True, text=True,
                           timeout=TINYGRAD_LIMIT_S + 300)
        r["proc"] = {"code": p.returncode, "out": p.stdout[-3000:], "err": p.stderr[-6000:]}
    except subprocess.TimeoutExpired as e:
        r["proc"] = {"code": None, "out": "", "err": f"no exit within {e.timeout} s (its watchdog did not fire)"}
    r["s"] = round(time.monotonic() - t0, 3)
    r["run"] = json.loads(out.read_text()) if out.exists() else None
    stopped = g.stop()
    report = stopped.get("report") or {}
    transfers = report.pop("transfers", [])
    report["transfer_summary"] = {"count": len(transfers), "not_ok": [x for x in transfers if x["status"] != "ok"][:10],
                                  "last": transfers[-12:]}
    r["gadget"] = stopped
    return r


def main() -> None:
    out = Path(sys.argv[1])
    t0 = time.monotonic()
    try:
        run_all()
    finally:
        RESULTS["total_s"] = round(time.monotonic() - t0, 3)
        RESULTS["enumeration_retries"] = ENUMERATION_RETRIES
        (out / "results.json").write_text(json.dumps(RESULTS, indent=1, default=str))


if __name__ == "__main__":
    main()
