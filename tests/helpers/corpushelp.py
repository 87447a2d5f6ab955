"""The shader-core corpus: random small tinygrad kernels, compiled for gfx1100, with the
inputs and the outputs tinygrad's CPU device computes for them.

A kernel is described by a JSON-able *spec* made from its seed (:func:`make_spec`): buffer shapes and dtypes,
an expression tree over the inputs, and the optimisation options (local sizes, grouped reductions through
LDS) to compile it with. :func:`build` turns a spec into tinygrad tensors on a device, so the same spec gives
the gfx1100 code object (on tinygrad's NULL device, through ``tinyhw.kernels.seam``) and the reference
answer (on tinygrad's CPU device, which needs clang). ``tests/data/corpus/make_corpus.py`` writes the
fixtures; ``tests/mocks/rdna3/test_rdna3_corpus.py`` runs them on the emulated shader core and recompiles a sample.

tinygrad is reached only after :func:`tinyhw.kernels.seam.load` pinned it to the NULL device (DEV=NULL);
its optimiser types are imported here for the options, nothing of it is copied.
"""

from __future__ import annotations

import json
import random
import struct
from pathlib import Path
from typing import Any

import numpy as np
from testpaths import ROOT

CORPUS = ROOT / "tests" / "data" / "corpus"
KINDS = ("ew_f32", "ew_i32", "ew_u32", "cast", "unary", "select", "reduce", "matmul", "gather", "grid2d",
         "grid3d")
UNARY = ("exp2", "log2", "sqrt", "reciprocal")
DT = {"f32": np.float32, "i32": np.int32, "u32": np.uint32}

#: Allowed float32 distance from the CPU device, in units in the last place, for the approximate operation at
#: the root of a ``unary`` kernel (its operand is exact IEEE arithmetic on both sides). LLVM compiles
#: reciprocal to a bare v_rcp_f32, sqrt to v_sqrt_f32 with fma range scaling, exp2/log2 to v_exp_f32 /
#: v_log_f32 with range scaling; the RDNA3 ISA documents v_rcp_f32, v_sqrt_f32, v_exp_f32 and v_log_f32 as
#: accurate to 1 ULP, so hardware may differ from a correctly rounded answer by 1 ULP (the model returns the
#: correctly rounded value). The reference is tinygrad's CPU device: its sqrt and 1/x are IEEE (correctly
#: rounded), so the bound is the ISA's 1 ULP; its clang renderer has no exp2/log2 and computes them with
#: tinygrad's own polynomial, whose distance from the correctly rounded value is no ISA figure: measured on this
#: corpus (the model's result is correctly rounded) at most 1 ULP for exp2 and 2 for log2, which are added.
#: Everything else is exact integer or IEEE arithmetic and must match bit for bit (float reductions and matmuls
#: use integer-valued data, so the order of a sum cannot matter).
TOLERANCE_ULP = {"exp2": 1 + 1, "log2": 1 + 2, "sqrt": 1, "reciprocal": 1}

# ---- specs -------------------------------------------------------------------------------------------------------


def _leaf(r: random.Random, n_in: int) -> list:
    return ["in", r.randrange(n_in)]


def _tree(r: random.Random, typ: str, n_in: int, depth: int) -> list:
    """A random expression of type ``typ`` over inputs 0..n_in-1 (all of that type); exact ops only."""
    if depth == 0 or r.random() < 0.25:
        return _leaf(r, n_in)
    if typ == "f32":
        op = r.choice(["add", "sub", "mul", "max", "min", "neg", "where_lt", "const_mul", "abs"])
    else:
        op = r.choice(["add", "sub", "mul", "idiv", "mod", "shl", "shr", "and", "or", "xor", "max", "min",
                       "where_lt", "where_eq", "const_mul", "idiv_const", "mod_const"])
    sub = lambda: _tree(r, typ, n_in, depth - 1)  # noqa: E731
    if op in ("neg", "abs"):
        return [op, sub()]
    if op in ("shl", "shr"):
        return [op, sub(), r.randrange(0, 9)]
    if op in ("const_mul", "idiv_const", "mod_const"):
        return [op, sub(), r.choice([3, 5, 7, 10, 13, 64, 100, 1000]) * (r.choice([1, -1]) if typ == "i32" else 1)]
    if op in ("idiv", "mod"):
        return [op, sub(), _leaf(r, n_in)]      # the divisor is an input leaf: the data has no zero there
    if op.startswith("where"):
        return [op, sub(), sub(), sub(), sub()]
    return [op, sub(), sub()]


