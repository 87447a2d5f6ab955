"""The emulated ASM24 bridge through real pyusb calls: identity, XDATA, link, unknown requests, faults.

Spec: specs/asm24-usb-bridge.md §2-§4, §7.1, §10, §12 items 1-4 and 13. The helpers at the top
(a stub GPU endpoint and thin request wrappers written from the spec tables) are shared with the
other tests/test_mock_asm24_*.py files; no tinyhw driver code is used.
"""

from __future__ import annotations

import errno
import struct

import pytest
import usb.core
import usb.util

from tinyhw.boards.navi31 import Navi31UsbOptions
from tinyhw.boards.options import FaultPlan
from tinyhw.mocks.bridge.asm24 import Asm24Bridge, Stall
from tinyhw.mocks.bridge.pyusb_backend import Asm24Backend, make_backend
from tinyhw.mocks.common.vclock import VirtualClock

MiB = 1 << 20


class StubGpu:
    """A small type-0 endpoint: 1002:744c, BAR0 64-bit prefetchable 256 MiB, BAR2 64-bit 2 MiB, BAR5 1 MiB."""

    BARS = {0: (0x10, 256 * MiB, 0xC), 2: (0x18, 2 * MiB, 0xC), 5: (0x24, 1 * MiB, 0x0)}

    def __init__(self) -> None:
        self.clock = VirtualClock()
        self.accesses = 0
        self.command = 0
        self.raw: dict[int, int] = {}  # BAR register -> last value written
        self.mem: dict[tuple[int, int], int] = {}
        self.placed: list[tuple[int, int, int]] = []  # (bar, address, size)
        self.resets = 0

    def _bar_reg(self, reg: int) -> tuple[int, bool] | None:
        for idx, (off, _, flags) in self.BARS.items():
            if reg == off:
                return idx, False
            if reg == off + 4 and flags & 0x4:
                return idx, True
        return None

    def cfg_read32(self, reg: int) -> int:
        if reg == 0x00:
            return 0x744C1002
        if reg == 0x04:
            return 0x0010 << 16 | self.command
        if reg == 0x08:
            return 0x030000C8
        hit = self._bar_reg(reg)
        if hit is None:
            return 0
        idx, high = hit
        _, size, flags = self.BARS[idx]
        raw = self.raw.get(reg, 0)
        if high:
            return raw & (~((size - 1) >> 32) & 0xFFFFFFFF)
        return (raw & ~(size - 1) & 0xFFFFFFF0) | flags

    def cfg_write32(self, reg: int, value: int, byte_enable: int = 0xF) -> None:
        lanes = sum(0xFF << (8 * i) for i in range(4) if byte_enable >> i & 1)
        if reg == 0x04:
            self.command = (self.command & ~lanes | value & lanes) & 0xFFFF
        elif self._bar_reg(reg) is not None:
            self.raw[reg] = self.raw.get(reg, 0) & ~lanes | value & lanes
            self.placed = [(i, self.bar_address(i), size) for i, (_, size, _) in self.BARS.items()]

    def bar_address(self, idx: int) -> int:
        off, _, flags = self.BARS[idx]
        lo = self.cfg_read32(off) & ~0xF
        return lo | (self.cfg_read32(off + 4) << 32 if flags & 0x4 else 0)

    def decode(self, addr: int) -> tuple[int, int] | None:
        if not self.command & 0x2:
            return None
        for idx, base, size in self.placed:
            if base <= addr < base + size:
                return idx, addr - base
        return None

    def mem_read32(self, bar: int, offset: int) -> int:
        self.accesses += 1
        return self.mem.get((bar, offset), 0)

    def mem_write32(self, bar: int, offset: int, value: int, byte_enable: int = 0xF) -> None:
        self.accesses += 1
        lanes = sum(0xFF << (8 * i) for i in range(4) if byte_enable >> i & 1)
        self.mem[(bar, offset)] = self.mem.get((bar, offset), 0) & ~lanes | value & lanes

    def reset(self) -> None:
        self.resets += 1
        self.command = 0
        self.raw.clear()
        self.placed = []


# -- request wrappers (spec §4.1 table, §5) ----------------------------------------------------------------

