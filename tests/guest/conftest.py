"""The real-kernel tier's session fixture: build the guest (cached), boot it ONCE, hand results to the tests.

specs/real-kernel-harness.md. The guest runs pciguest_main.py with this checkout and this
Python (the host root is its 9p root), so the tests here only assert on the JSON it wrote.
A missing qemu, busybox-static or kernel package FAILS the tier with what to install: CI
installs them, and a skip would hide a tier that never ran.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
REPO = HERE.parent.parent


@pytest.fixture(scope="session")
def guest() -> dict[str, Any]:
    """results.json of the single guest run (plus ``_boot``: wall time, serial console tail)."""
    from build import GuestUnavailable, build_guest
    from qemu import boot

    try:
        g = build_guest()
    except GuestUnavailable as e:
        pytest.fail(f"the real-kernel guest cannot be built: {e}", pytrace=False)
    import tempfile

    outdir = Path(tempfile.mkdtemp(prefix="tinyhw-guest-"))
    script = (f"cd {shlex.quote(str(REPO))}\n"
              f"export PYTHONPATH={shlex.quote(str(REPO))} HOME=/root PYTHONDONTWRITEBYTECODE=1\n"
              f"unset TINYHW_LOCK_DIR TINYHW_SYSFS TINYHW_DEVICE\n"
              f"{shlex.quote(sys.executable)} tests/guest/pciguest_main.py /run/out\n")
    result = boot(g, outdir, script, timeout_s=300)
    path = outdir / "results.json"
    console = (outdir / "console.log").read_text() if (outdir / "console.log").exists() else ""
    if not path.exists():
        pytest.fail(f"the guest wrote no results (qemu rc {result.returncode}, {result.wall_s:.1f} s)\n"
                    f"serial:\n{result.serial[-3000:]}\nconsole:\n{console[-3000:]}", pytrace=False)
    data = json.loads(path.read_text())
    data["_boot"] = {"wall_s": result.wall_s, "returncode": result.returncode, "serial": result.serial[-3000:],
                     "console": console[-5000:]}
    return data

