"""The emulated Navi31's PSP (MP0) boot path: bootloader, secure OS control, KM ring.

Implements specs/amd-bringup.md §10.4 "PSP bootloader" with the protocol of §5.1
(bootloader: C2PMSG_35 command/ready, C2PMSG_36 = MC >> 20, component order), §5.2 (sOS control
through C2PMSG_64, ring registers 67/69/70/71, 64-byte frames, the 1 KiB command buffer with the
response at +864, ring command payloads), §5.3 (TMR) and §7.1 (C2PMSG_81 = sOS alive). Ids and
layouts come from the generated ``tinyhw.autogen.psp_gfx_if`` / ``amdgpu_psp``; the images the
bootloader accepts are the facts of :mod:`tinyhw.mocks.amd.amfw`.

What a driver sees:

* Addresses: the PSP is an MMHUB client (§4.5): an MC address it is handed (C2PMSG_36, LOAD_TOC's and
  LOAD_IP_FW's images) inside the FB is VRAM, anything else is translated through MMHUB VMID0 (system aperture,
  page table: a system page is host memory behind the board's attachment, e.g. the bridge's over USB); the board
  hands that walk in as ``client_read``. An address that does not translate fails as below.
* Bootloader: C2PMSG_35 reads 0x80000000 when idle. A command write clears bit 31; after
  ``bl_delay`` the component at MC ``C2PMSG_36 << 20`` is checked (SHA-256 of the expected size
  against the real component; order KDB, SPL, SYS, SOC, INTF, DBG, RAS, SOS of those present) and
  bit 31 returns: 0x80000000 when accepted, 0x80000000 | 0x0001 (invented error code) when the
  bytes, the order or the address are wrong; a KDB starts the sequence over (inferred). After an
  accepted SOS the bootloader stops acking and C2PMSG_81 becomes the sOS version (0x00310025)
  after ``sos_delay``; a rejected SOS leaves bit 31 with the error code and C2PMSG_81 at 0.
* sOS control (C2PMSG_64): reads 0x80000000 | status once sOS is alive (0 before). A command write
  clears bit 31; after ``ctrl_delay`` it reads 0x80000000 | status (§10.4; §5.2's command-id
  bits 19:16 are left 0, which the drivers' 0x8000FFFF mask ignores either way).
  INIT_GPCOM_RING needs C2PMSG_71 != 0 and no ring (status 0, else 0x0001, invented);
  DESTROY_RINGS / DESTROY_GPCOM_RING remove the ring and zero C2PMSG_71/67; CAN_INIT_RINGS answers 0;
  MODE1_RST resets the board; any other command answers PSP_ERR_UNKNOWN_COMMAND.
* KM ring: a C2PMSG_67 write (dwords) makes sOS process every 64-byte frame from the old write
  pointer to the new one after ``cmd_delay``: read the 1 KiB command at the frame's MC address,
  execute, write resp.status (and resp.tmr_size for LOAD_TOC), then the fence value at the fence
  MC address. LOAD_TOC (TOC bytes checked) -> TMR size; SETUP_TMR records the region (size must
  cover the TMR size); LOAD_IP_FW records (fw_type, size, SHA-256) -- SMU firmware (allowed before
  SETUP_TMR, bytes checked against smu_13_0_0.bin) starts the SMU; other types need the TMR;
  AUTOLOAD_RLC (needs RLC_G loaded) completes RLC autoload after ``autoload_delay``;
  SRIOV_SPATIAL_PART and DESTROY_TMR answer 0; anything else PSP_ERR_UNKNOWN_COMMAND (0x100).
  Invented failure statuses: 0xFFFF000F (image bytes do not match), 0xFFFF0010 (prerequisite missing,
  e.g. LOAD_IP_FW before SETUP_TMR), 0xFFFF0011 (an address that does not translate).
* ``psp=hang``: the PSP never answers (bit 31 never returns, sOS never alive, ring never fenced).
* State (sOS alive, ring, TMR, loaded firmware) persists in the board state file until a mode-1 reset.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tinyhw.autogen import psp_gfx_if
from tinyhw.boards.spec import AmdFirmware
from tinyhw.commands import CommandTable
from tinyhw.mocks.amd import amfw
from tinyhw.mocks.common.services import BoardServices
from tinyhw.regs.asic import Asic

PSP_GFX = psp_gfx_if.CONSTANTS  # psp_gfx_if.h: command ids, firmware types, statuses
_RESP = psp_gfx_if.STRUCTS["struct psp_gfx_cmd_resp"][1]
_FRAME = psp_gfx_if.STRUCTS["struct psp_gfx_rb_frame"][1]
CMD_SIZE = psp_gfx_if.STRUCTS["struct psp_gfx_cmd_resp"][0]
FRAME_SIZE = psp_gfx_if.STRUCTS["struct psp_gfx_rb_frame"][0]
READY = PSP_GFX["GFX_FLAG_RESPONSE"]
BL_ERROR = 0x0001  # invented bootloader error code (low 16 bits of C2PMSG_35)
RING_ERROR = 0x0001  # invented sOS control error (ring already exists / no size)
ST_BAD_IMAGE = 0xFFFF000F  # invented ring statuses
ST_PREREQ = 0xFFFF0010
ST_BAD_ADDR = 0xFFFF0011
#: sOS control commands (C2PMSG_64) by id: a handler returns the status, or None when it reset the board
CONTROL: CommandTable[int] = CommandTable("psp control command")
#: KM ring commands (the 1 KiB command buffer's cmd_id): a handler returns (status, TMR size or None)
RING: CommandTable[int] = CommandTable("psp ring command")
#: the MP0 C2PMSG registers the boot path answers (specs/amd-bringup.md §3.3/§5)
MAILBOX = (33, 35, 36, 64, 67, 69, 70, 71, 81)


@dataclass
class PspTiming:
    """Virtual-time delays (all invented; the spec asks for configurable delays so polling is exercised)."""

    bl_delay: float = 2e-3
    sos_delay: float = 0.3
    ctrl_delay: float = 1e-3
    cmd_delay: float = 1e-3
    autoload_delay: float = 0.05
    reset_delay: float = 0.2


@dataclass
class PspState:
    """What persists across commands (board state file)."""

    bl_reg: int = READY  # C2PMSG_35
    bl_arg: int = 0  # C2PMSG_36
    loaded: list[str] = field(default_factory=list)  # bootloader components accepted, in order
    sos_alive: int = 0  # C2PMSG_81
    ctrl: int = 0  # C2PMSG_64
    wptr: int = 0  # C2PMSG_67
    ring_lo: int = 0
    ring_hi: int = 0
    ring_size: int = 0  # C2PMSG_71
    ring: tuple[int, int] | None = None  # (MC address, bytes) of the live KM ring
    toc: bool = False
    tmr: tuple[int, int] | None = None  # (MC address, bytes)
    fw: list[tuple[int, int, str]] = field(default_factory=list)  # LOAD_IP_FW: (fw_type, size, sha256)
    smu_loaded: bool = False

    def to_json(self) -> dict[str, Any]:
        """The state as JSON-ready values (tuples as lists), for the board state file."""
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PspState:
        """The state :meth:`to_json` wrote (unknown keys ignored, tuples restored)."""
        s = cls()
        for k, v in data.items():
            if hasattr(s, k):
                value = v
                if k in ("ring", "tmr") and v is not None:
                    value = tuple(v)
                if k == "fw":
                    value = [tuple(x) for x in v]
                setattr(s, k, value)
        return s


class PspBoot:
    """C2PMSG_33/35/36/64/67/69/70/71/81 and the firmware behind them, on a board's services (time, VRAM).

    ``regs`` is the ASIC's register database (the C2PMSG offsets); the board's events are callbacks:
    ``on_sos_alive()``, ``on_smu_loaded()``, ``on_autoload_done()`` and ``on_reset(trigger)`` (mode-1 reset)."""

    def __init__(self, services: BoardServices, regs: Asic, timing: PspTiming, *, on_sos_alive: Callable[[], None],
                 on_smu_loaded: Callable[[], None], on_autoload_done: Callable[[], None],
                 on_reset: Callable[[str], None], hang: bool = False, fwcheck: bool = True,
                 client_read: Callable[[int, int], bytes | None] | None = None,
                 firmware: AmdFirmware) -> None:
        self.services = services
        #: the board's firmware facts (its sOS components and SMU image, from its description)
        self.firmware = firmware
        self.sos = self.firmware.sos
        #: how the PSP reads memory at an MC address it is handed (an MMHUB client: VRAM inside the FB, else through
        #: MMHUB VMID0; the board passes that walk); None when the address is unreachable. Default: VRAM only.
        self.client_read = client_read or self._vram_read
        self.on_sos_alive = on_sos_alive
        self.on_smu_loaded = on_smu_loaded
        self.on_autoload_done = on_autoload_done
        self.on_reset = on_reset
        self.c2pmsg = {n: regs.offset(f"mp0.MP0_SMN_C2PMSG_{n}") for n in MAILBOX}
        self.timing = timing
        self.hang = hang
        self.fwcheck = fwcheck
        self.s = PspState()
        self.log: list[tuple[str, int, int]] = []  # (what, command id, status) of everything executed
        self._bl_busy = False

    def _vram_read(self, mc: int, length: int) -> bytes | None:
        phys = self.services.mc_to_vram(mc, length)
        return None if phys is None else self.services.vram_read(phys, length)

    # -- registers ----------------------------------------------------------------------------------------
    def handlers(self) -> tuple[dict[int, Any], dict[int, Any]]:
        """(reads, writes): BAR5 offset -> handler for the MP0 C2PMSG registers of the bootloader (33, 35, 36), the sOS
        control mailbox (64, 69-71), the KM ring's write pointer (67) and sOS alive (81)."""
        C2PMSG = self.c2pmsg
        def get(attr: str) -> Any:
            return lambda: getattr(self.s, attr)

        def put(attr: str) -> Any:
            return lambda v: setattr(self.s, attr, v)

        reads = {
            C2PMSG[33]: lambda: 0, C2PMSG[35]: get("bl_reg"), C2PMSG[36]: get("bl_arg"), C2PMSG[64]: get("ctrl"),
            C2PMSG[67]: get("wptr"), C2PMSG[69]: get("ring_lo"), C2PMSG[70]: get("ring_hi"),
            C2PMSG[71]: get("ring_size"), C2PMSG[81]: get("sos_alive"),
        }
        writes = {
            C2PMSG[33]: lambda v: None, C2PMSG[35]: self._bl_write, C2PMSG[36]: put("bl_arg"),
            C2PMSG[64]: self._ctrl_write, C2PMSG[67]: self._wptr_write, C2PMSG[69]: put("ring_lo"),
            C2PMSG[70]: put("ring_hi"), C2PMSG[71]: put("ring_size"),
            C2PMSG[81]: lambda v: None,  # written by the PSP only (inferred): a host write is dropped
        }
        return reads, writes

    def power_on(self) -> None:
        """Mode-1 reset / cold board: bootloader waiting, no sOS, no ring, no TMR."""
        self.s = PspState()
        self._bl_busy = False

    # -- bootloader ----------------------------------------------------------------------------------------
    def _bl_write(self, value: int) -> None:
        s = self.s
        s.bl_reg = value & ~READY
        if self.hang or s.sos_alive or self._bl_busy:
            self.log.append(("bootloader-ignored", value, 0))
            return  # after sOS (or while busy) the bootloader does not ack
        self._bl_busy = True
        self.services.schedule(self.timing.bl_delay, lambda: self._bl_execute(value))

    def _bl_execute(self, cmd: int) -> None:
        s = self.s
        status = self._bl_check(cmd)
        self.log.append(("bootloader", cmd, status))
        self._bl_busy = False
        if status == 0 and cmd == amfw.BOOTLOADER_ORDER[-1][0]:
            s.bl_reg = cmd  # SOS: no ack; alive after the delay
            self.services.schedule(self.timing.sos_delay, self._sos_up)
            return
        s.bl_reg = READY | status

    def _bl_check(self, cmd: int) -> int:
        s = self.s
        order = [c for c, _ in amfw.BOOTLOADER_ORDER]
        if cmd not in order:
            return BL_ERROR
        pos = order.index(cmd)
        types = amfw.BOOTLOADER_ORDER[pos][1]
        present = [t for t in types if t in self.sos]
        if not present:
            return BL_ERROR  # a component this file does not have
        if pos == 0:
            s.loaded.clear()  # a new KDB starts the sequence over (inferred: a driver retrying after a crash)
        done = [order.index(c) for c in (int(x.split(":")[0], 16) for x in s.loaded)]
        if done and pos <= max(done):
            return BL_ERROR  # out of order or repeated
        if pos == len(order) - 1:  # SOS needs every earlier component the file holds
            needed = [i for i, (_, ts) in enumerate(amfw.BOOTLOADER_ORDER[:-1])
                      if any(t in self.sos for t in ts)]
            if sorted(set(done)) != needed:
                return BL_ERROR
        mc = s.bl_arg << 20
        for t in present:
            img = self.sos[t]
            data = self.client_read(mc, img.size)
            if data is None:
                return BL_ERROR
            if not self.fwcheck or hashlib.sha256(data).hexdigest() == img.sha256:
                s.loaded.append(f"{cmd:x}:{img.name}")
                return 0
        return BL_ERROR

    def _sos_up(self) -> None:
        s = self.s
        s.sos_alive = self.sos[1].version
        s.ctrl = READY
        self.on_sos_alive()

    # -- sOS control ------------------------------------------------------------------------------------------
    def _ctrl_write(self, value: int) -> None:
        s = self.s
        s.ctrl = value & ~READY
        if self.hang or not s.sos_alive:
            return
        self.services.schedule(self.timing.ctrl_delay, lambda: self._ctrl_execute(value))

    def _ctrl_execute(self, value: int) -> None:
        cmd = value & PSP_GFX["GFX_CMD_ID_MASK"]
        handler = CONTROL.get(cmd)
        status = PSP_GFX["PSP_ERR_UNKNOWN_COMMAND"] if handler is None else handler(self)
        if status is None:  # the board was reset: no answer
            return
        self.log.append(("control", cmd, status))
        self.s.ctrl = READY | status  # §10.4: "answers 0x80000000 (status 0)"

    @CONTROL.handles(PSP_GFX["GFX_CTRL_CMD_ID_INIT_GPCOM_RING"])
    def create_km_ring(self) -> int | None:
        """sOS control INIT_GPCOM_RING: create the KM ring at the MC address in C2PMSG_69/70 of C2PMSG_71 bytes;
        RING_ERROR when a ring already exists, the size is 0 or the ring is not inside VRAM."""
        s = self.s
        mc = s.ring_hi << 32 | s.ring_lo
        if s.ring is not None or not s.ring_size or self.services.mc_to_vram(mc, s.ring_size) is None:
            return RING_ERROR
        s.ring, s.wptr = (mc, s.ring_size), 0
        return 0

    @CONTROL.handles(PSP_GFX["GFX_CTRL_CMD_ID_DESTROY_RINGS"])
    @CONTROL.handles(PSP_GFX["GFX_CTRL_CMD_ID_DESTROY_GPCOM_RING"])
    def destroy_km_ring(self) -> int | None:
        """sOS control DESTROY_RINGS / DESTROY_GPCOM_RING: drop the KM ring and its write pointer."""
        s = self.s
        s.ring, s.ring_size, s.wptr = None, 0, 0
        return 0

    @CONTROL.handles(PSP_GFX["GFX_CTRL_CMD_ID_CAN_INIT_RINGS"])
    def allow_rings(self) -> int | None:
        """sOS control CAN_INIT_RINGS: answers status 0 (rings may be created now)."""
        return 0

    @CONTROL.handles(PSP_GFX["GFX_CTRL_CMD_ID_MODE1_RST"])
    def reset_board(self) -> int | None:
        """sOS control MODE1_RST: the whole board is mode-1 reset; no answer is written (the reset clears the mailbox).
        """
        self.log.append(("control", PSP_GFX["GFX_CTRL_CMD_ID_MODE1_RST"], 0))
        self.on_reset("psp")
        return None

    # -- KM ring ------------------------------------------------------------------------------------------------
    def _wptr_write(self, value: int) -> None:
        s = self.s
        old, s.wptr = s.wptr, value
        if self.hang or s.ring is None or not s.sos_alive:
            return
        self.services.schedule(self.timing.cmd_delay, lambda: self._ring_execute(old, value))

    def _ring_execute(self, old: int, new: int) -> None:
        s = self.s
        if s.ring is None:
            return
        mc, size = s.ring
        ring_dw = size // 4
        frame_dw = FRAME_SIZE // 4
        base = self.services.mc_to_vram(mc, size)
        for i in range(((new - old) % ring_dw) // frame_dw):
            pos = (old + i * frame_dw) % ring_dw
            self._frame(self.services.vram_read(base + pos * 4, FRAME_SIZE))

    def _frame(self, frame: bytes) -> None:
        def u32(buf: bytes, name: str, table: dict = _FRAME) -> int:
            o = table[name][0]
            return int.from_bytes(buf[o:o + 4], "little")

        cmd_mc = u32(frame, "cmd_buf_addr_hi") << 32 | u32(frame, "cmd_buf_addr_lo")
        fence_mc = u32(frame, "fence_addr_hi") << 32 | u32(frame, "fence_addr_lo")
        fence_value = u32(frame, "fence_value")
        cmd_phys = self.services.mc_to_vram(cmd_mc, CMD_SIZE)
        if cmd_phys is None:
            self.log.append(("ring-bad-frame", cmd_mc, ST_BAD_ADDR))
        else:
            buf = self.services.vram_read(cmd_phys, CMD_SIZE)
            cmd_id = u32(buf, "cmd_id", _RESP)
            status, tmr = self._command(cmd_id, buf)
            self.log.append(("ring", cmd_id, status))
            self.services.vram_write(cmd_phys + _RESP["resp.status"][0], status.to_bytes(4, "little"))
            if tmr is not None:
                self.services.vram_write(cmd_phys + _RESP["resp.tmr_size"][0], tmr.to_bytes(4, "little"))
        fence_phys = self.services.mc_to_vram(fence_mc, 4)
        if fence_phys is not None:
            self.services.vram_write(fence_phys, fence_value.to_bytes(4, "little"))

    def _command(self, cmd_id: int, buf: bytes) -> tuple[int, int | None]:
        handler = RING.get(cmd_id)
        return (PSP_GFX["PSP_ERR_UNKNOWN_COMMAND"], None) if handler is None else handler(self, buf)

    @staticmethod
    def _arg(buf: bytes, name: str) -> int:
        o = _RESP[name][0]
        return int.from_bytes(buf[o:o + 4], "little")

    def _image(self, buf: bytes, prefix: str, lo: str, hi: str, size: str) -> tuple[int, bytes] | None:
        """(size, bytes) of the image a command names by MC address (read as :attr:`client_read` reads), None when
        the address is unreachable."""
        mc = self._arg(buf, f"{prefix}.{hi}") << 32 | self._arg(buf, f"{prefix}.{lo}")
        n = self._arg(buf, f"{prefix}.{size}")
        data = self.client_read(mc, max(n, 1))
        return None if data is None else (n, data[:n])

    @RING.handles(PSP_GFX["GFX_CMD_ID_LOAD_TOC"])
    def load_toc(self, buf: bytes) -> tuple[int, int | None]:
        """KM ring LOAD_TOC: check the TOC image at the given MC address against the firmware's and answer the TMR size
        (18 MiB); bad address or bytes fail."""
        got = self._image(buf, "cmd.cmd_load_toc", "toc_phy_addr_lo", "toc_phy_addr_hi", "toc_size")
        if got is None:
            return ST_BAD_ADDR, None
        if self.fwcheck and not _matches(got[1], self.sos[4]):
            return ST_BAD_IMAGE, None
        self.s.toc = True
        return 0, amfw.TMR_SIZE

    @RING.handles(PSP_GFX["GFX_CMD_ID_SETUP_TMR"])
    def set_up_tmr(self, buf: bytes) -> tuple[int, int | None]:
        """KM ring SETUP_TMR: reserve the TMR at the given MC address; it must be inside VRAM and, after LOAD_TOC, at
        least the TOC's TMR size."""
        s = self.s
        mc = (self._arg(buf, "cmd.cmd_setup_tmr.buf_phy_addr_hi") << 32 |
              self._arg(buf, "cmd.cmd_setup_tmr.buf_phy_addr_lo"))
        size = self._arg(buf, "cmd.cmd_setup_tmr.buf_size")
        if s.toc and size < amfw.TMR_SIZE:
            return ST_PREREQ, None
        if size and self.services.mc_to_vram(mc, size) is None:
            return ST_BAD_ADDR, None
        s.tmr = (mc, size)
        return 0, None

    @RING.handles(PSP_GFX["GFX_CMD_ID_DESTROY_TMR"])
    def destroy_tmr(self, buf: bytes) -> tuple[int, int | None]:
        """KM ring DESTROY_TMR: release the TMR."""
        self.s.tmr = None
        return 0, None

    @RING.handles(PSP_GFX["GFX_CMD_ID_LOAD_IP_FW"])
    def load_ip_firmware(self, buf: bytes) -> tuple[int, int | None]:
        """KM ring LOAD_IP_FW: the SMU image is checked and starts the SMU (allowed before SETUP_TMR); any other image
        needs the TMR and is recorded (type, size, SHA-256) unchecked."""
        s = self.s
        fw_type = self._arg(buf, "cmd.cmd_load_ip_fw.fw_type")
        got = self._image(buf, "cmd.cmd_load_ip_fw", "fw_phy_addr_lo", "fw_phy_addr_hi", "fw_size")
        if got is None or got[0] == 0:
            return ST_BAD_ADDR, None
        if fw_type == PSP_GFX["GFX_FW_TYPE_SMU"]:
            if self.fwcheck and not _matches(got[1], self.firmware.smu):
                return ST_BAD_IMAGE, None
            s.smu_loaded = True
            self.on_smu_loaded()
        elif s.tmr is None:
            return ST_PREREQ, None
        s.fw.append((fw_type, got[0], hashlib.sha256(got[1]).hexdigest()))
        return 0, None

    @RING.handles(PSP_GFX["GFX_CMD_ID_AUTOLOAD_RLC"])
    def start_rlc_autoload(self, buf: bytes) -> tuple[int, int | None]:
        """KM ring AUTOLOAD_RLC: needs the TMR and the RLC_G image; RLC autoload completes ``autoload_delay`` virtual
        seconds later."""
        s = self.s
        if s.tmr is None or not any(t == PSP_GFX["GFX_FW_TYPE_RLC_G"] for t, _, _ in s.fw):
            return ST_PREREQ, None
        self.services.schedule(self.timing.autoload_delay, self.on_autoload_done)
        return 0, None

    @RING.handles(PSP_GFX["GFX_CMD_ID_SRIOV_SPATIAL_PART"])
    def accept_spatial_partition(self, buf: bytes) -> tuple[int, int | None]:
        """KM ring SRIOV_SPATIAL_PART: accepted with status 0 (one partition, nothing changes)."""
        return 0, None

    # -- state ------------------------------------------------------------------------------------------------
    def to_state(self) -> dict[str, Any]:
        """The PSP's state for the board state file."""
        return self.s.to_json()

    def from_state(self, data: dict[str, Any]) -> None:
        """Restore the PSP's state from the board state file."""
        self.s = PspState.from_json(data)


def _matches(data: bytes, img: amfw.Image | None) -> bool:
    """The image is the expected one: its first ``img.size`` bytes hash right (a larger size is allowed)."""
    if img is None:  # a board without the facts of that file accepts any image
        return True
    return len(data) >= img.size and hashlib.sha256(data[:img.size]).hexdigest() == img.sha256
