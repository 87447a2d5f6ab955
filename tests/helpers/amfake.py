"""A small register-level fake of a Navi31's PSP and SMU for unit tests of tinyhw.boot.

Written from specs/amd-bringup.md §5.1-§5.2, §6.1, §7.2 and §10.4 (not from the driver): BAR0 is
VRAM (a dict of dwords), BAR5 holds the discovery window (the real mock board's), the PSP
bootloader (C2PMSG_35/36/81), the sOS ring (64/67/69/70/71), the SMU mailbox (66/82/90, debug
53/54/75), scratch registers and a few passive registers. It records every command so tests can
check order and payloads. Instant timing (answers come on the next read).
"""

from __future__ import annotations

import hashlib
import os
import struct
from pathlib import Path

from tinyhw import regs
from tinyhw.boards.navi31 import NAVI31
from tinyhw.mocks.amd.discovery import discovery_image, gc_info_table
from tinyhw.mocks.common.vclock import VirtualClock
from tinyhw.transport.base import BarInfo, BarRegion, Identity, Transport

#: The fake stands in for a Navi31 (its VRAM size in MiB, as CONFIG_MEMSIZE reads).
VRAM_MIB = NAVI31.vram_size >> 20

#: Debian's amdgpu files as tests/fetch_firmware.sh extracts them (same variables as test_firmware_real.py)
FW_DIR = Path(os.environ.get("TINYHW_FIRMWARE_DIR")
              or Path(os.environ.get("TINYHW_CACHE") or Path.home() / ".cache" / "tinyhw") / "firmware") \
    / "amd" / "lib" / "firmware" / "amdgpu"
A = regs.asic("navi31")


def off(name: str) -> int:
    return A.offset(name)


MP0 = {n: off(f"mp0.MP0_SMN_C2PMSG_{n}") for n in (35, 36, 64, 67, 69, 70, 71, 81)}
MP1 = {n: off(f"mp1.MP1_SMN_C2PMSG_{n}") for n in (53, 54, 66, 75, 82, 90)}
SCRATCH = {n: off(f"gc.SCRATCH_REG{n}") for n in (5, 6, 7)}
FB_BASE_MC = 0x8000000000  # FB base 0x80_0000_0000 (bits 23:0 of FB_LOCATION_BASE = 0x8000)