def make_spec(seed: int) -> dict:
    """The kernel of ``seed`` (deterministic: Python's ``random.Random`` and the seed only)."""
    r = random.Random(seed)
    kind = KINDS[seed % len(KINDS)]
    n = r.choice([32, 48, 64, 96, 100, 128, 160, 192, 256, 300, 384])
    spec: dict[str, Any] = {"seed": seed, "kind": kind, "opts": []}
    if kind in ("ew_f32", "ew_i32", "ew_u32"):
        typ = kind[3:]
        k = r.randint(1, 3)
        spec.update(inputs=[[typ, [n]]] * k, expr=_tree(r, typ, k, r.randint(1, 3)), out=typ)
        spec["opts"] = [["LOCAL", 0, r.choice([d for d in (2, 4, 8, 16, 32) if n % d == 0])]]
    elif kind == "cast":
        src, dst = r.choice([("f32", "i32"), ("i32", "f32"), ("u32", "f32"), ("f32", "u32"), ("i32", "u32"),
                             ("u32", "i32"), ("f32", "bits_u32"), ("u32", "bits_f32")])
        spec.update(inputs=[[src, [n]]], expr=["cast", _tree(r, src, 1, 1) if src != "f32" else ["in", 0], dst],
                    out=dst.removeprefix("bits_"))
        spec["opts"] = [["LOCAL", 0, r.choice([d for d in (4, 8, 16, 32) if n % d == 0])]]
    elif kind == "unary":
        op = r.choice(UNARY)
        spec.update(inputs=[["f32", [n]]] * 2, expr=[op, _tree(r, "f32", 2, 1)], out="f32", approx=op)
        spec["opts"] = [["LOCAL", 0, r.choice([d for d in (4, 8, 16, 32) if n % d == 0])]]
    elif kind == "select":
        typ = r.choice(["f32", "i32", "u32"])
        cmp = r.choice(["lt", "eq", "ne", "gt", "le", "ge"])
        spec.update(inputs=[[typ, [n]]] * 3, expr=["cmpsel", cmp, ["in", 0], ["in", 1], ["in", 2], _tree(r, typ, 3, 1)],
                    out=typ)
        spec["opts"] = [["LOCAL", 0, r.choice([d for d in (4, 8, 16, 32) if n % d == 0])]]
    elif kind == "reduce":
        typ = r.choice(["f32", "i32", "u32"])
        rows, cols = r.choice([3, 5, 7, 8]), r.choice([16, 48, 64, 96, 128, 192, 256])
        op = r.choice(["sum", "max"])
        spec.update(inputs=[[typ, [rows, cols]]], expr=[f"r{op}", ["in", 0], 1], out=typ, intvalued=True)
        # a group of more than 32 work-items is several waves: the LDS exchange then needs s_barrier
        # (LLVM drops the barrier of a one-wave workgroup)
        spec["opts"] = [[r.choice(["GROUP", "GROUPTOP"]), 0,
                         r.choice([d for d in (48, 64, 96, 128) if cols % d == 0 and r.random() < 0.8] or [8])]]
    elif kind == "matmul":
        m, k, nn = r.choice([4, 5, 8, 12]), r.choice([4, 7, 8, 16]), r.choice([3, 4, 6, 8, 16])
        spec.update(inputs=[["f32", [m, k]], ["f32", [k, nn]]], expr=["matmul", ["in", 0], ["in", 1]], out="f32",
                    intvalued=True)
        spec["opts"] = [["LOCAL", 0, r.choice([d for d in (2, 3, 4) if nn % d == 0])]]
    elif kind == "gather":
        typ = r.choice(["f32", "i32"])
        src_n, idx_n = r.choice([16, 37, 50, 64]), r.choice([8, 16, 20, 32])
        spec.update(inputs=[[typ, [src_n]], ["idx", [idx_n], src_n]], expr=["gather", ["in", 0], ["in", 1]], out=typ)
        spec["opts"] = []
    else:
        typ = r.choice(["f32", "i32", "u32"])
        dims = 2 if kind == "grid2d" else 3
        shape = [r.choice([3, 5, 6, 7, 9, 10, 12]) for _ in range(dims)]
        # a second input broadcast along one axis keeps tinygrad from merging the axes into one
        bshape = list(shape)
        bshape[1 if dims == 3 else r.randrange(2)] = 1
        spec.update(inputs=[[typ, shape], [typ, bshape]], expr=["add", _tree(r, typ, 2, 2), ["in", 1]], out=typ)
        opts = []
        for ax in range(dims):
            divs = [d for d in (1, 3, 5, 2, 7) if shape[ax] % d == 0 and d > 1]
            if divs and r.random() < 0.7:
                opts.append(["LOCAL", ax, r.choice(divs)])
        spec["opts"] = opts[::-1]     # the highest axis first: a LOCAL adds axes after the globals
    return spec


