"""The firmware feature: inspect and compare firmware images.

``inspect_file`` / ``inspect_bytes`` detect the type (Navi31 IFWI, ATOM VBIOS, amdgpu firmware file,
NVIDIA GSP-RM ELF, other ELF), parse it with the pure parsers of :mod:`tinyhw.formats` and return a JSON
document plus a tree for people; ``diff_bytes`` compares two images region by region. The board
identity that ``flash write`` checks lives in :func:`tinyhw.formats.vbios.vbios_identity` (pure, so the
flash feature uses it without importing this package).
"""

from tinyhw.firmware.diff import DiffResult, count_differences, diff_bytes
from tinyhw.firmware.inspect import KINDS, Inspection, detect, inspect_bytes, inspect_file, read_image
from tinyhw.firmware.tree import Node

__all__ = ["KINDS", "DiffResult", "Inspection", "Node", "count_differences", "detect", "diff_bytes",
           "inspect_bytes", "inspect_file", "read_image"]
