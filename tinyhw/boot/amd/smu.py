"""The SMU (MP1) mailbox from the host: messages, the alive probe, DPM clocks, metrics, mode-1 reset.

Spec: specs/amd-bringup.md §6.1 (C2PMSG_90 := 0, argument to C2PMSG_82, id to C2PMSG_66, poll
C2PMSG_90; debug mailbox 53/54/75), §6.2 (ids, generated from smu_v13_0_0_ppsmc.h), §6.3 (DPM
level count with index 0xFF, ``(clk << 16) | level``, soft min/max), §6.4 (TransferTableSmu2Dram
with the firmware's TABLE_SMU_METRICS), §7.2 (mode-1 reset of MP0 13.0.0 through debug message 2).
Response codes are mapped to errors as Linux smu_cmn.c does (read as the reference): 0xFC (busy)
is retried a few times, every other non-OK code fails naming the message.
"""

from __future__ import annotations

from tinyhw.boot.amd import ids
from tinyhw.boot.amd.gpu import SMU_ARG, SMU_DBG_ARG, SMU_DBG_MSG, SMU_DBG_RESP, SMU_MSG, SMU_RESP, AmGpu
from tinyhw.errors import DeviceTimeout, OperationFailed
from tinyhw.transport.wait import poll

TIMEOUT = 10.0
ALIVE_TIMEOUT = 0.1  # §6.1: the alive probe waits 100 ms
POLL = 0.0005
BUSY_RETRIES, BUSY_PAUSE = 5, 0.01
HINT = "reset the gpu with: tinyhw am reset --yes, then boot again"
RESULT_BUSY = ids.smu("PPSMC_Result_CmdRejectedBusy")


class SmuError(OperationFailed):
    """The SMU answered a message with an error code."""

    def __init__(self, message: str, *, code: int, hint: str | None = HINT) -> None:
        super().__init__(message, hint=hint)
        self.code = code


def result_name(code: int) -> str:
    """The SMU's answer code by name (``OK``, ``Failed``...), or its hex value when unknown."""
    return ids.RESULT_NAMES.get(code, f"0x{code:x}")


