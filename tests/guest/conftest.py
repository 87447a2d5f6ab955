"""The real-kernel tier's session fixture: build the guest (cached), boot it ONCE, hand results to the tests.

specs/real-kernel-harness.md. The guest runs pciguest_main.py with this checkout and this
Python (the host root is its 9p root), so the tests here only assert on the JSON it wrote.
A missing qemu, busybox-static or kernel package FAILS the tier with what to install: CI
installs them, and a skip would hide a tier that never ran.
"""

from __future__ import annotations

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
    from qemu import GuestRunFailed, run_in_guest

    try:
        g = build_guest()
    except GuestUnavailable as e:
        pytest.fail(f"the real-kernel guest cannot be built: {e}", pytrace=False)
    try:
        return run_in_guest(g, REPO, "tests/guest/pciguest_main.py",
                            env="unset TINYHW_LOCK_DIR TINYHW_SYSFS TINYHW_DEVICE\n", timeout_s=900)
    except GuestRunFailed as e:
        pytest.fail(str(e), pytrace=False)

