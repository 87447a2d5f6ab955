"""An emulated RDNA3 (gfx1100) wave32 shader core and dispatcher.

Written from specs/amd-compute.md §3-§5 and the RDNA3 ISA reference, never from another emulator.
The command processor model calls :func:`run_dispatch` at DISPATCH_DIRECT with the COMPUTE_* register
values it holds (:class:`DispatchRegs`) and a memory object on GPU virtual addresses (``read(addr, n)``,
``write(addr, data)``: the board's GPUVM translation sits behind it); the result carries exact counters.
Decoding is :mod:`tinyhw.formats.amdisa` (one generated opcode table, shared with ``prof insts``).

Modules: ``state`` (wave registers, operand access, errors), ``salu`` (scalar ALU, program control,
scalar loads), ``valu`` (VOP1/2/C/3, VOPD), ``vmem`` (LDS, global memory), ``dispatch`` (workgroups,
waves, barriers, the decode cache), ``launch`` (registers from a kernel descriptor, for tests).
"""

from __future__ import annotations

import importlib
from typing import Any

#: where each name of the package lives; imported on first use (PEP 562), so that importing one module of the
#: package (``tinyhw.mocks.rdna3.sqtt``: the thread trace's packet writer) does not import the shader core and numpy
_WHERE = {
    **dict.fromkeys(("CodeCache", "DispatchJob", "DispatchRegs", "DispatchResult", "FlatMemory", "Memory",
                     "MemoryFault", "default_cost", "run_dispatch"), "dispatch"),
    **dict.fromkeys(("LoadedKernel", "dispatch_regs", "load_kernel", "scratch_ring_bytes"), "launch"),
    **dict.fromkeys(("ShaderError", "ShaderFault", "Unimplemented", "WatchdogExpired"), "state"),
}


def __getattr__(name: str) -> Any:
    """The package's names, each imported from its module when first asked for."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = ["CodeCache", "DispatchJob", "DispatchRegs", "DispatchResult", "FlatMemory", "LoadedKernel", "Memory",
           "MemoryFault", "ShaderError", "ShaderFault", "Unimplemented", "WatchdogExpired", "default_cost",
           "dispatch_regs", "load_kernel", "run_dispatch", "scratch_ring_bytes"]
