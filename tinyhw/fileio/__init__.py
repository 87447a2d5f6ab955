"""Files a user names on the command line: checked before a device is touched, written atomically, read bounded.

Following ARCHITECTURE.md "CLI conventions": refuse before touching anything, exit 2.
Layer 1 (stdlib and :mod:`tinyhw.errors` only), so every feature and the CLI use the same rules:

* :func:`check_output_path` -- before anything is read from a device: refuses an empty path, a
  device node, FIFO, socket or directory, a directory that does not exist or where no file can be
  created (probed by creating and removing a temporary file, because ``os.access`` says yes to root
  even on ``/proc``), and an existing regular file unless ``force``. **Symlinks are written
  through**: the checks and the write apply to the symlink's target (a dangling link creates its
  target); the link itself is never replaced.
* :func:`atomic_write` -- a temporary file in the target's directory, fsync, then a rename over the
  target (or, with ``overwrite=False``, a hard link that fails if the name exists meanwhile: a backup
  is never overwritten); the destination is checked again just before, so a device node, FIFO or
  socket that appeared meanwhile is never replaced. The temporary file's name carries the writer's pid, so
  :func:`remove_stale_temps` can remove what a killed writer left (its process gone) on a later run.
* :func:`check_output_dir` / :func:`atomic_write_dir` -- an output directory (a capture): refused when it
  exists and is not an empty directory; written as a temporary directory beside it, then renamed into place,
  so a failure leaves nothing half-written.
* :func:`read_input` -- regular files only, the size checked by ``fstat`` on the opened file before
  a single byte is read, and the read bounded by ``max_size`` (a file that grows is refused too).
* :func:`read_xz_input` -- the same for an xz file, whose decompression stops at ``max_size`` bytes
  (a small xz bomb never grows past the cap).

Every refusal is :class:`~tinyhw.errors.Refused` (exit 2) with a one-line message naming the path.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path

from tinyhw.errors import EnvironmentProblem, Refused

__all__ = ["atomic_write", "atomic_write_dir", "check_output_dir", "check_output_path", "check_writable_dir", "kind_of",
           "read_input", "read_xz_input", "remove_stale_temps", "resolve_target", "stat_through"]

_READ_CHUNK = 1 << 20


def kind_of(mode: int) -> str:
    """What a ``st_mode`` is, in words: "a regular file", "a directory", "a character device node"..."""
    for test, words in ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a directory"),
                        (stat.S_ISCHR, "a character device node"), (stat.S_ISBLK, "a block device node"),
                        (stat.S_ISFIFO, "a fifo"), (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symlink")):
        if test(mode):
            return words
    return "not a regular file"


def _text(path: str | os.PathLike[str]) -> str:
    text = os.fspath(path)
    if not text or not text.strip():
        raise Refused("an empty path was given", hint="name a file")
    if "\0" in text:
        raise Refused(f"{text!r} contains a nul byte", hint="name a file")
    return text


def resolve_target(path: str | os.PathLike[str]) -> Path:
    """The file a write to ``path`` lands in: ``path`` itself, or the final target of a symlink."""
    text = _text(path)
    p = Path(text)
    try:
        if p.is_symlink():
            return p.resolve(strict=False)
    except (OSError, RuntimeError) as e:
        raise Refused(f"cannot follow the symlink {text}: {getattr(e, 'strerror', None) or e}".lower(),
                      hint="name a regular file") from None
    return p


def stat_through(path: str | os.PathLike[str], failure: str, hint: str) -> tuple[Path, str, os.stat_result | None]:
    """(the file a write to ``path`` lands in, " (the target of the symlink PATH)" or "", its stat or None when it
    does not exist); a stat that fails otherwise is refused (exit 2) as "``failure`` TARGET: why" with ``hint``."""
    text = _text(path)
    target = resolve_target(text)
    via = f" (the target of the symlink {text})" if str(target) != text and Path(text).is_symlink() else ""
    try:
        return target, via, os.stat(target)
    except FileNotFoundError:
        return target, via, None
    except OSError as e:
        raise Refused(f"{failure} {target}{via}: {(e.strerror or str(e)).lower()}", hint=hint) from None


def _probe_directory(parent: Path, text: str, what: str) -> None:
    """Create and remove a temporary file in ``parent``: the only test that holds for root and /proc too."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=".tinyhw-probe-", dir=parent)
    except OSError as e:
        raise Refused(f"cannot write the {what} {text}: cannot create a file in {parent} "
                      f"({(e.strerror or str(e)).lower()})", hint="pick a writable directory") from None
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(tmp)