def make_inputs(spec: dict) -> list[np.ndarray]:
    """Input arrays of ``spec`` (numpy's PCG64 from the seed; stored in the fixtures, never regenerated there)."""
    g = np.random.default_rng(spec["seed"])
    out = []
    intvalued = spec.get("intvalued", False)
    for ent in spec["inputs"]:
        typ, shape = ent[0], ent[1]
        if typ == "idx":
            out.append(g.integers(0, ent[2], size=shape).astype(np.int32))
        elif typ == "f32":
            if intvalued:
                out.append(g.integers(-20, 21, size=shape).astype(np.float32))
            else:
                x = (g.standard_normal(shape) * g.choice([1, 4, 100], size=shape)).astype(np.float32)
                x[g.random(shape) < 0.05] = 0.0
                out.append(x)
        elif typ == "i32":
            x = g.integers(-3000, 3000, size=shape).astype(np.int32)
            x[x == 0] = 7
            out.append(x)
        else:
            x = g.integers(1, 100000, size=shape).astype(np.uint32)
            out.append(x)
    return out


# ---- building tensors --------------------------------------------------------------------------------------------


def _ev(tg: Any, e: list, ins: list, typ: str) -> Any:
    op = e[0]
    ev = lambda x: _ev(tg, x, ins, typ)  # noqa: E731
    if op == "in":
        return ins[e[1]]
    if op == "add":
        return ev(e[1]) + ev(e[2])
    if op == "sub":
        return ev(e[1]) - ev(e[2])
    if op == "mul":
        return ev(e[1]) * ev(e[2])
    if op == "max":
        return ev(e[1]).maximum(ev(e[2]))
    if op == "min":
        return ev(e[1]).minimum(ev(e[2]))
    if op == "neg":
        return -ev(e[1])
    if op == "abs":
        return ev(e[1]).abs()
    if op == "const_mul":
        return ev(e[1]) * e[2]
    if op == "idiv":
        return ev(e[1]) // ev(e[2])
    if op == "mod":
        return ev(e[1]) % ev(e[2])
    if op == "idiv_const":
        return ev(e[1]) // e[2]
    if op == "mod_const":
        return ev(e[1]) % e[2]
    if op == "shl":
        return ev(e[1]) << e[2]
    if op == "shr":
        return ev(e[1]) >> e[2]
    if op in ("and", "or", "xor"):
        a, b = ev(e[1]), ev(e[2])
        return a & b if op == "and" else a | b if op == "or" else a ^ b
    if op == "where_lt":
        return (ev(e[1]) < ev(e[2])).where(ev(e[3]), ev(e[4]))
    if op == "where_eq":
        return (ev(e[1]) == ev(e[2])).where(ev(e[3]), ev(e[4]))
    if op == "cmpsel":
        a, b = ev(e[2]), ev(e[3])
        c = {"lt": a < b, "eq": a == b, "ne": a != b, "gt": a > b, "le": a <= b, "ge": a >= b}[e[1]]
        return c.where(ev(e[4]), ev(e[5]))
    if op == "cast":
        x = ev(e[1])
        dst = e[2]
        if dst.startswith("bits_"):
            return x.bitcast(tg.dtypes.uint32 if dst == "bits_u32" else tg.dtypes.float32)
        if dst == "u32" and str(x.dtype).endswith("float"):
            x = x.abs()
        return x.cast({"f32": tg.dtypes.float32, "i32": tg.dtypes.int32, "u32": tg.dtypes.uint32}[dst])
    if op == "exp2":
        return ev(e[1]).clip(-100, 100).exp2()
    if op == "log2":
        return (ev(e[1]).abs() + 0.5).log2()
    if op == "sqrt":
        return ev(e[1]).abs().sqrt()
    if op == "reciprocal":
        return (ev(e[1]).abs() + 0.25).reciprocal()
    if op == "rsum":
        return ev(e[1]).sum(axis=e[2], dtype=ins[0].dtype)
    if op == "rmax":
        return ev(e[1]).max(axis=e[2])
    if op == "matmul":
        return ev(e[1]) @ ev(e[2])
    if op == "gather":
        return ev(e[1])[ev(e[2])]
    raise ValueError(f"unknown op {op}")


