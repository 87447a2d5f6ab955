"""Probe kernels (layer 3): written once with tinygrad, checked against answers computed on the host.

* :mod:`~tinyhw.kernels.probes`: the probes (pattern, bandwidth, fma, atomic) and their host-side checks.
* :mod:`~tinyhw.kernels.seam`: the only module that imports tinygrad (specs/compiler-library.md §4).
* :mod:`~tinyhw.kernels.manifest`: built binaries on disk and the committed ones under ``prebuilt/``.
* :mod:`~tinyhw.kernels.run`: a probe on tinygrad's CPU device or on an NVIDIA GPU with the CUDA driver API,
  through the :class:`tinyhw.cuda.CudaDevice` the caller opens and hands in.

* :mod:`~tinyhw.kernels.amd` / :mod:`~tinyhw.kernels.execute`: a probe, or a user's code object, on an AMD GPU
  tinyhw booted, through the transport the caller opens (:func:`run_amd_probe`).

Importing this package imports neither tinygrad nor cuda-bindings.
"""

from typing import Any

from tinyhw.transport.base import Transport


def run_amd_probe(name: str, transport: Transport, **kw: Any) -> dict:
    """Probe ``name`` on the AMD GPU behind ``transport`` (see :func:`tinyhw.kernels.amd.run_amd_probe`)."""
    from tinyhw.kernels.amd import run_amd_probe as run

    return run(name, transport, **kw)


def exec_kernel(transport: Transport, code_object: Any, **kw: Any) -> Any:
    """A kernel of a user's code object on the AMD GPU behind ``transport`` (see
    :func:`tinyhw.kernels.execute.exec_kernel`)."""
    from tinyhw.kernels.execute import exec_kernel as run

    return run(transport, code_object, **kw)