def check_writable_dir(path: str | os.PathLike[str], *, what: str = "output file") -> Path:
    """Refuse (exit 2) a directory a file of tinyhw's naming cannot be written to (the name chosen later, as a
    default backup's is once the device is read); return the directory."""
    target = Path(path)
    if not target.is_dir():
        raise Refused(f"cannot write the {what} in {target}: it is not a directory")
    _probe_directory(target, str(target), what)
    return target


def check_output_path(path: str | os.PathLike[str], *, force: bool = False, what: str = "output file",
                      force_hint: str | None = "--force overwrites it") -> Path:
    """Refuse (exit 2) a path that must not be written; return the file the write will land in.

    Call it before reading anything from a device. ``force`` allows replacing an existing regular
    file (never anything else); ``force_hint`` names the option that does it (None: no option does,
    as for backups, which are never overwritten).
    """
    text = _text(path)
    if text.endswith(os.sep):
        raise Refused(f"cannot write the {what} {text}: the path names a directory", hint="name a file in it")
    target, via, st = stat_through(text, f"cannot write the {what}", "name a regular file in a writable directory")
    if st is not None:
        if not stat.S_ISREG(st.st_mode):
            raise Refused(f"refusing to write the {what} to {target}{via}: it is {kind_of(st.st_mode)}",
                          hint="name a regular file")
        if not force:
            raise Refused(f"the {what} {target}{via} exists; refusing to overwrite it",
                          hint=force_hint or "pick another file name")
    parent = target.parent
    try:
        pst = os.stat(parent)
    except FileNotFoundError:
        raise Refused(f"cannot write the {what} {text}: the directory {parent} does not exist",
                      hint="create it first or pick another directory") from None
    except OSError as e:
        raise Refused(f"cannot write the {what} {text}: {parent}: {(e.strerror or str(e)).lower()}") from None
    if not stat.S_ISDIR(pst.st_mode):
        raise Refused(f"cannot write the {what} {text}: {parent} is not a directory")
    _probe_directory(parent, text, what)
    return target


def check_output_dir(path: str | os.PathLike[str], *, what: str = "output directory") -> Path:
    """Refuse (exit 2) an output directory that exists and is not empty, or is not a directory, or whose parent
    cannot take it; return it. Call it before reading anything from a device."""
    text = _text(path)
    target = Path(text.rstrip(os.sep) or os.sep)
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise Refused(f"cannot write the {what} {text}: {(e.strerror or str(e)).lower()}") from None
    if st is not None:
        if not stat.S_ISDIR(st.st_mode):
            raise Refused(f"refusing to write the {what} {text}: it is {kind_of(st.st_mode)}",
                          hint="name a new or empty directory")
        try:
            empty = not any(os.scandir(target))
        except OSError as e:
            raise Refused(f"cannot read the {what} {text}: {(e.strerror or str(e)).lower()}") from None
        if not empty:
            raise Refused(f"the {what} {text} exists and is not empty; refusing to write into it",
                          hint="name a new or empty directory")
    parent = target.parent
    if not parent.is_dir():
        raise Refused(f"cannot write the {what} {text}: the directory {parent} does not exist",
                      hint="create it first or pick another directory")
    _probe_directory(parent, text, what)
    return target


