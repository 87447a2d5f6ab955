"""The PSP (MP0) from the host: bootloader component loads, the KM ring and its commands.

Spec: specs/amd-bringup.md §5.1 (bootloader: wait C2PMSG_35 bit31, copy the component into the
1 MiB-aligned message buffer, flush HDP, C2PMSG_36 := MC >> 20, C2PMSG_35 := command, wait again;
after SOS wait for C2PMSG_81 != 0), §5.2 (sOS control through C2PMSG_64; the KM ring at
C2PMSG_69/70/71; 64-byte frames; submission through C2PMSG_67 in dwords; fence and status), §5.3
(LOAD_TOC gives the TMR size; SETUP_TMR with the MC address), §4.2 steps 5-7. Linux psp_v13_0.c
and amdgpu_psp.c were read as the independent reference for the same steps. Every protocol
number comes from :mod:`tinyhw.boot.amd.ids` (generated from the kernel headers).
"""

from __future__ import annotations

import struct

from tinyhw.boot.amd import ids, layout
from tinyhw.boot.amd.gpu import (
    PSP_BL_ADDR,
    PSP_BL_CMD,
    PSP_CTRL,
    PSP_RING_HI,
    PSP_RING_LO,
    PSP_RING_SIZE,
    PSP_WPTR,
    AmGpu,
)
from tinyhw.errors import OperationFailed
from tinyhw.transport.wait import poll

READY = 1 << 31
TIMEOUT = 10.0  # §4.2: every wait is 10 s unless stated
POLL = 0.001
RESET_HINT = "reset the gpu with: tinyhw am reset --yes, then boot again"
#: before the sOS runs nothing on the gpu can mode-1 reset it (§7.2 needs the SMU or the sOS)
POWER_HINT = ("no firmware runs yet that could reset the gpu: power-cycle the board "
              "(emulated boards: tinyhw mock reset --yes), then boot again")


class PspError(OperationFailed):
    """The PSP refused a command or answered with an error status."""


