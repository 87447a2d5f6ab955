"""The second-compiler corpus: OpenCL C kernels compiled by clang-19 for gfx1100, answered by the same source on the
host.

Each kernel (:data:`KERNELS`) is one OpenCL C function ``k(__global OUT *out, __global const IN0 *in0, ...)``. For the
GPU it is compiled with ``clang-19 -x cl -target amdgcn-amd-amdhsa -mcpu=gfx1100 -nogpulib -O2`` and linked by
``ld.lld-19 -shared`` into a code object; for the answer the same text is compiled as C by clang-19 for x86-64 with a
small shim (:data:`HOST_PRELUDE`): the OpenCL qualifiers become nothing, every work-item of a workgroup is a host
thread (so barriers and the wave intrinsics see their whole wave: ``readfirstlane``, ``ballot``, ``ds_bpermute``,
DPP row shifts and permutes, WMMA are written there from the ISA's definitions of those operations, with a barrier
per wave around each exchange), and the result is written to a file. Work-item ids come from the ``GID``/``LID``
macros (the GPU side reads ``__builtin_amdgcn_workgroup_id_x``/``workitem_id_x``: no device library is linked).

Both sides use ``-ffp-contract=off`` (no fused multiply-add the source did not ask for), the GPU side
``-cl-fp32-correctly-rounded-divide-sqrt`` and the host side ``-ffloat16-excess-precision=none`` (each f16 operation
rounds to f16, as the GPU's f16 instructions do; a ``-Xclang`` option of clang-19) while a ``__bf16`` expression is
evaluated in f32 and rounded to bf16 where it is stored (clang's excess precision, which its gfx1100 code uses: the
chip has no bf16 arithmetic; the host's f32 -> bf16 rounding is the shim's, libgcc has none), so float results
must match bit for bit except for the transcendental builtins, whose ISA precision is 1 ULP (:data:`KERNELS`
``tol``; exp2 and log2 allow one more for the host libm's own error).

``tests/data/clcorpus/make_clcorpus.py`` writes the fixtures; ``tests/mocks/rdna3/test_rdna3_clcorpus.py`` runs them on
the core.
"""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import tempfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np
from testpaths import ROOT

CORPUS = ROOT / "tests" / "data" / "clcorpus"
CLANG, LLD = "clang-19", "ld.lld-19"
DEVICE_FLAGS = ["-x", "cl", "-cl-std=CL2.0", "-target", "amdgcn-amd-amdhsa", "-mcpu=gfx1100", "-nogpulib", "-O2",
                "-ffp-contract=off", "-cl-fp32-correctly-rounded-divide-sqrt", "-munsafe-fp-atomics"]
HOST_FLAGS = ["-x", "c", "-O2", "-ffp-contract=off", "-Xclang", "-ffloat16-excess-precision=none", "-Xclang",
              "-fbfloat16-excess-precision=standard", "-pthread"]
DT = {"i32": np.int32, "u32": np.uint32, "i64": np.int64, "u64": np.uint64, "f32": np.float32, "f64": np.float64,
      "f16": np.float16}
CT = {"i32": "int", "u32": "uint", "i64": "long", "u64": "ulong", "f32": "float", "f64": "double", "f16": "half"}

DEVICE_PRELUDE = """\
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#define GID ((int)(__builtin_amdgcn_workgroup_id_x() * BLOCK + __builtin_amdgcn_workitem_id_x()))
#define LID ((int)__builtin_amdgcn_workitem_id_x())
#define BARRIER() do { __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup"); __builtin_amdgcn_s_barrier(); \\
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup"); } while (0)
#define ATOMIC(op, p, v) __scoped_atomic_fetch_##op(p, v, __ATOMIC_RELAXED, __MEMORY_SCOPE_DEVICE)
#define CAS(p, old, new) __scoped_atomic_compare_exchange_n(p, old, new, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED, \\
    __MEMORY_SCOPE_DEVICE)
typedef half v16h __attribute__((ext_vector_type(16)));
typedef float v8f __attribute__((ext_vector_type(8)));
"""

