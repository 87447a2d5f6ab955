"""Table tests of the RDNA3 memory instructions against the ISA guide (SMEM, GLOBAL/FLAT, SCRATCH loads and stores).

Every opcode of a family runs on edge and seeded random inputs (seeds ``zlib.crc32(name)``); the expected
registers and memory are computed here from the guide's definitions over a ``bytearray`` copy of memory, never by
the core. Instructions are assembled by llvm-mc-19 (tests/helpers/rdna3asm.py), decoded and compiled by the core
and run on one wave32 (tests/helpers/rdna3isa.py). Atomics and DS are in test_rdna3_isa_mtable2.py.

Rules checked (RDNA3 ISA guide; "Scalar Memory" addressing, the FLAT/GLOBAL/SCRATCH microcode table):
- s_load/s_buffer_load: ADDR = base + inst_offset (21-bit signed) + SOFFSET register; every component's two LSBs
  are ignored (treated as zero); s_buffer_load dwords at or beyond the V#'s NUM_RECORDS read 0.
- GLOBAL: VGPR-64 address, or SGPR-pair base + unsigned 32-bit VGPR offset, + the signed 13-bit offset.
- FLAT: the offset is 12 bits unsigned, the field's MSB (bit 12) ignored.
- Inactive lanes neither load (their VDST keeps its value) nor store; GLC/SLC/DLC change no result.
- D16 loads write one 16-bit half (u8/i8 zero-/sign-extended to 16 bits) and keep the other; d16_hi stores store
  from bit 16.
- SCRATCH: private address = (SVE ? VGPR : 0) + (SADDR ? SGPR : 0) + offset, swizzled by dword over the lanes
  (byte p of lane l at FLAT_SCRATCH + (p // 4) * 128 + 4 * l + p % 4; tinyhw/mocks/rdna3/scratch.py).
Unaligned global addresses read and write the bytes at the address (the drivers' SH_MEM_CONFIG unaligned mode;
a choice not checked on hardware).
"""

from __future__ import annotations

import random
import struct
import zlib

import numpy as np
import pytest
from rdna3asm import HAVE_LLVM_MC, asm_many
from rdna3isa import run, wave
from rdna3mem import LOADS, STORES, Waves, memory, regs

pytestmark = pytest.mark.skipif(not HAVE_LLVM_MC, reason="llvm-mc-19 is not installed")
EXEC = 126
M32 = 0xFFFFFFFF


def _rng(name: str) -> random.Random:
    return random.Random(zlib.crc32(name.encode()))


# ---- SMEM -----------------------------------------------------------------------------------------------------------

SLOADS = {"s_load_b32": 1, "s_load_b64": 2, "s_load_b128": 4, "s_load_b256": 8, "s_load_b512": 16}
# (low bits of the base, instruction offset or None, SOFFSET register value or None)
SMEM_CASES = [(0, 0, None), (0, 4, None), (0, -4, None), (2, 2, None), (3, 7, None), (0, 0x1FC, None),
              (1, -5, None), (0, -0x100, None), (0, None, 8), (0, None, 6), (2, None, 3), (0, 16, 8), (3, -8, 13),
              (0, -0x40, 0x4B), (1, 1, 1)]


def _sdst(n: int) -> str:
    return "s8" if n == 1 else f"s[8:{7 + n}]"


