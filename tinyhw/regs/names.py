"""Register-name helpers: splitting ``block.REGISTER.FIELD``, globs, closest matches.

Names are case-insensitive; globs are shell-style (``*``, ``?``, ``[...]``). Closest
matches use difflib, so a typo gets a useful suggestion instead of a bare "not found".
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from tinyhw.errors import Refused

_GLOB_CHARS = frozenset("*?[")


def split(name: str) -> tuple[str, str, str | None]:
    """``"smuio.ROM_SW_CNTL.DATA_SIZE"`` -> ``("smuio", "ROM_SW_CNTL", "DATA_SIZE")``; field may be None."""
    parts = name.strip().split(".")
    if len(parts) not in (2, 3) or not all(parts):
        raise Refused(
            f"bad register name {name!r}",
            hint="write block.REGISTER or block.REGISTER.FIELD, e.g. smuio.ROM_SW_CNTL.DATA_SIZE",
        )
    return parts[0], parts[1], parts[2] if len(parts) == 3 else None


def is_glob(text: str) -> bool:
    """True when ``text`` holds a glob character (``*``, ``?``, ``[``)."""
    return any(c in _GLOB_CHARS for c in text)


def glob_matcher(pattern: str) -> re.Pattern[str]:
    """A compiled, case-insensitive full-match regex for the shell glob ``pattern``."""
    import fnmatch

    return re.compile(fnmatch.translate(pattern), re.IGNORECASE)


def closest(query: str, candidates: Iterable[str], n: int = 5) -> list[str]:
    """Up to ``n`` candidates closest to ``query`` (case-insensitive; glob characters ignored)."""
    import difflib

    by_upper: dict[str, str] = {}
    for c in candidates:
        by_upper.setdefault(c.upper(), c)
    q = "".join(ch for ch in query.upper() if ch not in _GLOB_CHARS and ch != "]")
    return [by_upper[m] for m in difflib.get_close_matches(q, list(by_upper), n=n, cutoff=0.6)]