HOST_PRELUDE = r"""
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
typedef unsigned int uint; typedef unsigned long ulong; typedef _Float16 half;
typedef half v16h __attribute__((ext_vector_type(16)));
typedef float v8f __attribute__((ext_vector_type(8)));
#define __kernel
#define __global
#define __private
#define __local static
static _Thread_local int th_lid, th_gid;
#define GID th_gid
#define LID th_lid
static pthread_barrier_t wg_bar, wave_bar[BLOCK / 32 + 1];
#define BARRIER() pthread_barrier_wait(&wg_bar)
#define ATOMIC(op, p, v) __atomic_fetch_##op(p, v, __ATOMIC_RELAXED)
#define CAS(p, old, new) __atomic_compare_exchange_n(p, old, new, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)
/* one exchange area per wave: what each lane hands the others at a wave intrinsic */
static int xi[BLOCK / 32 + 1][32];
static half xa[BLOCK / 32 + 1][32][16], xb[BLOCK / 32 + 1][32][16];
static void wave_sync(void) { pthread_barrier_wait(&wave_bar[th_lid / 32]); }
static int put(int x) { xi[th_lid / 32][th_lid % 32] = x; wave_sync(); return th_lid / 32; }
static int h_readfirstlane(int x) { int w = put(x); int r = xi[w][0]; wave_sync(); return r; }
static uint h_ballot(int b) {
    int w = put(b != 0); uint r = 0;
    for (int l = 0; l < 32; l++) r |= (uint)(xi[w][l] != 0) << l;
    wave_sync(); return r;
}
static int h_bpermute(int addr, int x) {   /* ISA ds_bpermute_b32: lane l reads lane (addr[l] / 4) mod 32 */
    int w = put(x); int r = xi[w][(addr >> 2) & 31]; wave_sync(); return r;
}
/* DPP16 (ISA "DPP16"): the source lane of lane l for a DPP_CTRL value; -1 when it lies outside the row */
static int dpp_src(int ctrl, int l) {
    int row = l & ~15, i = l & 15;
    if (ctrl <= 0xFF) return (l & ~3) | ((ctrl >> (2 * (l & 3))) & 3);             /* quad_perm */
    if (ctrl >= 0x101 && ctrl <= 0x10F) return i + (ctrl & 15) < 16 ? l + (ctrl & 15) : -1;   /* row_shl */
    if (ctrl >= 0x111 && ctrl <= 0x11F) return i >= (ctrl & 15) ? l - (ctrl & 15) : -1;       /* row_shr */
    if (ctrl >= 0x121 && ctrl <= 0x12F) return row | ((i - (ctrl & 15)) & 15);               /* row_ror */
    if (ctrl == 0x140) return row | (15 - i);                                                /* row_mirror */
    if (ctrl == 0x141) return row | (i & 8) | (7 - (i & 7));                                 /* row_half_mirror */
    if (ctrl >= 0x150 && ctrl <= 0x15F) return row | (ctrl & 15);                            /* row_share */
    if (ctrl >= 0x160 && ctrl <= 0x16F) return row | (i ^ (ctrl & 15));                      /* row_xmask */
    abort();
}
static int h_update_dpp(int old, int src, int ctrl, int row_mask, int bank_mask, int bound_ctrl) {
    int w = put(src), l = th_lid % 32, s = dpp_src(ctrl, l), r;
    if (!((row_mask >> (l / 16)) & 1) || !((bank_mask >> ((l & 15) / 4)) & 1)) r = old;   /* lane disabled */
    else if (s < 0) r = bound_ctrl ? 0 : old;
    else r = xi[w][s];
    wave_sync(); return r;
}
/* v_wmma_f32_16x16x16_f16, wave32 (ISA "WMMA"; lanes 16-31 repeat A and B of lanes 0-15): lane l holds row l%16
   of A and column l%16 of B (16 halves each); result element i of lane l is D[2i + l/16][l%16] = C + sum_k A*B */
static v8f h_wmma(v16h a, v16h b, v8f c) {
    int w = th_lid / 32, l = th_lid % 32;
    for (int k = 0; k < 16; k++) { xa[w][l][k] = a[k]; xb[w][l][k] = b[k]; }
    wave_sync();
    v8f d;
    for (int i = 0; i < 8; i++) {
        int row = 2 * i + l / 16, col = l % 16; float s = c[i];
        for (int k = 0; k < 16; k++) s += (float)xa[w][row][k] * (float)xb[w][col][k];
        d[i] = s;
    }
    wave_sync(); return d;
}
/* f32 -> bf16 for the compiler's bf16 arithmetic (libgcc has no __truncsfbf2): round to nearest even, NaN quieted */
__bf16 __truncsfbf2(float f) {
    uint u; unsigned short h; __bf16 r;
    memcpy(&u, &f, 4);
    u = (u & 0x7FFFFFFF) > 0x7F800000 ? u | 0x400000 : u + 0x7FFF + ((u >> 16) & 1);
    h = (unsigned short)(u >> 16); memcpy(&r, &h, 2); return r;
}
#define __builtin_amdgcn_readfirstlane(x) h_readfirstlane(x)
#define __builtin_amdgcn_ballot_w32(b) h_ballot(b)
#define __builtin_amdgcn_ds_bpermute(a, x) h_bpermute(a, x)
#define __builtin_amdgcn_update_dpp(o, s, c, r, b, bc) h_update_dpp(o, s, c, r, b, bc)
#define __builtin_amdgcn_mov_dpp(s, c, r, b, bc) h_update_dpp(0, s, c, r, b, bc)
#define __builtin_amdgcn_wmma_f32_16x16x16_f16_w32(a, b, c) h_wmma(a, b, c)
#define __builtin_amdgcn_exp2f(x) exp2f(x)
#define __builtin_amdgcn_logf(x) log2f(x)
#define __builtin_amdgcn_rcpf(x) (1.0f / (x))
#define __builtin_amdgcn_rsqf(x) ((float)(1.0 / sqrt((double)(x))))
#define __builtin_amdgcn_sqrtf(x) sqrtf(x)
"""

