"""The gfx11 decoder (tinyhw.formats.amdisa + the generated table rdna3_ops) against LLVM's disassembler.

Fixtures made by tests/data/rdna3/make_fixtures.py with Debian's llvm-19: the text llvm-objdump-19 prints
for every instruction of every committed gfx1100 code object, and llvm-mc-19's encodings of the probe
inventory (specs/amd-compute.md §9.3). Where LLVM 19 is installed the fixtures are also remade and compared,
so they cannot go stale; the opcode numbers the spec lists (§5.4) are checked against the generated table.
"""

from __future__ import annotations

import os
import shutil
import struct
from pathlib import Path

import pytest

from tinyhw.formats.amdisa import decode_at, decode_text, text_section
from tinyhw.formats.rdna3_ops import OPS

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).parent / "data" / "rdna3"


def _objdump_fixture() -> dict[str, dict[int, str]]:
    out: dict[str, dict[int, str]] = {}
    for line in (DATA / "objdump_gfx1100.txt").read_text().splitlines():
        rel, off, text = line.split("\t")
        out.setdefault(rel, {})[int(off)] = text
    return out


def _inventory() -> list[tuple[bytes, str]]:
    rows = []
    for line in (DATA / "inventory.txt").read_text().splitlines():
        words, text = line.split("\t")
        ws = [int(w, 16) for w in words.split()]
        rows.append((struct.pack(f"<{len(ws)}I", *ws), text))
    return rows


REF = _objdump_fixture()
SPEC_UNION = """s_add_i32 s_add_u32 s_addc_u32 s_and_saveexec_b32 s_ashr_i32 s_bcnt1_i32_b32 s_cmp_lt_u32 s_cmpk_lt_u32
    s_lshl_b32 s_lshl_b64 s_mov_b32 s_mul_i32 s_or_b32 s_barrier s_cbranch_execz s_cbranch_scc1 s_clause s_delay_alu
    s_endpgm s_nop s_sendmsg s_set_inst_prefetch_distance s_waitcnt s_load_b32 s_load_b64 s_load_b128 s_load_b256
    v_add3_u32 v_add_co_ci_u32 v_add_co_u32 v_add_f32 v_add_nc_u32 v_and_b32 v_and_or_b32 v_ashrrev_i32 v_bfe_u32
    v_cmp_gt_u32 v_cmp_lt_f32 v_cmpx_eq_u32 v_cndmask_b32 v_fma_f32 v_fmac_f32 v_lshl_or_b32 v_lshlrev_b32
    v_lshlrev_b64 v_max_f32 v_mbcnt_lo_u32_b32 v_mov_b32 v_mul_f32 v_mul_lo_u32 v_mul_u32_u24 v_readfirstlane_b32
    v_xor_b32 v_dual_add_f32 v_dual_cndmask_b32 v_dual_fmaak_f32 v_dual_fmac_f32 v_dual_max_f32 v_dual_mov_b32
    v_dual_mul_f32 ds_load_b32 ds_load_b128 ds_store_b32 global_load_b32 global_load_b128 global_store_b32
    global_store_b128 global_atomic_add_u32 buffer_gl0_inv"""



def test_every_committed_gfx1100_binary_is_in_the_fixture() -> None:
    committed = {p.relative_to(ROOT).as_posix() for p in (ROOT / "tinyhw/kernels/prebuilt/gfx1100").glob("*.elf")}
    assert committed and committed <= set(REF)


@pytest.mark.parametrize("rel", sorted(REF), ids=lambda r: r.split("/")[-1])
def test_decoder_text_equals_llvm_objdump(rel: str) -> None:
    addr, text = text_section((ROOT / rel).read_bytes()) or (0, b"")
    insts = decode_text(text, "gfx11")
    got = {addr + i.offset: i.text for i in insts}
    want = REF[rel]
    assert sum(i.size for i in insts) == len(text)
    assert got == want
    assert all(i.mnemonic for i in insts)


@pytest.mark.parametrize(("raw", "text"), _inventory(), ids=lambda v: v if isinstance(v, str) else "")
def test_inventory_decodes_as_llvm_mc_wrote_it(raw: bytes, text: str) -> None:
    inst = decode_at(raw + bytes(8), 0, "gfx11")
    assert (inst.size, inst.text) == (len(raw), text)


def test_inventory_covers_the_spec_union() -> None:
    """§9.3's 69 mnemonics (encoding variants folded the way the spec lists them) are all in inventory.s."""
    spec = SPEC_UNION.split()
    assert len(spec) == 69
    seen: set[str] = set()
    for raw, _ in _inventory():
        inst = decode_at(raw + bytes(8), 0, "gfx11")
        for m in inst.mnemonic.split("::"):
            seen.add(m.removesuffix("_e32").removesuffix("_e64"))
    assert set(spec) <= seen