def _dtype(tg: Any, typ: str) -> Any:
    return {"f32": tg.dtypes.float32, "i32": tg.dtypes.int32, "u32": tg.dtypes.uint32, "idx": tg.dtypes.int32}[typ]


def build(tg: Any, spec: dict, device: str, data: list[np.ndarray] | None = None) -> tuple[Any, Any, dict]:
    """(linear schedule, output tensor, id of a buffer -> argument name) for ``spec`` on ``device``."""
    T = tg.Tensor
    ins = []
    for i, ent in enumerate(spec["inputs"]):
        dt = _dtype(tg, ent[0])
        if data is None:
            ins.append(T.empty(*ent[1], dtype=dt, device=device))
        else:
            ins.append(T(data[i], device=device).contiguous().realize())
    expr = _ev(tg, spec["expr"], ins, spec["out"])
    if expr.dtype != _dtype(tg, spec["out"]):
        expr = expr.cast(_dtype(tg, spec["out"]))
    names = {id(t.uop.base): f"in{i}" for i, t in enumerate(ins)}
    out = T.empty(*expr.shape, dtype=expr.dtype, device=device)
    names[id(out.uop.base)] = "out"
    out = out.assign(expr)
    return out.schedule_linear(), out, names


def compile_gfx1100(spec: dict) -> dict:
    """The spec's one kernel compiled for gfx1100: code, grid, block, argument names; raises on >1 kernel."""
    from tinyhw.kernels import seam

    tg = seam.load()
    from tinygrad.codegen.opt import Opt, OptOps  # after the seam pinned DEV=NULL

    ren = seam._renderer(tg, "gfx1100")
    lin, out, names = build(tg, spec, "NULL")
    calls = [c for c in lin.src]
    if len(calls) != 1 or calls[0].src[0].op.name != "SINK":
        raise ValueError(f"{len(calls)} scheduled steps, the corpus takes one kernel")
    call = calls[0]
    ast = call.src[0]
    opts = tuple(Opt(getattr(OptOps, o), ax, amt) for o, ax, amt in spec["opts"])
    ast = ast.replace(arg=ast.arg.__class__(name=ast.arg.name, opts_to_apply=opts)) if ast.arg is not None else ast
    prg = tg.to_program(ast, ren)
    info = prg.arg
    argn = [names[id(u.base)] for u in tg.get_call_arg_uops(call)]
    return {"name": info.function_name, "grid": [int(x) for x in info.global_size],
            "block": [int(x) for x in info.local_size], "args": [argn[i] for i in info.globals],
            "vars": len(info.vars), "code": bytes(prg.src[3].arg)}


def run_cpu(spec: dict, data: list[np.ndarray]) -> np.ndarray:
    """The spec's output as tinygrad's CPU device computes it (clang)."""
    from tinyhw.kernels import seam

    tg = seam.load()
    lin, out, _ = build(tg, spec, "CPU", data)
    tg.run_linear(lin, wait=True)
    return out.numpy()


# ---- fixtures ----------------------------------------------------------------------------------------------------


def load_corpus() -> tuple[dict, dict[str, np.ndarray]]:
    meta = json.loads((CORPUS / "corpus.json").read_text())
    with np.load(CORPUS / "corpus.npz") as z:
        arrays = {k: z[k] for k in z.files}
    return meta, arrays


