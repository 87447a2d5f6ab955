"""Measurements: copy bandwidth host <-> device (``tinyhw bench copy``), the same way on every transport.

Layer 3: handed a transport (or, for ``cuda:N``, an open CUDA device), never constructing one. See
:mod:`tinyhw.bench.copy` (through a BAR), :mod:`tinyhw.bench.cuda_copy` (through the CUDA driver) and
:mod:`tinyhw.bench.staging` (the host side of a DMA-buffer copy, measured alone); :mod:`tinyhw.bench.paths`
chooses and opens the path (``bench_copy(transport, sizes)``: ``--path auto`` in one call; ``sram_path(transport)``:
the usb bridge's SRAM copy path alone, with the same refusals).
"""

from tinyhw.bench.copy import CopyPath, CopyResult, copy_bench, link_limit, parse_sizes, pick_bar
from tinyhw.bench.cuda_copy import MEMORIES, CudaCopyResult, cuda_copy_bench, cuda_link_limit
from tinyhw.bench.paths import PATHS, CopyPlan, bench_copy, choose_path, plan_copy, run_plan, sram_path
from tinyhw.bench.staging import Staging, staging_size

__all__ = ["MEMORIES", "PATHS", "CopyPath", "CopyPlan", "CopyResult", "bench_copy", "choose_path", "plan_copy",
           "run_plan", "sram_path", "CudaCopyResult", "copy_bench", "cuda_copy_bench", "cuda_link_limit",
           "Staging", "link_limit", "parse_sizes", "pick_bar", "staging_size"]
