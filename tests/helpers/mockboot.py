"""A minimal test-side AM driver, written from specs/amd-bringup.md only, to drive the emulated Navi31 boot.

It exists to test the emulator (tests/test_mock_boot_*.py), not to be the product's driver: it follows
§4.2 steps 5-8 and §5.1-§5.5, §6.1-§6.4 literally (bootloader components, KM ring, TOC/TMR,
LOAD_IP_FW, AUTOLOAD_RLC, SMU messages, metrics) with register offsets from the database and ids
from the generated protocol modules. Firmware comes from Debian's firmware-amd-graphics, extracted
by ``bash tests/fetch_firmware.sh``.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import pytest

from tinyhw.autogen import amdgpu_psp, psp_gfx_if, smu13_driver_if_v13_0_0, smu_v13_0_0_ppsmc
from tinyhw.errors import DeviceTimeout
from tinyhw.mocks.amd.board import Navi31Board
from tinyhw.regs import asic
from tinyhw.transport.base import Transport
from tinyhw.transport.devstr import parse_device
from tinyhw.transport.wait import poll

FETCH = "bash tests/fetch_firmware.sh"
FW_ROOT = Path(os.environ.get("TINYHW_FIRMWARE_DIR")
               or Path(os.environ.get("TINYHW_CACHE") or Path.home() / ".cache" / "tinyhw") / "firmware")
BL = amdgpu_psp.CONSTANTS
G = psp_gfx_if.CONSTANTS
MSG = smu_v13_0_0_ppsmc.CONSTANTS
DIF = smu13_driver_if_v13_0_0.CONSTANTS
RESP = psp_gfx_if.STRUCTS["struct psp_gfx_cmd_resp"][1]
METRICS_SIZE, METRICS = smu13_driver_if_v13_0_0.STRUCTS["SmuMetricsExternal_t"]
A = asic("navi31")


def reg(name: str) -> int:
    return A.offset(name)


def firmware(name: str) -> bytes:
    path = FW_ROOT / "amd" / "lib" / "firmware" / "amdgpu" / name
    if not path.is_file():
        pytest.fail(f"{path} is missing: run `{FETCH}` first", pytrace=False)
    return path.read_bytes()


def common(data: bytes) -> tuple[int, int, int, int, int]:
    """(header major, minor, ucode_version, ucode_size, ucode_offset) of an amdgpu file (§5.4)."""
    _, _, major, minor, _, _, version, size, offset, _ = struct.unpack_from("<IIHHHHIIII", data, 0)
    return major, minor, version, size, offset


def psp_components(data: bytes) -> dict[int, bytes]:
    """psp_fw_type -> bytes of a psp v2.x sos file (§5.4)."""
    major, minor, _, _, array = common(data)
    assert major == 2
    count = struct.unpack_from("<I", data, 32)[0]
    base = 40 if minor == 1 else 36
    out = {}
    for i in range(count):
        fw_type, _, off, size = struct.unpack_from("<IIII", data, base + 16 * i)
        out[fw_type] = data[array + off:array + off + size]
    return out


def ip_images() -> list[tuple[int, bytes]]:
    """(gfx fw_type, image) for LOAD_IP_FW after the SMU, in §5.5 order, for Navi31 (GC 11, SDMA 6)."""
    out = []
    sdma = firmware("sdma_6_0_0.bin")  # v2: ctl image -> TH1, ctx image -> TH0
    _, _, _, _, arr = common(sdma)
    ctx_size, _, _, ctl_off, ctl_size = struct.unpack_from("<IIIII", sdma, 36)
    out += [(G["GFX_FW_TYPE_SDMA_UCODE_TH1"], sdma[ctl_off:ctl_off + ctl_size]),
            (G["GFX_FW_TYPE_SDMA_UCODE_TH0"], sdma[arr:arr + ctx_size])]
    mec = firmware("gc_11_0_0_mec.bin")  # gfx v2: code + stack
    _, usize, uoff, dsize, doff = struct.unpack_from("<IIIII", mec, 32)
    out += [(G["GFX_FW_TYPE_RS64_MEC"], mec[uoff:uoff + usize]),
            (G["GFX_FW_TYPE_RS64_MEC_P0_STACK"], mec[doff:doff + dsize])]
    imu = firmware("gc_11_0_0_imu.bin")
    _, _, _, _, arr = common(imu)
    isize, _, dsize, _ = struct.unpack_from("<IIII", imu, 32)
    out += [(G["GFX_FW_TYPE_IMU_I"], imu[arr:arr + isize]),
            (G["GFX_FW_TYPE_IMU_D"], imu[arr + isize:arr + isize + dsize])]
    rlc = firmware("gc_11_0_0_rlc.bin")
    _, minor, _, usize, arr = common(rlc)
    iram_size, iram_off, dram_size, dram_off = struct.unpack_from("<IIII", rlc, 156)
    out += [(G["GFX_FW_TYPE_RLC_IRAM"], rlc[iram_off:iram_off + iram_size]),
            (G["GFX_FW_TYPE_RLC_DRAM_BOOT"], rlc[dram_off:dram_off + dram_size])]
    if minor == 3:
        _, _, psize, poff, _, _, vsize, voff = struct.unpack_from("<IIIIIIII", rlc, 172)
        out += [(G["GFX_FW_TYPE_RLC_P"], rlc[poff:poff + psize]), (G["GFX_FW_TYPE_RLC_V"], rlc[voff:voff + vsize])]
    out.append((G["GFX_FW_TYPE_RLC_G"], rlc[arr:arr + usize]))
    return out


def smu_image() -> bytes:
    data = firmware("smu_13_0_0.bin")
    _, _, _, size, off = common(data)
    return data[off:off + size]


# boot-region layout of this test driver (physical VRAM offsets, all below the 256 MiB small BAR)
MSG_BUF, CMD_BUF, FENCE, RING, SMU_TABLE, TMR = 0x100000, 0x200000, 0x201000, 0x210000, 0x300000, 0x1000000
RING_SIZE = 0x10000


@dataclass
class Am:
    """The test driver over one transport (``board`` is the emulator behind it, for counters)."""

    t: Transport
    board: Navi31Board

    def __post_init__(self) -> None:
        self.bar0 = self.t.bar(0)
        self.bar5 = self.t.bar(5)
        self.clock = self.t.clock
        self.fb = (self.bar5.read32(reg("mmhub.MMMC_VM_FB_LOCATION_BASE")) & 0xFFFFFF) << 24

    # -- memory -----------------------------------------------------------------------------------------
    def mc(self, phys: int) -> int:
        return self.fb + phys

    def vram_write(self, phys: int, data: bytes) -> None:
        data = data + bytes(-len(data) % 4)
        self.bar0.write(phys, data)

    def vram_read(self, phys: int, n: int) -> bytes:
        return self.bar0.read(phys, n)

    def vram_read_indirect(self, addr: int, n: int) -> bytes:
        """§1.2: MM_INDEX_HI, MM_INDEX | 0x80000000, MM_DATA per dword."""
        out = bytearray()
        for a in range(addr, addr + n, 4):
            self.bar5.write32(0x18, a >> 31)
            self.bar5.write32(0x0, (a & 0x7FFFFFFF) | 0x80000000)
            out += self.bar5.read32(0x4).to_bytes(4, "little")
        return bytes(out)

    def wait(self, offset: int, done, what: str, timeout: float = 10.0) -> int:
        return poll(self.clock, lambda: self.bar5.read32(offset), done, timeout=timeout, interval=1e-3, what=what)

    # -- PSP bootloader (§5.1) --------------------------------------------------------------------------
    def bootloader(self, comps: dict[int, bytes], order: list[tuple[int, int]] | None = None) -> None:
        c35, c36, c81 = (reg(f"mp0.MP0_SMN_C2PMSG_{n}") for n in (35, 36, 81))
        order = order or [(BL["PSP_BL__LOAD_KEY_DATABASE"], 3), (BL["PSP_BL__LOAD_TOS_SPL_TABLE"], 5),
                          (BL["PSP_BL__LOAD_SYSDRV"], 2), (BL["PSP_BL__LOAD_SOSDRV"], 1)]
        for cmd, fw_type in order:
            if fw_type not in comps:
                continue
            self.wait(c35, lambda v: v & 0x80000000, "bootloader ready")
            image = comps[fw_type] + bytes(4)
            self.vram_write(MSG_BUF, image + bytes(-len(image) % 16))
            self.bar5.write32(c36, self.mc(MSG_BUF) >> 20)
            self.bar5.write32(c35, cmd)
            if cmd != BL["PSP_BL__LOAD_SOSDRV"]:
                v = self.wait(c35, lambda v: v & 0x80000000, "component consumed")
                assert v == 0x80000000, f"bootloader refused 0x{cmd:x}: 0x{v:x}"
        self.wait(c81, lambda v: v != 0, "sOS alive")

    # -- KM ring (§5.2) -------------------------------------------------------------------------------------
    def ring_create(self) -> None:
        c64, c69, c70, c71 = (reg(f"mp0.MP0_SMN_C2PMSG_{n}") for n in (64, 69, 70, 71))
        if self.bar5.read32(c71):
            self.bar5.write32(c64, G["GFX_CTRL_CMD_ID_DESTROY_RINGS"])
            self.wait(c64, lambda v: v & 0x80000000, "ring destroyed")
        self.wait(c64, lambda v: v & 0x80000000, "sOS ready")
        mc = self.mc(RING)
        self.bar5.write32(c69, mc & 0xFFFFFFFF)
        self.bar5.write32(c70, mc >> 32)
        self.bar5.write32(c71, RING_SIZE)
        self.bar5.write32(c64, G["GFX_CTRL_CMD_ID_INIT_GPCOM_RING"])
        v = self.wait(c64, lambda v: v & 0x80000000, "ring created")
        assert v & 0x8000FFFF == 0x80000000, hex(v)

    def submit(self, cmd_id: int, fields: dict[str, int]) -> tuple[int, int]:
        """One ring command; returns (resp.status, resp.tmr_size)."""
        c67 = reg("mp0.MP0_SMN_C2PMSG_67")
        wptr = self.bar5.read32(c67)
        cmd = bytearray(1024)
        struct.pack_into("<I", cmd, RESP["cmd_id"][0], cmd_id)
        for name, value in fields.items():
            struct.pack_into("<I", cmd, RESP[name][0], value)
        self.vram_write(CMD_BUF, bytes(cmd))
        fence_value = wptr // 16 + 1
        frame = struct.pack("<IIIIII", self.mc(CMD_BUF) & 0xFFFFFFFF, self.mc(CMD_BUF) >> 32, 0,
                            self.mc(FENCE) & 0xFFFFFFFF, self.mc(FENCE) >> 32, fence_value) + bytes(40)
        self.vram_write(RING + 4 * (wptr % (RING_SIZE // 4)), frame)
        self.bar5.write32(c67, wptr + 16)
        poll(self.clock, lambda: int.from_bytes(self.vram_read(FENCE, 4), "little"), lambda v: v == fence_value,
             timeout=10, interval=1e-3, what="ring fence")
        resp = self.vram_read(CMD_BUF + RESP["resp.status"][0], 20)
        return struct.unpack_from("<I", resp, 0)[0], struct.unpack_from("<I", resp, 16)[0]

    def load_ip_fw(self, fw_type: int, image: bytes) -> int:
        self.vram_write(MSG_BUF, image)
        mc = self.mc(MSG_BUF)
        status, _ = self.submit(G["GFX_CMD_ID_LOAD_IP_FW"], {
            "cmd.cmd_load_ip_fw.fw_phy_addr_lo": mc & 0xFFFFFFFF, "cmd.cmd_load_ip_fw.fw_phy_addr_hi": mc >> 32,
            "cmd.cmd_load_ip_fw.fw_size": len(image), "cmd.cmd_load_ip_fw.fw_type": fw_type})
        return status

    def load_toc(self, toc: bytes) -> tuple[int, int]:
        self.vram_write(MSG_BUF, toc)
        mc = self.mc(MSG_BUF)
        return self.submit(G["GFX_CMD_ID_LOAD_TOC"], {
            "cmd.cmd_load_toc.toc_phy_addr_lo": mc & 0xFFFFFFFF, "cmd.cmd_load_toc.toc_phy_addr_hi": mc >> 32,
            "cmd.cmd_load_toc.toc_size": len(toc)})

    def setup_tmr(self, size: int) -> int:
        mc = self.mc(TMR)
        status, _ = self.submit(G["GFX_CMD_ID_SETUP_TMR"], {
            "cmd.cmd_setup_tmr.buf_phy_addr_lo": mc & 0xFFFFFFFF, "cmd.cmd_setup_tmr.buf_phy_addr_hi": mc >> 32,
            "cmd.cmd_setup_tmr.buf_size": size, "cmd.cmd_setup_tmr.tmr_flags": 2,
            "cmd.cmd_setup_tmr.system_phy_addr_lo": TMR, "cmd.cmd_setup_tmr.system_phy_addr_hi": 0})
        return status

    # -- SMU (§6.1) -----------------------------------------------------------------------------------------
    def smu(self, msg: int, arg: int = 0, timeout: float = 10.0) -> tuple[int, int]:
        m66, m82, m90 = reg("mp1.MP1_SMN_C2PMSG_66"), reg("mp1.MP1_SMN_C2PMSG_82"), reg("mp1.MP1_SMN_C2PMSG_90")
        self.bar5.write32(m90, 0)
        self.bar5.write32(m82, arg)
        self.bar5.write32(m66, msg)
        resp = self.wait(m90, lambda v: v != 0, f"smu message 0x{msg:x}", timeout)
        return resp, self.bar5.read32(m82)

    def metrics(self) -> dict[str, object]:
        assert self.smu(MSG["PPSMC_MSG_TransferTableSmu2Dram"], DIF["TABLE_SMU_METRICS"])[0] == 1
        raw = self.vram_read(SMU_TABLE, METRICS_SIZE)
        out: dict[str, object] = {}
        for name, (off, ctype, count) in METRICS.items():
            if not name.startswith("SmuMetrics."):
                continue  # spare and padding words of SmuMetricsExternal_t
            fmt = {"uint8_t": "B", "uint16_t": "H", "uint32_t": "I"}[ctype]
            vals = struct.unpack_from(f"<{count}{fmt}", raw, off)
            out[name.split(".", 1)[1]] = vals[0] if count == 1 else list(vals)
        return out

    # -- the whole §4.2 steps 5-8 + autoload ------------------------------------------------------------------
    def smu_alive(self) -> bool:
        """§6.1: GetSmuVersion with a 100 ms timeout; alive iff C2PMSG_90 != 0 afterwards."""
        with suppress(DeviceTimeout):
            self.smu(MSG["PPSMC_MSG_GetSmuVersion"], timeout=0.1)
        return self.bar5.read32(reg("mp1.MP1_SMN_C2PMSG_90")) != 0

    def mode1_reset(self) -> None:
        """§7.2 for MP0 13.0.0: debug mailbox message 2, then wait for the bootloader."""
        self.bar5.write32(reg("mp1.MP1_SMN_C2PMSG_54"), 0)
        self.bar5.write32(reg("mp1.MP1_SMN_C2PMSG_53"), 0)
        self.bar5.write32(reg("mp1.MP1_SMN_C2PMSG_75"), MSG["DEBUGSMC_MSG_Mode1Reset"])
        self.clock.sleep(0.5)
        self.wait(reg("mp0.MP0_SMN_C2PMSG_35"), lambda v: v & 0x80000000, "bootloader after reset")

    def boot(self) -> int:
        """§4.1 decision (without the partial-boot branch) then the full boot."""
        sos_alive = self.bar5.read32(reg("mp0.MP0_SMN_C2PMSG_81")) != 0
        if sos_alive and self.smu_alive():
            self.mode1_reset()
        return self.full_boot()

    def full_boot(self) -> int:
        sos = psp_components(firmware("psp_13_0_0_sos.bin"))
        if not self.bar5.read32(reg("mp0.MP0_SMN_C2PMSG_81")):
            self.bootloader(sos)
        self.ring_create()
        status, tmr = self.load_toc(sos[4])
        assert status == 0 and tmr
        assert self.load_ip_fw(G["GFX_FW_TYPE_SMU"], smu_image()) == 0
        assert self.setup_tmr(tmr) == 0
        for fw_type, image in ip_images():
            assert self.load_ip_fw(fw_type, image) == 0, fw_type
        assert self.submit(G["GFX_CMD_ID_AUTOLOAD_RLC"], {})[0] == 0
        self.wait(reg("gc.RLC_RLCS_BOOTLOAD_STATUS"), lambda v: v & 0x80000000, "rlc autoload")
        assert self.bar5.read32(reg("gc.CP_STAT")) == 0
        mc = self.mc(SMU_TABLE)
        assert self.smu(MSG["PPSMC_MSG_SetDriverDramAddrHigh"], mc >> 32)[0] == 1
        assert self.smu(MSG["PPSMC_MSG_SetDriverDramAddrLow"], mc & 0xFFFFFFFF)[0] == 1
        assert self.smu(MSG["PPSMC_MSG_EnableAllSmuFeatures"], 0)[0] == 1
        return tmr


@contextmanager
def open_am(device: str) -> Iterator[Am]:
    """``mock:navi31[,opts]`` directly, or ``mock:navi31-usb[,opts]`` through the emulated bridge and pyusb,
    opened the way the CLI opens them (so the device lock and the real USB driver are in the path)."""
    try:
        from tinyhw.connect import open_device  # type: ignore[import-not-found]
    except ImportError:  # before tinyhw.connect existed the opener lived in the CLI package
        from tinyhw.cli.devices import open_device
    opened = open_device(parse_device(device))
    try:
        t = opened.transport
        # the emulated board behind the transport: the direct transport holds it; for the USB attachment
        # the opener closes it last (its bound close method is the only reference the opener keeps)
        board = getattr(t, "board", None) or next(c.__self__ for c in opened.closers
                                                  if isinstance(getattr(c, "__self__", None), Navi31Board))
        yield Am(t, board)
    finally:
        opened.close()
