"""The USB tier's session fixture: build the guest (cached), boot it ONCE, hand the results to the tests.

specs/usb-real-stack-harness.md. The guest runs usbguest_main.py with this checkout and this
Python (the host root is its 9p root). A missing qemu, busybox-static or kernel package FAILS the
tier with what to install (CI installs them): a skip would hide a tier that never ran.
"""

from __future__ import annotations

import json
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
for p in (HERE, HERE.parent / "guest"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))


@pytest.fixture(scope="session")
def usb_guest() -> dict[str, Any]:
    """results.json of the single guest run, plus ``_boot`` (wall time, return code, console tails)."""
    from qemu import boot
    from usbguest_build import GuestUnavailable, build_usb_guest

    try:
        g = build_usb_guest()
    except GuestUnavailable as e:
        pytest.fail(f"the usb-gadget guest cannot be built: {e}", pytrace=False)
    outdir = Path(tempfile.mkdtemp(prefix="tinyhw-usbguest-"))
    script = (f"cd {shlex.quote(str(REPO))}\n"
              f"export PYTHONPATH={shlex.quote(str(REPO))} HOME=/root PYTHONDONTWRITEBYTECODE=1\n"
              "unset TINYHW_LOCK_DIR TINYHW_DEVICE TINYHW_STRICT XDG_CACHE_HOME XDG_STATE_HOME\n"
              "export XDG_STATE_HOME=/tmp/state XDG_CACHE_HOME=/tmp/cache\n"
              f"{shlex.quote(sys.executable)} tests/usbguest/usbguest_main.py /run/out\n")
    result = boot(g, outdir, script, timeout_s=2400)
    path = outdir / "results.json"
    console = (outdir / "console.log").read_text() if (outdir / "console.log").exists() else ""
    if not path.exists():
        pytest.fail(f"the usb guest wrote no results (qemu rc {result.returncode}, {result.wall_s:.1f} s)\n"
                    f"serial:\n{result.serial[-3000:]}\nconsole:\n{console[-3000:]}", pytrace=False)
    data = json.loads(path.read_text())
    data["_boot"] = {"wall_s": result.wall_s, "returncode": result.returncode, "serial": result.serial[-3000:],
                     "console": console[-6000:]}
    return data
