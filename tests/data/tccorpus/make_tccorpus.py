"""Write the tensor-core and half-precision corpus: compile each kernel of tests/helpers/tccorpushelp.py for gfx1100
with tinygrad and answer it on tinygrad's CPU device.

    .venv/bin/python tests/data/tccorpus/make_tccorpus.py

Writes corpus.json (tinygrad and libLLVM versions; per kernel its expression, types, options, tolerance, the
tinygrad kernel name, grid, block and argument order) and corpus.npz (code objects, inputs, expected outputs)
beside this file. Needs the compile extra (tinygrad 0.14.0, libLLVM >= 18) and clang.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "helpers"))
import tccorpushelp


def main() -> int:
    from tinyhw.kernels import seam
    tg = seam.load()
    entries, arrays = [], {}
    for k in tccorpushelp.KERNELS:
        name = k["name"]
        comp = tccorpushelp.compile_gfx1100(k)
        data = [tccorpushelp.make_input(name, i, spec) for i, spec in enumerate(k["ins"])]
        expected = tccorpushelp.run_cpu(k, data)
        arrays[f"{name}_code"] = np.frombuffer(comp.pop("code"), dtype=np.uint8)
        for i, x in enumerate(data):
            arrays[f"{name}_in{i}"] = x
        arrays[f"{name}_out"] = expected
        entries.append({**k, **comp})
        print(f"{name}: {comp['kernel']} grid {comp['grid']} block {comp['block']}", flush=True)
    meta = {"generator": "tests/data/tccorpus/make_tccorpus.py", "tinygrad": tg.version,
            "libllvm": tg.libllvm[1] if tg.libllvm else None, "kernels": entries}
    out = tccorpushelp.CORPUS
    (out / "corpus.json").write_text(json.dumps(meta, indent=1) + "\n")
    np.savez_compressed(out / "corpus.npz", **arrays)
    print(f"{len(entries)} kernels -> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
