"""Resident waves of the emulated shader core and the SQ registers that show them: SQ_IND_INDEX/DATA, SQ_CMD.

Facts: specs/amd-compute.md §8 (SQ_IND_INDEX fields, the ``ixSQ_WAVE_*`` indices, the SGPR/VGPR windows, the
SQ_WAVE_STATUS bits; the wave is chosen by GRBM_GFX_INDEX SE/SA/INSTANCE plus SQ_IND_INDEX.WAVE_ID), through
:mod:`tinyhw.formats.sqwave` (the indices, HW_ID1 and the SQ_CMD halt word, some inferred as that module says).

Model (a functional one, inferred where the specs are silent):

* A dispatch that runs past the command processor's instruction budget (a shader that never ends) does not
  vanish: the waves of the workgroup that was running stay **resident** (:meth:`ShaderArray.admit`), and the
  queue stays busy. Later workgroups of that dispatch are never launched.
* Resident waves keep executing while the host works: at every access to the SQ registers they run the
  instructions the board's clock allows since the last access (2.5 GHz issue, one instruction a cycle), at
  most :data:`STEP_MAX` per wave and access, so a read that is not halted may see a wave move between two
  registers, as on hardware.
* SQ_CMD with CMD = SETHALT in broadcast mode halts (DATA bit 0 = 1) or resumes (0) every resident wave;
  a halted wave has SQ_WAVE_STATUS.HALT set and does not advance.
* Wave *n* of the workgroup sits at SE 0, SA 0, WGP n // 64, SIMD n % 4, slot (n // 4) % 16 (tinyhw's own
  placement). STATUS reads VALID (bit 16), SCC, HALT, EXECZ, IN_BARRIER; PC, EXEC, M0, HW_ID1 and the SGPRs
  (0x200 + n) and VGPRs (0x400 + n, WORKITEM_ID = lane) read the wave's state; every other index reads 0.
  An empty slot reads 0 everywhere. AUTO_INCR advances INDEX after each SQ_IND_DATA access.
* A wave that reaches ``s_endpgm`` (or faults) while resident leaves its slot. A dequeue drops them all.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tinyhw.formats import sqwave
from tinyhw.regs.asic import Asic

__all__ = ["STEP_MAX", "ShaderArray"]

#: the register fields the SQ model decodes (names in the GC block of the board's register database)
FIELDS = ("SQ_IND_INDEX.WAVE_ID", "SQ_IND_INDEX.WORKITEM_ID", "SQ_IND_INDEX.AUTO_INCR", "SQ_IND_INDEX.INDEX",
          "SQ_CMD.CMD", "SQ_CMD.MODE", "SQ_CMD.DATA", "GRBM_GFX_INDEX.SE_INDEX", "GRBM_GFX_INDEX.SA_INDEX",
          "GRBM_GFX_INDEX.INSTANCE_INDEX")
SHADER_HZ = 2.5e9  # the command processor's modelled issue rate
STEP_MAX = 64       # instructions a resident wave may run per SQ access (bounds the work of one access)
SCC, EXECZ, IN_BARRIER = (1 << sqwave.STATUS_BITS[n] for n in ("SCC", "EXECZ", "IN_BARRIER"))
_M0, _EXEC = 125, 126  # the wave's scalar file (tinyhw.mocks.rdna3.state)


def slot_of(n: int) -> sqwave.Slot:
    """Where wave ``n`` of the resident workgroup sits (see the module docstring)."""
    return sqwave.Slot(0, 0, n // 64, n % 4, (n // 4) % 16)


class ShaderArray:
    """The SQ's view of the resident waves, answering SQ_IND_INDEX/DATA and SQ_CMD (see the module docstring).

    ``now`` is the board clock, ``regs()`` the register file's storage (GRBM_GFX_INDEX is read from it), ``db``
    the board's register database (the SQ and GRBM offsets and fields)."""

    def __init__(self, now: Callable[[], float], regs: Callable[[], dict[int, int]], db: Asic) -> None:
        self.now = now
        self.regs = regs
        self.sq_ind_index, self.sq_ind_data, self.sq_cmd, self.grbm_gfx_index = (
            db.offset(f"gc.{n}") for n in ("SQ_IND_INDEX", "SQ_IND_DATA", "SQ_CMD", "GRBM_GFX_INDEX"))
        self.fields = {n: db.field(f"gc.{n}") for n in FIELDS}
        self.power_on()

    def _get(self, name: str, value: int) -> int:
        """Field ``name`` (a :data:`FIELDS` entry) of the register value ``value``."""
        f = self.fields[name]
        return (value & f.mask) >> f.shift

    def power_on(self) -> None:
        """No resident waves, not halted, index 0."""
        self.dispatch: Any = None
        self.slots: dict[sqwave.Slot, Any] = {}
        self.halted = False
        self.index = 0
        self.last = 0.0
        self.stats = {"steps": 0, "stepped_instructions": 0, "halts": 0, "resumes": 0}

    # -- residency --------------------------------------------------------------------------------------------
    def admit(self, dispatch: Any) -> None:
        """Keep the running workgroup of ``dispatch`` (a dispatch whose budget ran out) resident."""
        self.dispatch = dispatch
        self.slots = {slot_of(i): w for i, w in enumerate(dispatch.waves) if not w.done}
        self.last = self.now()

    def drop(self) -> None:
        """Forget every resident wave (a dequeue or a reset)."""
        self.dispatch = None
        self.slots = {}
        self.halted = False

    @property
    def resident(self) -> int:
        """How many waves are resident."""
        return len(self.slots)

    def advance(self) -> None:
        """Run each resident, unhalted wave for the instructions the clock allows since the last access."""
        from tinyhw.mocks.rdna3.state import ShaderError, WatchdogExpired

        t = self.now()
        n = min(STEP_MAX, int((t - self.last) * SHADER_HZ))
        self.last = t
        if self.halted or n <= 0 or not self.slots:
            return
        d = self.dispatch
        self.stats["steps"] += 1
        for slot, w in list(self.slots.items()):
            if w.at_barrier:
                continue
            d.budget = n
            before = d.res.wave_instructions
            try:
                d.run_wave(w)
            except WatchdogExpired:
                pass
            except ShaderError:
                w.done = True
            self.stats["stepped_instructions"] += d.res.wave_instructions - before
            if w.done:
                del self.slots[slot]
        live = list(self.slots.values())
        if live and all(w.at_barrier for w in live):
            for w in live:
                w.at_barrier = False

    # -- registers ----------------------------------------------------------------------------------------------
    def handlers(self) -> tuple[dict[int, Callable[[], int]], dict[int, Callable[[int], None]]]:
        """BAR5 handlers for SQ_IND_INDEX, SQ_IND_DATA and SQ_CMD."""
        index, data, cmd = self.sq_ind_index, self.sq_ind_data, self.sq_cmd
        reads: dict[int, Callable[[], int]] = {index: lambda: self.index, data: self.read_data, cmd: lambda: 0}
        writes: dict[int, Callable[[int], None]] = {index: self._set_index, data: self.write_data, cmd: self.command}
        return reads, writes

    def _set_index(self, value: int) -> None:
        self.advance()
        self.index = value & 0xFFFFFFFF

    def selected(self) -> Any:
        """The wave GRBM_GFX_INDEX and SQ_IND_INDEX.WAVE_ID name, or None for an empty slot."""
        g = self.regs().get(self.grbm_gfx_index, 0)
        inst = self._get("GRBM_GFX_INDEX.INSTANCE_INDEX", g)
        se, sa = self._get("GRBM_GFX_INDEX.SE_INDEX", g), self._get("GRBM_GFX_INDEX.SA_INDEX", g)
        slot = sqwave.Slot(se, sa, inst >> 2, inst & 3, self._get("SQ_IND_INDEX.WAVE_ID", self.index))
        return self.slots.get(slot), slot

    def read_data(self) -> int:
        """SQ_IND_DATA: the selected wave's register at INDEX (then AUTO_INCR)."""
        self.advance()
        w, slot = self.selected()
        index = self._get("SQ_IND_INDEX.INDEX", self.index)
        value = 0 if w is None else self._value(w, slot, index, self._get("SQ_IND_INDEX.WORKITEM_ID", self.index))
        self._bump()
        return value & 0xFFFFFFFF

    def write_data(self, value: int) -> None:
        """SQ_IND_DATA writes are not modelled beyond AUTO_INCR (the host only reads wave state here)."""
        self._bump()

    def _bump(self) -> None:
        if self._get("SQ_IND_INDEX.AUTO_INCR", self.index):
            f = self.fields["SQ_IND_INDEX.INDEX"]
            index = (self._get("SQ_IND_INDEX.INDEX", self.index) + 1) & (f.mask >> f.shift)
            self.index = (self.index & ~f.mask) | index << f.shift

    def _value(self, w: Any, slot: sqwave.Slot, index: int, lane: int) -> int:
        ix = sqwave.INDEX
        if sqwave.SGPR_OFFSET <= index < sqwave.SGPR_OFFSET + sqwave.SGPRS:
            return w.s[index - sqwave.SGPR_OFFSET]
        if sqwave.VGPR_OFFSET <= index < sqwave.VGPR_OFFSET + w.v.shape[0]:
            return int(w.v[index - sqwave.VGPR_OFFSET, lane & 31])
        if index == ix["STATUS"]:
            return (sqwave.VALID | (sqwave.HALT if self.halted else 0) | (SCC if w.scc else 0)
                    | (EXECZ if not w.s[_EXEC] else 0) | (IN_BARRIER if w.at_barrier else 0))
        value = {ix["PC_LO"]: w.pc & 0xFFFFFFFF, ix["PC_HI"]: w.pc >> 32 & 0xFFFF, ix["EXEC_LO"]: w.s[_EXEC],
                 ix["EXEC_HI"]: w.s[_EXEC + 1], ix["M0"]: w.s[_M0],
                 ix["HW_ID1"]: sqwave.make_hw_id1(slot.se, slot.sa, slot.wgp, slot.simd, slot.wave)}
        return value.get(index, 0)

    def command(self, value: int) -> None:
        """SQ_CMD: SETHALT in broadcast mode halts (DATA bit 0) or resumes every resident wave."""
        self.advance()
        cmd, mode = self._get("SQ_CMD.CMD", value), self._get("SQ_CMD.MODE", value)
        if cmd != sqwave.CMD_SETHALT or mode != sqwave.MODE_BROADCAST:
            return
        self.halted = bool(self._get("SQ_CMD.DATA", value) & 1)
        self.stats["halts" if self.halted else "resumes"] += 1
