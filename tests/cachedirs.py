"""Where the tests find what tests/setup-system.sh fetched (firmware) and where the guest tiers cache builds.

The same rule as the rest of tinyhw and tests/fetch_firmware.sh: ``$TINYHW_FIRMWARE_DIR``, else
``$TINYHW_CACHE/firmware``, else ``${XDG_CACHE_HOME:-~/.cache}/tinyhw/firmware`` (the guest cache likewise,
``$TINYHW_GUEST_CACHE`` or ``.../tinyhw/guest``). tests/conftest.py gives every test a private
``XDG_CACHE_HOME``, so :func:`pin_for_session` resolves both once, when the session starts, from the
environment the user ran pytest in, and exports them as ``TINYHW_FIRMWARE_DIR`` / ``TINYHW_GUEST_CACHE``.
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


def pin_for_session() -> None:
    """Export the firmware and guest cache locations resolved from the environment as it is now."""
    os.environ["TINYHW_FIRMWARE_DIR"] = str(firmware_dir())
    os.environ["TINYHW_GUEST_CACHE"] = str(guest_cache())
