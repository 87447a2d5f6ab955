"""An NVIDIA GPU through the CUDA driver API (``cuda-bindings``): the ``cuda:N`` device (layer 2).

Like a transport package it may import layers 0-1 only, and it is constructed in one place
(:func:`tinyhw.connect.open_cuda`); the features that use it (``kernels run``, ``bench copy``) are handed
the open :class:`~tinyhw.cuda.device.CudaDevice` and never import this package. It is not a register
transport: it has no BARs or config space, only device memory, host buffers, streams, events and modules.

* :mod:`~tinyhw.cuda.device`: the context, memory, copies, launches, event timing, peak figures.
* :mod:`~tinyhw.cuda.pcilink`: the GPU's PCIe link read (read-only) from sysfs at its PCI address.

Importing this package does not import ``cuda-bindings``; opening a device does.
"""

from tinyhw.cuda.device import INSTALL_HINT, CudaDevice, CudaPeak, HostBuffer, fp32_lanes_per_sm, load_driver
from tinyhw.cuda.pcilink import PciLink, read_pci_link

__all__ = ["INSTALL_HINT", "CudaDevice", "CudaPeak", "HostBuffer", "PciLink", "fp32_lanes_per_sm", "load_driver",
           "read_pci_link"]
