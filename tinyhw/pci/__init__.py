"""Native PCIe transports (layer 2): the functions of this machine through Linux.

* :mod:`tinyhw.pci.scan` - read-only sysfs enumeration and lspci's one-line description;
* :mod:`tinyhw.pci.sysfs` - the ``pci:`` transport (config file, ``resourceN`` mmap, resize, reset);
* :mod:`tinyhw.pci.mmio` - mapped BARs with single aligned 32-bit accesses (§6.3);
* :mod:`tinyhw.pci.bind` - binding to vfio-pci through ``driver_override`` and back;
* :mod:`tinyhw.pci.vfio` / :mod:`tinyhw.pci.vfio_abi` - the ``vfio:`` transport (type1 IOMMU, regions,
  reset, eventfd interrupts, DMA buffers from :mod:`tinyhw.pci.dma`);
* :mod:`tinyhw.pci.describe` - what ``tinyhw pci show`` / ``pci config`` print.

Spec: specs/pci-vfio-remote.md §2 (sysfs), §3-§4 (config space, lspci formats), §6-§10.
"""