class FakeBoard:
    def __init__(self, image: bytes | None = None) -> None:
        self.vram: dict[int, int] = {}
        self.reg: dict[int, int] = {}
        self.log: list[tuple] = []
        self.sos = False
        self.smu_up = False
        self.ring = 0
        self.wptr = 0
        self.rlc_done = False
        self.smu_table = 0
        self.bl_status = 1 << 31
        self.ctrl = 0
        self.smu_resp = 0
        self.smu_arg = 0
        self.dbg_resp = 0
        self.silent_smu = False
        self.fail_cmd: int | None = None
        self.levels = {0: [500, 1500, 2500], 1: [400, 1200], 2: [96, 1249], 3: [400, 1900]}
        self.soft: dict[int, tuple[int, int]] = {}
        img = image if image is not None else discovery_image(NAVI31.profile, gc_info_table(dict(NAVI31.gc_info)))
        at = (VRAM_MIB << 20) - (64 << 10)
        for i in range(0, len(img), 4):
            self.vram[at + i] = int.from_bytes(img[i:i + 4].ljust(4, b"\0"), "little")
        self.reg[off("mmhub.MMMC_VM_FB_LOCATION_BASE")] = FB_BASE_MC >> 24
        self.reg[off("nbio.BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL")] = off("nbio.BIF_BX_PF0_GPU_HDP_FLUSH_REQ")
        for n in SCRATCH.values():
            self.reg[n] = 0

    # -- vram ----------------------------------------------------------------------------------------
    def vbytes(self, mc: int, n: int) -> bytes:
        o = mc - FB_BASE_MC
        return b"".join(self.vram.get(o + i, 0).to_bytes(4, "little") for i in range(0, n, 4))[:n]

    def vput(self, mc: int, value: int) -> None:
        self.vram[mc - FB_BASE_MC] = value

    # -- registers ------------------------------------------------------------------------------------------
    def read(self, o: int) -> int:
        if o == 0x378C:
            return VRAM_MIB
        if o == MP0[35]:
            return self.bl_status
        if o == MP0[81]:
            return 0x3101 if self.sos else 0
        if o == MP0[64]:
            return self.ctrl if self.sos else 0
        if o == MP0[67]:
            return self.wptr
        if o == MP0[71]:
            return self.ring
        if o == MP1[90]:
            return self.smu_resp
        if o == MP1[82]:
            return self.smu_arg
        if o == off("gc.CP_STAT"):
            return 0 if self.rlc_done else 1
        if o == off("gc.RLC_RLCS_BOOTLOAD_STATUS"):
            return (1 << 31) if self.rlc_done else 0
        return self.reg.get(o, 0)

    def write(self, o: int, v: int) -> None:
        self.log.append(("w", o, v))
        if o == MP0[35]:
            self._bootloader(v)
        elif o == MP0[64]:
            self._ctrl(v)
        elif o == MP0[67]:
            self._ring(v)
        elif o == MP1[66]:
            self._smu(v)
        elif o == MP1[90]:
            self.smu_resp = v
        elif o == MP1[82]:
            self.smu_arg = v
        elif o == MP1[75]:
            if v == 2 and self.smu_up:
                self.mode1()
        else:
            self.reg[o] = v

    def _bootloader(self, cmd: int) -> None:
        addr = self.reg.get(MP0[36], 0) << 20
        data = self.vbytes(addr, 16)
        self.log.append(("bl", cmd, hashlib.sha256(data).hexdigest()[:8]))
        if cmd == 0x20000:
            self.sos = True
            self.ctrl = 1 << 31
        self.bl_status = 1 << 31

    def _ctrl(self, cmd: int) -> None:
        self.log.append(("ctrl", cmd))
        if cmd == 0x20000:
            self.ring = self.reg.get(MP0[71], 0) or 0x10000
            self.wptr = 0
        elif cmd == 0x30000:
            self.ring = 0
        elif cmd == 0x70000:
            self.mode1()
            return
        self.ctrl = 1 << 31

    def _ring(self, new: int) -> None:
        ring_mc = self.reg.get(MP0[69], 0) | (self.reg.get(MP0[70], 0) << 32)
        while self.wptr < new:
            frame = self.vbytes(ring_mc + 4 * self.wptr, 64)
            cmd_lo, cmd_hi, _sz, f_lo, f_hi, f_val = struct.unpack_from("<6I", frame)
            cmd_mc = cmd_lo | cmd_hi << 32
            cmd = self.vbytes(cmd_mc, 64)
            cid = struct.unpack_from("<I", cmd, 8)[0]
            args = struct.unpack_from("<6I", cmd, 28)
            self.log.append(("cmd", cid, args))
            status = 0
            if cid == self.fail_cmd:
                status = 0xFFFF
            elif cid == 0x20:
                self.vput(cmd_mc + 880, 0x1300000)
            elif cid == 0x6 and args[3] == 0x12:
                self.smu_up = True
            elif cid == 0x21:
                self.rlc_done = True
            elif cid not in (0x5, 0x6):
                status = 0x100
            self.vput(cmd_mc + 864, status)
            self.vput(f_lo | f_hi << 32, f_val)
            self.wptr += 16

    def _smu(self, msg: int) -> None:
        self.log.append(("smu", msg, self.smu_arg))
        if not self.smu_up or self.silent_smu:
            return
        arg, out, resp = self.smu_arg, self.smu_arg, 1
        if msg == 0x2:
            out = 0x004E4B00
        elif msg == 0xE:
            self.smu_table = (self.smu_table & 0xFFFFFFFF) | arg << 32
        elif msg == 0xF:
            self.smu_table = (self.smu_table >> 32 << 32) | arg
        elif msg == 0x1F:
            clk, idx = arg >> 16, arg & 0xFFFF
            lv = self.levels[clk]
            out = len(lv) if idx == 0xFF else lv[idx]
        elif msg in (0x19, 0x1A):
            clk, mhz = arg >> 16, arg & 0xFFFF
            lo, hi = self.soft.get(clk, (0, 0))
            self.soft[clk] = (mhz, hi) if msg == 0x19 else (lo, mhz)
        elif msg == 0x12:
            table = bytearray(392)
            struct.pack_into("<H", table, 54, 2500)  # gfx PreDs
            struct.pack_into("<H", table, 56, 30)  # gfx PostDs
            struct.pack_into("<H", table, 104, 3)  # gfx activity
            struct.pack_into("<H", table, 120 + 2, 55)  # hotspot
            for i in range(0, 392, 4):
                self.vput(self.smu_table + i, int.from_bytes(table[i:i + 4], "little"))
        elif msg in (0x6,):
            pass
        else:
            resp = 0xFE
        self.smu_arg, self.smu_resp = out, resp

    def mode1(self) -> None:
        self.log.append(("mode1",))
        self.sos = self.smu_up = self.rlc_done = False
        self.ring = self.wptr = 0
        self.smu_resp = 0
        for n in SCRATCH.values():
            self.reg[n] = 0


