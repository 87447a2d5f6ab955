"""Emulated boards and bridges, written from the specs (never from the driver code they test).

``mocks`` is a transport layer: it may import layers 0-1 (``autogen``, ``errors``,
``transport``, ``regs``, ``formats``, ``boards``) and pyusb, never ``usb``, ``pci``
or any feature package.

Packages by product: ``common`` (clock, services, PCI function, IOMMU, physical RAM, faults), ``bridge`` (the ASM24
USB-to-PCIe bridge), ``amd`` (the Navi31 board and its blocks), ``rdna3`` (the shader core), ``nvidia`` (the AD102
board). This package imports none of them; the board registry names each emulator as ``module:Class``.

What the emulated Navi31 does at its interface, for driver writers (options, the PSP/SMU boot
path, mode-1 reset, the board state file and its counters): ``tinyhw/mocks/README.md``.
"""
