"""The device lock: one holder, the holder shown to whoever is refused, never unlinked."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tinyhw.errors import DeviceLocked
from tinyhw.transport.lock import DeviceLock


def test_second_holder_is_refused_with_holder_info() -> None:
    with DeviceLock("pci:0000:03:00.0", backend="pci") as first:
        path = first.path
        code = (
            "import sys\nfrom tinyhw.transport.lock import DeviceLock\nfrom tinyhw.errors import DeviceLocked\n"
            "try:\n    DeviceLock('pci:0000:03:00.0').acquire()\nexcept DeviceLocked as e:\n"
            "    print(e); sys.exit(e.exit_code)\n"
        )
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
        assert r.returncode == 3
        assert "in use by pid" in r.stdout and str(path) in r.stdout
    assert path is not None and path.exists()  # never unlinked
    with DeviceLock("pci:0000:03:00.0"):
        pass


def test_same_process_second_lock_object_refused() -> None:
    with DeviceLock("usb-serial:1234abcd"), pytest.raises(DeviceLocked):
        DeviceLock("usb-serial:1234abcd").acquire()


def test_distinct_keys_do_not_collide() -> None:
    with DeviceLock("a/b"), DeviceLock("a_b"):
        pass
