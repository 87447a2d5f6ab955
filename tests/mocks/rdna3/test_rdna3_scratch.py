"""The private segment on the emulated RDNA3 core: scratch_load/store, the wave's slot, and what a dispatch needs.

Expected memory layouts are written out from the rule the hardware documents (dword interleave across the 32
lanes of a wave: byte p of lane l at base + (p // 4) * 128 + 4 * l + p % 4), never taken from the core.
"""

from __future__ import annotations

import struct

import numpy as np
import pytest
from rdna3isa import OPC, run, sopp, wave

from tinyhw.mocks.rdna3 import DispatchRegs, FlatMemory, ShaderFault, run_dispatch

BASE = 0x200000
OFF = 0x7C          # SADDR "off" (NULL)


def scratch(m: str, *, vdst: int = 0, addr: int = 0, data: int = 0, saddr: int = OFF, sve: int = 1,
            offset: int = 0) -> list[int]:
    """A SCRATCH-segment FLAT instruction (spec §5.2: SEG 1; SVE in dword 1 bit 23)."""
    enc, op = OPC[m]
    assert enc == "SCRATCH"
    return [0xDC000000 | op << 18 | 1 << 16 | offset & 0x1FFF,
            vdst << 24 | sve << 23 | saddr << 16 | data << 8 | addr]


def scratch_wave(wave_bytes: int = 1024) -> tuple:
    mem = FlatMemory(BASE, 1 << 16)
    w = wave(mem=mem)
    w.scratch, w.scratch_size = BASE + 0x1000, wave_bytes
    return w, mem


def test_a_store_interleaves_dwords_across_the_lanes() -> None:
    w, mem = scratch_wave()
    lanes = np.arange(32, dtype=np.uint32)
    w.v[1] = 8                                    # every lane: private address 8
    w.v[2], w.v[3] = lanes + 1000, lanes + 2000
    run(scratch("scratch_store_b64", addr=1, data=2), w)
    for lane in range(32):
        lo = struct.unpack_from("<I", mem.buf, 0x1000 + 2 * 128 + 4 * lane)[0]
        hi = struct.unpack_from("<I", mem.buf, 0x1000 + 3 * 128 + 4 * lane)[0]
        assert (lo, hi) == (lane + 1000, lane + 2000)
    assert not any(mem.buf[0x1000:0x1000 + 256])  # dwords 0 and 1 of every lane untouched


def test_loads_see_each_lanes_own_bytes_with_saddr_vgpr_and_a_negative_offset() -> None:
    w, mem = scratch_wave()
    for lane in range(32):                        # private dword 5 of each lane holds 0x80 + lane in its low byte
        mem.buf[0x1000 + 5 * 128 + 4 * lane] = 0x80 + lane
    w.s[4] = 16                                    # SADDR s4 + VGPR 8 + offset -4 = private byte 20 = dword 5
    w.v[1] = 8
    run(scratch("scratch_load_i8", vdst=5, addr=1, saddr=4, offset=-4), w)
    run(scratch("scratch_load_u8", vdst=6, addr=1, saddr=4, offset=-4), w)
    for lane in range(32):
        assert int(w.v[6, lane]) == 0x80 + lane
        assert int(w.v[5, lane]) == (0x80 + lane - 0x100) & 0xFFFFFFFF      # sign-extended
    w.v[7] = np.arange(32, dtype=np.uint32) * 3
    w.v[1] = 28                                    # SVE only
    run(scratch("scratch_store_b32", addr=1, data=7), w)
    w.v[8] = 0
    run(scratch("scratch_load_b32", vdst=8, saddr=4, sve=0, offset=12), w)   # SADDR only: 16 + 12 = 28
    assert w.v[8].tolist() == [3 * lane for lane in range(32)]


def test_inactive_lanes_neither_read_nor_write() -> None:
    w, mem = scratch_wave()
    w.s[126] = 0x0000FFFF
    w.v[1], w.v[2] = 0, 7
    run(scratch("scratch_store_b32", addr=1, data=2), w)
    got = np.frombuffer(bytes(mem.buf[0x1000:0x1000 + 128]), dtype="<u4")
    assert got.tolist() == [7] * 16 + [0] * 16


def test_an_access_past_the_waves_allocation_faults() -> None:
    w, _ = scratch_wave(wave_bytes=256)            # 256 bytes per wave: 8 private bytes per lane
    w.v[1] = 4
    run(scratch("scratch_store_b32", addr=1, data=2), w)
    with pytest.raises(ShaderFault, match="beyond the 8 bytes per lane"):
        run(scratch("scratch_store_b64", addr=1, data=2), w)
    w.scratch_size = 0
    with pytest.raises(ShaderFault, match="without a private segment"):
        run(scratch("scratch_load_b32", vdst=3, addr=1), w)


def _regs(mem: FlatMemory, **kw) -> DispatchRegs:
    code = mem.alloc(struct.pack("<I", *sopp("s_endpgm")))
    # USER_SGPR 2, TGID_X_EN, SCRATCH_EN: s0..s1 user data, s2 workgroup id X, s3 the private segment wave offset
    base = dict(pgm_lo=code >> 8, pgm_hi=0, rsrc1=0, rsrc2=1 | 2 << 1 | 1 << 7, num_thread=(70, 1, 1), dim=(2, 1, 1),
                user_data=(11, 22), tmpring_size=3 | 2 << 12, scratch_base_lo=(BASE + 0x8000) >> 8)
    base.update(kw)
    return DispatchRegs(**base)


