"""Boot the test guest once in QEMU (TCG) and run a prepared script in it (specs/real-kernel-harness.md).

The guest sees the host's whole root filesystem read-only through 9p with a tmpfs overlay,
so it runs this checkout with the host's Python; a second, writable 9p share carries the
script in and the results out. The edu device is pinned at 0000:00:05.0 (binding the wrong
address to vfio-pci would take the guest's 9p root away), behind an emulated intel-iommu so
VFIO type1 works.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from build import Guest, need_tool

EDU_ADDRESS = "0000:00:05.0"


@dataclass
class BootResult:
    returncode: int
    wall_s: float
    serial: str  # QEMU's stdout: the guest's serial console
    outdir: Path


def qemu_command(guest: Guest, outdir: Path, memory_mb: int = 1024) -> list[str]:
    qemu = need_tool("qemu-system-x86_64", "qemu-system-x86")
    return [
        qemu, "-accel", "tcg,thread=multi", "-cpu", "max", "-smp", "2",
        "-machine", "q35,kernel-irqchip=split", "-m", str(memory_mb),
        "-nographic", "-nodefaults", "-serial", "stdio", "-no-reboot",
        "-device", "intel-iommu,intremap=on",
        "-kernel", str(guest.kernel), "-initrd", str(guest.initrd),
        "-append", "console=ttyS0 quiet panic=-1 intel_iommu=on",
        "-virtfs", "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap",
        "-virtfs", f"local,path={outdir},mount_tag=outdir,security_model=none",
        "-device", "edu,addr=05.0,dma_mask=0xffffffff",  # dma below 4 GiB, not 256 MiB: physical addresses too
        # ivshmem-plain: a 64 MiB prefetchable memory BAR (bar2) backed by host memory, for bench copy
        "-object", "memory-backend-ram,id=ivshm,size=64M", "-device", "ivshmem-plain,memdev=ivshm,addr=06.0",
    ]


def boot(guest: Guest, outdir: Path, script: str, timeout_s: float = 900) -> BootResult:
    """Write ``script`` as the guest's ``/run/out/run.sh``, boot, wait for power-off."""
    outdir.mkdir(parents=True, exist_ok=True)
    (outdir / "run.sh").write_text(script)
    t0 = time.monotonic()
    try:
        p = subprocess.run(qemu_command(guest, outdir), capture_output=True, text=True, timeout=timeout_s, check=False,
                           stdin=subprocess.DEVNULL)
        rc, serial = p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        rc = -1
        serial = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        serial += f"\n[host] qemu did not power off within {timeout_s:.0f} s"
    return BootResult(rc, time.monotonic() - t0, serial, outdir)


class GuestRunFailed(Exception):
    """The guest ran but wrote no results; the message has the serial console and the script's output."""


def run_in_guest(guest: Guest, repo: Path, main: str, *, env: str = "", timeout_s: float = 900,
                 prefix: str = "tinyhw-guest-") -> dict[str, Any]:
    """Boot once, run ``python main /run/out`` from the checkout ``repo`` (``env``: extra shell lines
    before it), and return its results.json plus ``_boot`` (wall time, return code, console tails)."""
    outdir = Path(tempfile.mkdtemp(prefix=prefix))
    script = (f"cd {shlex.quote(str(repo))}\n"
              f"export PYTHONPATH={shlex.quote(str(repo))} HOME=/root PYTHONDONTWRITEBYTECODE=1\n"
              f"{env}"
              f"{shlex.quote(sys.executable)} {shlex.quote(main)} /run/out\n")
    result = boot(guest, outdir, script, timeout_s=timeout_s)
    path = outdir / "results.json"
    console = (outdir / "console.log").read_text() if (outdir / "console.log").exists() else ""
    if not path.exists():
        raise GuestRunFailed(f"the guest wrote no results (qemu rc {result.returncode}, {result.wall_s:.1f} s)\n"
                             f"serial:\n{result.serial[-3000:]}\nconsole:\n{console[-3000:]}")
    data = json.loads(path.read_text())
    data["_boot"] = {"wall_s": result.wall_s, "returncode": result.returncode, "serial": result.serial[-3000:],
                     "console": console[-6000:]}
    return data
