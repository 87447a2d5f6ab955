"""Files the flash feature writes: dumps and backups, checked by reading them back.

ARCHITECTURE.md "CLI conventions" (destructive commands back up first). The path rules and the
atomic write (temporary file beside the target, fsync, rename) are :mod:`tinyhw.fileio`'s, shared
with every command that writes a file; here: a backup is never overwritten and is re-read from disk
and compared before it is trusted.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

from tinyhw.errors import EnvironmentProblem, OperationFailed
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


def default_backup_name(data: bytes, now: float | None = None) -> Path:
    """``navi31-flash-backup-YYYYmmdd-HHMMSS-<sha8>.bin`` in the current directory."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    return Path.cwd() / f"navi31-flash-backup-{stamp}-{sha256(data)[:8]}.bin"
