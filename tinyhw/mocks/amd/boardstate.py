"""The emulated Navi31's board state file: what must outlive one command besides the flash.

ARCHITECTURE.md "Emulated boards" (state that outlives a command lives in a file beside the flash
file) and specs/amd-bringup.md §4.1 / §10.4 (scratch registers, sOS, KM ring and SMU state persist
across host processes until a mode-1 reset; "persistence of SCRATCH_REG5/6/7 between processes").

The file is ``<flash file>.board.json`` (so ``mock:navi31`` and ``mock:navi31-usb`` share it, as
they share the flash). It holds JSON: the board's virtual time, the register file (every
register the model keeps as plain storage, by byte offset: scratch registers, MMHUB/GC/IH
programming, ``reg write`` values, RLC autoload), the SMUIO ROM block / GPIO pad storage that
differs from power-on (``smuio``), one object per firmware block (``psp``, ``smu``),
and ``last_command``: the emulator's counters of the command that wrote the file
(``vram_bytes_written``, ``bar5_writes``, ``reg_writes`` (BAR5 writes other than the address registers
MM_INDEX, MM_INDEX_HI and RSMU_INDEX of the indirect windows), ``regfile_writes``, ``smu_messages``, ``psp_commands``,
``mode1_resets``, ``accesses``), so a test can prove that a refused command wrote nothing.
It is written when the board closes or disconnects (atomically: a torn write is impossible);
``tinyhw mock reset --yes`` deletes it (a cold board). VRAM contents are not kept (inferred
simplification: the boot region is rebuilt by whoever needs it; the discovery table is
rewritten at every start). A file that cannot be read (missing, not JSON, nested deeper than
:data:`tinyhw.formats.boundedjson.MAX_DEPTH` or larger than :data:`MAX_STATE_BYTES`) is ignored, as a cold board.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tinyhw.errors import Refused
from tinyhw.formats import boundedjson
from tinyhw.mocks.amd.flashstore import write_atomic

VERSION = 1
MAX_STATE_BYTES = 64 << 20      # the register file, firmware blocks and counters: far below this
MAX_STATE_VALUES = 1 << 22


def state_path(flash: Path | str) -> Path:
    """The board state file beside ``flash``."""
    flash = Path(flash)
    return flash.with_name(flash.name + ".board.json")


def load(flash: Path | str) -> dict[str, Any]:
    """The saved state, or ``{}`` for a cold board (no file, unreadable file, other version)."""
    path = state_path(flash)
    try:
        data = boundedjson.loads(path.read_bytes(), f"the board state file {path}", max_bytes=MAX_STATE_BYTES,
                                 max_values=MAX_STATE_VALUES)
    except (OSError, Refused):   # missing, unreadable, not json, too deep or too large: a cold board
        return {}
    if not isinstance(data, dict) or data.get("version") != VERSION:
        return {}
    return data


def save(flash: Path | str, state: dict[str, Any]) -> None:
    """Write ``state`` atomically beside ``flash``."""
    state = {"version": VERSION, **state}
    write_atomic(state_path(flash), (json.dumps(state, sort_keys=True, indent=1) + "\n").encode())


def clear(flash: Path | str) -> None:
    """Forget the board state (a cold board next time)."""
    state_path(flash).unlink(missing_ok=True)
