"""Where the remote client and server find their shared secret and the default Unix socket.

The secret file holds at least 32 random bytes (``tinyhw serve keygen`` writes 32 as 64 hex digits) and
must be private: owned by the user, mode 0600 (no group or other bits), as specs/pci-vfio-remote.md
§12.2 item 2 asks. The default socket lives in ``$XDG_RUNTIME_DIR/tinyhw/`` (a per-user 0700 directory).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import tempfile
from pathlib import Path

from tinyhw.errors import EnvironmentProblem, Refused
from tinyhw.fileio import kind_of

MIN_SECRET = 32
MAX_KEY_FILE = 4096  # the most a key file may hold (a keygen key is 65 bytes)


def default_key_path() -> Path:
    """The shared key's path: ``$TINYHW_REMOTE_KEY``, else ``$XDG_CONFIG_HOME/tinyhw/remote.key`` (default
    ``~/.config``)."""
    env = os.environ.get("TINYHW_REMOTE_KEY")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "tinyhw" / "remote.key"


def runtime_dir() -> Path:
    """``$XDG_RUNTIME_DIR/tinyhw``, or ``<tmp>/tinyhw-<uid>`` when it is not set (where the default socket lives)."""
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    return Path(xdg) / "tinyhw" if xdg else Path(tempfile.gettempdir()) / f"tinyhw-{os.getuid()}"


def default_socket_path() -> Path:
    """The unix socket a ``serve remote`` listens on by default: ``remote.sock`` in :func:`runtime_dir`."""
    return runtime_dir() / "remote.sock"


def _check_regular(p: Path, st: os.stat_result) -> None:
    """A key is a small regular file: a fifo would block the open or the read forever, a device node never ends."""
    if not stat.S_ISREG(st.st_mode):
        raise Refused(f"refusing to read the remote key {p}: it is {kind_of(st.st_mode)}, not a regular file",
                      hint="name the key file itself (`tinyhw serve keygen` writes one)")
    if st.st_size > MAX_KEY_FILE:
        raise Refused(f"refusing to read the remote key {p}: 0x{st.st_size:x} bytes is more than a key file holds "
                      f"(0x{MAX_KEY_FILE:x})", hint="name the key file `tinyhw serve keygen` wrote")


def load_secret(path: Path | str) -> bytes:
    """The secret in ``path``: refused unless a regular file of at most :data:`MAX_KEY_FILE` bytes (checked
    with ``lstat`` before it is opened, non-blocking, and with ``fstat`` after), owned by this user with no
    group/other permission bits."""
    p = Path(path)
    try:
        _check_regular(p, os.lstat(p))
        fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        raise EnvironmentProblem(f"no remote key at {p}",
                                 hint="create one with `tinyhw serve keygen` and copy it to both machines") from None
    except OSError as e:
        raise EnvironmentProblem(f"cannot read the remote key {p}: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        _check_regular(p, st)  # again on what was opened: it may have been swapped meanwhile
        if st.st_mode & 0o077 or st.st_uid != os.geteuid():
            raise Refused(f"the remote key {p} must be private (mode {stat.S_IMODE(st.st_mode):04o}, owner uid "
                          f"{st.st_uid})", hint=f"chmod 600 {p} and own it as this user")
        raw = os.read(fd, MAX_KEY_FILE + 1)
    finally:
        os.close(fd)
    if len(raw) > MAX_KEY_FILE:
        raise Refused(f"refusing to read the remote key {p}: it grew past 0x{MAX_KEY_FILE:x} bytes")
    text = raw.strip()
    try:
        secret = bytes.fromhex(text.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        secret = raw
    if len(secret) < MIN_SECRET:
        raise Refused(f"the remote key {p} holds {len(secret)} bytes; at least {MIN_SECRET} are needed",
                      hint="create a new one with `tinyhw serve keygen`")
    return secret


def write_secret(path: Path | str, *, force: bool = False) -> Path:
    """Create ``path`` (mode 0600) with 32 random bytes as hex; refuse to overwrite unless ``force``.

    Written atomically (a private temporary file in the same directory, then renamed over ``path``, or with
    ``force`` off linked to it, failing if the name exists by then), so a failed write never leaves a torn key;
    a symlink, FIFO, device node or socket at ``path`` is refused, even with ``force``."""
    p = Path(path)
    with contextlib.suppress(FileNotFoundError):
        if not stat.S_ISREG(os.lstat(p).st_mode):  # never open a fifo (it would block) or a device node for writing
            raise Refused(f"refusing to write the key to {p}: it is not a regular file", hint="name a regular file")
        if not force:
            raise Refused(f"{p} exists already", hint="pass --force to replace it (clients then need the new key)")
    p.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name[:64]}.", suffix=".tmp", dir=p.parent)  # mode 0600
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o600)
            f.write(secrets.token_hex(MIN_SECRET).encode() + b"\n")
            f.flush()
            os.fsync(f.fileno())
        with contextlib.suppress(FileNotFoundError):
            if not stat.S_ISREG(os.lstat(p).st_mode):  # again: nothing may have appeared in its place meanwhile
                raise Refused(f"refusing to write the key to {p}: it is not a regular file",
                              hint="name a regular file")
        if force:
            os.replace(tmp, p)
        else:
            os.link(tmp, p)
    except FileExistsError:
        raise Refused(f"{p} exists already",
                      hint="pass --force to replace it (clients then need the new key)") from None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    return p