BASE = 0x7F00_0000_0000


def run_on_core(entry: dict, arrays: dict[str, np.ndarray], **kw: Any) -> tuple[np.ndarray, Any]:
    """Run one fixture on the emulated shader core; (output array, dispatch result)."""
    from tinyhw.mocks.rdna3 import FlatMemory, dispatch_regs, load_kernel, run_dispatch

    key = f"k{entry['seed']}"
    mem = FlatMemory(BASE, 8 << 20)
    k = load_kernel(arrays[f"{key}_code"].tobytes(), mem)
    out_shape, out_dt = entry["out_shape"], DT[entry["out"]]
    bufs = {}
    for i in range(len(entry["inputs"])):
        bufs[f"in{i}"] = mem.alloc(arrays[f"{key}_in{i}"].tobytes())
    nbytes = int(np.prod(out_shape)) * 4
    bufs["out"] = mem.alloc(nbytes)
    kernarg = mem.alloc(b"".join(struct.pack("<Q", bufs[a]) for a in entry["args"]) + bytes(64), align=64)
    regs = dispatch_regs(k.kd, k.entry, kernarg, tuple(entry["grid"]), tuple(entry["block"]))
    res = run_dispatch(regs, mem, **kw)
    return np.frombuffer(mem.read(bufs["out"], nbytes), dtype=out_dt).reshape(out_shape), res


def exec_argv(entry: dict, arrays: dict[str, np.ndarray], folder: Path) -> tuple[list[str], int, list[str]]:
    """The fixture as ``kernels exec`` arguments (after ``--device D kernels exec``): its code object and input
    buffers written to files in ``folder``, the output as ``zeros:N``; (argv without ``--out``, the output's
    buffer index, the input files in buffer order)."""
    key = f"k{entry['seed']}"
    code = folder / f"{key}.elf"
    code.write_bytes(arrays[f"{key}_code"].tobytes())
    argv = [str(code), "--kernel", entry["name"], "--grid", ",".join(map(str, entry["grid"])),
            "--block", ",".join(map(str, entry["block"]))]
    out_index, inputs = -1, []
    for i, name in enumerate(entry["args"]):
        if name == "out":
            argv += ["--buffer", f"zeros:{int(np.prod(entry['out_shape'])) * 4}"]
            out_index = i
        else:
            path = folder / f"{key}_{name}.bin"
            path.write_bytes(arrays[f"{key}_{name}"].tobytes())
            argv += ["--buffer", str(path)]
            inputs.append(str(path))
    return argv, out_index, inputs


def compare_output(entry: dict, got: np.ndarray, exp: np.ndarray) -> tuple[str, str]:
    """('exact' | 'within' | 'FAIL', detail): a fixture's output against the CPU device's, within
    :data:`TOLERANCE_ULP` for the approximate operation of a ``unary`` kernel, bit for bit otherwise."""
    if got.tobytes() == exp.tobytes():
        return "exact", ""
    if got.size != exp.size:
        return "FAIL", f"{got.size} elements, {exp.size} expected"
    tol = TOLERANCE_ULP.get(entry.get("approx", ""), 0)
    if entry["out"] == "f32" and tol:
        ulp = int(ulp_distance(got.reshape(exp.shape), exp).max())
        if ulp <= tol:
            return "within", f"{ulp} ulp"
        return "FAIL", f"{entry['approx']}: {ulp} ulp from the cpu (allowed {tol})"
    g, e = got.reshape(-1), exp.reshape(-1)
    bad = np.flatnonzero(g != e)
    i = int(bad[0]) if bad.size else 0
    return "FAIL", f"{bad.size} elements differ, first [{i}]: {g[i]!r} != {e[i]!r}"


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Units in the last place between float32 arrays (ordered integer view; -0 == +0; NaN vs NaN is 0)."""
    def key(x: np.ndarray) -> np.ndarray:
        i = x.astype(np.float32).view(np.int32).astype(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFF), i)
    d = np.abs(key(a) - key(b))
    both_nan = np.isnan(a) & np.isnan(b)
    return np.where(both_nan, 0, d)
