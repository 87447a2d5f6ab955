"""Shared helpers of the flash CLI tests: a private emulated board per test, its state, its journals."""

from __future__ import annotations

from pathlib import Path


def dev(tmp_path: Path, board: str = "navi31", extra: str = "") -> str:
    """A device string for the emulated board whose flash file lives in ``tmp_path``."""
    return f"mock:{board},flash={tmp_path / 'flash.bin'},timing=instant" + (f",{extra}" if extra else "")


def flash_state(tmp_path: Path) -> tuple[bytes, bytes]:
    """The emulated flash contents and its non-volatile status-register sidecar."""
    sr = tmp_path / "flash.bin.sr"
    return (tmp_path / "flash.bin").read_bytes(), sr.read_bytes() if sr.exists() else b""


def journals(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "state" / "tinyhw").glob("flash-*.json"))
