"""The emulated Navi31's SMU (MP1, PMFW 13.0.0): message mailbox, DPM tables, metrics table.

Implements specs/amd-bringup.md §10.4 "SMU mailbox" items 1-5 with the protocol of §6.1 (C2PMSG_66
message, 82 argument/value, 90 response; debug mailbox 75/53/54), the messages of §6.2/§6.3 and the
metrics transfer of §6.4 (TransferTableSmu2Dram with TABLE_SMU_METRICS = 5 writes
``SmuMetricsExternal_t`` to the driver-table address). Message ids, response codes, table ids and
the metrics layout come from the generated ``tinyhw.autogen.smu_v13_0_0_ppsmc`` and
``smu13_driver_if_v13_0_0``; the numbers below (DPM levels, power, temperatures) are invented
but plausible for an RX 7900 XTX.

What a driver sees:

* Before LOAD_IP_FW(SMU) has been processed (cold board, after a mode-1 reset) the SMU is silent:
  writes are stored, C2PMSG_90 never changes (§10.4 item 5, inferred). ``smu=silent`` keeps it
  silent for good; ``smu=busy@N`` answers the N-th message of the process with 0xFC.
* A write to C2PMSG_66 starts a message; C2PMSG_90 reads 0 until ``delay`` has passed, then the
  response: 0x1 OK, 0xFF failed (bad argument, table id other than 5, address outside VRAM),
  0xFE unknown message, 0xFD prerequisite missing (clock limits or table transfer before
  EnableAllSmuFeatures / without a driver-table address), 0xFC busy.
* GetSmuVersion -> 0x004E4B00; GetDriverIfVersion -> 0x3D; GetDpmFreqByIndex ``(clk << 16) | 0xFF``
  -> level count, ``(clk << 16) | i`` -> MHz (bit 31 clear); Get{Min,Max}DpmFreq, GetDcModeMaxDpmFreq;
  SetSoftMin/Max/HardMin/MaxByFreq ``(clk << 16) | MHz`` (0xFFFF = no limit); SetPptLimit 1..402 W,
  GetPptLimit; Enable/DisableAllSmuFeatures, feature masks; SetDriverDramAddrHigh/Low latch the
  table address; TransferTableSmu2Dram(5) writes the 392-byte metrics table there;
  TransferTableDram2Smu, workload/GFXOFF/power-source style messages are accepted.
* Mode-1 reset: Mode1Reset (0x2F) on the main mailbox or DEBUGSMC_MSG_Mode1Reset (2) on the debug
  mailbox; the response register of the mailbox used reads 1 afterwards (inferred), every other
  SMU register 0, and the SMU is silent again until LOAD_IP_FW(SMU).
* Metrics move over the board's virtual time: GFX activity follows the load (option ``load=``, or
  100 % while a compute queue is active) with a 0.5 s time constant, temperatures with 15 s; clocks
  sit at the soft limits (deep sleep below 15 % activity shows in the PostDs values), power is
  capped by the PPT limit and the excess shows as PPT0 throttling.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field
from typing import Any

from tinyhw.autogen import smu13_driver_if_v13_0_0 as DIF
from tinyhw.autogen import smu_v13_0_0_ppsmc as PPSMC
from tinyhw.mocks import amfw
from tinyhw.mocks.amregs import SMU_ARG, SMU_DBG_ARG, SMU_DBG_MSG, SMU_DBG_RESP, SMU_MSG, SMU_RESP

M = PPSMC.CONSTANTS
C = DIF.CONSTANTS
OK, FAILED, UNKNOWN, PREREQ, BUSY = (M["PPSMC_Result_OK"], M["PPSMC_Result_Failed"], M["PPSMC_Result_UnknownCmd"],
                                     M["PPSMC_Result_CmdRejectedPrereq"], M["PPSMC_Result_CmdRejectedBusy"])
MSG_IDS = {v: k[len("PPSMC_MSG_"):] for k, v in M.items() if k.startswith("PPSMC_MSG_")}
METRICS_SIZE, METRICS = DIF.STRUCTS["SmuMetricsExternal_t"]
_FMT = {"uint8_t": "B", "uint16_t": "H", "uint32_t": "I", "int16_t": "h", "int32_t": "i"}

#: DPM levels (MHz) per PPCLK index (invented, RX 7900 XTX-like): GFX, SOC, UCLK, FCLK, DCLK0, VCLK0,
#: DCLK1, VCLK1, DISP, DPP, DPREF, DCF, DTB.
DPM: tuple[tuple[int, ...], ...] = (
    (500, 1800, 2526), (500, 960, 1200), (96, 456, 772, 1249), (400, 1000, 1500, 1940),
    (500, 1000, 1500), (500, 1000, 1500), (500, 1000, 1500), (500, 1000, 1500),
    (600, 1200), (600, 1200), (600,), (600, 1200), (600,),
)
PPT_DEFAULT, PPT_MAX = 355, 402
IDLE_W = 18
NO_LIMIT = 0xFFFF


@dataclass
class SmuState:
    loaded: bool = False
    features: int = 0
    allowed: int = 0
    dram_hi: int = 0
    dram_lo: int = 0
    tools_hi: int = 0
    tools_lo: int = 0
    soft_min: list[int] = field(default_factory=lambda: [0] * len(DPM))
    soft_max: list[int] = field(default_factory=lambda: [NO_LIMIT] * len(DPM))
    ppt: int = PPT_DEFAULT
    counter: int = 0
    energy: int = 0
    activity: float = 0.0
    temp: float = 0.0  # 0..1 thermal fraction
    last_t: float = 0.0


class Smu:
    """MP1 mailbox registers and PMFW. ``board`` gives virtual time (``board.now()``), memory and load."""

    def __init__(self, board: Any, *, delay: float = 100e-6, silent: bool = False, busy_at: int | None = None,
                 load: int = 0) -> None:
        self.board = board
        self.delay = delay
        self.silent = silent
        self.busy_at = busy_at
        self.load = load
        self.s = SmuState()
        self.messages = 0  # main-mailbox messages this process
        self.log: list[tuple[int, int, int]] = []  # (message, argument, response)
        self.regs = {SMU_MSG: 0, SMU_ARG: 0, SMU_RESP: 0, SMU_DBG_MSG: 0, SMU_DBG_ARG: 0, SMU_DBG_RESP: 0}

    def power_on(self) -> None:
        self.s = SmuState(last_t=self.board.now())
        for k in self.regs:
            self.regs[k] = 0

    def handlers(self) -> tuple[dict[int, Any], dict[int, Any]]:
        reads = {o: (lambda o=o: self.regs[o]) for o in self.regs}
        writes = {o: (lambda v, o=o: self._store(o, v)) for o in self.regs}
        writes[SMU_MSG] = self._msg_write
        writes[SMU_DBG_MSG] = self._dbg_write
        return reads, writes

    def _store(self, offset: int, value: int) -> None:
        self.regs[offset] = value

    # -- mailbox --------------------------------------------------------------------------------------------
    def _msg_write(self, value: int) -> None:
        self.regs[SMU_MSG] = value
        self.messages += 1
        n = self.messages
        if self.silent or not self.s.loaded:
            return
        arg = self.regs[SMU_ARG]
        self.board.schedule(self.delay, lambda: self._answer(value, arg, n))

    def _answer(self, msg: int, arg: int, n: int) -> None:
        if self.busy_at is not None and n == self.busy_at:
            resp, out = BUSY, None
        else:
            resp, out = self._execute(msg, arg)
        self.log.append((msg, arg, resp))
        if out is not None:
            self.regs[SMU_ARG] = out & 0xFFFFFFFF
        self.regs[SMU_RESP] = resp

    def _dbg_write(self, value: int) -> None:
        self.regs[SMU_DBG_MSG] = value
        if self.silent or not self.s.loaded:
            return
        if value == M["DEBUGSMC_MSG_Mode1Reset"]:
            self.board.schedule(self.delay, self._debug_reset)
        else:
            self.board.schedule(self.delay, lambda: self.regs.__setitem__(SMU_DBG_RESP, UNKNOWN))

    def _main_reset(self) -> None:
        self.board.mode1_reset("smu")
        self.regs[SMU_RESP] = OK  # the answer stays readable across the reset (inferred)

    def _debug_reset(self) -> None:
        self.log.append((M["DEBUGSMC_MSG_Mode1Reset"], self.regs[SMU_DBG_ARG], OK))
        self.board.mode1_reset("smu-debug")
        self.regs[SMU_DBG_RESP] = OK

    # -- messages -------------------------------------------------------------------------------------------
    def _execute(self, msg: int, arg: int) -> tuple[int, int | None]:
        s = self.s
        name = MSG_IDS.get(msg)
        clk, low = arg >> 16, arg & 0xFFFF
        if name is None:
            return UNKNOWN, None
        if name == "TestMessage":
            return OK, arg + 1
        if name == "GetSmuVersion":
            return OK, amfw.SMU_VERSION
        if name == "GetDriverIfVersion":
            return OK, amfw.DRIVER_IF_VERSION
        if name in ("SetAllowedFeaturesMaskLow", "SetAllowedFeaturesMaskHigh"):
            shift = 0 if name.endswith("Low") else 32
            s.allowed = (s.allowed & ~(0xFFFFFFFF << shift)) | (arg << shift)
            return OK, None
        if name == "EnableAllSmuFeatures":
            s.features = (1 << C["NUM_FEATURES"]) - 1
            return OK, None
        if name == "DisableAllSmuFeatures":
            s.features = 0
            return OK, None
        if name in ("EnableSmuFeaturesLow", "EnableSmuFeaturesHigh", "DisableSmuFeaturesLow",
                    "DisableSmuFeaturesHigh"):
            mask = arg << (0 if name.endswith("Low") else 32)
            s.features = s.features | mask if name.startswith("Enable") else s.features & ~mask
            return OK, None
        if name in ("GetRunningSmuFeaturesLow", "GetRunningSmuFeaturesHigh"):
            return OK, s.features >> (0 if name.endswith("Low") else 32) & 0xFFFFFFFF
        if name in ("SetDriverDramAddrHigh", "SetDriverDramAddrLow", "SetToolsDramAddrHigh", "SetToolsDramAddrLow"):
            attr = ("dram_" if "Driver" in name else "tools_") + ("hi" if name.endswith("High") else "lo")
            setattr(s, attr, arg)
            return OK, None
        if name == "TransferTableSmu2Dram":
            return self._transfer(low), None
        if name == "TransferTableDram2Smu":
            return (OK if low < C["TABLE_COUNT"] else FAILED), None
        if name in ("GetDpmFreqByIndex", "GetMinDpmFreq", "GetMaxDpmFreq", "GetDcModeMaxDpmFreq"):
            if clk >= len(DPM):
                return FAILED, None
            levels = DPM[clk]
            if name == "GetDpmFreqByIndex":
                if low == 0xFF:
                    return OK, len(levels)
                return (OK, levels[low]) if low < len(levels) else (FAILED, None)
            return OK, levels[0] if name == "GetMinDpmFreq" else levels[-1]
        if name in ("SetSoftMinByFreq", "SetSoftMaxByFreq", "SetHardMinByFreq", "SetHardMaxByFreq"):
            if clk >= len(DPM):
                return FAILED, None
            if not s.features:
                return PREREQ, None
            target = s.soft_min if "Min" in name else s.soft_max
            target[clk] = low
            return OK, None
        if name == "SetPptLimit":
            if not 1 <= arg <= PPT_MAX:
                return FAILED, None
            s.ppt = arg
            return OK, None
        if name == "GetPptLimit":
            return OK, s.ppt
        if name == "Mode1Reset":
            self.board.schedule(0, self._main_reset)
            return OK, None
        if name in ("Mode2Reset", "EnterBaco", "ExitBaco", "ArmD3", "BacoAudioD3PME", "TriggerVFFLR"):
            return PREREQ, None  # not modelled: rejected
        return OK, None  # every other documented message is accepted without effect

    def _transfer(self, table: int) -> int:
        s = self.s
        if table != C["TABLE_SMU_METRICS"]:
            return FAILED
        if not s.features or not (s.dram_hi or s.dram_lo):
            return PREREQ
        phys = self.board.mc_to_phys(s.dram_hi << 32 | s.dram_lo, METRICS_SIZE)
        if phys is None:
            return FAILED
        self.board.vram_write(phys, self.metrics())
        return OK

    # -- metrics ----------------------------------------------------------------------------------------------
    def _advance(self) -> None:
        s = self.s
        now = self.board.now()
        dt = max(0.0, now - s.last_t)
        target = 100.0 if self.board.compute_active() else float(self.load)
        s.activity += (target - s.activity) * (1 - math.exp(-dt / 0.5))
        demanded = IDLE_W + (PPT_MAX - IDLE_W) * s.activity / 100
        power = min(demanded, s.ppt)
        s.temp += (power / PPT_MAX - s.temp) * (1 - math.exp(-dt / 15.0))
        s.energy = (s.energy + int(power * dt * 1000)) & 0xFFFFFFFF  # mJ
        s.last_t = now

    def _clock(self, clk: int, busy: float) -> int:
        s = self.s
        levels = DPM[clk]
        lo = max(levels[0], min(s.soft_min[clk], levels[-1]))
        hi = levels[-1] if s.soft_max[clk] == NO_LIMIT else max(lo, min(s.soft_max[clk], levels[-1]))
        return int(lo + (hi - lo) * busy)

    def metrics(self) -> bytes:
        """The ``SmuMetricsExternal_t`` image for the current virtual time (advances the model)."""
        self._advance()
        s = self.s
        s.counter += 1
        busy = s.activity / 100
        jitter = (s.counter * 2654435761 >> 7) % 5 - 2
        demanded = IDLE_W + (PPT_MAX - IDLE_W) * busy
        power = min(demanded, s.ppt)
        buf = bytearray(METRICS_SIZE)

        def put(name: str, value: float | list[float]) -> None:
            off, ctype, count = METRICS[f"SmuMetrics.{name}"]
            values = value if isinstance(value, list) else [value]
            assert len(values) <= count, name
            fmt = _FMT[ctype]
            for i, v in enumerate(values):
                struct.pack_into("<" + fmt, buf, off + i * struct.calcsize(fmt), max(0, int(round(v))))

        clocks = [self._clock(c, busy) for c in range(len(DPM))]
        gfx, mem, fclk = clocks[0], clocks[2], clocks[3]
        put("CurrClock", clocks)
        put("AverageGfxclkFrequencyTarget", gfx)
        put("AverageGfxclkFrequencyPreDs", gfx + jitter)
        put("AverageGfxclkFrequencyPostDs", gfx + jitter if s.activity > 15 else max(5, gfx * busy))
        put("AverageFclkFrequencyPreDs", fclk)
        put("AverageFclkFrequencyPostDs", fclk if s.activity > 15 else max(5, fclk * busy))
        put("AverageMemclkFrequencyPreDs", mem)
        put("AverageMemclkFrequencyPostDs", mem if s.activity > 15 else max(5, mem * busy))
        put("dGPU_W_MAX", s.ppt)
        put("MetricsCounter", s.counter)
        put("AvgVoltage", [700 + 400 * busy + jitter, 800, 1350, 1250, 0])
        put("AvgCurrent", [5 + 250 * busy, 10, 4, 3, 0])
        put("AverageGfxActivity", s.activity)
        put("AverageUclkActivity", 0.6 * s.activity)
        put("EnergyAccumulator", s.energy)
        put("AverageSocketPower", power)
        put("AverageTotalBoardPower", power * 1.05)
        edge = 30 + 45 * s.temp
        temps = [edge, edge + 8 + 20 * s.temp, edge + 6, edge + 4, 40 + 40 * s.temp, edge + 5, 45 + 20 * s.temp,
                 45 + 20 * s.temp, edge + 3, edge + 2, 0, 0, 0]
        put("AvgTemperature", [t + (jitter if t else 0) for t in temps])
        put("AvgTemperatureFanIntake", 28)
        put("PcieRate", 4)
        put("PcieWidth", 16)
        hot = temps[1]
        pwm = 0 if hot < 55 else min(100, 20 + (hot - 55) * 3)
        put("AvgFanPwm", pwm)
        put("AvgFanRpm", pwm * 33)
        throttle = [0] * C["THROTTLER_COUNT"]
        if demanded > s.ppt:
            throttle[C["THROTTLER_PPT0_BIT"]] = round((demanded - s.ppt) * 100 / demanded)
        put("ThrottlingPercentage", throttle)
        return bytes(buf)

    # -- state ---------------------------------------------------------------------------------------------------
    def to_state(self) -> dict[str, Any]:
        return dict(self.s.__dict__)

    def from_state(self, data: dict[str, Any]) -> None:
        s = SmuState()
        for k, v in data.items():
            if hasattr(s, k):
                setattr(s, k, v)
        self.s = s
