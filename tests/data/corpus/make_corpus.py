"""Write the shader-core corpus: compile each seed's kernel for gfx1100 and run it on tinygrad's CPU device.

    .venv/bin/python tests/data/corpus/make_corpus.py [--seeds 0:240]

Writes corpus.json (one entry per kernel: seed, kind, spec, kernel name, grid, block, argument order,
shapes) and corpus.npz (code object bytes, inputs, expected outputs) beside this file. Seeds that tinygrad
schedules as more than one kernel, or whose options it refuses, are logged and left out (so are their
seeds in ``skipped``). Needs the compile extra (tinygrad 0.14.0, libLLVM >= 18) and clang.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "helpers"))
import corpushelp


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default="0:240", help="START:STOP")
    a = ap.parse_args()
    start, stop = (int(x) for x in a.seeds.split(":"))
    from tinyhw.kernels import seam
    tg = seam.load()
    from tinygrad.codegen.opt import KernelOptError  # after the seam pinned DEV=NULL
    entries, arrays, skipped = [], {}, []
    t0 = time.time()
    for seed in range(start, stop):
        spec = corpushelp.make_spec(seed)
        comp = None
        while comp is None:
            try:
                comp = corpushelp.compile_gfx1100(spec)
            except KernelOptError:
                if not spec["opts"]:
                    raise
                spec["opts"] = spec["opts"][:-1]
            except ValueError as e:
                print(f"seed {seed} {spec['kind']}: skipped: {e}", flush=True)
                skipped.append(seed)
                break
        if comp is None:
            continue
        data = corpushelp.make_inputs(spec)
        expected = corpushelp.run_cpu(spec, data)
        key = f"k{seed}"
        arrays[f"{key}_code"] = np.frombuffer(comp.pop("code"), dtype=np.uint8)
        for i, d in enumerate(data):
            arrays[f"{key}_in{i}"] = d
        arrays[f"{key}_out"] = expected
        entries.append({**spec, **comp, "out_shape": list(expected.shape)})
        print(f"seed {seed} {spec['kind']}: {comp['name']} grid {comp['grid']} block {comp['block']}", flush=True)
    meta = {"generator": "tests/data/corpus/make_corpus.py", "seeds": [start, stop], "skipped": skipped,
            "tinygrad": tg.version, "libllvm": tg.libllvm[1] if tg.libllvm else None, "kernels": entries}
    out = Path(__file__).resolve().parent
    (out / "corpus.json").write_text(json.dumps(meta, indent=None, separators=(",", ":")) + "\n")
    np.savez_compressed(out / "corpus.npz", **arrays)
    print(f"{len(entries)} kernels, {len(skipped)} skipped, {time.time() - t0:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
