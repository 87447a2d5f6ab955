"""Measurements: copy bandwidth host <-> device (``tinyhw bench copy``), the same way on every transport.

Layer 3: handed a transport, never constructing one. See :mod:`tinyhw.bench.copy`.
"""

from tinyhw.bench.copy import CopyResult, copy_bench, link_limit, parse_sizes, pick_bar

__all__ = ["CopyResult", "copy_bench", "link_limit", "parse_sizes", "pick_bar"]