def test_each_wave_starts_with_its_slot_in_the_ring() -> None:
    mem = FlatMemory(BASE, 1 << 16)
    seen = []
    run_dispatch(_regs(mem), mem, on_wave_end=lambda w: seen.append((w.wg[0], w.index, w.s[:4], w.scratch,
                                                                     w.scratch_size)))
    assert len(seen) == 6                          # 2 workgroups x 3 waves
    for wg, wi, s, flat_scratch, size in seen:
        assert s == [11, 22, wg, wi * 512]         # WAVESIZE 2 x 256 bytes per wave
        assert (flat_scratch, size) == (BASE + 0x8000 + wi * 512, 512)


@pytest.mark.parametrize(("kw", "why"), [
    ({"scratch_base_lo": 0}, "compute_dispatch_scratch_base is 0"),
    ({"tmpring_size": 3}, "wavesize is 0"),
    ({"tmpring_size": 2 | 2 << 12}, "waves is 2, a workgroup has 3 waves"),
])
def test_a_dispatch_the_hardware_could_not_give_scratch_is_refused(kw: dict, why: str) -> None:
    mem = FlatMemory(BASE, 1 << 16)
    with pytest.raises(ShaderFault, match=why):
        run_dispatch(_regs(mem, **kw), mem)
    run_dispatch(_regs(mem, rsrc2=2 << 1 | 1 << 7, **kw), mem)      # without SCRATCH_EN the ring is not looked at


def test_a_clang_kernel_with_a_private_array_runs_through_tinyhws_driver_on_the_emulated_board() -> None:
    """tinyhw's own compute queue gives a kernel with a private segment a scratch ring (COMPUTE_TMPRING_SIZE and
    COMPUTE_DISPATCH_SCRATCH_BASE, after its buffers, in pages of its own); the emulated CP hands them to the core and
    the answer is the host's (tests/data/clcorpus, kernel scratch_i32: int a[256] indexed by data)."""
    import clcorpushelp
    from kernelshelp import am_boot

    import tinyhw
    from tinyhw.boot.amd import compute

    am_boot()
    meta, arrays = clcorpushelp.load_corpus()
    k = next(e for e in meta["kernels"] if e["name"] == "scratch_i32")
    kernel = compute.load_code_object(arrays["scratch_i32_code"].tobytes())
    assert kernel.kd.scratch_bytes >= 1024 and kernel.kd.scratch_enabled
    ring, tmpring = compute.scratch_ring(kernel.kd, (k["block"], 1, 1))
    assert tmpring & 0xFFF == 1 and ring >= 32 * 1024            # one wave; at least 1 KiB per lane
    with tinyhw.open("mock:navi31,strict") as o:
        eng = compute.open_compute(o.transport)
        with eng:
            run = eng.run(kernel, (k["grid"],), (k["block"],), [bytes(4 * k["out"][1]), arrays["scratch_i32_in0"]])
    assert run.outputs[0] == arrays["scratch_i32_out"].tobytes()
    assert len(run.outputs) == 2                                   # the ring is not one of the kernel's buffers


def test_d16_loads_write_one_half_and_keep_the_other_and_store_d16_hi_stores_the_high_half() -> None:
    w, mem = scratch_wave()
    for lane in range(32):                          # private dword 0 of each lane: bytes 0x80+lane, 0x7F, 0x34, 0x12
        mem.buf[0x1000 + 4 * lane:0x1000 + 4 * lane + 4] = bytes([0x80 + lane, 0x7F, 0x34, 0x12])
    w.v[1] = 0                                      # private address 0 (SVE)
    w.v[2] = 0xAAAA5555
    cases = {"scratch_load_d16_u8": lambda lane: 0xAAAA0000 | 0x80 + lane,
             "scratch_load_d16_i8": lambda lane: 0xAAAA0000 | (0x80 + lane - 0x100) & 0xFFFF,
             "scratch_load_d16_b16": lambda lane: 0xAAAA0000 | 0x7F00 | 0x80 + lane,
             "scratch_load_d16_hi_u8": lambda lane: (0x80 + lane) << 16 | 0x5555,
             "scratch_load_d16_hi_i8": lambda lane: ((0x80 + lane - 0x100) & 0xFFFF) << 16 | 0x5555,
             "scratch_load_d16_hi_b16": lambda lane: (0x7F00 | 0x80 + lane) << 16 | 0x5555}
    for m, want in cases.items():
        w.v[3] = 0xAAAA5555
        run(scratch(m, vdst=3, addr=1), w)
        assert w.v[3].tolist() == [want(lane) for lane in range(32)], m
    w.v[4] = np.arange(32, dtype=np.uint32) << 16 | 0xBEEF
    w.v[1] = 8                                      # private dword 2
    run(scratch("scratch_store_d16_hi_b16", addr=1, data=4), w)
    w.v[1] = 12                                     # private dword 3
    run(scratch("scratch_store_d16_hi_b8", addr=1, data=4), w)
    for lane in range(32):
        assert struct.unpack_from("<H", mem.buf, 0x1000 + 2 * 128 + 4 * lane)[0] == lane
        assert mem.buf[0x1000 + 3 * 128 + 4 * lane:0x1000 + 3 * 128 + 4 * lane + 2] == bytes([lane, 0])