class Psp:
    """The PSP's bootloader mailbox (component loads) and the secure OS's KM ring (commands with a fence) on one GPU."""

    def __init__(self, gpu: AmGpu, timeout: float = TIMEOUT) -> None:
        self.gpu = gpu
        self.timeout = timeout
        self._wptr: int | None = None  # the ring's write pointer as this process last set it

    # -- bootloader (§5.1) -----------------------------------------------------------------------------------
    def bootloader_ready(self) -> bool:
        """True when the bootloader's C2PMSG_35 has its ready bit (31) set."""
        return bool(self.gpu.rd(PSP_BL_CMD) & READY)

    def wait_bootloader(self, what: str) -> None:
        """Wait until the bootloader is ready (not all-ones, which means the device is gone); raises DeviceTimeout
        naming ``what``."""
        poll(self.gpu.clock, lambda: self.gpu.rd(PSP_BL_CMD), lambda v: bool(v & READY) and v != 0xFFFFFFFF,
             timeout=self.timeout, interval=POLL * 10, what=f"the psp bootloader ({what})", hint=POWER_HINT)

    def load_component(self, label: str, command: int, mc: int, *, last: bool = False) -> None:
        """One bootloader command for the component already in VRAM at ``mc`` (1 MiB aligned).

        Waits for the bootloader, C2PMSG_36 := mc >> 20, C2PMSG_35 := command; then waits for the
        bootloader to take it (bit31 back with no error bits, Linux's check) or, after SOS, for C2PMSG_81.
        """
        self.wait_bootloader(f"ready for {label}")
        self.gpu.wr(PSP_BL_ADDR, mc >> 20)
        self.gpu.wr(PSP_BL_CMD, command)
        if last:
            # sOS alive, or the bootloader back with error bits (it rejected the SOS image)
            poll(self.gpu.clock, lambda: (self.gpu.sos_alive(), self.gpu.rd(PSP_BL_CMD)),
                 lambda v: v[0] or bool(v[1] != 0xFFFFFFFF and v[1] & READY and v[1] != READY), timeout=self.timeout,
                 interval=POLL * 20, what="the psp secure os to come alive (c2pmsg_81)", hint=POWER_HINT)
            if self.gpu.sos_alive():
                return
        else:
            self.wait_bootloader(f"to take {label}")
        v = self.gpu.rd(PSP_BL_CMD)
        if v != READY:
            raise PspError(f"the psp bootloader rejected the {label} component (c2pmsg_35 0x{v:08x})",
                           hint="the image is not one this board accepts (was --allow-unknown-firmware given?), or "
                                "an interrupted earlier boot left the bootloader part-way: boot again, and "
                                "power-cycle the board if it repeats")

    # -- sOS control and ring (§5.2) -------------------------------------------------------------------------------
    def _ctrl_wait(self, what: str, mask: int = READY) -> int:
        return poll(self.gpu.clock, lambda: self.gpu.rd(PSP_CTRL), lambda v: v != 0xFFFFFFFF and bool(v & mask),
                    timeout=self.timeout, interval=POLL * 10, what=what, hint=RESET_HINT)

    def create_ring(self) -> None:
        """Destroy a ring left by an earlier boot, then create the KM ring in VRAM (§4.2 step 6)."""
        gpu = self.gpu
        if gpu.rd(PSP_RING_SIZE):
            self._ctrl_wait("the psp secure os before destroying the old ring")
            gpu.wr(PSP_CTRL, ids.CTRL_DESTROY_RINGS)
            gpu.clock.sleep(0.02)
            self._ctrl_wait("the psp to destroy the old ring")
        self._ctrl_wait("the psp secure os to accept a ring (c2pmsg_64 bit31)")
        mc = gpu.mc(layout.RING)
        gpu.wr(PSP_RING_LO, mc & 0xFFFFFFFF)
        gpu.wr(PSP_RING_HI, mc >> 32)
        gpu.wr(PSP_RING_SIZE, layout.RING_SIZE)
        gpu.wr(PSP_CTRL, ids.CTRL_INIT_GPCOM_RING)
        gpu.clock.sleep(0.02)
        v = self._ctrl_wait("the psp to create the km ring")
        if v & (READY | ids.STATUS_MASK) != READY:
            raise PspError(f"the psp refused to create the km ring (c2pmsg_64 0x{v:08x}, status "
                           f"0x{v & ids.STATUS_MASK:x})", hint=RESET_HINT)
        self._wptr = gpu.rd(PSP_WPTR)

    def submit(self, cmd_id: int, payload: dict[str, int], what: str) -> bytes:
        """One ring command: command buffer, frame, wptr; wait for the fence; check status. Returns the response."""
        gpu = self.gpu
        cmd = bytearray(ids.CMD_SIZE)
        struct.pack_into("<I", cmd, ids.cmd_off("cmd_id"), cmd_id)
        for name, value in payload.items():
            struct.pack_into("<I", cmd, ids.cmd_off(name), value & 0xFFFFFFFF)
        wptr = gpu.rd(PSP_WPTR) if self._wptr is None else self._wptr
        if (wptr + 16) * 4 > layout.RING_SIZE:
            raise PspError(f"the psp km ring is full (wptr 0x{wptr:x})", hint=RESET_HINT)
        fence_value = wptr + 1
        # command buffer and fence page are adjacent: one block write clears the fence too
        gpu.vram_write(layout.CMD_BUF, bytes(cmd) + bytes(layout.FENCE - layout.CMD_BUF - len(cmd)) + bytes(4))
        frame = bytearray(ids.FRAME_SIZE)
        cmd_mc, fence_mc = gpu.mc(layout.CMD_BUF), gpu.mc(layout.FENCE)
        for name, value in (("cmd_buf_addr_lo", cmd_mc & 0xFFFFFFFF), ("cmd_buf_addr_hi", cmd_mc >> 32),
                            ("fence_addr_lo", fence_mc & 0xFFFFFFFF), ("fence_addr_hi", fence_mc >> 32),
                            ("fence_value", fence_value)):
            struct.pack_into("<I", frame, ids.frame_off(name), value)
        gpu.vram_write(layout.RING + 4 * wptr, bytes(frame))
        gpu.hdp_flush()
        gpu.wr(PSP_WPTR, wptr + ids.FRAME_SIZE // 4)
        self._wptr = wptr + ids.FRAME_SIZE // 4
        poll(gpu.clock, lambda: gpu.vram_read32(layout.FENCE), lambda v: v == fence_value, timeout=self.timeout,
             interval=POLL, what=f"the psp to finish {what}", hint=RESET_HINT)
        resp = gpu.vram_read(layout.CMD_BUF + ids.cmd_off("resp.status"), 32)
        status = struct.unpack_from("<I", resp, 0)[0]
        if status != 0:
            known = " (unknown command)" if status == ids.ERR_UNKNOWN_COMMAND else ""
            raise PspError(f"the psp answered {what} with status 0x{status:x}{known}", hint=RESET_HINT)
        return resp

    # -- commands (§5.2, §5.3) -------------------------------------------------------------------------------------
    def load_toc(self, mc: int, size: int) -> int:
        """LOAD_TOC of the table of contents at ``mc`` (``size`` bytes); returns the TMR size in bytes the PSP asks for.
        """
        resp = self.submit(ids.CMD_LOAD_TOC, {"cmd.cmd_load_toc.toc_phy_addr_lo": mc & 0xFFFFFFFF,
                                              "cmd.cmd_load_toc.toc_phy_addr_hi": mc >> 32,
                                              "cmd.cmd_load_toc.toc_size": size}, "load_toc")
        off = ids.cmd_off("resp.tmr_size") - ids.cmd_off("resp.status")
        return struct.unpack_from("<I", resp, off)[0]

    def setup_tmr(self, mc: int, size: int) -> None:
        """SETUP_TMR: hand the PSP its trusted memory region, ``size`` bytes at ``mc`` (virtual = physical address)."""
        self.submit(ids.CMD_SETUP_TMR, {"cmd.cmd_setup_tmr.buf_phy_addr_lo": mc & 0xFFFFFFFF,
                                        "cmd.cmd_setup_tmr.buf_phy_addr_hi": mc >> 32,
                                        "cmd.cmd_setup_tmr.buf_size": size,
                                        "cmd.cmd_setup_tmr.tmr_flags": 1 << 1,  # virt_phy_addr (§5.2)
                                        "cmd.cmd_setup_tmr.system_phy_addr_lo": mc & 0xFFFFFFFF,
                                        "cmd.cmd_setup_tmr.system_phy_addr_hi": mc >> 32}, "setup_tmr")

    def load_ip_fw(self, mc: int, size: int, fw_type: int, label: str) -> None:
        """LOAD_IP_FW of the ``size`` bytes at ``mc`` as firmware type ``fw_type`` (``label`` names it in errors)."""
        self.submit(ids.CMD_LOAD_IP_FW, {"cmd.cmd_load_ip_fw.fw_phy_addr_lo": mc & 0xFFFFFFFF,
                                         "cmd.cmd_load_ip_fw.fw_phy_addr_hi": mc >> 32,
                                         "cmd.cmd_load_ip_fw.fw_size": size,
                                         "cmd.cmd_load_ip_fw.fw_type": fw_type}, f"load_ip_fw {label}")

    def autoload_rlc(self) -> None:
        """AUTOLOAD_RLC: the PSP starts the RLC with the firmware loaded so far."""
        self.submit(ids.CMD_AUTOLOAD_RLC, {}, "autoload_rlc")

    def mode1_reset(self) -> None:
        """The PSP reset path (sOS control MODE1_RST, §5.2 / §7.2 "not used by AM"): the fallback of ``am reset``."""
        self._ctrl_wait("the psp secure os before a mode-1 reset")
        self.gpu.wr(PSP_CTRL, ids.CTRL_MODE1_RST)
