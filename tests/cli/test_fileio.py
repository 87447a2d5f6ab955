"""tinyhw.fileio: the path checks, atomic writes and bounded reads every command that names a file uses."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from tinyhw.errors import EnvironmentProblem, Refused
from tinyhw.fileio import atomic_write, check_output_path, read_input


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    p = tmp_path / "fifo"
    os.mkfifo(p)
    return p


@pytest.fixture
def sock(tmp_path: Path):
    p = tmp_path / "s.sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(p))
    yield p
    s.close()


def _refused(fn, *args, **kw) -> str:
    with pytest.raises(Refused) as e:
        fn(*args, **kw)
    assert e.value.exit_code == 2
    assert "\n" not in str(e.value)
    return str(e.value)


def test_output_refuses_special_files(tmp_path: Path, fifo: Path, sock: Path) -> None:
    assert "character device node" in _refused(check_output_path, "/dev/full", force=True)
    assert "a fifo" in _refused(check_output_path, fifo, force=True)
    assert "a socket" in _refused(check_output_path, sock, force=True)
    assert "a directory" in _refused(check_output_path, tmp_path, force=True)
    assert "names a directory" in _refused(check_output_path, f"{tmp_path}/x/")
    assert "empty path" in _refused(check_output_path, "")
    assert "does not exist" in _refused(check_output_path, tmp_path / "missing" / "out.bin")
    (tmp_path / "file").write_bytes(b"")
    assert "not a directory" in _refused(check_output_path, tmp_path / "file" / "out.bin")


def test_output_refuses_an_unwritable_directory_even_for_root() -> None:
    # /proc takes no new files even as root, where os.access says yes: the probe file finds out
    assert "cannot create a file in /proc" in _refused(check_output_path, "/proc/tinyhw-out.bin")
    assert "exists" in _refused(check_output_path, "/proc/version")


def test_output_existing_file_needs_force(tmp_path: Path) -> None:
    p = tmp_path / "out.bin"
    assert check_output_path(p) == p
    p.write_bytes(b"old")
    msg = _refused(check_output_path, p)
    assert "exists" in msg and "--force" in msg
    assert "another file name" in _refused(check_output_path, p, force_hint=None)
    assert check_output_path(p, force=True) == p
    assert not [x for x in os.listdir(tmp_path) if x.startswith(".tinyhw-probe")]


def test_symlinks_are_written_through(tmp_path: Path) -> None:
    target = tmp_path / "real.bin"
    link = tmp_path / "link.bin"
    link.symlink_to(target)  # dangling: the write creates the target
    assert check_output_path(link) == target
    atomic_write(link, b"one")
    assert link.is_symlink() and target.read_bytes() == b"one"
    assert "symlink" in _refused(check_output_path, link)  # the target exists now: --force
    atomic_write(link, b"two")
    assert link.is_symlink() and target.read_bytes() == b"two"
    dev = tmp_path / "to-dev"
    dev.symlink_to("/dev/full")
    assert "character device node" in _refused(check_output_path, dev, force=True)
    assert "character device node" in _refused(atomic_write, dev, b"x")
    assert dev.is_symlink()
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    _refused(check_output_path, loop)


def test_atomic_write_never_replaces_special_files(tmp_path: Path, fifo: Path) -> None:
    _refused(atomic_write, fifo, b"x")
    assert fifo.is_fifo()
    _refused(atomic_write, tmp_path, b"x")
    p = tmp_path / "backup.bin"
    atomic_write(p, [b"ab", b"cd"], overwrite=False)
    assert p.read_bytes() == b"abcd"
    _refused(atomic_write, p, b"x", overwrite=False)
    assert p.read_bytes() == b"abcd"
    assert sorted(os.listdir(tmp_path)) == ["backup.bin", "fifo"]


def test_atomic_write_failure_leaves_nothing(tmp_path: Path) -> None:
    def chunks():
        yield b"x" * 10
        raise OSError(28, "No space left on device")

    with pytest.raises(EnvironmentProblem, match="no space left"):
        atomic_write(tmp_path / "out.bin", chunks())
    assert os.listdir(tmp_path) == []


def test_read_input_regular_files_only(tmp_path: Path, fifo: Path, sock: Path) -> None:
    p = tmp_path / "in.bin"
    p.write_bytes(b"12345")
    assert read_input(p, 5) == b"12345"
    assert "0x5 bytes is more than the 0x4 bytes" in _refused(read_input, p, 4)
    assert "character device node" in _refused(read_input, "/dev/zero", 1 << 21)
    assert "a fifo" in _refused(read_input, fifo, 10)  # and does not block waiting for a writer
    assert "a socket" in _refused(read_input, sock, 10)
    assert "a directory" in _refused(read_input, tmp_path, 10)
    assert "no such file" in _refused(read_input, tmp_path / "nope", 10)
    assert "empty path" in _refused(read_input, "", 10)
    big = tmp_path / "big.bin"
    with open(big, "wb") as f:
        f.truncate((2 << 20) + 1)
    assert "more than the 2 mib this command accepts" in _refused(read_input, big, 2 << 20, "image")


def test_read_input_bounds_pseudo_files() -> None:
    # /proc files say size 0 and still hold bytes: the read itself is bounded
    assert "more than the 0x8 bytes" in _refused(read_input, "/proc/self/status", 8)
    assert read_input("/proc/self/status", 1 << 20).startswith(b"Name:")


# -- xz inputs: decompression bounded by the cap -------------------------------------------------------------------


def xz_bomb(path: Path, total: int, stream_size: int = 16 << 20) -> Path:
    """An xz file that decompresses to ``total`` zero bytes: one stream of ``stream_size`` zeros, compressed
    chunk by chunk (never held whole), repeated as concatenated streams (what ``xz -d`` decompresses too)."""
    import lzma

    c = lzma.LZMACompressor(preset=0)
    zeros = bytes(1 << 20)
    stream = b"".join([c.compress(zeros) for _ in range(stream_size >> 20)] + [c.flush()])
    with open(path, "wb") as f:
        for _ in range(total // stream_size):
            f.write(stream)
    return path


def test_xz_input_is_read_and_concatenated_streams_too(tmp_path: Path) -> None:
    import lzma

    from tinyhw.fileio import read_xz_input

    p = tmp_path / "a.xz"
    p.write_bytes(lzma.compress(b"first ") + lzma.compress(b"second"))
    assert read_xz_input(p, 4096) == b"first second"
    p.write_bytes(lzma.compress(bytes(4097)))
    assert "decompresses to more than the 4 kib" in _refused(read_xz_input, p, 4096)
    p.write_bytes(b"not xz at all")
    assert "not valid xz data" in _refused(read_xz_input, p, 4096)
    p.write_bytes(lzma.compress(bytes(1000))[:-8])  # truncated
    assert "not valid xz data" in _refused(read_xz_input, p, 4096)


def test_xz_bomb_stops_at_the_cap_with_bounded_memory(tmp_path: Path) -> None:
    """A 1 GiB bomb (a few KiB on disk) is refused after decompressing at most the cap: peak memory ~ the cap."""
    import time
    import tracemalloc

    from tinyhw.fileio import read_xz_input

    bomb = xz_bomb(tmp_path / "bomb.xz", 1 << 30)
    assert bomb.stat().st_size < 256 << 10
    tracemalloc.start()
    t0 = time.monotonic()
    try:
        message = _refused(read_xz_input, bomb, 4 << 20, "firmware file")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "decompresses to more than the 4 mib" in message
    assert peak < 16 << 20, peak  # the 4 MiB cap and its input, never the 1 GiB
    print(f"the 1 GiB xz bomb was refused after {time.monotonic() - t0:.2f} s wall")
