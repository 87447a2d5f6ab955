"""Measurements: copy bandwidth host <-> device (``tinyhw bench copy``), the same way on every transport.

Layer 3: handed a transport (or, for ``cuda:N``, an open CUDA device), never constructing one. See
:mod:`tinyhw.bench.copy` (through a BAR) and :mod:`tinyhw.bench.cuda_copy` (through the CUDA driver).
"""

from tinyhw.bench.copy import CopyPath, CopyResult, copy_bench, link_limit, parse_sizes, pick_bar
from tinyhw.bench.cuda_copy import MEMORIES, CudaCopyResult, cuda_copy_bench, cuda_link_limit

__all__ = ["MEMORIES", "CopyPath", "CopyResult", "CudaCopyResult", "copy_bench", "cuda_copy_bench", "cuda_link_limit",
           "link_limit", "parse_sizes", "pick_bar"]