HOST_MAIN = r"""
struct targ { int lid, gid; };
static void *buf[8];
static void *thread(void *p) {
    struct targ *t = p; th_lid = t->lid; th_gid = t->gid;
    k(ARGS);
    return 0;
}
static void *load(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb"); if (!f) { perror(path); exit(1); }
    fseek(f, 0, SEEK_END); *n = ftell(f); fseek(f, 0, SEEK_SET);
    void *p = malloc(*n + 16); if (fread(p, 1, *n, f) != *n) exit(1); fclose(f); return p;
}
int main(int argc, char **argv) {
    size_t n;
    for (int i = 1; i < argc - 1; i++) buf[i - 1] = load(argv[i], &n);
    size_t out_n; buf[0] = load(argv[1], &out_n);
    pthread_barrier_init(&wg_bar, 0, BLOCK);
    for (int w = 0; w < (BLOCK + 31) / 32; w++) pthread_barrier_init(&wave_bar[w], 0, 32);
    for (int g = 0; g < GRID; g++) {
        pthread_t th[BLOCK]; struct targ ta[BLOCK];
        for (int l = 0; l < BLOCK; l++) {
            ta[l].lid = l; ta[l].gid = g * BLOCK + l; pthread_create(&th[l], 0, thread, &ta[l]);
        }
        for (int l = 0; l < BLOCK; l++) pthread_join(th[l], 0);
    }
    FILE *f = fopen(argv[argc - 1], "wb"); fwrite(buf[0], 1, out_n, f); fclose(f);
    return 0;
}
"""


def _k(name: str, src: str, out: tuple[str, int], ins: list[tuple[str, int, str]], *, block: int = 32,
       grid: int = 2, tol: int = 0, out_init: str = "zero", flags: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"name": name, "src": src, "out": list(out), "ins": [list(i) for i in ins], "block": block, "grid": grid,
            "tol": tol, "out_init": out_init, "flags": list(flags)}


