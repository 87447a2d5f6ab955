"""The tensor-core and half-precision corpus: tinygrad kernels compiled for gfx1100 that use WMMA (tinygrad's tensor
cores) and f16 arithmetic, with the answer tinygrad's CPU device computes for the same kernel.

Each kernel (:data:`KERNELS`) is a named tinygrad expression over inputs ``a``, ``b``, ``c`` (``d`` is
``tinygrad.dtypes``), the input types, shapes and data, the output type, and the optimisation options to compile it
with. A tensor-core kernel names tinygrad 0.14.0's ``OptOps.TC`` option first, argument ``(tc_select, tc_opt,
use_tc)`` = ``(-1, 0, 1)``: the first of the AMD renderer's RDNA3 tensor cores (16x16x16; f16 -> f32, f16 -> f16,
bf16 -> f32, i8 -> i32) whose types match the reduction, which makes ``v_wmma_*`` instructions; the options are the
same ones the ``TC`` context variable (default 1) makes the hand-coded optimiser try first. ``None`` means
tinygrad's own heuristics (which also try the tensor cores first).

``tests/data/tccorpus/make_tccorpus.py`` writes the fixtures; ``tests/mocks/rdna3/test_rdna3_tccorpus.py`` runs them on
the emulated core. tinygrad is reached only through :mod:`tinyhw.kernels.seam` (DEV=NULL for the gfx1100 code, the CPU
device for the answer); nothing of it is copied.

Exactness. Kernels on ``int`` data (small integers) have every product and every partial sum exactly representable
in the accumulator's format, so any summation order gives the same bits: they must match the CPU exactly. Kernels on
``normal`` data (``tol = "sum"``) are sums of rounded terms whose order differs: the ISA guide gives no accumulation
order or intermediate rounding for WMMA (only D = A * B + C), tinygrad's CPU device sums one product after another
in the accumulator format, and a half product may be rounded to f16 on the CPU (tinygrad multiplies in the input
type) where WMMA keeps it exact. Their check is a bound computed from the inputs alone, not from the core: with ``S``
= the sum of ``|a_i * b_i|`` over the ``K`` terms, ``u_p`` the unit roundoff of the product's type (0 when exact)
and ``u_a`` that of the accumulator, any order of summation gives a value within ``B = S * (u_p + K * u_a * (1 +
u_p))`` of the exact sum (the classical recursive-summation bound, gamma_K <= K * u / (1 - K * u), slackened by 1%),
so the output must lie between the output type's rounding of exact - B and of exact + B (rounding to nearest is
monotone). The CPU answer is checked against the same interval, so a wrong reference is caught too. A row sum that
one work-item adds up in index order, as the CPU does, has the same roundings and must match bit for bit.

Elementwise f16 kernels and casts must match bit for bit, and are built so that they can: tinygrad's CPU device
renders half as clang's ``__fp16``, a storage type whose arithmetic is done in float and rounded to f16 once, where
the value is stored, while the gfx1100 code rounds every operation to f16 (``v_add_f16``, ``v_mul_f16``) and LLVM
fuses a multiply and an add into one ``v_fma_f16``/``v_fmac_f16`` (tinygrad marks its float operations
``contract``). The two agree when each output has one inexact f16 rounding: a single operation on random
(``normal``) data (float's 24 bits are at least twice f16's 11 plus 2, so rounding the float sum or product of two
f16 values to f16 gives the correctly rounded f16 result), or a chain on ``coarse`` data (multiples of 1/8 up to 6,
where every step but the last is exact in f16), a multiply-add on ``fine`` data (multiples of 1/64 up to 4: exact in
float, so the CPU rounds it once, as the fused v_fma_f16 does, and an unfused one would not), or an exact operation
(``pow2``: a multiply by a power of two). Random data through a chain of f16 operations would measure clang's
``__fp16`` promotion, not the core.
"""

from __future__ import annotations

