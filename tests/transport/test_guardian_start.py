"""The ``pci:`` transport's bus-master guardian (transport/physmem.py) when its own setup fails: it must never
exit silently leaving bus mastering on; it clears the bit, and its holder is told."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tinyhw.errors import OperationFailed
from tinyhw.transport.physmem import start_guardian


def _config(tmp_path: Path, command: int) -> Path:
    config = tmp_path / "config"  # a regular file stands for the sysfs config file
    config.write_bytes(bytes(4) + command.to_bytes(2, "little") + bytes(250))
    return config


def _command(config: Path) -> int:
    return int.from_bytes(config.read_bytes()[4:6], "little")


def test_a_failing_descriptor_listing_does_not_leave_bus_mastering_on(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The watcher cannot list its descriptors (no /proc in its mount namespace, out of descriptors): it still
    guards, and clears the bit when the holder lets go."""
    config = _config(tmp_path, 0x0406)

    def no_listing(path: object = ".") -> list[str]:
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(os, "listdir", no_listing)
    monkeypatch.setattr(os, "scandir", no_listing)
    stop = start_guardian(str(config))
    monkeypatch.undo()
    assert _command(config) == 0x0406  # guarding, not cleared early
    stop()
    assert _command(config) == 0x0402  # bus master cleared, the other bits kept


def test_a_guardian_that_cannot_start_clears_the_bit_and_tells_its_holder(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    config = _config(tmp_path, 0x0006)

    def refuse() -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "setsid", refuse)
    with pytest.raises(OperationFailed, match="guardian .* could not start; bus mastering was cleared"):
        start_guardian(str(config))
    monkeypatch.undo()
    assert _command(config) == 0x0002