def atomic_write_dir(path: str | os.PathLike[str], files: dict[str, bytes]) -> Path:
    """Write ``files`` (plain name -> bytes) as the directory ``path``: into a temporary directory beside it, then
    renamed over ``path`` (which may be an empty directory); refused like :func:`check_output_dir`."""
    target = check_output_dir(path)
    for name in files:
        if not name or "/" in name or name in (".", "..") or "\0" in name:
            raise ValueError(f"not a plain file name: {name!r}")
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        for name, data in files.items():
            with open(tmp / name, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
        _sync_directory(tmp)
        check_output_dir(target)
        os.rename(tmp, target)
    except BaseException:
        for child in tmp.iterdir() if tmp.exists() else ():
            with contextlib.suppress(OSError):
                child.unlink()
        with contextlib.suppress(OSError):
            tmp.rmdir()
        raise
    _sync_directory(target.parent)
    return target


def _check_destination(target: Path, overwrite: bool) -> None:
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        return
    except OSError as e:
        raise Refused(f"cannot write {target}: {(e.strerror or str(e)).lower()}") from None
    if not stat.S_ISREG(st.st_mode):
        raise Refused(f"refusing to replace {target}: it is {kind_of(st.st_mode)}", hint="name a regular file")
    if not overwrite:
        raise Refused(f"{target} exists; refusing to overwrite it", hint="pick another file name")


def atomic_write(path: str | os.PathLike[str], data: bytes | Iterable[bytes], *, overwrite: bool = True) -> Path:
    """Write ``data`` (bytes, or chunks) to ``path`` atomically; return the file written (a symlink's target).

    A reader never sees half a file: the bytes go to a temporary file in the same directory, are
    flushed to disk, then renamed over the target (``overwrite=False``: linked to it, failing if the
    name exists by then). Never replaces a device node, FIFO, socket or directory (exit 2). A
    failing write (disk full, permission) is :class:`~tinyhw.errors.EnvironmentProblem` (exit 3)
    and leaves no temporary file behind.
    """
    target = resolve_target(path)
    _check_destination(target, overwrite)
    chunks = [data] if isinstance(data, bytes | bytearray | memoryview) else data
    tmp: str | None = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name[:64]}.{os.getpid()}.", suffix=".tmp", dir=target.parent)
        with os.fdopen(fd, "wb") as f:
            for chunk in chunks:
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        _check_destination(target, overwrite)  # again: nothing may have appeared in its place meanwhile
        if overwrite:
            os.replace(tmp, target)
        else:
            os.link(tmp, target)
            os.unlink(tmp)
        tmp = None
        _sync_directory(target.parent)
    except FileExistsError:
        raise Refused(f"{target} appeared while it was being written; refusing to overwrite it",
                      hint="pick another file name") from None
    except OSError as e:
        raise EnvironmentProblem(f"cannot write {target}: {(e.strerror or str(e)).lower()}",
                                 hint="check the directory and free space") from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    return target


#: an :func:`atomic_write` temporary file: ``.NAME.PID.RANDOM.tmp`` (RANDOM is mkstemp's, without dots)
_TEMP_PID = re.compile(r"\.(\d+)\.[^.]+\.tmp$")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: it exists, as another user
        return True
    return True


def remove_stale_temps(directory: str | os.PathLike[str], name_prefix: str) -> list[Path]:
    """Remove the temporary files that :func:`atomic_write` left in ``directory`` for targets named
    ``name_prefix...`` when its process was killed: regular files of this user whose writer (the pid in the name)
    is gone. A live writer's file, a file of another user, a link or anything else is left alone; returns what
    was removed."""
    removed: list[Path] = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(directory):
            if not entry.name.startswith(f".{name_prefix}") or not entry.name.endswith(".tmp"):
                continue
            m = _TEMP_PID.search(entry.name)
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if m is None or not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or _alive(int(m.group(1))):
                continue
            with contextlib.suppress(OSError):
                os.unlink(entry.path)
                removed.append(Path(entry.path))
    return removed