import json
import struct
from fractions import Fraction
from typing import Any

import numpy as np
from testpaths import ROOT

CORPUS = ROOT / "tests" / "data" / "tccorpus"
#: tinygrad's tensor-core option (tc_select -1: the first that fits; tc_opt 0; use_tc 1: real WMMA instructions)
TC = ["TC", 0, [-1, 0, 1]]
NP = {"f16": np.float16, "f32": np.float32, "i32": np.int32, "i8": np.int8, "bf16": np.uint16}
UNIT_ROUNDOFF = {"f16": 2.0 ** -11, "bf16": 2.0 ** -8, "f32": 2.0 ** -24}


def _k(name: str, expr: str, ins: list[list], out: str, opts: list | None, *, tol: str = "exact",
       mnemonics: tuple[str, ...] = (), acc: str = "", prod: str = "") -> dict:
    """One kernel: ``ins`` = [[type, shape, data kind], ...]; ``mnemonics`` must appear in its code object;
    ``tol`` ``"sum"`` takes the summation bound over a matmul/reduction of ``prod``-typed products accumulated in
    ``acc``."""
    k: dict[str, Any] = {"name": name, "expr": expr, "ins": ins, "out": out, "opts": opts, "tol": tol,
                         "mnemonics": list(mnemonics)}
    if tol == "sum":
        k.update(acc=acc, prod=prod)
    return k


