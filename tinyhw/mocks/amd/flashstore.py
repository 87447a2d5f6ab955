"""The emulated flash's persistent store: a 2 MiB array written through to a file, plus
a small sidecar holding the chip's non-volatile status bits (specs/navi31-spi-flash.md §c.3).

ARCHITECTURE.md "Emulated boards": state that must outlive a command lives in a file that is
updated as each program or erase happens, so a disconnect mid-erase leaves a torn sector.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable
from pathlib import Path

from tinyhw.errors import EnvironmentProblem, Refused
from tinyhw.fileio import kind_of, stat_through

SIZE = 0x200000


class FlashStore:
    """The flash array in memory, written through to ``path``; NV status bits in ``path`` + ".sr".

    A missing file is created from ``image()`` (a fresh factory image; :attr:`created` says so), its parent
    directories too only with ``make_parents`` (the default file in the user's cache; a file the user names in a
    missing directory is more likely a typo, refused); a symlink is followed (a dangling one creates its target).
    Refused (exit 2), before anything is opened: a path that is, or whose symlink names, a directory, FIFO, device
    node or socket, and a file of the wrong size (never silently reshaped).
    """

    def __init__(self, path: Path, image: Callable[[], bytes], size: int = SIZE, *, make_parents: bool = True) -> None:
        self.path = Path(path)
        self.sr_path = self.path.with_name(self.path.name + ".sr")
        self.size = size
        self.created = False
        target = check_store_path(self.path, make_parents)
        try:
            if target is not None:
                write_atomic(target, image())
                self.created = True
            self._fd: int | None = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
            self.data = bytearray(os.pread(self._fd, size + 1, 0))
            self.sr_nv = bytearray(self.sr_path.read_bytes()[:3]) if self.sr_path.exists() else bytearray(3)
        except OSError as e:
            raise EnvironmentProblem(f"cannot open the emulated flash file {self.path}: {e.strerror}",
                                     hint="pick another file with flash=FILE") from None
        if len(self.data) != size:
            os.close(self._fd)
            self._fd = None
            raise Refused(f"emulated flash file {self.path} holds 0x{len(self.data):x} bytes, not 0x{size:x}",
                          hint="restore it with 'tinyhw mock reset --yes' or pick another file with flash=FILE")
        self.sr_nv += bytes(3 - len(self.sr_nv))

    def write(self, offset: int, chunk: bytes) -> None:
        """Change ``len(chunk)`` bytes at ``offset`` in memory and in the file (pwrite of that range)."""
        self.data[offset:offset + len(chunk)] = chunk
        if self._fd is not None:
            os.pwrite(self._fd, chunk, offset)

    def save_sr(self, sr: bytes) -> None:
        """Keep ``sr`` (SR1, SR2, SR3) as the non-volatile status bits and write them to the sidecar file atomically."""
        self.sr_nv[:] = sr
        write_atomic(self.sr_path, bytes(sr))

    def close(self) -> None:
        """Flush the flash file to disk (fsync) and close it; safe to call twice."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            with contextlib.suppress(OSError):
                os.fsync(fd)
            os.close(fd)


def check_store_path(path: Path, make_parents: bool) -> Path | None:
    """Refuse (exit 2) a flash file that is not a regular file (also behind a symlink), or that is missing in a
    directory that is missing when ``make_parents`` is off; the file to create when it is missing, else None."""
    target, via, st = stat_through(path, "cannot use the emulated flash file", "pick another file with flash=FILE")
    if st is not None:
        if not stat.S_ISREG(st.st_mode):
            raise Refused(f"the emulated flash file {target}{via} is {kind_of(st.st_mode)}, not a regular file",
                          hint="pick another file with flash=FILE")
        return None
    if not make_parents and not target.parent.is_dir():
        raise Refused(f"cannot create the emulated flash file {target}{via}: the directory {target.parent} does "
                      "not exist", hint="create it first or pick another file with flash=FILE")
    return target


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file and rename (parents created)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)