N = 64      # 2 workgroups of 32 unless a kernel says otherwise

#: the kernels: body text (the signature is made from ``out`` and ``ins``), output (dtype, count), inputs
#: (dtype, count, generator), launch, and the ULP tolerance of a transcendental result (0: bit for bit)
KERNELS: list[dict[str, Any]] = [
    _k("i32_divmod", """
    int g = GID, a = in0[g], b = in1[g];
    uint ua = (uint)a, ub = (uint)b;
    out[g] = a / b + (a % b) * 3 + (int)(ua / (ub | 1u)) - (int)(ua % 977u) + a / 7 - a % -13;""",
       ("i32", N), [("i32", N, "bits"), ("i32", N, "nonzero")]),
    _k("i32_bits", """
    int g = GID; uint a = (uint)in0[g], b = (uint)in1[g];
    uint r = __builtin_popcount(a) + (a ? __builtin_clz(a) : 32) * 3 + (b ? __builtin_ctz(b) : 32) * 5;
    r ^= __builtin_bitreverse32(a) + ((a << (b & 31)) | (a >> ((32 - (b & 31)) & 31)));
    r += (uint)(((long)(int)a * (long)(int)b) >> 32) + (uint)(((ulong)a * (ulong)b) >> 32);
    out[g] = (int)(r + (a > b ? a - b : b - a) + ((int)a < (int)b ? 1 : 2));""",
       ("i32", N), [("i32", N, "bits"), ("i32", N, "bits")]),
    _k("i64_arith", """
    int g = GID; long a = in0[g], b = in1[g];
    ulong ua = (ulong)a, ub = (ulong)b;
    out[g] = a * b + (a >> 7) - (b << 3) + a / b + a % b + (long)(ua / (ub | 1)) + (long)(ua >> 13)
             + (a < b ? a : b) + (ua > ub ? 1 : 0);""",
       ("i64", N), [("i64", N, "bits"), ("i64", N, "nonzero")]),
    _k("u64_select", """
    int g = GID; ulong a = in0[g], b = in1[g];
    ulong m = a < b ? a : b, x = a > b ? a : b;
    out[g] = (m ^ (x >> 5)) + (a == b) + __builtin_popcountl(a) + (a ? __builtin_clzl(a) : 64);""",
       ("u64", N), [("u64", N, "bits"), ("u64", N, "bits")]),
    _k("f32_arith", """
    int g = GID; float a = in0[g], b = in1[g];
    float r = (a + b) * (a - b) - a * 0.375f;
    r = r > b ? r : b * 2.0f;
    out[g] = r + __builtin_fabsf(a) - __builtin_fminf(a, b) + __builtin_fmaxf(a, -b) + __builtin_fmaf(a, b, 1.5f)
             + __builtin_copysignf(1.0f, b) + __builtin_floorf(a) + __builtin_truncf(b) + __builtin_ceilf(a)
             + __builtin_rintf(b);""",
       ("f32", N), [("f32", N, "float"), ("f32", N, "float")]),
    _k("f32_div", """
    int g = GID;
    out[g] = in0[g] / in1[g];""", ("f32", N), [("f32", N, "float"), ("f32", N, "float")]),
    _k("f32_sqrt", """
    int g = GID;
    out[g] = __builtin_sqrtf(in0[g]);""", ("f32", N), [("f32", N, "fpos")]),
    _k("f32_exp2", """
    int g = GID;
    out[g] = __builtin_amdgcn_exp2f(in0[g] * 0.0625f);""", ("f32", N), [("f32", N, "float")], tol=2),
    _k("f32_log2", """
    int g = GID;
    out[g] = __builtin_amdgcn_logf(in0[g]);""", ("f32", N), [("f32", N, "fpos")], tol=2),
    _k("f32_rcp", """
    int g = GID;
    out[g] = __builtin_amdgcn_rcpf(in0[g]);""", ("f32", N), [("f32", N, "float")], tol=1),
    _k("f32_rsq", """
    int g = GID;
    out[g] = __builtin_amdgcn_rsqf(in0[g]);""", ("f32", N), [("f32", N, "fpos")], tol=1),
    _k("f32_cvt", """
    int g = GID; float a = in0[g]; int i = in1[g];
    out[g] = (float)(int)a + (float)i * 0.5f + (float)(uint)(a < 0 ? -a : a) + (float)(uint)i;""",
       ("f32", N), [("f32", N, "float"), ("i32", N, "bits")]),
    _k("f16_arith", """
    int g = GID; half a = in0[g], b = in1[g];
    half r = (a * b + a) - b;
    r = r > a ? r : a * (half)0.5f;
    out[g] = r + (half)(-a);""", ("f16", N), [("f16", N, "half"), ("f16", N, "half")]),
    _k("f16_cvt", """
    int g = GID; float a = in0[g];
    half h = (half)a;
    out[g] = (float)h * 2.0f + (float)(half)(a * 3.0f) + (float)(int)h;""", ("f32", N), [("f32", N, "float")]),
    _k("bf16_arith", """
    int g = GID; float x = in0[g];
    __bf16 a = (__bf16)x, b = (__bf16)(x * 3.0f), c = a * b + a;
    c = c > b ? c - b : c + (__bf16)in1[g];
    out[g] = (float)c + (float)a * 0.5f;""", ("f32", N), [("f32", N, "float"), ("f32", N, "float")]),
    _k("f64_arith", """
    int g = GID; double a = in0[g], b = in1[g];
    double r = (a + b) * (a - b) + __builtin_fma(a, b, 0.25) - __builtin_fabs(b);
    out[g] = (r > a ? r : a) + __builtin_fmin(a, b) + __builtin_floor(a) + __builtin_trunc(b);""",
       ("f64", N), [("f64", N, "float"), ("f64", N, "float")]),
    _k("f64_div", """
    int g = GID;
    out[g] = in0[g] / in1[g];""", ("f64", N), [("f64", N, "float"), ("f64", N, "float")]),
    _k("f64_sqrt", """
    int g = GID;
    out[g] = __builtin_sqrt(in0[g]);""", ("f64", N), [("f64", N, "fpos")]),
    _k("f64_cvt", """
    int g = GID; double a = in0[g]; long i = in1[g];
    out[g] = (double)(long)(a * 1e6) + (double)i + (double)(float)a + (double)(int)a
             + (double)(ulong)(i & 0xFFFFFFFFFFF);""",
       ("f64", N), [("f64", N, "float"), ("i64", N, "bits")]),
    _k("atomic_i32", """
    int g = GID, x = in0[g];
    ATOMIC(add, out + 0, x); ATOMIC(sub, out + 1, x); ATOMIC(max, out + 2, x); ATOMIC(min, out + 3, x);
    ATOMIC(and, out + 4, x | 0x10101); ATOMIC(or, out + 5, x & 0x7070); ATOMIC(xor, out + 6, x);
    ATOMIC(max, (__global uint *)out + 7, (uint)x); ATOMIC(min, (__global uint *)out + 8, (uint)x);
    int old = out[9];
    while (!CAS(out + 9, &old, old + (x & 255))) {}""", ("i32", 10), [("i32", N, "bits")], out_init="atomic"),
    _k("atomic_i64", """
    int g = GID; long x = in0[g];
    ATOMIC(add, out + 0, x); ATOMIC(max, out + 1, x); ATOMIC(min, out + 2, x); ATOMIC(xor, out + 3, x);
    long old = out[4];
    while (!CAS(out + 4, &old, old + (x & 0xFFFF))) {}""", ("i64", 5), [("i64", N, "bits")], out_init="atomic"),
    _k("atomic_f32", """
    int g = GID;
    ATOMIC(add, out + (g & 3), in0[g]);""", ("f32", 4), [("f32", N, "intf")]),
    _k("atomic_f32_cas", """
    int g = GID; union { float f; int i; } old, new;
    __global int *p = (__global int *)out + (g & 1);
    old.i = *p;
    do { new.f = old.f + in0[g]; } while (!CAS(p, &old.i, new.i));""", ("f32", 2), [("f32", N, "intf")]),
    _k("scratch_i32", """
    int g = GID; int a[256];
    for (int i = 0; i < 256; i++) a[i] = i * g + in0[i & 63];
    out[g] = a[in0[g] & 255] + a[(g * 7) & 255] * 3;""", ("i32", N), [("i32", N, "bits")]),
    _k("scratch_f64", """
    int g = GID; double d[96]; int idx[96];
    for (int i = 0; i < 96; i++) {
        d[i] = in0[(i + g) & 63] * (double)i; idx[i] = (int)(in1[(i * 5 + g) & 63] * 95.0) % 96;
    }
    double s = 0;
    for (int i = 0; i < 96; i++) s += d[idx[i] < 0 ? -idx[i] : idx[i]];
    out[g] = s;""", ("f64", N), [("f64", N, "intf"), ("f64", N, "float")], block=64, grid=1),
    _k("lds_reduce", """
    __local int buf[64];
    int l = LID, g = GID;
    buf[l] = in0[g];
    BARRIER();
    for (int s = 32; s > 0; s >>= 1) { if (l < s) buf[l] += buf[l + s]; BARRIER(); }
    out[g] = buf[0] + buf[(l * 5) & 63];""", ("i32", 128), [("i32", 128, "bits")], block=64, grid=2),
    _k("wave_readfirstlane_ballot", """
    int g = GID, x = in0[g];
    int f = __builtin_amdgcn_readfirstlane(x + LID);
    uint m = __builtin_amdgcn_ballot_w32(x & 1);
    out[g] = f + (int)m + (int)__builtin_amdgcn_ballot_w32(x > 0) * 3;""", ("i32", N), [("i32", N, "bits")]),
    _k("wave_bpermute", """
    int g = GID, l = LID;
    out[g] = __builtin_amdgcn_ds_bpermute(((l * 5 + 3) & 31) * 4, in0[g]) + __builtin_amdgcn_ds_bpermute(
        (in1[g] & 31) * 4, in0[g] * 3);""", ("i32", N), [("i32", N, "bits"), ("i32", N, "bits")]),
    _k("wave_dpp", """
    int g = GID, x = in0[g];
    int r = __builtin_amdgcn_update_dpp(7, x, 0x111, 0xf, 0xf, 0);          /* row_shr:1, bound_ctrl off */
    r += __builtin_amdgcn_update_dpp(5, x, 0x114, 0xf, 0xf, 1) * 3;         /* row_shr:4, bound_ctrl on */
    r += __builtin_amdgcn_mov_dpp(x, 0x1b, 0xf, 0xf, 0) * 5;                /* quad_perm [3,2,1,0] */
    r += __builtin_amdgcn_mov_dpp(x, 0x123, 0xf, 0xf, 0) * 7;               /* row_ror:3 */
    r += __builtin_amdgcn_mov_dpp(x, 0x140, 0xf, 0xf, 0) * 11;              /* row_mirror */
    r += __builtin_amdgcn_update_dpp(9, x, 0x101, 0xa, 0x5, 0) * 13;        /* row_shl:1, rows/banks masked */
    out[g] = r;""", ("i32", N), [("i32", N, "bits")]),
    _k("wmma_f16", """
    int g = GID, l = LID;
    v16h a, b; v8f c;
    for (int k = 0; k < 16; k++) { a[k] = in0[(l & 15) * 16 + k]; b[k] = in1[k * 16 + (l & 15)]; }
    for (int i = 0; i < 8; i++) c[i] = (float)(i - l);
    v8f d = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32(a, b, c);
    for (int i = 0; i < 8; i++) out[g * 8 + i] = d[i];""", ("f32", 256),
       [("f16", 256, "halfint"), ("f16", 256, "halfint")],
       grid=1),
]


