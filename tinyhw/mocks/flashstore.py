"""The emulated flash's persistent store: a 2 MiB array written through to a file, plus
a small sidecar holding the chip's non-volatile status bits (specs/navi31-spi-flash.md §c.3).

ARCHITECTURE.md "Emulated boards": state that must outlive a command lives in a file that is
updated as each program or erase happens, so a disconnect mid-erase leaves a torn sector.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path

from tinyhw.errors import EnvironmentProblem, Refused

SIZE = 0x200000


class FlashStore:
    """The flash array in memory, written through to ``path``; NV status bits in ``path`` + ".sr".

    A missing file is created (parent directories too) from ``image()``; a file of the
    wrong size is refused rather than silently reshaped.
    """

    def __init__(self, path: Path, image: Callable[[], bytes], size: int = SIZE) -> None:
        self.path = Path(path)
        self.sr_path = self.path.with_name(self.path.name + ".sr")
        self.size = size
        try:
            if not self.path.exists():
                write_atomic(self.path, image())
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


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file and rename (parents created)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)
