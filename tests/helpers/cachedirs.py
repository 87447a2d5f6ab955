"""Where the tests find what tests/setup-system.sh fetched (firmware) and where the guest tiers cache builds.

The same rule as the rest of tinyhw and tests/fetch_firmware.sh: ``$TINYHW_FIRMWARE_DIR``, else
``$TINYHW_CACHE/firmware``, else ``${XDG_CACHE_HOME:-~/.cache}/tinyhw/firmware`` (the guest cache likewise,
``$TINYHW_GUEST_CACHE`` or ``.../tinyhw/guest``). tests/conftest.py gives every test a private
``XDG_CACHE_HOME``, so :func:`pin_for_session` resolves both once, when the session starts, from the
environment the user ran pytest in, and exports them as ``TINYHW_FIRMWARE_DIR`` / ``TINYHW_GUEST_CACHE``.
Those two are all a test session may keep in the user's folders; :func:`user_dirs`, :func:`snapshot` and
:func:`changes` let tests/conftest.py check that nothing else there changed.
"""

from __future__ import annotations

import os
from pathlib import Path


def tinyhw_cache(env: dict[str, str] | os._Environ[str] = os.environ) -> Path:
    if env.get("TINYHW_CACHE"):
        return Path(env["TINYHW_CACHE"])
    return Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tinyhw"


def firmware_dir(env: dict[str, str] | os._Environ[str] = os.environ) -> Path:
    return Path(env["TINYHW_FIRMWARE_DIR"]) if env.get("TINYHW_FIRMWARE_DIR") else tinyhw_cache(env) / "firmware"


def guest_cache(env: dict[str, str] | os._Environ[str] = os.environ) -> Path:
    return Path(env["TINYHW_GUEST_CACHE"]) if env.get("TINYHW_GUEST_CACHE") else tinyhw_cache(env) / "guest"


def user_dirs(env: dict[str, str] | os._Environ[str] = os.environ) -> list[Path]:
    """tinyhw's folders in the user's home that the tests must leave untouched: the cache (emulated flash files,
    nv boot records, the ad102 board state), the state (flash journals, backups) and the config (keys)."""
    home = Path.home()
    return [tinyhw_cache(env), Path(env.get("XDG_STATE_HOME") or home / ".local" / "state") / "tinyhw",
            Path(env.get("XDG_CONFIG_HOME") or home / ".config") / "tinyhw"]


def snapshot(dirs: list[Path], skip: list[Path]) -> dict[str, tuple[int, int]]:
    """path -> (size, mtime_ns) of every file under ``dirs``, folders under ``skip`` left out."""
    out: dict[str, tuple[int, int]] = {}
    skipped = {str(p) for p in skip}
    for d in dirs:
        for root, subdirs, files in os.walk(d):
            subdirs[:] = [s for s in subdirs if os.path.join(root, s) not in skipped]
            for name in files:
                p = os.path.join(root, name)
                try:
                    st = os.lstat(p)
                except OSError:
                    continue
                out[p] = (st.st_size, st.st_mtime_ns)
    return out


def changes(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> list[str]:
    """What differs between two :func:`snapshot` results, one line per file."""
    out = [f"new {p}" for p in sorted(after.keys() - before.keys())]
    out += [f"changed {p}" for p in sorted(before.keys() & after.keys()) if before[p] != after[p]]
    return out + [f"deleted {p}" for p in sorted(before.keys() - after.keys())]


def pin_for_session() -> None:
    """Export the firmware and guest cache locations resolved from the environment as it is now."""
    os.environ["TINYHW_FIRMWARE_DIR"] = str(firmware_dir())
    os.environ["TINYHW_GUEST_CACHE"] = str(guest_cache())
