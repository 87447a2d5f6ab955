"""The USB tier's session fixture: build the guest (cached), boot it ONCE, hand the results to the tests.

specs/usb-real-stack-harness.md. The guest runs usbguest_main.py with this checkout and this
Python (the host root is its 9p root). A missing qemu, busybox-static or kernel package FAILS the
tier with what to install (CI installs them): a skip would hide a tier that never ran.
"""

from __future__ import annotations

import os
import shlex
import sys
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
    from qemu import GuestRunFailed, run_in_guest
    from usbguest_build import GuestUnavailable, build_usb_guest

    try:
        g = build_usb_guest()
    except GuestUnavailable as e:
        pytest.fail(f"the usb-gadget guest cannot be built: {e}", pytrace=False)
    env = ("unset TINYHW_LOCK_DIR TINYHW_DEVICE TINYHW_STRICT XDG_CACHE_HOME XDG_STATE_HOME\n"
           "export XDG_STATE_HOME=/tmp/state XDG_CACHE_HOME=/tmp/cache\n")
    # the firmware where this session found it (the host's root is the guest's); a step selection when given
    for name in ("TINYHW_FIRMWARE_DIR", "USBGUEST_STEPS", "USBGUEST_TINYGRAD_LIMIT_S"):
        if os.environ.get(name):
            env += f"export {name}={shlex.quote(os.environ[name])}\n"
    try:
        return run_in_guest(g, REPO, "tests/usbguest/usbguest_main.py", env=env, timeout_s=2400,
                            prefix="tinyhw-usbguest-")
    except GuestRunFailed as e:
        pytest.fail(str(e), pytrace=False)
