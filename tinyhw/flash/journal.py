"""The write/erase journal: what an interrupted ``flash write``/``erase`` needs to finish with ``--resume``.

Lives in ``$XDG_STATE_HOME/tinyhw/`` (default ``~/.local/state/tinyhw/``), one JSON file per job,
keyed by the image's sha256 (an erase by its sector range). It records the target range, the
backup (path and sha256), the original protection bits, the board identity of the flash before the
job (its VBIOS: part number, PCI ids, version), the sectors done and the phase of the
sector in flight; it is written atomically before each erase and at each phase change, and
removed when the job has been verified. Complements specs/navi31-spi-flash.md §d.6 step 4 (the
resume point), which the seed left to the user.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tinyhw.errors import OperationFailed, Refused
from tinyhw.fileio import atomic_write, remove_stale_temps
from tinyhw.formats import boundedjson

VERSION = 1
MAX_JOURNAL_BYTES = 1 << 20   # a journal holds a few fields and the list of sectors done
#: Phases, in order: backup (skipped with --no-backup), compare (reading the range to find the sectors that differ,
#: when no backup read gives it), unprotect, then per sector erase/program/verify, restore-protection, final-verify.
PHASES = ("backup", "compare", "unprotect", "erase", "program", "verify", "restore-protection", "final-verify")


def state_dir() -> Path:
    """Where flash journals live: ``$XDG_STATE_HOME/tinyhw``, else ``~/.local/state/tinyhw``. The first call for a
    directory removes the temporary journal files a killed ``flash write`` or ``erase`` left there, once their
    process is gone (:func:`tinyhw.fileio.remove_stale_temps`)."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    directory = Path(base) / "tinyhw"
    if directory not in _SWEPT:
        _SWEPT.add(directory)
        remove_stale_temps(directory, "flash-")
    return directory


_SWEPT: set[Path] = set()


def write_key(image_sha256: str, region: str | None = None) -> str:
    """The journal key of a write job, named by the image's SHA-256 (and the region of a region write)."""
    if region is not None and not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,63}", region):
        raise Refused(f"region name {region!r} is not a layout region name (lower-case letters, digits, '-')",
                      hint="tinyhw flash layout lists the names")
    return f"write-{image_sha256}" + (f"-region-{region}" if region else "")


def erase_key(start: int, count: int) -> str:
    """The journal key of an erase job, named by its sector range."""
    return f"erase-{start}-{count}"


def journal_path(key: str) -> Path:
    """The journal file for ``key``."""
    return state_dir() / f"flash-{key}.json"


@dataclass
class Journal:
    """What a flash write or erase job has done so far, saved after every step so it can be resumed."""
    kind: str  # "write" or "erase"
    key: str
    device: str
    start_sector: int
    sector_count: int
    image_sha256: str | None = None
    image_path: str | None = None
    backup_wanted: bool = True
    backup: str | None = None
    backup_sha256: str | None = None
    #: why writing the backup to ``backup`` failed (a resume never silently reuses that path)
    backup_failed: str | None = None
    #: original SR1/SR2 (as read before anything was changed) and whether this job cleared them
    protection: dict[str, Any] | None = None
    clear_protection: bool = False
    #: the identity of the flash's VBIOS read before the job changed anything (a resumed write compares the
    #: image against this, never against the half-written flash); ``board_checked`` False: not read
    board_identity: dict[str, Any] | None = None
    board_checked: bool = False
    #: a region write (``flash write --region``): the region's name, start and end (exclusive) and, in hex, the
    #: pre-job bytes of the sectors it only partly covers (what those sectors keep outside the region)
    region: dict[str, Any] | None = None
    sectors_done: list[int] = field(default_factory=list)
    sector: int | None = None
    phase: str = "backup"
    interrupted: str | None = None
    created: float = field(default_factory=time.time)
    updated: float = 0.0
    version: int = VERSION

    @property
    def path(self) -> Path:
        """The journal's file."""
        return journal_path(self.key)

    def save(self, **changes: Any) -> None:
        """Apply ``changes`` and write the journal atomically (it must be on disk before the next step)."""
        for k, v in changes.items():
            if not hasattr(self, k):
                raise AttributeError(k)
            setattr(self, k, v)
        self.updated = time.time()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, (json.dumps(asdict(self), indent=1) + "\n").encode())

    def remove(self) -> None:
        """Delete the journal file (a finished or abandoned job)."""
        self.path.unlink(missing_ok=True)

    def where(self) -> str:
        """The phase in words, for messages: "erase of sector 17", "backup", "compare read of sectors 16..23"."""
        if self.sector is not None and self.phase in ("erase", "program", "verify"):
            return f"{self.phase} of sector {self.sector}"
        if self.phase == "compare":
            return f"compare read of sectors {self.start_sector}..{self.start_sector + self.sector_count - 1}"
        return self.phase

    @classmethod
    def load(cls, key: str) -> Journal | None:
        """The journal saved under ``key``, or None; an unreadable one or another version raises OperationFailed."""
        path = journal_path(key)
        try:
            doc = boundedjson.loads(path.read_bytes(), f"the flash journal {path}", max_bytes=MAX_JOURNAL_BYTES)
        except FileNotFoundError:
            return None
        except OSError as e:
            raise OperationFailed(f"cannot read the flash journal {path}: {(e.strerror or str(e)).lower()}",
                                  hint="inspect or remove it, then rerun") from None
        except Refused as e:   # not json, too deep or too large: the state is unreadable, as for an OSError
            raise OperationFailed(e.message, hint="inspect or remove it, then rerun") from None
        if not isinstance(doc, dict):
            raise OperationFailed(f"the flash journal {path} holds a json {type(doc).__name__}, not an object",
                          hint="inspect or remove it, then rerun")
        if doc.get("version") != VERSION:
            raise OperationFailed(f"flash journal {path} has version {doc.get('version')}, not {VERSION}")
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in doc.items() if k in known})


def find_journals(kind: str) -> list[Journal]:
    """Every journal of ``kind`` in the state directory (for ``erase --resume`` without a range)."""
    out = []
    for p in sorted(state_dir().glob(f"flash-{kind}-*.json")):
        j = Journal.load(p.stem.removeprefix("flash-"))
        if j is not None:
            out.append(j)
    return out
