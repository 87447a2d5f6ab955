"""Write the OpenCL C corpus: compile each kernel of tests/helpers/clcorpushelp.py for gfx1100 and answer it on the
host.

    .venv/bin/python tests/data/clcorpus/make_clcorpus.py

Writes corpus.json (the compiler, and per kernel its launch, types, tolerance and the SHA-256 of its source) and
corpus.npz (code objects, inputs, expected outputs) beside this file. Needs clang-19 and ld.lld-19
(tests/setup-system.sh installs them). known_gaps.json (kernel -> the mnemonic that stops it on the shader core) is
kept by hand: tests/mocks/rdna3/test_rdna3_clcorpus.py says when an entry is new or stale.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "helpers"))
import clcorpushelp


def main() -> int:
    version = subprocess.run([clcorpushelp.CLANG, "--version"], capture_output=True, text=True,
                             check=True).stdout.splitlines()[0]
    entries, arrays = [], {}
    for k in clcorpushelp.KERNELS:
        b = clcorpushelp.build(k)
        name = k["name"]
        arrays[f"{name}_code"] = np.frombuffer(b["code"], dtype=np.uint8)
        for i, x in enumerate(b["inputs"]):
            arrays[f"{name}_in{i}"] = x
        arrays[f"{name}_out"] = b["expected"]
        entry = {key: v for key, v in k.items() if key != "src"}
        entry["source_sha256"] = hashlib.sha256(clcorpushelp.source(k).encode()).hexdigest()
        entries.append(entry)
        print(f"{name}: {len(b['code'])} bytes of code object", flush=True)
    meta = {"generator": "tests/data/clcorpus/make_clcorpus.py", "compiler": version,
            "device_flags": clcorpushelp.DEVICE_FLAGS, "host_flags": clcorpushelp.HOST_FLAGS, "kernels": entries}
    out = clcorpushelp.CORPUS
    (out / "corpus.json").write_text(json.dumps(meta, indent=1) + "\n")
    np.savez_compressed(out / "corpus.npz", **arrays)
    print(f"{len(entries)} kernels -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