class _Region(BarRegion):
    def __init__(self, info: BarInfo, t: FakeTransport) -> None:
        super().__init__(info)
        self.t = t

    def read32(self, offset: int) -> int:
        self.t.clock.advance(1e-6)
        self.t.counters.reg_reads += 1
        b = self.t.board
        return b.vram.get(offset, 0) if self.info.index == 0 else b.read(offset)

    def write32(self, offset: int, value: int) -> None:
        self.t.clock.advance(1e-6)
        self.t.counters.reg_writes += 1
        b = self.t.board
        if self.info.index == 0:
            b.vram[offset] = value
            b.log.append(("vram", offset))
        else:
            b.write(offset, value)

    def read(self, offset: int, length: int) -> bytes:
        return b"".join(self.read32(offset + i).to_bytes(4, "little") for i in range(0, length, 4))

    def write(self, offset: int, data: bytes) -> None:
        self.t.counters.bytes_out += len(data)
        for i in range(0, len(data), 4):
            self.t.board.vram[offset + i] = int.from_bytes(data[i:i + 4], "little")
        self.t.board.log.append(("vram_block", offset, len(data)))


class FakeTransport(Transport):
    name = "fake"
    emulated = True

    def __init__(self, board: FakeBoard | None = None) -> None:
        super().__init__(VirtualClock())
        self.board = board or FakeBoard()
        self.cfg = {0x04: 0x0006}

    def config_read(self, offset: int, size: int = 4) -> int:
        if offset == 0:
            return 0x744C1002
        return self.cfg.get(offset, 0)

    def config_write(self, offset: int, size: int, value: int) -> None:
        self.cfg[offset] = value
        self.board.log.append(("cfg", offset, value))

    def bars(self) -> list[BarInfo]:
        return [BarInfo(0, 0x8000000000, 32 << 30, "memory", True, True),  # large bar: discovery read from bar0
                BarInfo(5, 0xD0000000, 1 << 20, "memory")]

    def _make_region(self, info: BarInfo) -> BarRegion:
        return _Region(info, self)

    def identity(self) -> Identity:
        return Identity(0x1002, 0x744C, 0xC8, 0x030000, 0x1DA2, 0xE471, "fake:navi31")


def boot_emulated_board(device: str = "mock:navi31") -> None:
    """`tinyhw am boot --yes` on the emulated board with the test firmware (a test fails when it is missing)."""
    import pytest
    from clihelp import run

    if not (FW_DIR / "psp_13_0_0_sos.bin").is_file():
        pytest.fail(f"firmware missing in {FW_DIR}: run bash tests/fetch_firmware.sh", pytrace=False)
    r = run("--device", device, "am", "boot", "--yes", "--firmware-dir", str(FW_DIR))
    assert r.code == 0, r.err