KERNELS: list[dict] = [
    # ---- tensor cores (WMMA) -----------------------------------------------------------------------------------
    _k("tc_h_h_16", "a @ b", [["f16", [16, 16], "int"], ["f16", [16, 16], "int"]], "f16", [TC],
       mnemonics=("v_wmma_f32_16x16x16_f16",)),
    _k("tc_h_f_32x48x64", "a.matmul(b, dtype=d.float)", [["f16", [32, 64], "int"], ["f16", [64, 48], "int"]], "f32",
       [TC], mnemonics=("v_wmma_f32_16x16x16_f16",)),
    _k("tc_hacc_32", "a.matmul(b, dtype=d.half)", [["f16", [32, 32], "int"], ["f16", [32, 32], "int"]], "f16", [TC],
       mnemonics=("v_wmma_f16_16x16x16_f16",)),
    _k("tc_h_heuristic_64", "a @ b", [["f16", [64, 64], "int"], ["f16", [64, 64], "int"]], "f16", None,
       mnemonics=("v_wmma_f32_16x16x16_f16",)),
    _k("tc_bf16_f_32", "a.matmul(b, dtype=d.float)", [["bf16", [32, 32], "int"], ["bf16", [32, 32], "int"]], "f32",
       [TC], mnemonics=("v_wmma_f32_16x16x16_bf16",)),
    _k("tc_i8_i32_32", "a.matmul(b, dtype=d.int32)", [["i8", [32, 48], "i8"], ["i8", [48, 32], "i8"]], "i32", [TC],
       mnemonics=("v_wmma_i32_16x16x16_iu8",)),
    _k("tc_h_f_bias_relu", "(a.matmul(b, dtype=d.float) + c).relu()",
       [["f16", [32, 32], "int"], ["f16", [32, 32], "int"], ["f32", [32], "int"]], "f32", [TC],
       mnemonics=("v_wmma_f32_16x16x16_f16",)),
    # 9-bit data: each product needs up to 17 bits (more than f16 has), every sum of 32 is exact in f32
    _k("tc_h_f_fine_32", "a.matmul(b, dtype=d.float)", [["f16", [32, 32], "fine"], ["f16", [32, 32], "fine"]], "f32",
       [TC], mnemonics=("v_wmma_f32_16x16x16_f16",)),
    _k("tc_h_f_normal_32", "a.matmul(b, dtype=d.float)", [["f16", [32, 32], "normal"], ["f16", [32, 32], "normal"]],
       "f32", [TC], tol="sum", acc="f32", prod="f16", mnemonics=("v_wmma_f32_16x16x16_f16",)),
    _k("tc_hacc_normal_16", "a.matmul(b, dtype=d.half)", [["f16", [16, 32], "normal"], ["f16", [32, 16], "normal"]],
       "f16", [TC], tol="sum", acc="f16", prod="f16", mnemonics=("v_wmma_f16_16x16x16_f16",)),
    # ---- half precision without tensor cores ---------------------------------------------------------------------
    _k("h_matmul_12x20x24", "a @ b", [["f16", [12, 20], "int"], ["f16", [20, 24], "int"]], "f16", [["LOCAL", 0, 4]],
       mnemonics=("v_cvt_f16_f32",)),
    _k("h_matmul_notc_normal", "a.matmul(b, dtype=d.float)", [["f16", [8, 24], "normal"], ["f16", [24, 8], "normal"]],
       "f32", [], tol="sum", acc="f32", prod="f16", mnemonics=("v_mul_f16",)),
    _k("h_add_mul", "(a + b) * c - a", [["f16", [256], "coarse"]] * 3, "f16", [["LOCAL", 0, 32]],
       mnemonics=("v_add_f16", "v_fma_f16")),
    _k("h_fma_fine", "a * b + c", [["f16", [256], "fine"]] * 3, "f16", [["LOCAL", 0, 32]],
       mnemonics=("v_fmac_f16",)),
    _k("h_minmax_neg", "a.maximum(b) - a.minimum(c).abs() * -b", [["f16", [160], "coarse"]] * 3, "f16",
       [["LOCAL", 0, 32]], mnemonics=("v_cmp_gt_f16", "v_fmac_f16")),
    _k("h_where_cmp", "(a < b).where(a * c, b + c)", [["f16", [96], "normal"]] * 3, "f16", [["LOCAL", 0, 32]],
       mnemonics=("v_cmp_lt_f16", "v_mul_f16", "v_add_f16")),
    _k("h_cast_f32_to_f16", "a.cast(d.half)", [["f32", [256], "wide"]], "f16", [["LOCAL", 0, 32]],
       mnemonics=("v_cvt_f16_f32",)),
    _k("h_mixed_casts", "(a.cast(d.half) * b).cast(d.float) + c", [["f32", [128], "normal"], ["f16", [128], "pow2"],
       ["f32", [128], "normal"]], "f32", [["LOCAL", 0, 32]], mnemonics=("v_cvt_f16_f32", "v_cvt_f32_f16")),
    _k("h_to_int", "a.cast(d.int32) + (b * 4).cast(d.int32)", [["f16", [128], "normal"]] * 2, "i32",
       [["LOCAL", 0, 32]], mnemonics=("v_mul_f16",)),
    _k("h_sum_f32acc_group", "a.sum(axis=1)", [["f16", [8, 256], "int"]], "f16", [["GROUP", 0, 64]],
       mnemonics=("v_cvt_f16_f32", "s_barrier")),
    # one work-item sums a row in index order in f32, as the CPU does: the same roundings, bit for bit
    _k("h_sum_f32acc_normal", "a.sum(axis=1, dtype=d.float)", [["f16", [6, 96], "normal"]], "f32", [],
       mnemonics=("v_cvt_f32_f16",)),
    _k("h_max_rows", "a.max(axis=1)", [["f16", [8, 128], "normal"]], "f16", [["GROUPTOP", 0, 32]],
       mnemonics=("v_max_f16",)),
]


# ---- data ----------------------------------------------------------------------------------------------------------