@pytest.mark.parametrize("name", sorted(SLOADS))
def test_s_load_offsets_and_ignored_low_bits(name: str) -> None:
    n = SLOADS[name]
    rng = _rng(name)
    mem, buf, ref = memory(rng, 0x800)
    texts = []
    for _lo, imm, so in SMEM_CASES:
        if so is None:
            texts.append(f"{name} {_sdst(n)}, s[2:3], {imm}")
        elif imm is None:
            texts.append(f"{name} {_sdst(n)}, s[2:3], s5")
        else:
            texts.append(f"{name} {_sdst(n)}, s[2:3], s5 offset:{imm}")
    for (lo, imm, so), words in zip(SMEM_CASES, asm_many(texts), strict=True):
        w = wave(mem=mem)
        base = buf + 0x200 + lo
        w.s[2], w.s[3], w.s[5] = base & M32, base >> 32, so or 0
        w.s[8:40] = [0xDEAD0000 + i for i in range(32)]
        run(words, w)
        # guide: every component's two LSBs are ignored and treated as zero
        addr = (base & ~3) + ((imm or 0) & ~3) + ((so or 0) & ~3) - buf
        want = list(struct.unpack_from(f"<{n}I", ref, addr))
        assert w.s[8:8 + n] == want, (name, lo, imm, so)
        assert w.s[8 + n:40] == [0xDEAD0000 + i for i in range(n, 32)], name


# (instruction offset or None, SOFFSET value or None, NUM_RECORDS, low bits of the V# base)
SBUF_CASES = [(0, None, 0x400, 0), (8, None, 20, 0), (0, None, 0, 0), (None, 12, 16, 0), (4, 4, 24, 0),
              (3, None, 12, 0), (None, 7, 64, 0), (0x3FC, None, 0x400, 0), (16, 5, 40, 0), (0, None, 4, 0),
              (2, 6, 64, 0), (1, 3, 64, 0), (0, None, 64, 2), (4, 8, 64, 3), (2, 2, 64, 1)]


@pytest.mark.parametrize("name", sorted(m.replace("s_load", "s_buffer_load") for m in SLOADS))
def test_s_buffer_load_num_records_and_offsets(name: str) -> None:
    n = SLOADS[name.replace("s_buffer_load", "s_load")]
    rng = _rng(name)
    mem, buf, ref = memory(rng, 0x800)
    texts = []
    for imm, so, _nr, _lo in SBUF_CASES:
        if so is None:
            texts.append(f"{name} {_sdst(n)}, s[44:47], {imm}")
        elif imm is None:
            texts.append(f"{name} {_sdst(n)}, s[44:47], s5")
        else:
            texts.append(f"{name} {_sdst(n)}, s[44:47], s5 offset:{imm}")
    for (imm, so, nr, lo), words in zip(SBUF_CASES, asm_many(texts), strict=True):
        w = wave(mem=mem)
        base = buf + 0x100 + lo
        w.s[44:48] = [base & M32, base >> 32 & 0xFFFF, nr, 0]     # V#: base, stride 0, NUM_RECORDS
        w.s[5] = so or 0
        w.s[8:40] = [0xBEEF0000 + i for i in range(32)]
        run(words, w)
        rel = ((imm or 0) & ~3) + ((so or 0) & ~3)
        want = [struct.unpack_from("<I", ref, 0x100 + rel + 4 * i)[0] if rel + 4 * i + 4 <= nr else 0
                for i in range(n)]
        assert w.s[8:8 + n] == want, (name, imm, so, nr)
        assert w.s[8 + n:40] == [0xBEEF0000 + i for i in range(n, 32)], name


def test_smem_soffset_m0() -> None:
    """SOFFSET may name M0 (the guide's "SGPR[offset] or M0")."""
    rng = _rng("smem_m0")
    mem, buf, ref = memory(rng, 0x200)
    load, bload = asm_many(["s_load_b64 s[8:9], s[2:3], m0 offset:0x4", "s_buffer_load_b32 s10, s[44:47], m0"])
    w = wave(mem=mem)
    w.s[2], w.s[3], w.s[125] = buf & M32, buf >> 32, 0x13
    w.s[44:48] = [buf & M32, buf >> 32, 0x100, 0]
    run(load, w)
    run(bload, w)
    assert w.s[8:10] == list(struct.unpack_from("<2I", ref, 0x14)) and w.s[10] == struct.unpack_from("<I", ref, 0x10)[0]