def _sync_directory(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _size_text(n: int) -> str:
    for unit, shift in (("gib", 30), ("mib", 20), ("kib", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"0x{n:x} bytes"


def read_input(path: str | os.PathLike[str], max_size: int, what: str = "input file") -> bytes:
    """The bytes of a regular file of at most ``max_size`` bytes; anything else is refused (exit 2).

    The type is checked with ``stat`` before opening and again with ``fstat`` on the opened file
    (a FIFO is opened non-blocking, so a FIFO without a writer cannot hang it), the size before any
    read, and the read stops at ``max_size + 1`` bytes (a file that grows, or a pseudo file whose
    size says 0, is still bounded).
    """
    text = _text(path)
    try:
        st = os.stat(text)
        if not stat.S_ISREG(st.st_mode):
            raise Refused(f"refusing to read the {what} {text}: it is {kind_of(st.st_mode)}",
                          hint="give a regular file")
        fd = os.open(text, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise Refused(f"cannot read the {what} {text}: no such file", hint="check the path") from None
    except OSError as e:
        if e.errno == errno.ENAMETOOLONG:
            raise Refused(f"cannot read the {what}: the path is too long") from None
        raise Refused(f"cannot read the {what} {text}: {(e.strerror or str(e)).lower()}",
                      hint="check the path and permissions") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Refused(f"refusing to read the {what} {text}: it is {kind_of(st.st_mode)}",
                          hint="give a regular file")
        if st.st_size > max_size:
            raise Refused(f"refusing to read the {what} {text}: 0x{st.st_size:x} bytes is more than the "
                          f"{_size_text(max_size)} this command accepts", hint="give the right file")
        out = bytearray()
        while len(out) <= max_size:
            chunk = os.read(fd, min(_READ_CHUNK, max_size + 1 - len(out)))
            if not chunk:
                break
            out += chunk
    except OSError as e:
        raise Refused(f"cannot read the {what} {text}: {(e.strerror or str(e)).lower()}") from None
    finally:
        os.close(fd)
    if len(out) > max_size:
        raise Refused(f"refusing to read the {what} {text}: it holds more than the {_size_text(max_size)} "
                      "this command accepts", hint="give the right file")
    return bytes(out)


MAX_XZ_STREAMS = 64     # concatenated xz streams in one file (a kernel firmware file holds one)
XZ_MEMLIMIT = 256 << 20   # the decoder's memory for one stream (xz -9e needs 65 MiB; the kernel's files 2-8 MiB)
_XZ_PIECE = (1 << 12, 1 << 20)   # compressed bytes handed over at a time: the first of a stream, the most
_NOT_NUL = re.compile(rb"[^\x00]")

#: Work counters of :func:`read_xz_input` since import (tests compare them at two input sizes).
XZ_WORK = {"streams": 0, "fed_bytes": 0}


def read_xz_input(path: str | os.PathLike[str], max_size: int, what: str = "input file") -> bytes:
    """The decompressed bytes of an xz (or lzma-alone) regular file, at most ``max_size`` of them (exit 2 beyond).

    The compressed file is read with :func:`read_input` (bounded by ``max_size`` too); decompression is
    streamed with an output limit of ``max_size + 1`` bytes, so it stops there however far the data
    would expand. Concatenated streams are decompressed as ``xz -d`` does, at most :data:`MAX_XZ_STREAMS` of
    them; the input is handed over in pieces, so the work per stream is bounded (no copy of the rest of the file
    per stream) and the whole is linear in the file. Data that is not xz is refused.
    """
    import lzma

    text = _text(path)
    data = read_input(text, max_size, what)
    view = memoryview(data)
    out = bytearray()
    off = 0
    streams = 0
    try:
        while True:
            streams += 1
            XZ_WORK["streams"] += 1
            if streams > MAX_XZ_STREAMS:
                raise Refused(f"refusing to read the {what} {text}: it holds more than {MAX_XZ_STREAMS} "
                              "concatenated xz streams", hint="give the right file")
            dec = lzma.LZMADecompressor(memlimit=XZ_MEMLIMIT)   # a header cannot claim a 1.5 GiB dictionary
            size = _XZ_PIECE[0]   # doubled while the stream goes on: at most twice its length is handed over
            while not dec.eof:
                piece = view[off:off + size] if dec.needs_input else b""
                if dec.needs_input:
                    if not piece:
                        raise lzma.LZMAError("compressed data ended before the end-of-stream marker")
                    off += len(piece)
                    size = min(2 * size, _XZ_PIECE[1])
                    XZ_WORK["fed_bytes"] += len(piece)
                out += dec.decompress(piece, max_length=max_size + 1 - len(out))
                if len(out) > max_size:
                    raise Refused(f"refusing to read the {what} {text}: it decompresses to more than the "
                                  f"{_size_text(max_size)} this command accepts", hint="give the right file")
            off -= len(dec.unused_data)   # what the last piece held beyond the stream
            m = _NOT_NUL.search(data, off)   # stream padding
            if m is None:
                return bytes(out)
            off = m.start()
    except lzma.LZMAError as e:
        if "memory usage limit" in str(e).lower():
            raise Refused(f"refusing to read the {what} {text}: decoding it needs more than {XZ_MEMLIMIT >> 20} mib "
                          "of memory (its dictionary)", hint="give the right file") from None
        raise Refused(f"the {what} {text} is not valid xz data ({str(e).lower()})",
                      hint="give the right file") from None
