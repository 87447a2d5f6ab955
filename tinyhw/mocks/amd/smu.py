"""The emulated Navi31's SMU (MP1, PMFW 13.0.0): message mailbox, DPM tables, metrics table.

Implements specs/amd-bringup.md §10.4 "SMU mailbox" with the protocol of §6.1 (C2PMSG_66
message, 82 argument/value, 90 response; debug mailbox 75/53/54), the messages of §6.2/§6.3 and the
metrics transfer of §6.4 (TransferTableSmu2Dram with TABLE_SMU_METRICS = 5 writes
``SmuMetricsExternal_t`` to the driver-table address). Message ids, response codes, table ids and
the metrics layout come from the generated ``tinyhw.autogen.smu_v13_0_0_ppsmc`` and
``smu13_driver_if_v13_0_0``; the numbers below (DPM levels, power, temperatures) are invented
but plausible for an RX 7900 XTX.

What a driver sees:

* Before LOAD_IP_FW(SMU) has been processed (cold board, after a mode-1 reset) the SMU is silent:
  writes are stored, C2PMSG_90 never changes (§10.4, inferred). ``smu=silent`` keeps it
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
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tinyhw.autogen import smu13_driver_if_v13_0_0 as DIF
from tinyhw.autogen import smu_v13_0_0_ppsmc as PPSMC
from tinyhw.boards.spec import AmdFirmware
from tinyhw.commands import CommandTable
from tinyhw.mocks.common.services import BoardServices
from tinyhw.regs.asic import Asic

PPSMC_CONST = PPSMC.CONSTANTS  # PPSMC result codes and message ids
DRIVER_IF = DIF.CONSTANTS  # smu13_driver_if_v13_0_0.h constants (feature, table and throttler counts)
OK, FAILED, UNKNOWN, PREREQ, BUSY = (PPSMC_CONST[f"PPSMC_Result_{name}"] for name in (
    "OK", "Failed", "UnknownCmd", "CmdRejectedPrereq", "CmdRejectedBusy"))
MSG_IDS = {v: k[len("PPSMC_MSG_"):] for k, v in PPSMC_CONST.items() if k.startswith("PPSMC_MSG_")}
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
#: the SMU's messages by PPSMC name: one named handler each (a documented name without one is accepted)
MESSAGES: CommandTable[str] = CommandTable("smu message")
Answer = tuple[int, "int | None"]  # (response code, value for the argument register or None)
#: the mailbox registers by what they are (MP1 C2PMSG numbers, specs/amd-bringup.md §3.3/§6.1)
MAILBOX = {"msg": 66, "arg": 82, "resp": 90, "dbg_msg": 75, "dbg_arg": 53, "dbg_resp": 54}


@dataclass
class SmuState:
    """What the PMFW keeps between messages (and in the board state file): firmware loaded, allowed and enabled feature
    masks, the driver and tools table addresses, soft/hard clock limits in MHz, the PPT limit in W, and the metrics'
    integrators (energy, activity, thermal fraction, last update time)."""

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
    """MP1 mailbox registers and PMFW on a board's :class:`~tinyhw.mocks.common.services.BoardServices`.

    ``regs`` is the ASIC's register database (the mailbox offsets), ``on_reset(trigger)`` is the board's
    mode-1 reset, ``compute_active()`` says whether a compute queue keeps the GPU busy (100 % load)."""

    def __init__(self, services: BoardServices, regs: Asic, *, on_reset: Callable[[str], None],
                 compute_active: Callable[[], bool] = lambda: False, delay: float = 100e-6, silent: bool = False,
                 busy_at: int | None = None, load: int = 0, firmware: AmdFirmware) -> None:
        self.services = services
        self.firmware = firmware  # the board's SMU image and driver-interface version
        self.on_reset = on_reset
        self.compute_active = compute_active
        mb = {k: regs.offset(f"mp1.MP1_SMN_C2PMSG_{n}") for k, n in MAILBOX.items()}
        self.MSG, self.ARG, self.RESP = mb["msg"], mb["arg"], mb["resp"]
        self.DBG_MSG, self.DBG_ARG, self.DBG_RESP = mb["dbg_msg"], mb["dbg_arg"], mb["dbg_resp"]
        self.delay = delay
        self.silent = silent
        self.busy_at = busy_at
        self.load = load
        self.s = SmuState()
        self.messages = 0  # main-mailbox messages this process
        self.log: list[tuple[int, int, int]] = []  # (message, argument, response)
        self.regs = dict.fromkeys(mb.values(), 0)

    def power_on(self) -> None:
        """Power-on / mode-1-reset state: no firmware, no features, default limits; every mailbox register 0."""
        self.s = SmuState(last_t=self.services.now())
        for k in self.regs:
            self.regs[k] = 0

    def handlers(self) -> tuple[dict[int, Any], dict[int, Any]]:
        """(reads, writes): BAR5 offset -> handler for the MP1 mailbox registers; a write of the message register (main
        or debug) runs the message."""
        reads = {o: (lambda o=o: self.regs[o]) for o in self.regs}
        writes = {o: (lambda v, o=o: self._store(o, v)) for o in self.regs}
        writes[self.MSG] = self._msg_write
        writes[self.DBG_MSG] = self._dbg_write
        return reads, writes

    def _store(self, offset: int, value: int) -> None:
        self.regs[offset] = value

    # -- mailbox --------------------------------------------------------------------------------------------
    def _msg_write(self, value: int) -> None:
        self.regs[self.MSG] = value
        self.messages += 1
        n = self.messages
        if self.silent or not self.s.loaded:
            return
        arg = self.regs[self.ARG]
        self.services.schedule(self.delay, lambda: self._answer(value, arg, n))

    def _answer(self, msg: int, arg: int, n: int) -> None:
        if self.busy_at is not None and n == self.busy_at:
            resp, out = BUSY, None
        else:
            resp, out = self._execute(msg, arg)
        self.log.append((msg, arg, resp))
        if out is not None:
            self.regs[self.ARG] = out & 0xFFFFFFFF
        self.regs[self.RESP] = resp

    def _dbg_write(self, value: int) -> None:
        self.regs[self.DBG_MSG] = value
        if self.silent or not self.s.loaded:
            return
        if value == PPSMC_CONST["DEBUGSMC_MSG_Mode1Reset"]:
            self.services.schedule(self.delay, self._debug_reset)
        else:
            self.services.schedule(self.delay, lambda: self.regs.__setitem__(self.DBG_RESP, UNKNOWN))

    def _main_reset(self) -> None:
        self.on_reset("smu")
        self.regs[self.RESP] = OK  # the answer stays readable across the reset (inferred)

    def _debug_reset(self) -> None:
        self.log.append((PPSMC_CONST["DEBUGSMC_MSG_Mode1Reset"], self.regs[self.DBG_ARG], OK))
        self.on_reset("smu-debug")
        self.regs[self.DBG_RESP] = OK

    # -- messages (one named handler per message, MESSAGES) ---------------------------------------------------
    def _execute(self, msg: int, arg: int) -> tuple[int, int | None]:
        name = MSG_IDS.get(msg)
        if name is None:
            return UNKNOWN, None
        if name not in MESSAGES:
            return OK, None  # every other documented message is accepted without effect
        return MESSAGES.dispatch(self, name, arg)

    @MESSAGES.handles("TestMessage")
    def answer_test_message(self, arg: int) -> Answer:
        """TestMessage: answers the argument plus one."""
        return OK, arg + 1

    @MESSAGES.handles("GetSmuVersion")
    def report_smu_version(self, arg: int) -> Answer:
        """GetSmuVersion: the PMFW version of the board's Debian SMU file (smu_13_0_0.bin on Navi31)."""
        assert self.firmware.smu is not None
        return OK, self.firmware.smu.version

    @MESSAGES.handles("GetDriverIfVersion")
    def report_driver_if_version(self, arg: int) -> Answer:
        """GetDriverIfVersion: the driver-interface version the PMFW speaks (0x3D on Navi31)."""
        return OK, self.firmware.smu_driver_if

    @MESSAGES.handles("SetAllowedFeaturesMaskLow", shift=0)
    @MESSAGES.handles("SetAllowedFeaturesMaskHigh", shift=32)
    def set_allowed_features(self, arg: int, shift: int) -> Answer:
        """SetAllowedFeaturesMaskLow/High: the 32 bits of the allowed-feature mask at ``shift``."""
        s = self.s
        s.allowed = (s.allowed & ~(0xFFFFFFFF << shift)) | (arg << shift)
        return OK, None

    @MESSAGES.handles("EnableAllSmuFeatures")
    def enable_all_features(self, arg: int) -> Answer:
        """EnableAllSmuFeatures: every feature runs (clock limits and table transfers become possible)."""
        self.s.features = (1 << DRIVER_IF["NUM_FEATURES"]) - 1
        return OK, None

    @MESSAGES.handles("DisableAllSmuFeatures")
    def disable_all_features(self, arg: int) -> Answer:
        """DisableAllSmuFeatures: no feature runs."""
        self.s.features = 0
        return OK, None

    @MESSAGES.handles("EnableSmuFeaturesLow", shift=0, enable=True)
    @MESSAGES.handles("EnableSmuFeaturesHigh", shift=32, enable=True)
    @MESSAGES.handles("DisableSmuFeaturesLow", shift=0, enable=False)
    @MESSAGES.handles("DisableSmuFeaturesHigh", shift=32, enable=False)
    def switch_features(self, arg: int, shift: int, enable: bool) -> Answer:
        """Enable/DisableSmuFeaturesLow/High: set or clear the argument's 32 feature bits at ``shift``."""
        s = self.s
        mask = arg << shift
        s.features = s.features | mask if enable else s.features & ~mask
        return OK, None

    @MESSAGES.handles("GetRunningSmuFeaturesLow", shift=0)
    @MESSAGES.handles("GetRunningSmuFeaturesHigh", shift=32)
    def report_running_features(self, arg: int, shift: int) -> Answer:
        """GetRunningSmuFeaturesLow/High: 32 bits of the enabled-feature mask from ``shift``."""
        return OK, self.s.features >> shift & 0xFFFFFFFF

    @MESSAGES.handles("SetDriverDramAddrHigh", attr="dram_hi")
    @MESSAGES.handles("SetDriverDramAddrLow", attr="dram_lo")
    @MESSAGES.handles("SetToolsDramAddrHigh", attr="tools_hi")
    @MESSAGES.handles("SetToolsDramAddrLow", attr="tools_lo")
    def latch_table_address(self, arg: int, attr: str) -> Answer:
        """SetDriverDramAddrHigh/Low, SetToolsDramAddrHigh/Low: keep one half of a table's MC address in ``attr``."""
        setattr(self.s, attr, arg)
        return OK, None

    @MESSAGES.handles("TransferTableSmu2Dram")
    def transfer_table_to_dram(self, arg: int) -> Answer:
        """TransferTableSmu2Dram: write the metrics table (id 5 only) at the driver table's MC address; needs the
        features enabled and the address set, the address inside VRAM."""
        return self._transfer(arg & 0xFFFF), None

    @MESSAGES.handles("TransferTableDram2Smu")
    def accept_table_from_dram(self, arg: int) -> Answer:
        """TransferTableDram2Smu: accepted for any table id below TABLE_COUNT (the contents are not read)."""
        return (OK if arg & 0xFFFF < DRIVER_IF["TABLE_COUNT"] else FAILED), None

    @MESSAGES.handles("GetDpmFreqByIndex")
    def report_dpm_level(self, arg: int) -> Answer:
        """GetDpmFreqByIndex: the frequency in MHz of DPM level (arg & 0xFFFF) of clock (arg >> 16), or the level count
        for index 0xFF."""
        clk, index = arg >> 16, arg & 0xFFFF
        if clk >= len(DPM):
            return FAILED, None
        levels = DPM[clk]
        if index == 0xFF:
            return OK, len(levels)
        return (OK, levels[index]) if index < len(levels) else (FAILED, None)

    @MESSAGES.handles("GetMinDpmFreq", lowest=True)
    @MESSAGES.handles("GetMaxDpmFreq", lowest=False)
    @MESSAGES.handles("GetDcModeMaxDpmFreq", lowest=False)
    def report_dpm_bound(self, arg: int, lowest: bool) -> Answer:
        """GetMin/MaxDpmFreq, GetDcModeMaxDpmFreq: the lowest or highest DPM frequency in MHz of clock (arg >> 16)."""
        clk = arg >> 16
        if clk >= len(DPM):
            return FAILED, None
        return OK, DPM[clk][0] if lowest else DPM[clk][-1]

    @MESSAGES.handles("SetSoftMinByFreq", limit="min")
    @MESSAGES.handles("SetHardMinByFreq", limit="min")
    @MESSAGES.handles("SetSoftMaxByFreq", limit="max")
    @MESSAGES.handles("SetHardMaxByFreq", limit="max")
    def set_clock_limit(self, arg: int, limit: str) -> Answer:
        """SetSoft/HardMin/MaxByFreq: the ``min`` or ``max`` limit in MHz (arg & 0xFFFF) of clock (arg >> 16); needs the
        features enabled."""
        clk, mhz = arg >> 16, arg & 0xFFFF
        if clk >= len(DPM):
            return FAILED, None
        if not self.s.features:
            return PREREQ, None
        (self.s.soft_min if limit == "min" else self.s.soft_max)[clk] = mhz
        return OK, None

    @MESSAGES.handles("SetPptLimit")
    def set_power_limit(self, arg: int) -> Answer:
        """SetPptLimit: the package power limit in W (1..402)."""
        if not 1 <= arg <= PPT_MAX:
            return FAILED, None
        self.s.ppt = arg
        return OK, None

    @MESSAGES.handles("GetPptLimit")
    def report_power_limit(self, arg: int) -> Answer:
        """GetPptLimit: the package power limit in W."""
        return OK, self.s.ppt

    @MESSAGES.handles("Mode1Reset")
    def start_mode1_reset(self, arg: int) -> Answer:
        """Mode1Reset: answered OK, then the board is mode-1 reset as the next firmware event."""
        self.services.schedule(0, self._main_reset)
        return OK, None

    @MESSAGES.handles("Mode2Reset")
    @MESSAGES.handles("EnterBaco")
    @MESSAGES.handles("ExitBaco")
    @MESSAGES.handles("ArmD3")
    @MESSAGES.handles("BacoAudioD3PME")
    @MESSAGES.handles("TriggerVFFLR")
    def reject_unmodelled_reset(self, arg: int) -> Answer:
        """Mode2Reset, BACO, D3 and VF FLR messages: not modelled, answered with the prerequisite error (0xFD)."""
        return PREREQ, None  # not modelled: rejected

    def _transfer(self, table: int) -> int:
        s = self.s
        if table != DRIVER_IF["TABLE_SMU_METRICS"]:
            return FAILED
        if not s.features or not (s.dram_hi or s.dram_lo):
            return PREREQ
        phys = self.services.mc_to_vram(s.dram_hi << 32 | s.dram_lo, METRICS_SIZE)
        if phys is None:
            return FAILED
        self.services.vram_write(phys, self.metrics())
        return OK

    # -- metrics ----------------------------------------------------------------------------------------------
    def _advance(self) -> None:
        s = self.s
        now = self.services.now()
        dt = max(0.0, now - s.last_t)
        target = 100.0 if self.compute_active() else float(self.load)
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
        throttle = [0] * DRIVER_IF["THROTTLER_COUNT"]
        if demanded > s.ppt:
            throttle[DRIVER_IF["THROTTLER_PPT0_BIT"]] = round((demanded - s.ppt) * 100 / demanded)
        put("ThrottlingPercentage", throttle)
        return bytes(buf)

    # -- state ---------------------------------------------------------------------------------------------------
    def to_state(self) -> dict[str, Any]:
        """The PMFW state for the board state file."""
        return dict(self.s.__dict__)

    def from_state(self, data: dict[str, Any]) -> None:
        """Restore the PMFW state from the board state file (unknown keys ignored)."""
        s = SmuState()
        for k, v in data.items():
            if hasattr(s, k):
                setattr(s, k, v)
        self.s = s