def test_s_dcache_inv_and_gl1_inv_change_nothing() -> None:
    rng = _rng("s_dcache_inv")
    mem, buf, ref = memory(rng, 0x100)
    w = wave(mem=mem)
    w.s[0:20] = [rng.getrandbits(32) for _ in range(20)]
    before = list(w.s)
    for words in asm_many(["s_dcache_inv", "s_gl1_inv"]):
        assert run(words, w) is None
    assert list(w.s) == before and mem.peek(buf, 0x100) == bytes(ref)


# ---- GLOBAL / FLAT loads and stores --------------------------------------------------------------------------------

CACHE = ["", " glc", " slc", " dlc", " glc slc dlc"]
GLOBAL_OFFSETS = [0, 4, -4, 7, -1, 4095, -4096, 0x123]
FLAT_OFFSETS = [0, 1, 4, 4095, 0x800]
MODES = ["vaddr", "saddr", "flat"]


def _dwords(size: int) -> int:
    return max(size // 4, 1)


def _flat_rows(name: str, mode: str, store: bool) -> tuple[list[str], list[int]]:
    """(instruction texts, offsets) of one opcode's table in one addressing mode."""
    rng = _rng(f"{name}/{mode}/text")
    offs = FLAT_OFFSETS if mode == "flat" else GLOBAL_OFFSETS
    seg = "flat" if mode == "flat" else "global"
    op = f"{seg}_{name}"
    size = (STORES if store else LOADS)[name.split("_", 1)[1]][0]
    vregs = regs(10, _dwords(size))
    addr = {"vaddr": "v[2:3], ", "saddr": "v2, ", "flat": "v[2:3], "}[mode]
    tail = {"vaddr": ", off", "saddr": ", s[4:5]", "flat": ""}[mode]
    texts = []
    for off in offs:
        o = f" offset:{off}" if off else ""
        cache = rng.choice(CACHE)
        if store:
            texts.append(f"{op} {addr}{vregs}{tail}{o}{cache}")
        else:
            texts.append(f"{op} {vregs}, {addr.removesuffix(', ')}{tail}{o}{cache}")
    return texts, offs


def _set_address(w, mode: str, lanes: list[int], addrs: dict[int, int], off: int, sbase: int) -> None:
    """Registers that make lane ``l`` access ``addrs[l]`` with instruction offset ``off``."""
    for lane in lanes:
        a = addrs[lane] - off
        if mode == "saddr":
            w.v[2, lane] = a - sbase
        else:
            w.v[2, lane], w.v[3, lane] = a & M32, a >> 32
    w.s[4], w.s[5] = sbase & M32, sbase >> 32


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", [f"load_{s}" for s in LOADS])
def test_global_flat_loads(name: str, mode: str) -> None:
    suffix = name.split("_", 1)[1]
    size, fn = LOADS[suffix]
    n = _dwords(size)
    texts, offs = _flat_rows(name, mode, False)
    rng = _rng(f"{name}/{mode}")
    mem, buf, ref = memory(rng, 0x3000)
    for off, words in zip(offs, asm_many(texts), strict=True):
        w = wave(mem=mem)
        mask = rng.getrandbits(32) | 1
        w.s[EXEC] = mask
        lanes = list(range(32))
        addrs = {lane: buf + 0x1000 + rng.randrange(0x1000) for lane in lanes}
        addrs[1] = addrs[0]                                          # two lanes on one address
        sbase = buf - rng.randrange(1, 0x800)
        _set_address(w, mode, lanes, addrs, off, sbase)
        old = [[rng.getrandbits(32) for _ in range(32)] for _ in range(n)]
        for j in range(n):
            w.v[10 + j] = old[j]
        run(words, w)
        for lane in lanes:
            got = [int(w.v[10 + j, lane]) for j in range(n)]
            prev = [old[j][lane] for j in range(n)]
            if mask >> lane & 1:
                a = addrs[lane] - buf
                assert got == fn(bytes(ref[a:a + size]), prev), (texts, off, lane)
            else:
                assert got == prev, (name, off, lane)        # inactive lanes load nothing
        assert mem.peek(buf, len(ref)) == bytes(ref)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", [f"store_{s}" for s in STORES])
def test_global_flat_stores(name: str, mode: str) -> None:
    size, fn = STORES[name.split("_", 1)[1]]
    n = _dwords(size)
    texts, offs = _flat_rows(name, mode, True)
    rng = _rng(f"{name}/{mode}")
    mem, buf, ref = memory(rng, 0x3000)
    for off, words in zip(offs, asm_many(texts), strict=True):
        w = wave(mem=mem)
        mask = rng.getrandbits(32) | 1
        w.s[EXEC] = mask
        lanes = list(range(32))
        slots = rng.sample(range(0x1000 // 32), 32)                  # distinct 32-byte slots, unaligned inside
        addrs = {lane: buf + 0x1000 + 32 * slots[lane] + rng.randrange(32 - size + 1) for lane in lanes}
        sbase = buf - rng.randrange(1, 0x800)
        _set_address(w, mode, lanes, addrs, off, sbase)
        data = [[rng.getrandbits(32) for _ in range(32)] for _ in range(n)]
        for j in range(n):
            w.v[10 + j] = data[j]
        run(words, w)
        for lane in lanes:
            if mask >> lane & 1:                             # inactive lanes store nothing
                a = addrs[lane] - buf
                ref[a:a + size] = fn([data[j][lane] for j in range(n)])
        assert mem.peek(buf, len(ref)) == bytes(ref), (texts, off)


def test_flat_offset_msb_is_ignored() -> None:
    """The guide's FLAT microcode table: "Flat: 12-bit unsigned offset (MSB is ignored)". A FLAT word with bit 12
    of OFFSET set addresses ADDR + OFFSET[11:0] (GLOBAL: the same 13 bits are signed, -4096 + OFFSET[11:0])."""
    rng = _rng("flat_offset_msb")
    mem, buf, ref = memory(rng, 0x3000)
    flat, glob = asm_many(["flat_load_b32 v10, v[2:3] offset:16", "global_load_b32 v10, v[2:3], off offset:16"])
    for words, delta in (([flat[0] | 1 << 12, flat[1]], 16), ([glob[0] | 1 << 12, glob[1]], 16 - 4096)):
        w = wave(mem=mem)
        w.s[EXEC] = 1
        a = buf + 0x1800
        w.v[2, 0], w.v[3, 0] = a & M32, a >> 32
        run(words, w)
        assert int(w.v[10, 0]) == struct.unpack_from("<I", ref, 0x1800 + delta)[0], delta


def test_global_saddr_vgpr_offset_is_unsigned_32_bits() -> None:
    """GLOBAL with SADDR: the VGPR is a 32-bit unsigned offset (0xFFFFFFF0 is 4 GiB - 16 above SADDR, not -16)."""
    rng = _rng("saddr_unsigned")
    mem, buf, ref = memory(rng, 0x100, base=0x1_0000_0000)
    (words,) = asm_many(["global_load_b32 v10, v2, s[4:5] offset:-16"])
    w = wave(mem=mem)
    w.s[EXEC] = 1
    w.v[2, 0] = 0xFFFFFFF0
    sbase = buf + 0x50 - 0xFFFFFFF0
    w.s[4], w.s[5] = sbase & M32, sbase >> 32
    run(words, w)
    assert int(w.v[10, 0]) == struct.unpack_from("<I", ref, 0x40)[0]


# ---- SCRATCH ------------------------------------------------------------------------------------------------------

SCRATCH_MODES = {"st": ("off", "off"), "sv": ("v2", "off"), "ss": ("off", "s7"), "svs": ("v2", "s7")}
SCRATCH_OFFSETS = [0, 8, 12, -8, 32]
WAVE_BYTES = 0x1000                      # 128 private bytes per lane


def _scratch_rows(name: str, mode: str, store: bool) -> list[str]:
    size = (STORES if store else LOADS)[name.split("_", 1)[1]][0]
    vregs = regs(10, _dwords(size))
    va, sa = SCRATCH_MODES[mode]
    rows = []
    for off in SCRATCH_OFFSETS:
        o = f" offset:{off}" if off else ""
        rows.append(f"scratch_{name} {va}, {vregs}, {sa}{o}" if store else f"scratch_{name} {vregs}, {va}, {sa}{o}")
    return rows


def _private(rng: random.Random, mode: str, off: int, size: int) -> tuple[dict[int, int], int, int]:
    """(per-lane private address, VGPR values, SGPR value) with every address aligned to the element and in range."""
    align = min(size, 4)
    sg = rng.randrange(8, 16) // align * align if mode in ("ss", "svs") else 0
    vg = {lane: rng.randrange(8, 40) // align * align if mode in ("sv", "svs") else 0 for lane in range(32)}
    return {lane: vg[lane] + sg + off for lane in range(32)}, vg, sg


def _swz(scratch: int, p: int, lane: int) -> int:
    return scratch + p // 4 * 128 + 4 * lane + p % 4


@pytest.mark.parametrize("mode", sorted(SCRATCH_MODES))
@pytest.mark.parametrize("kind", ["load", "store"])
def test_scratch_loads_and_stores_every_width(kind: str, mode: str) -> None:
    table = LOADS if kind == "load" else STORES
    for suffix, (size, fn) in table.items():
        name = f"{kind}_{suffix}"
        rng = _rng(f"scratch_{name}/{mode}")
        mem, buf, ref = memory(rng, WAVE_BYTES)
        n = _dwords(size)
        for off, words in zip(SCRATCH_OFFSETS, asm_many(_scratch_rows(name, mode, kind == "store")), strict=True):
            if mode == "st" and off < 0:
                continue
            w = wave(mem=mem)
            w.scratch, w.scratch_size = buf, WAVE_BYTES
            mask = rng.getrandbits(32) | 1
            w.s[EXEC] = mask
            priv, vg, sg = _private(rng, mode, off, size)
            w.v[2] = [vg[lane] for lane in range(32)]
            w.s[7] = sg
            vals = [[rng.getrandbits(32) for _ in range(32)] for _ in range(n)]
            for j in range(n):
                w.v[10 + j] = vals[j]
            run(words, w)
            for lane in range(32):
                vas = [_swz(buf, priv[lane] + k, lane) - buf for k in range(size)]
                lane_regs = [vals[j][lane] for j in range(n)]
                if kind == "store":
                    if mask >> lane & 1:
                        for va, b in zip(vas, fn(lane_regs), strict=True):
                            ref[va] = b
                    continue
                got = [int(w.v[10 + j, lane]) for j in range(n)]
                want = fn(bytes(ref[va] for va in vas), lane_regs) if mask >> lane & 1 else lane_regs
                assert got == want, (name, mode, off, lane)
            assert mem.peek(buf, len(ref)) == bytes(ref), (name, mode, off)


def test_scratch_sve_off_ignores_the_vgpr() -> None:
    """SVE=0 (``off`` for the VGPR): the VGPR named in ADDR does not contribute (guide's SVE table: ST and SS)."""
    rng = _rng("scratch_sve0")
    mem, buf, ref = memory(rng, WAVE_BYTES)
    (words,) = asm_many(["scratch_load_b32 v10, off, s7 offset:4"])
    w = wave(mem=mem)
    w.scratch, w.scratch_size = buf, WAVE_BYTES
    w.v[0] = [0x40 * (lane + 1) for lane in range(32)]       # would move every lane if it were added
    w.s[7] = 8
    run(words, w)
    assert [int(x) for x in w.v[10]] == [struct.unpack_from("<I", ref, _swz(0, 12, lane))[0] for lane in range(32)]
    assert np.count_nonzero(w.v[10]) > 0


# ---- the lockstep (several waves at once) paths give the same answers ---------------------------------------------

WIDE = [f"load_{s}" for s in ("b32", "b64", "b96", "b128")] + [f"store_{s}" for s in ("b32", "b64", "b96", "b128")]


@pytest.mark.parametrize("mode", ["vaddr", "saddr"])
@pytest.mark.parametrize("name", WIDE)
def test_lockstep_global_loads_and_stores_match_the_table(name: str, mode: str) -> None:
    from tinyhw.formats.amdisa import decode_at
    from tinyhw.mocks.rdna3.vmem import PER_WAVE, wide_global

    store = name.startswith("store")
    size = (STORES if store else LOADS)[name.split("_", 1)[1]][0]
    n = _dwords(size)
    texts, offs = _flat_rows(name, mode, store)
    rng = _rng(f"wide/{name}/{mode}")
    mem, buf, ref = memory(rng, 0x3000)
    for off, words in zip(offs, asm_many(texts), strict=True):
        inst = decode_at(struct.pack(f"<{len(words)}I", *words) + bytes(16), 0, "gfx11")
        fn = wide_global(inst)
        assert fn is not None, texts
        k = 3
        ww = Waves(k, mem, rng)
        slots = rng.sample(range(0x1000 // 32), 32 * k) if store else []
        addrs = [[buf + 0x1000 + (32 * slots[32 * i + lane] + rng.randrange(32 - size + 1) if store else
                                  rng.randrange(0x1000)) for lane in range(32)] for i in range(k)]
        sbase = buf - rng.randrange(1, 0x800)
        ww.s[4], ww.s[5] = sbase & M32, sbase >> 32
        for i in range(k):
            for lane in range(32):
                a = addrs[i][lane] - off
                if mode == "saddr":
                    ww.v[2, i, lane] = a - sbase
                else:
                    ww.v[2, i, lane], ww.v[3, i, lane] = a & M32, a >> 32
        before = ww.v.copy()
        assert fn(ww) != PER_WAVE
        for i in range(k):
            for lane in range(32):
                a = addrs[i][lane] - buf
                on = ww.lanes[i, lane]
                prev = [int(before[10 + j, i, lane]) for j in range(n)]
                if store:
                    if on:
                        ref[a:a + size] = STORES[name.split("_", 1)[1]][1](prev)
                    continue
                got = [int(ww.v[10 + j, i, lane]) for j in range(n)]
                assert got == (LOADS[name.split("_", 1)[1]][1](bytes(ref[a:a + size]), prev) if on else prev)
        assert mem.peek(buf, len(ref)) == bytes(ref), (texts, off)


@pytest.mark.parametrize("name", sorted(SLOADS))
def test_lockstep_s_load_matches_the_table(name: str) -> None:
    from tinyhw.formats.amdisa import decode_at
    from tinyhw.mocks.rdna3.dispatch import _wide_sload

    n = SLOADS[name]
    rng = _rng(f"wide/{name}")
    mem, buf, ref = memory(rng, 0x800)
    cases = [(2, 2, 1), (3, -8, 13), (1, 1, 1), (0, 0x1FC, 0)]
    texts = [f"{name} {_sdst(n)}, s[2:3], s5 offset:{imm}" for _lo, imm, _so in cases]
    for (lo, imm, so), words in zip(cases, asm_many(texts), strict=True):
        fn = _wide_sload(decode_at(struct.pack(f"<{len(words)}I", *words) + bytes(16), 0, "gfx11"))
        assert fn is not None
        ww = Waves(2, mem, rng)
        base = buf + 0x200 + lo
        ww.s[2], ww.s[3], ww.s[5] = base & M32, base >> 32, so
        fn(ww)
        addr = (base & ~3) + (imm & ~3) + (so & ~3) - buf
        assert ww.s[8:8 + n] == list(struct.unpack_from(f"<{n}I", ref, addr)), (name, lo, imm, so)
