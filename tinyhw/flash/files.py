"""Files the flash feature writes: atomic dumps and backups, checked by reading them back.

ARCHITECTURE.md "CLI conventions" (destructive commands back up first) and the issue's rules: a dump
or backup is written to a temporary file beside the target, flushed to disk, then renamed, so a
reader never sees half a file; a backup is re-read from disk and compared before it is trusted.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from pathlib import Path

from tinyhw.errors import EnvironmentProblem, OperationFailed, Refused


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_atomic(path: Path, data: bytes, *, overwrite: bool = True) -> None:
    """Write ``data`` to ``path`` through ``path.tmp<pid>`` + fsync + rename."""
    path = Path(path)
    if not overwrite and path.exists():
        raise Refused(f"{path} exists; refusing to overwrite it", hint="pick another file name")
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise EnvironmentProblem(f"cannot write {path}: {e.strerror}", hint="check the directory and free space") \
            from None


def write_verified(path: Path, data: bytes, *, overwrite: bool = False) -> str:
    """:func:`write_atomic`, then read the file back and compare; returns the sha256."""
    write_atomic(path, data, overwrite=overwrite)
    digest = sha256(data)
    try:
        back = Path(path).read_bytes()
    except OSError as e:
        raise EnvironmentProblem(f"cannot read back {path}: {e.strerror}") from None
    if sha256(back) != digest:
        raise OperationFailed(f"{path} does not read back as written (sha256 {sha256(back)[:16]}, "
                              f"expected {digest[:16]})", hint="check the disk; nothing was changed on the flash")
    return digest


def default_backup_name(data: bytes, now: float | None = None) -> Path:
    """``navi31-flash-backup-YYYYmmdd-HHMMSS-<sha8>.bin`` in the current directory."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    return Path.cwd() / f"navi31-flash-backup-{stamp}-{sha256(data)[:8]}.bin"