def open_bridge(board: object | None = None, *, configure: bool = True, **opts: object,
                ) -> tuple[usb.core.Device, Asm24Bridge, VirtualClock]:
    """An emulated bridge found through pyusb, configured like the host open sequence (§2 step 5)."""
    opts.setdefault("strict", True)
    faults = opts.pop("faults", None)
    options = Navi31UsbOptions(**opts)  # type: ignore[arg-type]
    if faults:
        options.faults = FaultPlan.parse(str(faults))
    clock = VirtualClock()
    backend = make_backend(board or StubGpu(), options, clock)
    dev = usb.core.find(idVendor=0xADD1, idProduct=0x0001, backend=backend)
    assert dev is not None
    if configure:
        dev.set_configuration(1)
        usb.util.claim_interface(dev, 0)
        dev.set_interface_altsetting(0, 0)
    return dev, backend.bridge, clock


def xdata_read(dev: usb.core.Device, addr: int, n: int, bank: int = 0) -> bytes:
    """Vendor request 0xE4: ``n`` bytes of the bridge's XDATA at ``addr`` (``bank`` in wIndex's high byte)."""
    return bytes(dev.ctrl_transfer(0xC0, 0xE4, addr, bank << 8, n, timeout=1000))


def xdata_write(dev: usb.core.Device, addr: int, value: int) -> None:
    """Vendor request 0xE5: write the byte ``value`` to XDATA at ``addr``."""
    dev.ctrl_transfer(0x40, 0xE5, addr, value, None, timeout=1000)


def tlp_request(dev: usb.core.Device, fmt_type: int, be: int, addr: int, value: int, *, mode: int = 0) -> None:
    """Vendor request 0xF0 OUT: hand the bridge one TLP (format/type, byte enables, 64-bit address, data; ``mode`` in
    wIndex)."""
    payload = struct.pack("<III", addr & 0xFFFFFFFF, addr >> 32, value)
    assert dev.ctrl_transfer(0x40, 0xF0, fmt_type | be << 8, mode, payload, timeout=5000) == 12


def tlp_completion(dev: usb.core.Device) -> bytes:
    """Vendor request 0xF0 IN: the 8-byte completion record of the last TLP."""
    return bytes(dev.ctrl_transfer(0xC0, 0xF0, 0, 0, 8, timeout=5000))


def parse_record(rec: bytes) -> tuple[int, int, int, bool, int]:
    """(data, status, byte count, CplD, result) of an 8-byte completion record (§5.5)."""
    hdr = rec[4] << 8 | rec[5]
    return int.from_bytes(rec[:4], "little"), hdr >> 13, hdr & 0xFFF, bool(rec[6] & 1), rec[7]


def cfg_addr(bus: int, dev: int, fn: int, reg: int) -> int:
    return bus << 24 | dev << 19 | fn << 16 | reg


def cfg_read(dev: usb.core.Device, bus: int, d: int, fn: int, reg: int) -> tuple[int, int, int, bool, int]:
    tlp_request(dev, 0x04 if bus == 0 else 0x05, 0xF, cfg_addr(bus, d, fn, reg & ~3), 0)
    return parse_record(tlp_completion(dev))


def cfg_write(dev: usb.core.Device, bdf: tuple[int, int, int], reg: int, value: int, *, size: int = 4,
              ) -> tuple[int, int, int, bool, int]:
    """A config write of ``size`` bytes at ``reg`` of (bus, device, function); returns the parsed completion."""
    bus, d, fn = bdf
    off = reg & 3
    be = ((1 << size) - 1) << off
    tlp_request(dev, 0x44 if bus == 0 else 0x45, be, cfg_addr(bus, d, fn, reg & ~3), value << (8 * off))
    return parse_record(tlp_completion(dev))


def program_bridges(dev: usb.core.Device, gpu_bus: int = 4) -> None:
    """§8 step 1 for every bridge bus 0..gpu_bus-1."""
    for b in range(gpu_bus):
        assert cfg_write(dev, (b, 0, 0), 0x18, (b + 1) << 8 | gpu_bus << 16)[1] == 0
        cfg_write(dev, (b, 0, 0), 0x20, 0x1000, size=2)
        cfg_write(dev, (b, 0, 0), 0x22, 0xFFFF, size=2)
        cfg_write(dev, (b, 0, 0), 0x24, 0x0000, size=2)
        cfg_write(dev, (b, 0, 0), 0x26, 0xFFFF, size=2)
        cfg_write(dev, (b, 0, 0), 0x28, 0x8)
        cfg_write(dev, (b, 0, 0), 0x2C, 0xFFFFFFFF)
        cfg_write(dev, (b, 0, 0), 0x04, 0x07, size=1)


