// every mnemonic of specs/amd-compute.md §9.3 (the probe inventory), plus what tinyhw's committed probes use;
// assembled by `llvm-mc-19 -arch=amdgcn -mcpu=gfx1100 -show-encoding` into inventory.txt (make_fixtures.sh)
s_add_i32 s0, s2, s14
s_add_u32 s0, s4, s0
s_addc_u32 s1, s5, s1
s_and_saveexec_b32 s0, vcc_lo
s_ashr_i32 s1, s0, 31
s_bcnt1_i32_b32 s4, s4
s_cmp_lt_u32 s3, 0x100
s_cmpk_lt_u32 s0, 0x80
s_lshl_b32 s2, s15, 5
s_lshl_b64 s[0:1], s[0:1], 2
s_mov_b32 s4, exec_lo
s_mul_i32 s4, s14, 0xc3
s_or_b32 exec_lo, exec_lo, s5
s_barrier
s_cbranch_execz 9
s_cbranch_scc1 65493
s_clause 0x1
s_delay_alu instid0(VALU_DEP_2) | instskip(NEXT) | instid1(VALU_DEP_2)
s_endpgm
s_nop 0
s_sendmsg sendmsg(MSG_DEALLOC_VGPRS)
s_set_inst_prefetch_distance 0x1
s_waitcnt lgkmcnt(0)
s_waitcnt vmcnt(0)
s_load_b32 s2, s[0:1], 0x10
s_load_b64 s[0:1], s[0:1], 0x8
s_load_b128 s[4:7], s[0:1], null
s_load_b256 s[4:11], s[0:1], null
v_add3_u32 v0, s2, v0, v5
v_add_co_ci_u32_e32 v3, vcc_lo, s3, v4, vcc_lo
v_add_co_ci_u32_e64 v3, null, s3, v4, s5
v_add_co_u32 v2, vcc_lo, s2, v3
v_add_f32_e32 v0, v0, v3
v_add_nc_u32_e32 v0, 0x1234567, v3
v_and_b32_e32 v0, 0x3ff, v0
v_and_or_b32 v1, v0, 0x3ff, v2
v_ashrrev_i32_e32 v4, 31, v3
v_bfe_u32 v3, v0, 10, 10
v_cmp_gt_u32_e32 vcc_lo, 31, v0
v_cmp_lt_f32_e32 vcc_lo, v1, v2
v_cmpx_eq_u32_e32 0, v1
v_cndmask_b32_e32 v4, v4, v5, vcc_lo
v_cndmask_b32_e64 v4, 0, -1, vcc_lo
v_fma_f32 v1, 0x3f7fc000, v1, 0.5
v_fmac_f32_e32 v4, v2, v3
v_lshl_or_b32 v0, s15, 7, v0
v_lshlrev_b32_e32 v0, 2, v0
v_lshlrev_b64 v[3:4], 2, v[3:4]
v_max_f32_e32 v0, v0, v1
v_mbcnt_lo_u32_b32 v1, s4, 0
v_mov_b32_e32 v1, 0
v_mul_f32_e32 v0, v0, v1
v_mul_lo_u32 v3, 0x9e3779b1, v0
v_mul_u32_u24_e32 v1, 33, v0
v_readfirstlane_b32 s0, v2
v_xor_b32_e32 v0, 0x5a5a5a5a, v0
v_dual_add_f32 v1, v2, v3 :: v_dual_add_f32 v0, v4, v5
v_dual_cndmask_b32 v1, v2, v3 :: v_dual_mov_b32 v0, 1.0
v_dual_fmaak_f32 v1, v2, v3, 0x3fc00000 :: v_dual_max_f32 v0, 0, v4
v_dual_fmac_f32 v4, v2, v3 :: v_dual_mul_f32 v5, v7, v8
v_dual_mov_b32 v1, 0 :: v_dual_fmac_f32 v4, v2, v3
v_dual_mul_f32 v1, v2, v3 :: v_dual_mov_b32 v0, s4
v_dual_max_f32 v1, v2, v3 :: v_dual_cndmask_b32 v0, v4, v5
ds_load_b32 v1, v2 offset:16
ds_load_b128 v[2:5], v1 offset:32
ds_store_b32 v5, v4
ds_store_b32 v5, v4 offset:1024
global_load_b32 v5, v[3:4], off offset:128
global_load_b32 v1, v0, s[6:7]
global_load_b128 v[0:3], v[0:1], off
global_store_b32 v[2:3], v0, off
global_store_b32 v1, v0, s[0:1] offset:-60
global_store_b128 v[4:5], v[0:3], off offset:512
global_atomic_add_u32 v2, v2, v3, s[0:1] glc
global_atomic_add_u32 v[2:3], v4, off
buffer_gl0_inv
v_lshrrev_b32_e32 v1, 8, v0
v_lshl_add_u32 v5, s14, 4, v1
v_or_b32_e32 v1, 1, v3
v_cmp_lt_u32_e32 vcc_lo, 30, v0
v_sub_nc_u32_e32 v1, v2, v3
v_min_f32_e32 v1, v2, v3
v_cvt_f32_u32_e32 v1, v2
v_cvt_u32_f32_e32 v1, v2
s_and_b32 s0, s1, s2
s_xor_b32 s0, s1, s2
s_sub_u32 s0, s1, s2
s_lshr_b32 s0, s1, 3
s_cselect_b32 s0, s1, s2
s_cmp_eq_u32 s0, 0
s_branch 2
s_cbranch_scc0 3
s_cbranch_vccnz 4
s_cbranch_execnz 65534
s_mov_b32 exec_lo, s4
