"""Files the flash feature writes: dumps and backups, checked by reading them back.

ARCHITECTURE.md "CLI conventions" (destructive commands back up first). The path rules and the
atomic write (temporary file beside the target, fsync, rename) are :mod:`tinyhw.fileio`'s, shared
with every command that writes a file; here: a backup is never overwritten and is re-read from disk
and compared before it is trusted.
"""

from __future__ import annotations

import hashlib
import re
import time
from pathlib import Path

from tinyhw.errors import EnvironmentProblem, OperationFailed, Refused
from tinyhw.fileio import atomic_write

#: The largest flash image a command reads (the whole 2 MiB flash of the Navi31 board).
MAX_IMAGE = 0x200000


def sha256(data: bytes) -> str:
    """The SHA-256 of ``data`` in hex."""
    return hashlib.sha256(data).hexdigest()


def write_verified(path: Path, data: bytes) -> str:
    """Write a new file (never overwriting one) atomically, read it back and compare; returns the sha256."""
    written = atomic_write(path, data, overwrite=False)
    digest = sha256(data)
    try:
        back = Path(written).read_bytes()
    except OSError as e:
        raise EnvironmentProblem(f"cannot read back {written}: {e.strerror}") from None
    if sha256(back) != digest:
        raise OperationFailed(f"{written} does not read back as written (sha256 {sha256(back)[:16]}, "
                              f"expected {digest[:16]})", hint="check the disk; nothing was changed on the flash")
    return digest


def backup_dir() -> Path:
    """Where backups go when no ``--backup FILE`` is named: ``backups/`` in tinyhw's state directory (beside the
    flash journals, :func:`tinyhw.flash.journal.state_dir`: ``$XDG_STATE_HOME/tinyhw``, else
    ``~/.local/state/tinyhw``); created (mode 0700) when missing."""
    from tinyhw.flash.journal import state_dir

    path = state_dir() / "backups"
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as e:
        raise Refused(f"cannot create the backup directory {path}: {(e.strerror or str(e)).lower()}",
                      hint="name the backup file with --backup FILE, or set XDG_STATE_HOME to a writable "
                           "directory") from None
    return path


def default_backup_name(data: bytes, jedec: bytes = b"", now: float | None = None) -> Path:
    """``<board>-<jedec>-<vbios part number>-YYYYmmdd-HHMMSS-<sha8>.bin`` in :func:`backup_dir`: the board's name
    (``navi31``: the description of the VBIOS's PCI ids, else ``flash``), the flash chip's JEDEC id and the board's
    VBIOS part number (read from ``data``; ``novbios`` without one) name the board, the local time and the content's
    hash the moment."""
    from tinyhw.boards import by_pci
    from tinyhw.formats.vbios import vbios_identity

    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    ident = vbios_identity(data)
    part = re.sub(r"[^A-Za-z0-9.]+", "-", ident.part_number).strip("-.")[:40] if ident is not None else ""
    chip = jedec.hex() or "flash"
    board = by_pci(ident.vendor_id or 0, ident.device_id or 0) if ident is not None else None
    name = board.name if board is not None else "flash"
    return backup_dir() / f"{name}-{chip}-{part or 'novbios'}-{stamp}-{sha256(data)[:8]}.bin"