def assign_bars(dev: usb.core.Device, gpu_bus: int = 4) -> dict[int, tuple[int, int]]:
    """§8 step 3: size every BAR through config TLPs and place it; returns {bar: (address, size)}."""
    cursors = {False: 0x10000000, True: 0x8_0000_0000}
    out: dict[int, tuple[int, int]] = {}
    off = 0x10
    while off <= 0x24:
        cur = cfg_read(dev, gpu_bus, 0, 0, off)[0]
        if cur & 1:
            off += 4
            continue
        pref, is64 = bool(cur & 0x8), bool(cur & 0x4)
        cfg_write(dev, (gpu_bus, 0, 0), off, 0xFFFFFFFF)
        mask = cfg_read(dev, gpu_bus, 0, 0, off)[0] & ~0xF
        if is64:
            cfg_write(dev, (gpu_bus, 0, 0), off + 4, 0xFFFFFFFF)
            mask |= cfg_read(dev, gpu_bus, 0, 0, off + 4)[0] << 32
        size = (~mask + 1) & ((1 << (64 if is64 else 32)) - 1)
        if size:
            addr = cursors[pref]
            cfg_write(dev, (gpu_bus, 0, 0), off, addr & 0xFFFFFFFF)
            if is64:
                cfg_write(dev, (gpu_bus, 0, 0), off + 4, addr >> 32)
            out[(off - 0x10) // 4] = (addr, size)
            cursors[pref] += -(-size // (2 * MiB)) * 2 * MiB
        off += 8 if is64 else 4
    cfg_write(dev, (gpu_bus, 0, 0), 0x04, 0x07, size=1)
    return out


def enumerate_gpu(dev: usb.core.Device) -> dict[int, tuple[int, int]]:
    program_bridges(dev)
    return assign_bars(dev)


# -- identity (§2, §3) --------------------------------------------------------------------------------------

def test_found_by_ids_with_strings_location_and_speed() -> None:
    dev, bridge, _ = open_bridge(configure=False)
    assert usb.util.get_string(dev, dev.iProduct) == "custom v0.1"
    assert usb.util.get_string(dev, dev.iManufacturer) == "tiny"
    serial = usb.util.get_string(dev, dev.iSerialNumber)
    assert len(serial) == 8 and int(serial, 16) >= 0 and serial == serial.lower()
    assert (dev.bus, dev.address, dev.port_numbers, dev.speed) == (1, 7, (2,), 5)  # superspeed-plus
    assert dev.bcdUSB == 0x0320 and 1 << dev.bMaxPacketSize0 == 512
    cfg = dev.get_active_configuration()
    assert cfg.bConfigurationValue == 1 and cfg.bmAttributes == 0xC0
    alt0 = cfg[(0, 0)]
    assert (alt0.bInterfaceClass, alt0.bInterfaceSubClass, alt0.bInterfaceProtocol) == (0xFF, 0xFF, 0xFF)
    assert {(e.bEndpointAddress, e.wMaxPacketSize) for e in alt0} == {(0x81, 1024), (0x02, 1024)}
    assert list(alt0[0].extra_descriptors) == [6, 0x30, 15, 0, 0, 0]  # SuperSpeed companion: burst 16
    assert {e.bEndpointAddress for e in cfg[(0, 1)]} == {0x81, 0x02, 0x83, 0x04}
    assert bridge.stats()["usb_transfers"] == 0  # descriptors and strings are standard requests


def test_find_all_and_serial_is_deterministic() -> None:
    opts = Navi31UsbOptions(strict=True)
    b1 = Asm24Bridge(StubGpu(), opts, VirtualClock())
    b2 = Asm24Bridge(StubGpu(), opts, VirtualClock())
    backend = Asm24Backend([b1, b2])
    devs = list(usb.core.find(find_all=True, backend=backend))
    assert [(d.bus, d.address) for d in devs] == [(1, 7), (1, 8)]
    assert devs[0].serial_number == devs[1].serial_number  # same options, same serial
    assert usb.core.find(idVendor=0x3801, backend=backend) is None
    alt = Asm24Backend(Asm24Bridge(StubGpu(), opts, VirtualClock(), vendor_id=0x3801))
    assert usb.core.find(idVendor=0x3801, idProduct=1, backend=alt) is not None


def test_bos_and_unknown_descriptor() -> None:
    dev, _, _ = open_bridge()
    bos = bytes(dev.ctrl_transfer(0x80, 6, 0x0F00, 0, 64))
    assert bos[:5] == bytes([5, 0x0F, 22, 0, 2]) and bos[5:8] == bytes([7, 0x10, 2])
    assert struct.unpack_from("<H", bos, 12 + 4)[0] == 0x000E  # SuperSpeed capability speeds mask
    with pytest.raises(usb.core.USBTimeoutError):  # device qualifier: not handled, no data stage
        dev.ctrl_transfer(0x80, 6, 0x0600, 0, 10, timeout=50)


def test_high_speed_identity() -> None:
    dev, bridge, _ = open_bridge(speed="hs")
    assert dev.speed == 3 and dev.bcdUSB == 0x0200 and dev.bMaxPacketSize0 == 64
    intf = dev.get_active_configuration()[(0, 0)]
    assert {(e.bEndpointAddress, e.wMaxPacketSize) for e in intf} == {
        (0x81, 512), (0x02, 512), (0x83, 512), (0x04, 512)}
    with pytest.raises(Stall):  # no alternate setting 1 at High-Speed (pyusb itself would refuse it)
        bridge.control(0x01, 11, 1, 0, 0)


# -- XDATA (§4.2, §7.1) -----------------------------------------------------------------------------------------

def test_e4_e5_windows_alias_the_bridge_memory() -> None:
    dev, bridge, _ = open_bridge()
    xdata_write(dev, 0xF010, 0x5A)
    assert bridge.memory.sram[0x10] == 0x5A
    bridge.memory.sram[0x20:0x24] = b"\x01\x02\x03\x04"
    assert xdata_read(dev, 0xF020, 4) == b"\x01\x02\x03\x04"
    for xaddr, pcie in ((0xA000, 0x820000), (0xB000, 0x800000), (0xB800, 0x822000), (0xF000, 0x200000)):
        xdata_write(dev, xaddr + 8, 0xC3)
        assert bridge.memory.pcie_read(pcie + 8, 1) == b"\xc3"
    xdata_write(dev, 0x8000, 0x11)
    assert xdata_read(dev, 0x8000, 1) == b"\x11"


def test_landing_page_is_read_only_and_e4_caps() -> None:
    dev, bridge, _ = open_bridge()
    xdata_write(dev, 0x7010, 0x99)
    assert xdata_read(dev, 0x7010, 1) == b"\x00"
    assert len(xdata_read(dev, 0xF000, 512)) == 512
    assert len(xdata_read(dev, 0xF000, 1000)) == 512  # SuperSpeed cap: fewer bytes come back


def test_e4_high_speed_cap_times_out_or_is_short() -> None:
    dev, bridge, clock = open_bridge(speed="hs")
    assert len(xdata_read(dev, 0xF000, 64)) == 64
    t0 = clock.now()
    with pytest.raises(usb.core.USBTimeoutError) as err:
        xdata_read(dev, 0xF000, 255)
    assert (err.value.backend_error_code, err.value.errno) == (-7, errno.ETIMEDOUT)
    assert clock.now() - t0 == pytest.approx(1.0)  # the host waited its whole 1 s limit
    bridge.e4_overlong_hs = "short"
    assert len(xdata_read(dev, 0xF000, 255)) == 64


def test_strict_flags_unmodelled_xdata_writes() -> None:
    from tinyhw.errors import StrictEmulationError

    dev, _, _ = open_bridge()
    with pytest.raises(StrictEmulationError):
        xdata_write(dev, 0x0100, 1)
    dev2, bridge2, _ = open_bridge(strict=False)
    xdata_write(dev2, 0x0100, 1)
    assert bridge2.warnings and "0x0100" in bridge2.warnings[0]


# -- link (§4.6, §12 item 4) ---------------------------------------------------------------------------------------

def _link_power(dev: usb.core.Device, on: int) -> None:
    """Vendor request 0xF3: PCIe side power on (1) or off (0)."""
    dev.ctrl_transfer(0x40, 0xF3, on, 0, None, timeout=10000)


def test_link_up_at_power_on_and_power_off() -> None:
    dev, _, _ = open_bridge(link="up")
    assert xdata_read(dev, 0xB450, 1) == b"\x78"
    _link_power(dev, 0)
    assert xdata_read(dev, 0xB450, 1) == b"\x00" and xdata_read(dev, 0xB480, 1) == b"\x01"
    tlp_request(dev, 0x04, 0xF, 0, 0)
    assert parse_record(tlp_completion(dev))[4] == 0xFF  # link down: no completion


def test_link_down_until_f3_which_waits_for_training() -> None:
    dev, bridge, clock = open_bridge(link="down")
    assert xdata_read(dev, 0xB450, 1) == b"\x00"
    tlp_request(dev, 0x04, 0xF, 0, 0)
    assert tlp_completion(dev)[7] == 0xFF
    t0 = clock.now()
    _link_power(dev, 1)
    assert 0.3 <= clock.now() - t0 < 0.31  # three stable 100 ms samples
    assert xdata_read(dev, 0xB450, 1) == b"\x78" and xdata_read(dev, 0xB480, 1) == b"\x00"
    assert cfg_read(dev, 0, 0, 0, 0)[4] == 0


def test_link_slow_returns_before_link_up() -> None:
    dev, _, clock = open_bridge(link="slow")
    t0 = clock.now()
    _link_power(dev, 1)
    assert clock.now() - t0 < 0.03
    assert xdata_read(dev, 0xB450, 1) in (b"\x01", b"\x10")
    assert cfg_read(dev, 0, 0, 0, 0)[4] == 0xFF
    clock.advance(0.05)
    assert xdata_read(dev, 0xB450, 1) == b"\x78"
    assert cfg_read(dev, 0, 0, 0, 0)[:2] == (0x24641B21, 0)


@pytest.mark.parametrize(("mode", "ltssm"), [("wedged", 0x4C), ("no-gpu", 0x01)])
def test_link_never_trains(mode: str, ltssm: int) -> None:
    dev, _, clock = open_bridge(link=mode)
    t0 = clock.now()
    _link_power(dev, 1)
    assert clock.now() - t0 == pytest.approx(2.0, abs=0.01)  # 20 samples, none good
    clock.advance(5)
    assert xdata_read(dev, 0xB450, 1) == bytes([ltssm])
    assert cfg_read(dev, 0, 0, 0, 0)[4] == 0xFF


def test_f3_pulses_perst_and_resets_the_card() -> None:
    gpu = StubGpu()
    dev, bridge, _ = open_bridge(gpu)
    enumerate_gpu(dev)
    _link_power(dev, 1)
    assert gpu.resets == 1 and gpu.command == 0
    assert bridge.hierarchy.bridges[0].secondary == 1  # ASMedia ports keep their bus numbers
    assert bridge.hierarchy.bridges[2].secondary == 0  # the GPU's own switch was reset


# -- unknown and malformed requests (§4.8, §12 item 2) -----------------------------------------------------------

def test_unknown_vendor_requests() -> None:
    dev, bridge, _ = open_bridge()
    assert dev.ctrl_transfer(0x40, 0x77, 1, 2, None) == 0
    assert len(dev.ctrl_transfer(0xC0, 0x77, 1, 2, 0)) == 0
    with pytest.raises(usb.core.USBTimeoutError):
        dev.ctrl_transfer(0xC0, 0x77, 0, 0, 4, timeout=100)
    with pytest.raises(usb.core.USBTimeoutError):
        dev.ctrl_transfer(0x40, 0x77, 0, 0, b"\x00\x01", timeout=100)
    with pytest.raises(usb.core.USBTimeoutError):  # E4 with the OUT request type is not E4
        dev.ctrl_transfer(0x40, 0xE4, 0xB450, 0, b"\x00", timeout=100)
    assert bridge.stats()["control_transfers"] == 5


@pytest.mark.parametrize(("rt", "req", "data"), [
    (0x40, 0xF0, b"\x00" * 8), (0x40, 0xF0, b"\x00" * 16), (0xC0, 0xF0, 4), (0xC0, 0xF0, 12),
    (0x40, 0xE5, b"\x00"), (0x40, 0xF2, b"\x00"), (0x40, 0xF3, b"\x00\x00"),
])
def test_wrong_wlength_is_stalled(rt: int, req: int, data: bytes | int) -> None:
    dev, _, _ = open_bridge()
    with pytest.raises(usb.core.USBError) as err:
        dev.ctrl_transfer(rt, req, 0, 0, data)
    assert (err.value.backend_error_code, err.value.errno) == (-9, errno.EPIPE)
    assert xdata_read(dev, 0xB450, 1) == b"\x78"  # a control stall does not halt anything


# -- faults (§10, §12 item 13) ---------------------------------------------------------------------------------------

def test_disconnect_fault_is_permanent() -> None:
    dev, bridge, _ = open_bridge(faults="disconnect@3")
    xdata_read(dev, 0xB450, 1)
    xdata_read(dev, 0xB450, 1)
    with pytest.raises(usb.core.USBError) as err:
        xdata_read(dev, 0xB450, 1)
    assert (err.value.backend_error_code, err.value.errno) == (-4, errno.ENODEV)
    assert "No such device" in str(err.value)
    for call in (lambda: dev.write(0x02, b"\x00" * 4), lambda: dev.clear_halt(0x81), lambda: xdata_read(dev, 0, 1)):
        with pytest.raises(usb.core.USBError) as err:
            call()
        assert err.value.backend_error_code == -4
    assert usb.core.find(idVendor=0xADD1, backend=_backend_of(dev)) is None
    assert [r.status for r in bridge.log] == ["ok", "ok", "disconnect", "disconnect", "disconnect"]


def _backend_of(dev: usb.core.Device) -> Asm24Backend:
    backend = dev.backend
    assert isinstance(backend, Asm24Backend)
    return backend


def test_timeout_fault_waits_the_host_limit_then_recovers() -> None:
    dev, bridge, clock = open_bridge(faults="timeout@2")
    xdata_read(dev, 0xB450, 1)
    t0 = clock.now()
    with pytest.raises(usb.core.USBTimeoutError) as err:
        xdata_write(dev, 0xF000, 0x42)
    assert (err.value.backend_error_code, err.value.errno) == (-7, errno.ETIMEDOUT)
    assert clock.now() - t0 == pytest.approx(1.0)
    assert bridge.memory.sram[0] == 0  # the request never reached the firmware
    xdata_write(dev, 0xF000, 0x42)
    assert bridge.memory.sram[0] == 0x42


def test_stall_fault_on_bulk_halts_until_cleared() -> None:
    dev, bridge, _ = open_bridge(faults="stall@1")
    with pytest.raises(usb.core.USBError) as err:
        dev.read(0x81, 64, timeout=100)
    assert err.value.backend_error_code == -9
    with pytest.raises(usb.core.USBError):
        dev.read(0x81, 64, timeout=100)
    dev.clear_halt(0x81)
    with pytest.raises(usb.core.USBTimeoutError):
        dev.read(0x81, 64, timeout=100)  # endpoint usable again; nothing to read
    assert bridge.stats()["usb_transfers"] == 3 and bridge.stats()["bulk_transfers"] == 3


def test_stats_and_log_count_only_driver_transfers() -> None:
    dev, bridge, clock = open_bridge()
    std = bridge.stats()["standard_requests"]
    t0 = clock.now()
    xdata_read(dev, 0xB450, 1)
    xdata_write(dev, 0xF000, 1)
    dev.clear_halt(0x81)
    st = bridge.stats()
    assert (st["usb_transfers"], st["control_transfers"], st["bulk_transfers"]) == (2, 2, 0)
    assert (st["bytes_in"], st["bytes_out"], st["standard_requests"]) == (1, 0, std + 1)
    assert [(r.number, r.kind, r.setup[:2] if r.setup else None, r.actual) for r in bridge.log] == [
        (1, "control", (0xC0, 0xE4), 1), (2, "control", (0x40, 0xE5), 0)]
    assert clock.now() - t0 == pytest.approx(3 * 100e-6)  # three control round trips


def test_kernel_driver_detach_and_reset() -> None:
    options = Navi31UsbOptions(strict=True)
    backend = Asm24Backend(Asm24Bridge(StubGpu(), options, VirtualClock()), kernel_driver_active=True)
    dev = usb.core.find(idVendor=0xADD1, backend=backend)
    assert dev.is_kernel_driver_active(0)
    with pytest.raises(usb.core.USBError) as err:
        usb.util.claim_interface(dev, 0)
    assert err.value.errno == errno.EBUSY
    dev.detach_kernel_driver(0)
    dev.reset()
    usb.util.claim_interface(dev, 0)
    tlp_request(dev, 0x20, 0xF, 0, 256, mode=2)  # a stream the reset below cancels
    dev.reset()
    assert backend.bridge.configuration == 1 and not backend.bridge.endpoints.in_fifo