def make_input(name: str, i: int, spec: list) -> np.ndarray:
    """Input ``i`` of kernel ``name`` (deterministic: seeded by the name and index)."""
    dt, n, kind = spec
    r = np.random.RandomState(zlib.crc32(f"{name}/{i}".encode()))
    if kind == "bits":
        raw = r.randint(0, 1 << 16, size=n * np.dtype(DT[dt]).itemsize // 2).astype(np.uint16)
        return raw.view(DT[dt]).copy()
    if kind == "nonzero":
        v = r.randint(2, 5000, size=n) * r.choice([-1, 1], size=n)
        return v.astype(DT[dt])
    if kind == "float":
        return (r.standard_normal(n) * r.choice([0.01, 1.0, 100.0, 1e5], size=n)).astype(DT[dt])
    if kind == "fpos":
        return np.abs(r.standard_normal(n) * r.choice([0.001, 1.0, 1000.0], size=n)).astype(DT[dt]) + DT[dt](1e-3)
    if kind == "intf":
        return r.randint(-64, 65, size=n).astype(DT[dt])
    if kind == "half":
        return (r.standard_normal(n) * 8).astype(np.float16).astype(DT[dt])
    if kind == "halfint":
        return r.randint(-8, 9, size=n).astype(DT[dt])
    raise ValueError(kind)


def out_init(k: dict) -> np.ndarray:
    """The output buffer before the kernel runs: zeros, or for the integer atomics a start value per counter."""
    dt, n = k["out"]
    buf = np.zeros(n, dtype=DT[dt])
    if k["out_init"] == "atomic":
        buf[:] = [12345, 0, -(1 << 20), 1 << 20, -1, 0, 0x5A5A, 0, -1, 7][:n] if dt == "i32" else \
            [1 << 40, -(1 << 62), 1 << 62, 0x123456789, 99][:n]
    return buf


def source(k: dict) -> str:
    """The kernel's OpenCL C text (without a prelude): ``k(__global OUT *out, __global const IN0 *in0, ...)``."""
    params = [f"__global {CT[k['out'][0]]} *out"] + [f"__global const {CT[t]} *in{i}" for i, (t, _, _) in
                                                     enumerate(k["ins"])]
    return f"__kernel void k({', '.join(params)}) {{{k['src']}\n}}\n"


def have_compiler() -> bool:
    """True when clang-19 and ld.lld-19 are on PATH."""
    return shutil.which(CLANG) is not None and shutil.which(LLD) is not None


def compile_gfx1100(k: dict, tmp: Path) -> bytes:
    """The kernel's gfx1100 code object (clang-19 OpenCL C, linked by ld.lld-19)."""
    cl = tmp / f"{k['name']}.cl"
    cl.write_text(DEVICE_PRELUDE + source(k))
    obj, co = tmp / f"{k['name']}.o", tmp / f"{k['name']}.co"
    subprocess.run([CLANG, *DEVICE_FLAGS, *k["flags"], f"-DBLOCK={k['block']}", "-c", str(cl), "-o", str(obj)],
                   check=True, capture_output=True)
    subprocess.run([LLD, "-shared", "--build-id=none", str(obj), "-o", str(co)], check=True, capture_output=True)
    return co.read_bytes()


def run_host(k: dict, inputs: list[np.ndarray], tmp: Path) -> np.ndarray:
    """The answer: the same source compiled as C for this machine by clang-19 (the shim above) and run."""
    args = ", ".join(["(void *)buf[0]"] + [f"(void *)buf[{i + 1}]" for i in range(len(inputs))])
    c = tmp / f"{k['name']}_host.c"
    c.write_text(f"#define BLOCK {k['block']}\n#define GRID {k['grid']}\n" + HOST_PRELUDE + source(k)
                 + HOST_MAIN.replace("ARGS", args))
    exe = tmp / f"{k['name']}_host"
    subprocess.run([CLANG, *HOST_FLAGS, str(c), "-o", str(exe), "-lm"], check=True, capture_output=True)
    files = [tmp / f"{k['name']}_buf{i}.bin" for i in range(len(inputs) + 1)]
    for f, a in zip(files, [out_init(k), *inputs], strict=True):
        f.write_bytes(a.tobytes())
    result = tmp / f"{k['name']}_result.bin"
    subprocess.run([str(exe), *map(str, files), str(result)], check=True, capture_output=True, timeout=120)
    return np.frombuffer(result.read_bytes(), dtype=DT[k["out"][0]]).copy()


def build(k: dict) -> dict[str, Any]:
    """Compile and answer one kernel: {"code": bytes, "inputs": [...], "expected": array}."""
    inputs = [make_input(k["name"], i, s) for i, s in enumerate(k["ins"])]
    with tempfile.TemporaryDirectory(prefix="clcorpus-") as d:
        return {"code": compile_gfx1100(k, Path(d)), "inputs": inputs, "expected": run_host(k, inputs, Path(d))}


def load_corpus() -> tuple[dict, dict[str, np.ndarray]]:
    """(corpus.json, corpus.npz arrays)."""
    meta = json.loads((CORPUS / "corpus.json").read_text())
    with np.load(CORPUS / "corpus.npz") as z:
        return meta, {name: z[name] for name in z.files}


def run_on_core(k: dict, arrays: dict[str, np.ndarray]) -> tuple[np.ndarray, Any]:
    """Run one fixture on the emulated shader core (scratch ring included); (output, dispatch result)."""
    from tinyhw.mocks.rdna3 import FlatMemory, dispatch_regs, load_kernel, run_dispatch, scratch_ring_bytes

    name = k["name"]
    mem = FlatMemory(0x7F00_0000_0000, 4 << 20)
    lk = load_kernel(arrays[f"{name}_code"].tobytes(), mem)
    out = mem.alloc(out_init(k).tobytes())
    ins = [mem.alloc(arrays[f"{name}_in{i}"].tobytes()) for i in range(len(k["ins"]))]
    kernarg = mem.alloc(b"".join(struct.pack("<Q", a) for a in [out, *ins]) + bytes(256), align=64)
    block = (k["block"], 1, 1)
    ring = scratch_ring_bytes(lk.kd, block)
    scratch = mem.alloc(ring) if ring else 0
    regs = dispatch_regs(lk.kd, lk.entry, kernarg, (k["grid"], 1, 1), block, scratch=scratch)
    res = run_dispatch(regs, mem)
    dt, n = k["out"]
    return np.frombuffer(mem.read(out, n * np.dtype(DT[dt]).itemsize), dtype=DT[dt]).copy(), res


def ulp_distance(a: np.ndarray, b: np.ndarray) -> int:
    """The largest distance in units in the last place between two float arrays of one dtype (-0 == +0)."""
    it = {2: np.int16, 4: np.int32, 8: np.int64}[a.dtype.itemsize]
    bits = 8 * a.dtype.itemsize

    def key(x: np.ndarray) -> np.ndarray:
        i = x.view(it).astype(object if bits == 64 else np.int64)
        return np.array([-(v & ((1 << (bits - 1)) - 1)) if v < 0 else v for v in i.tolist()], dtype=object)
    return int(max(abs(x - y) for x, y in zip(key(a), key(b), strict=True))) if len(a) else 0


def compare(k: dict, got: np.ndarray, exp: np.ndarray) -> tuple[str, str]:
    """('exact' | 'within' | 'FAIL', detail) of a fixture's output against the host's answer."""
    if got.tobytes() == exp.tobytes():
        return "exact", ""
    if got.size != exp.size:
        return "FAIL", f"{got.size} elements, {exp.size} expected"
    if k["tol"] and got.dtype.kind == "f":
        ulp = ulp_distance(got, exp)
        if ulp <= k["tol"]:
            return "within", f"{ulp} ulp"
        return "FAIL", f"{ulp} ulp from the host's answer (allowed {k['tol']})"
    bad = np.flatnonzero(got.view(f"u{got.dtype.itemsize}") != exp.view(f"u{exp.dtype.itemsize}"))
    i = int(bad[0])
    return "FAIL", f"{bad.size} of {got.size} elements differ, first [{i}]: {got[i]!r} != {exp[i]!r}"