def _f32_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bits (the values used are exactly representable: small integers)."""
    bits = x.astype(np.float32).view(np.uint32)
    assert not (bits & 0xFFFF).any()
    return (bits >> 16).astype(np.uint16)


def make_input(name: str, i: int, spec: list) -> np.ndarray:
    """Input ``i`` of kernel ``name`` (numpy's PCG64 seeded from the name and index; stored in the fixtures)."""
    typ, shape, kind = spec
    g = np.random.default_rng([sum(name.encode()) * 7919 + len(name), i])
    if kind == "int":
        x = g.integers(-3, 4, size=shape).astype(np.float32)
    elif kind == "i8":
        return g.integers(-128, 128, size=shape).astype(np.int8)
    elif kind == "coarse":
        x = (g.integers(-48, 49, size=shape) / 8).astype(np.float32)
    elif kind == "fine":
        x = (g.integers(-256, 257, size=shape) / 64).astype(np.float32)
    elif kind == "pow2":
        x = np.exp2(g.integers(-3, 4, size=shape)) * g.choice([-1, 1], size=shape)
    elif kind == "normal":
        x = (g.standard_normal(shape) * g.choice([0.25, 1, 8], size=shape)).astype(np.float32)
    elif kind == "wide":
        # magnitudes from f16's subnormals to past its largest finite value, plus exact halfway points between
        # neighbouring f16 values (round to nearest even decides them) and the overflow threshold
        mag = np.exp2(g.uniform(-27, 17, size=shape)).astype(np.float32)
        x = np.where(g.random(shape) < 0.5, -mag, mag).astype(np.float32)
        h = g.standard_normal(16).astype(np.float16)
        x[:16] = (h.astype(np.float32) + np.spacing(h).astype(np.float32) / 2)
        x[16:20] = [65504.0, 65519.99, 65520.0, -65520.0]
        x[20:24] = [2.0 ** -24, 2.0 ** -25, 3 * 2.0 ** -26, -(2.0 ** -25) * 1.5]
        return x
    else:
        raise ValueError(f"unknown data kind {kind}")
    if typ == "bf16":
        return _f32_to_bf16_bits(x)
    return x.astype(NP[typ])


# ---- building tensors --------------------------------------------------------------------------------------------


def _dtype(tg: Any, typ: str) -> Any:
    d = tg.dtypes
    return {"f16": d.half, "f32": d.float32, "i32": d.int32, "i8": d.int8, "bf16": d.bfloat16}[typ]


def build(tg: Any, k: dict, device: str, data: list[np.ndarray] | None = None) -> tuple[Any, Any, dict]:
    """(linear schedule, output tensor, id of a buffer -> argument name) for kernel ``k`` on ``device``."""
    T = tg.Tensor
    ins = []
    for i, (typ, shape, _) in enumerate(k["ins"]):
        dt = _dtype(tg, typ)
        if data is None:
            ins.append(T.empty(*shape, dtype=dt, device=device))
        elif typ == "bf16" and device == "CPU":
            # this machine's clang has no __bf16 for tinygrad's CPU target: the CPU gets the same values as f32
            # (bf16 -> f32 is exact, and so is the f32 product of two bf16 values)
            ins.append(T((data[i].astype(np.uint32) << 16).view(np.float32), device=device).contiguous().realize())
        elif typ == "bf16":
            ins.append(T(data[i], device=device).bitcast(dt).contiguous().realize())
        else:
            ins.append(T(data[i], device=device).contiguous().realize())
    env = {"d": tg.dtypes, **dict(zip("abc", ins, strict=False))}
    expr = eval(k["expr"], {"__builtins__": {}}, env)  # the expressions are this module's own
    if expr.dtype != _dtype(tg, k["out"]):
        expr = expr.cast(_dtype(tg, k["out"]))
    names = {id(t.uop.base): f"in{i}" for i, t in enumerate(ins)}
    out = T.empty(*expr.shape, dtype=expr.dtype, device=device)
    names[id(out.uop.base)] = "out"
    out = out.assign(expr)
    return out.schedule_linear(), out, names


def compile_gfx1100(k: dict) -> dict:
    """Kernel ``k`` compiled for gfx1100: code, grid, block, argument names; raises on more than one kernel."""
    from tinyhw.kernels import seam

    tg = seam.load()
    from tinygrad.codegen.opt import Opt, OptOps  # after the seam pinned DEV=NULL

    ren = seam._renderer(tg, "gfx1100")
    lin, _, names = build(tg, k, "NULL")
    calls = list(lin.src)
    if len(calls) != 1 or calls[0].src[0].op.name != "SINK":
        raise ValueError(f"{k['name']}: {len(calls)} scheduled steps, the corpus takes one kernel")
    call = calls[0]
    ast = call.src[0]
    if k["opts"] is not None:
        opts = tuple(Opt(getattr(OptOps, o), ax, tuple(arg) if isinstance(arg, list) else arg)
                     for o, ax, arg in k["opts"])
        ast = ast.replace(arg=ast.arg.__class__(name=ast.arg.name, opts_to_apply=opts))
    prg = tg.to_program(ast, ren)
    info = prg.arg
    argn = [names[id(u.base)] for u in tg.get_call_arg_uops(call)]
    return {"kernel": info.function_name, "grid": [int(x) for x in info.global_size],
            "block": [int(x) for x in info.local_size], "args": [argn[i] for i in info.globals],
            "code": bytes(prg.src[3].arg)}


def run_cpu(k: dict, data: list[np.ndarray]) -> np.ndarray:
    """Kernel ``k``'s output as tinygrad's CPU device computes it (clang), bf16 as its bits."""
    from tinyhw.kernels import seam

    tg = seam.load()
    lin, out, _ = build(tg, k, "CPU", data)
    tg.run_linear(lin, wait=True)
    if k["out"] == "bf16":
        out = out.bitcast(tg.dtypes.uint16)
    return out.numpy()


# ---- fixtures ----------------------------------------------------------------------------------------------------


def load_corpus() -> tuple[dict, dict[str, np.ndarray]]:
    """(corpus.json, the arrays of corpus.npz)."""
    meta = json.loads((CORPUS / "corpus.json").read_text())
    with np.load(CORPUS / "corpus.npz") as z:
        arrays = {key: z[key] for key in z.files}
    return meta, arrays


def run_on_core(entry: dict, arrays: dict[str, np.ndarray]) -> tuple[np.ndarray, Any]:
    """Run one fixture on the emulated shader core; (output array, dispatch result)."""
    from tinyhw.mocks.rdna3 import FlatMemory, dispatch_regs, load_kernel, run_dispatch

    name = entry["name"]
    mem = FlatMemory(0x7F00_0000_0000, 4 << 20)
    lk = load_kernel(arrays[f"{name}_code"].tobytes(), mem)
    exp = arrays[f"{name}_out"]
    bufs = {f"in{i}": mem.alloc(arrays[f"{name}_in{i}"].tobytes()) for i in range(len(entry["ins"]))}
    bufs["out"] = mem.alloc(exp.nbytes)
    kernarg = mem.alloc(b"".join(struct.pack("<Q", bufs[a]) for a in entry["args"]) + bytes(64), align=64)
    regs = dispatch_regs(lk.kd, lk.entry, kernarg, tuple(entry["grid"]), tuple(entry["block"]))
    res = run_dispatch(regs, mem)
    return np.frombuffer(mem.read(bufs["out"], exp.nbytes), dtype=exp.dtype).reshape(exp.shape), res


# ---- comparing ---------------------------------------------------------------------------------------------------


def _as_f64(x: np.ndarray, typ: str) -> np.ndarray:
    if typ == "bf16":
        return (x.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return x.astype(np.float64)


def _round_to(x: np.ndarray, typ: str) -> np.ndarray:
    """float64 -> the output type's value (round to nearest even), as float64 (bf16 only for exact values)."""
    if typ == "f16":
        return x.astype(np.float16).astype(np.float64)   # float64 -> float16 rounds once in numpy
    if typ == "f32":
        return x.astype(np.float32).astype(np.float64)
    raise ValueError(f"no summation bound for {typ}")


def sum_interval(entry: dict, arrays: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi) per output element for a ``tol = "sum"`` kernel: the output type's roundings of exact -/+ B (see the
    module text). The exact sum is computed with fractions from the inputs (f16 products are exact in float64, the
    sum of them need not be)."""
    name, typ = entry["name"], entry["out"]
    a = _as_f64(arrays[f"{name}_in0"], entry["ins"][0][0])
    if "matmul" in entry["expr"] or "@" in entry["expr"]:
        b = _as_f64(arrays[f"{name}_in1"], entry["ins"][1][0])
        terms = a[:, :, None] * b[None, :, :]                       # [m, k, n], exact in float64
        kax = 1
    else:
        terms, kax = a, 1                                            # a row sum: the terms are the elements
    n_terms = terms.shape[kax]
    exact = np.empty(np.delete(terms.shape, kax), dtype=np.float64)
    tm = np.moveaxis(terms, kax, -1)
    for idx in np.ndindex(exact.shape):
        exact[idx] = float(sum((Fraction(float(t)) for t in tm[idx]), Fraction(0)))
    mag = np.abs(terms).sum(axis=kax)
    up = 0.0 if entry["prod"] == "exact" else UNIT_ROUNDOFF[entry["prod"]]
    ua = UNIT_ROUNDOFF[entry["acc"]]
    bound = mag * (up + n_terms * ua * (1 + up)) * 1.01
    return _round_to(exact - bound, typ), _round_to(exact + bound, typ)


def ulp_distance(a: np.ndarray, b: np.ndarray) -> int:
    """The largest distance in units in the last place between two float arrays of one dtype (-0 == +0)."""
    it = {2: np.int16, 4: np.int32}[a.dtype.itemsize]

    def key(x: np.ndarray) -> np.ndarray:
        i = x.reshape(-1).view(it).astype(np.int64)
        return np.where(i < 0, -(i & ((1 << (8 * a.dtype.itemsize - 1)) - 1)), i)
    return int(np.abs(key(a) - key(b)).max()) if a.size else 0


def compare(entry: dict, got: np.ndarray, exp: np.ndarray, arrays: dict[str, np.ndarray]) -> tuple[str, str]:
    """('exact' | 'within' | 'FAIL', detail): bit for bit, or inside the summation interval for ``tol = "sum"``."""
    if got.tobytes() == exp.tobytes():
        return "exact", ""
    if entry["tol"] == "sum":
        lo, hi = sum_interval(entry, arrays)
        g, e = got.astype(np.float64), exp.astype(np.float64)
        bad_ref = ~((lo <= e) & (e <= hi))
        if bad_ref.any():
            return "FAIL", f"the cpu answer is outside the summation bound at {np.argwhere(bad_ref)[0].tolist()}"
        bad = ~((lo <= g) & (g <= hi))
        if bad.any():
            i = tuple(np.argwhere(bad)[0])
            return "FAIL", f"{int(bad.sum())} elements outside the summation bound, first {list(i)}: {g[i]!r} not in " \
                           f"[{lo[i]!r}, {hi[i]!r}] (cpu {e[i]!r})"
        width = float(np.max(np.abs(g - e) / np.maximum(hi - lo, np.finfo(np.float64).tiny)))
        return "within", f"{ulp_distance(got, exp)} ulp from the cpu at most, the largest gap {width:.3f} of the " \
                         "bound's width"
    if got.shape != exp.shape or got.dtype != exp.dtype:
        return "FAIL", f"{got.dtype}{got.shape} returned, {exp.dtype}{exp.shape} expected"
    u = {1: np.uint8, 2: np.uint16, 4: np.uint32}[got.dtype.itemsize]
    g, e = got.reshape(-1), exp.reshape(-1)
    bad = np.flatnonzero(g.view(u) != e.view(u))
    i = int(bad[0])
    return "FAIL", f"{bad.size} elements differ, first [{i}]: {g[i]!r} != {e[i]!r}"
