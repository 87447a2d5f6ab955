"""One tinygrad process on an emulated Navi31 (run by tests/peer/test_peer_tinygrad_amd.py, one per boot).

``python tests/peer/peeramd.py DEVICE [--ops]``: opens DEVICE (``mock:navi31,...`` or ``mock:navi31-usb,...``) through
:func:`tinyhw.peers.tinygrad_amd.emulated_gpu`, lets tinygrad 0.14.0 (``DEV=AMD``, unmodified) boot it, and with
``--ops`` runs the work list, each result compared with numpy. Prints one JSON object on its last stdout line:
the boot (full or partial, PSP commands and statuses, SMU messages), each op's result (``ok``, ``detail``: the first
differing element, expected vs got, or the error and the adapter's last accesses), and what the board did not
model. Exit 0 even when ops fail (the test reads the JSON); exit 1 when the boot itself fails (the JSON then
carries the error and the last accesses).
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np

from tinyhw.peers.tinygrad_amd import emulated_gpu


def first_divergence(want: np.ndarray, got: np.ndarray, rtol: float, atol: float) -> str | None:
    """None when ``got`` matches ``want``; else the first differing element, expected vs got."""
    if want.shape != got.shape:
        return f"shape: expected {want.shape}, got {got.shape}"
    bad = ~np.isclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol)
    if not bad.any():
        return None
    i = tuple(int(x) for x in np.argwhere(bad)[0])
    return f"{int(bad.sum())} of {bad.size} differ; first at {list(i)}: expected {want[i]!r}, got {got[i]!r}"


def ops(board: Any) -> list[tuple[str, Callable[[], tuple[np.ndarray, np.ndarray, float, float]]]]:
    """The work list: (name, fn returning (expected, got, rtol, atol))."""
    from tinygrad import Tensor, dtypes

    rng = np.random.default_rng(1)
    a = rng.standard_normal((64, 64)).astype(np.float32)
    b = rng.standard_normal((64, 64)).astype(np.float32)
    v = rng.standard_normal(4096).astype(np.float32)
    ints = rng.integers(-1000, 1000, 256).astype(np.int32)
    h = rng.standard_normal(256).astype(np.float16)

    def add() -> tuple:
        return a + b, (Tensor(a, device="AMD") + Tensor(b, device="AMD")).numpy(), 0, 0

    def matmul() -> tuple:
        return a @ b, (Tensor(a, device="AMD") @ Tensor(b, device="AMD")).numpy(), 1e-4, 1e-4

    def sum_max() -> tuple:
        t = Tensor(v, device="AMD")
        got = np.array([t.sum().numpy(), t.max().numpy()], dtype=np.float32)
        return np.array([v.sum(), v.max()], dtype=np.float32), got, 1e-4, 1e-3

    def lds() -> tuple:
        x = rng.standard_normal((4, 8192)).astype(np.float32)
        got = Tensor(x, device="AMD").sum(axis=1).numpy()
        last = board.cp.last_dispatch
        used = sum(n for m, n in (last.per_mnemonic.items() if last is not None else ()) if m.startswith("ds_"))
        if not used:
            raise AssertionError("the reduction kernel ran without an LDS (ds_*) instruction")
        return x.sum(axis=1), got, 1e-4, 1e-3

    def f16() -> tuple:
        t = Tensor(h, device="AMD")
        return (h * h + h).astype(np.float16), (t * t + t).numpy(), 2e-3, 2e-3

    def int_math() -> tuple:
        t = Tensor(ints, device="AMD")
        got = ((t * 3 + 7) // 4 ^ (t & 0xFF)).cast(dtypes.int32).numpy()
        want = ((ints * 3 + 7) // 4) ^ (ints & 0xFF)
        return want.astype(np.int32), got, 0, 0

    work = [("add", add), ("matmul64", matmul), ("sum_max", sum_max), ("lds_reduce", lds), ("f16", f16),
            ("int_math", int_math)]
    only = os.environ.get("PEERAMD_OPS")  # a comma list of op names, to run a subset by hand
    return [w for w in work if not only or w[0] in only.split(",")]


def main(argv: list[str]) -> int:
    device, run_ops = argv[0], "--ops" in argv
    out: dict[str, Any] = {"device": device, "ops": {}}
    rc = 0
    with emulated_gpu(device) as gpu:
        try:
            from tinygrad import Device

            dev = Device["AMD"]
            am = dev.iface.dev_impl
            out["boot"] = {"ok": True, "partial": bool(am.partial_boot), "usb": bool(dev.is_usb())}
            if run_ops:
                for name, fn in ops(gpu.board):
                    try:
                        want, got, rtol, atol = fn()
                        bad = first_divergence(np.asarray(want), np.asarray(got), rtol, atol)
                        out["ops"][name] = {"ok": bad is None, "detail": bad or ""}
                    except Exception as exc:  # one op's failure must not hide the others'
                        errors = gpu.board.cp.errors  # the queue errors, kept after the driver's recovery
                        out["ops"][name] = {"ok": False, "detail": f"{type(exc).__name__}: {exc}\n"
                                            f"compute queue errors: {errors}\n{gpu.log.report()}"}
        except Exception as exc:
            out["boot"] = {"ok": False, "error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc(),
                           "last": gpu.log.report(40)}
            rc = 1
        board = gpu.board
        log = board.am.boot.log
        out["psp"] = {"commands": [[what, cmd, status] for what, cmd, status in log],
                      "nonzero": [[what, cmd, status] for what, cmd, status in log if status]}
        out["counters"] = board.counters()
        out["uncovered"] = gpu.uncovered
    out["finalize_errors"] = gpu.finalize_errors  # tinygrad's fini (SDMA, GFX, SMU clocks, SCRATCH_REG6) at the end
    print(json.dumps(out))
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