# opcode numbers as specs/amd-compute.md §5.4 lists them, independent of LLVM
SPEC_OPCODES = {
    ("SOP2", 0): "s_add_u32", ("SOP2", 2): "s_add_i32", ("SOP2", 4): "s_addc_u32", ("SOP2", 8): "s_lshl_b32",
    ("SOP2", 9): "s_lshl_b64", ("SOP2", 12): "s_ashr_i32", ("SOP2", 24): "s_or_b32", ("SOP2", 44): "s_mul_i32",
    ("SOP2", 22): "s_and_b32", ("SOP2", 26): "s_xor_b32", ("SOP2", 1): "s_sub_u32", ("SOP2", 10): "s_lshr_b32",
    ("SOP2", 48): "s_cselect_b32", ("SOPK", 13): "s_cmpk_lt_u32", ("SOP1", 0): "s_mov_b32",
    ("SOP1", 24): "s_bcnt1_i32_b32", ("SOP1", 32): "s_and_saveexec_b32", ("SOPC", 10): "s_cmp_lt_u32",
    ("SOPP", 0): "s_nop", ("SOPP", 4): "s_set_inst_prefetch_distance", ("SOPP", 5): "s_clause",
    ("SOPP", 7): "s_delay_alu", ("SOPP", 9): "s_waitcnt", ("SOPP", 48): "s_endpgm", ("SOPP", 54): "s_sendmsg",
    ("SOPP", 61): "s_barrier", ("SOPP", 34): "s_cbranch_scc1", ("SOPP", 37): "s_cbranch_execz",
    ("SOPP", 32): "s_branch", ("SOPP", 33): "s_cbranch_scc0", ("SOPP", 35): "s_cbranch_vccz",
    ("SOPP", 36): "s_cbranch_vccnz", ("SOPP", 38): "s_cbranch_execnz",
    ("SMEM", 0): "s_load_b32", ("SMEM", 1): "s_load_b64", ("SMEM", 2): "s_load_b128", ("SMEM", 3): "s_load_b256",
    ("VOP1", 1): "v_mov_b32_e32", ("VOP1", 2): "v_readfirstlane_b32", ("VOP2", 1): "v_cndmask_b32_e32",
    ("VOP2", 3): "v_add_f32_e32", ("VOP2", 8): "v_mul_f32_e32", ("VOP2", 11): "v_mul_u32_u24_e32",
    ("VOP2", 16): "v_max_f32_e32", ("VOP2", 24): "v_lshlrev_b32_e32", ("VOP2", 26): "v_ashrrev_i32_e32",
    ("VOP2", 27): "v_and_b32_e32", ("VOP2", 29): "v_xor_b32_e32", ("VOP2", 32): "v_add_co_ci_u32_e32",
    ("VOP2", 37): "v_add_nc_u32_e32", ("VOP2", 43): "v_fmac_f32_e32", ("VOPC", 17): "v_cmp_lt_f32_e32",
    ("VOPC", 76): "v_cmp_gt_u32_e32", ("VOPC", 202): "v_cmpx_eq_u32_e32", ("VOP3", 288): "v_add_co_ci_u32_e64",
    ("VOP3", 528): "v_bfe_u32", ("VOP3", 531): "v_fma_f32", ("VOP3", 597): "v_add3_u32",
    ("VOP3", 598): "v_lshl_or_b32", ("VOP3", 599): "v_and_or_b32", ("VOP3", 768): "v_add_co_u32",
    ("VOP3", 799): "v_mbcnt_lo_u32_b32", ("VOP3", 812): "v_mul_lo_u32", ("VOP3", 828): "v_lshlrev_b64",
    ("VOPDX", 0): "v_dual_fmac_f32", ("VOPDX", 1): "v_dual_fmaak_f32", ("VOPDX", 3): "v_dual_mul_f32",
    ("VOPDX", 4): "v_dual_add_f32", ("VOPDX", 8): "v_dual_mov_b32", ("VOPDX", 9): "v_dual_cndmask_b32",
    ("VOPDX", 10): "v_dual_max_f32", ("DS", 13): "ds_store_b32", ("DS", 54): "ds_load_b32",
    ("DS", 255): "ds_load_b128", ("GLOBAL", 20): "global_load_b32", ("GLOBAL", 23): "global_load_b128",
    ("GLOBAL", 26): "global_store_b32", ("GLOBAL", 29): "global_store_b128", ("GLOBAL", 53): "global_atomic_add_u32",
    ("MUBUF", 43): "buffer_gl0_inv",
}


def test_generated_table_agrees_with_the_spec_opcodes() -> None:
    assert {k: OPS[k][0] for k in SPEC_OPCODES if k in OPS} == SPEC_OPCODES


def test_vopd_y_destination_parity() -> None:
    # C9080B01 01000900: v_dual_add_f32 v1, ... :: v_dual_add_f32 v0, ... (spec §5.2, decoded)
    inst = decode_at(struct.pack("<2I", 0xC9080B01, 0x01000900), 0, "gfx11")
    assert inst.fields["vdstx"] == 1 and inst.fields["vdsty"] == 0
    assert inst.text.startswith("v_dual_add_f32 v1,") and ":: v_dual_add_f32 v0," in inst.text


needs_llvm = pytest.mark.skipif(not (shutil.which("llvm-mc-19") and shutil.which("llvm-objdump-19"))
                                and os.environ.get("TINYHW_REQUIRE_COMPILE") != "1",  # CI: required
                                reason="llvm-19 (llvm-mc-19, llvm-objdump-19) is not installed")


@needs_llvm
def test_fixtures_are_what_llvm_prints_now() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_fixtures", DATA / "make_fixtures.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.inventory() == (DATA / "inventory.txt").read_text()
    assert mod.objdump() == (DATA / "objdump_gfx1100.txt").read_text()


@needs_llvm
def test_generated_table_is_what_the_generator_makes() -> None:
    from tinyhw.autogen import genisa

    assert genisa.generate(shutil.which("llvm-mc-19") or "") == (ROOT / "tinyhw/formats/rdna3_ops.py").read_text()
