"""Probe kernels (layer 3): written once with tinygrad, checked against answers computed on the host.

* :mod:`~tinyhw.kernels.probes`: the probes (pattern, bandwidth, fma, atomic) and their host-side checks.
* :mod:`~tinyhw.kernels.seam`: the only module that imports tinygrad (specs/compiler-library.md §4).
* :mod:`~tinyhw.kernels.manifest`: built binaries on disk and the committed ones under ``prebuilt/``.
* :mod:`~tinyhw.kernels.run`: a probe on tinygrad's CPU device or on an NVIDIA GPU with the CUDA driver API,
  through the :class:`tinyhw.cuda.CudaDevice` the caller opens and hands in.

Importing this package imports neither tinygrad nor cuda-bindings.
"""