class Smu:
    """The SMU's message mailbox (C2PMSG_66/82/90) on one GPU: version, driver table, features, DPM clocks, metrics,
    reset."""

    def __init__(self, gpu: AmGpu, timeout: float = TIMEOUT) -> None:
        self.gpu = gpu
        self.timeout = timeout
        self._levels: dict[int, list[int]] = {}

    def send(self, name: str, arg: int = 0, *, timeout: float | None = None, value: bool = True) -> int:
        """Send message ``name`` (a PPSMC_MSG_ suffix); return C2PMSG_82 after an OK answer (0 if not ``value``)."""
        msg = ids.msg(name)
        for attempt in range(BUSY_RETRIES + 1):
            code = self._exchange(SMU_RESP, SMU_ARG, SMU_MSG, msg, arg, name, timeout)
            if code == ids.RESULT_OK:
                return self.gpu.rd(SMU_ARG) if value else 0
            if code == RESULT_BUSY and attempt < BUSY_RETRIES:
                self.gpu.clock.sleep(BUSY_PAUSE)
                continue
            raise SmuError(f"the smu answered {name} (0x{msg:x}, argument 0x{arg:x}) with {result_name(code)} "
                           f"(0x{code:x})", code=code)
        raise AssertionError("unreachable")

    def _exchange(self, resp: str, arg_reg: str, msg_reg: str, msg: int, arg: int, name: str,
                  timeout: float | None) -> int:
        gpu = self.gpu
        gpu.wr(resp, 0)
        gpu.wr(arg_reg, arg)
        gpu.wr(msg_reg, msg)
        return poll(gpu.clock, lambda: gpu.rd(resp), lambda v: v != 0, timeout=timeout or self.timeout,
                    interval=POLL, what=f"the smu to answer {name} (c2pmsg_90)", hint=HINT)

    def alive(self) -> bool:
        """§6.1: GetSmuVersion with a 100 ms timeout; any answer, even an error code, proves the firmware runs."""
        try:
            self._exchange(SMU_RESP, SMU_ARG, SMU_MSG, ids.msg("GetSmuVersion"), 0, "GetSmuVersion",
                           ALIVE_TIMEOUT)
        except DeviceTimeout:
            return False
        return True

    def version(self) -> int:
        """The SMU firmware's version (GetSmuVersion)."""
        return self.send("GetSmuVersion")

    # -- driver table and features (§4.2 step 8) --------------------------------------------------------------
    def set_driver_table(self, mc: int) -> None:
        """Tell the SMU where its driver table lives: the memory-controller address ``mc`` (two messages, high then
        low)."""
        self.send("SetDriverDramAddrHigh", mc >> 32, value=False)
        self.send("SetDriverDramAddrLow", mc & 0xFFFFFFFF, value=False)

    def enable_features(self) -> None:
        """EnableAllSmuFeatures: start the SMU's power-management features."""
        self.send("EnableAllSmuFeatures", 0, value=False)

    # -- clocks (§6.3) ------------------------------------------------------------------------------------------
    def level_count(self, clk: int) -> int:
        """Number of DPM levels of clock ``clk`` (GetDpmFreqByIndex with index 0xFF, §6.3)."""
        n = self.send("GetDpmFreqByIndex", (clk << 16) | 0xFF) & 0x7FFFFFFF
        if not 0 < n <= 64:
            raise SmuError(f"the smu reports {n} dpm levels for clock {clk}", code=ids.RESULT_OK)
        return n

    def level_mhz(self, clk: int, level: int) -> int:
        """The frequency in MHz of DPM level ``level`` of clock ``clk``."""
        return self.send("GetDpmFreqByIndex", (clk << 16) | level) & 0x7FFFFFFF

    def levels(self, clk: int) -> list[int]:
        """MHz of every DPM level of clock ``clk`` (cached)."""
        if clk not in self._levels:
            self._levels[clk] = [self.level_mhz(clk, i) for i in range(self.level_count(clk))]
        return self._levels[clk]

    def pin(self, clk: int, mhz: int) -> None:
        """Pin clock ``clk`` to ``mhz`` MHz (soft minimum and maximum both)."""
        self.send("SetSoftMinByFreq", (clk << 16) | (mhz & 0xFFFF), value=False)
        self.send("SetSoftMaxByFreq", (clk << 16) | (mhz & 0xFFFF), value=False)

    def highest_clocks(self) -> dict[str, int]:
        """Pin GFXCLK, SOCCLK, UCLK and FCLK to their highest DPM level (§4.2 step 11); returns MHz by name.

        Asks only for the level count and the top level's frequency (two messages per clock).
        """
        out = {}
        for name in ("GFXCLK", "SOCCLK", "UCLK", "FCLK"):
            clk = ids.CLOCKS[name]
            top = self.level_mhz(clk, self.level_count(clk) - 1)
            self.pin(clk, top)
            out[name.lower()] = top
        return out

    # -- metrics (§6.4) ------------------------------------------------------------------------------------------
    def transfer_metrics(self) -> None:
        """Ask the SMU to copy its metrics table into the driver table in VRAM."""
        self.send("TransferTableSmu2Dram", ids.TABLE_SMU_METRICS, value=False)

    # -- mode-1 reset (§7.2) ---------------------------------------------------------------------------------------
    def mode1_reset(self) -> None:
        """Debug-mailbox message 2 (argument 0): no answer is awaited, the SMU resets the whole GPU."""
        gpu = self.gpu
        gpu.wr(SMU_DBG_RESP, 0)
        gpu.wr(SMU_DBG_ARG, 0)
        gpu.wr(SMU_DBG_MSG, ids.DEBUG_MODE1_RESET)
