"""VFIO's user-space ABI: ioctl numbers, flags and struct layouts (specs/pci-vfio-remote.md §8.4-§8.7, §8.11).

Every VFIO ioctl is ``_IO(';', 100 + n)`` with no size or direction bits, so the request is
``0x3B00 | nr``; the structures carry their own ``argsz``. Structures are packed here with
:mod:`struct` little-endian formats whose sizes are checked against the spec's table at import.
Pointer arguments are passed as mutable ``bytearray`` so ``fcntl.ioctl`` returns the integer
result (a new device fd for GET_DEVICE_FD) and the kernel can fill the buffer (§8.11).
"""

from __future__ import annotations

import struct


def _io(nr: int) -> int:
    return (ord(";") << 8) | nr


VFIO_GET_API_VERSION = _io(100)
VFIO_CHECK_EXTENSION = _io(101)
VFIO_SET_IOMMU = _io(102)
VFIO_GROUP_GET_STATUS = _io(103)
VFIO_GROUP_SET_CONTAINER = _io(104)
VFIO_GROUP_UNSET_CONTAINER = _io(105)
VFIO_GROUP_GET_DEVICE_FD = _io(106)
VFIO_DEVICE_GET_INFO = _io(107)
VFIO_DEVICE_GET_REGION_INFO = _io(108)
VFIO_DEVICE_GET_IRQ_INFO = _io(109)
VFIO_DEVICE_SET_IRQS = _io(110)
VFIO_DEVICE_RESET = _io(111)
VFIO_IOMMU_GET_INFO = _io(112)
VFIO_IOMMU_MAP_DMA = _io(113)
VFIO_IOMMU_UNMAP_DMA = _io(114)

VFIO_API_VERSION = 0
VFIO_TYPE1_IOMMU = 1
VFIO_TYPE1v2_IOMMU = 3
VFIO_NOIOMMU_IOMMU = 8

GROUP_FLAGS_VIABLE = 1 << 0
GROUP_FLAGS_CONTAINER_SET = 1 << 1
DEVICE_FLAGS_RESET = 1 << 0
DEVICE_FLAGS_PCI = 1 << 1
REGION_INFO_FLAG_READ = 1 << 0
REGION_INFO_FLAG_WRITE = 1 << 1
REGION_INFO_FLAG_MMAP = 1 << 2
IRQ_INFO_EVENTFD = 1 << 0
IRQ_SET_DATA_NONE = 1 << 0
IRQ_SET_DATA_BOOL = 1 << 1
IRQ_SET_DATA_EVENTFD = 1 << 2
IRQ_SET_ACTION_MASK = 1 << 3
IRQ_SET_ACTION_UNMASK = 1 << 4
IRQ_SET_ACTION_TRIGGER = 1 << 5
DMA_MAP_FLAG_READ = 1 << 0
DMA_MAP_FLAG_WRITE = 1 << 1

PCI_BAR0_REGION_INDEX = 0
PCI_ROM_REGION_INDEX = 6
PCI_CONFIG_REGION_INDEX = 7
PCI_NUM_REGIONS = 9
PCI_INTX_IRQ_INDEX, PCI_MSI_IRQ_INDEX, PCI_MSIX_IRQ_INDEX = 0, 1, 2
IRQ_INDEX_NAMES = {"intx": PCI_INTX_IRQ_INDEX, "msi": PCI_MSI_IRQ_INDEX, "msix": PCI_MSIX_IRQ_INDEX}

GROUP_STATUS = struct.Struct("<II")  # argsz, flags
DEVICE_INFO = struct.Struct("<IIIIII")  # argsz, flags, num_regions, num_irqs, cap_offset, pad
REGION_INFO = struct.Struct("<IIIIQQ")  # argsz, flags, index, cap_offset, size, offset
IRQ_INFO = struct.Struct("<IIII")  # argsz, flags, index, count
IRQ_SET = struct.Struct("<IIIII")  # argsz, flags, index, start, count (+ data)
IOMMU_TYPE1_INFO = struct.Struct("<IIQII")  # argsz, flags, iova_pgsizes, cap_offset, pad
DMA_MAP = struct.Struct("<IIQQQ")  # argsz, flags, vaddr, iova, size
DMA_UNMAP = struct.Struct("<IIQQ")  # argsz, flags, iova, size

_SIZES = {GROUP_STATUS: 8, DEVICE_INFO: 24, REGION_INFO: 32, IRQ_INFO: 16, IRQ_SET: 20, IOMMU_TYPE1_INFO: 24,
          DMA_MAP: 32, DMA_UNMAP: 24}
assert all(s.size == n for s, n in _SIZES.items()), "vfio struct layout differs from the spec (§8.5)"


def buffer(layout: struct.Struct, *fields: int) -> bytearray:
    """A mutable, filled ioctl argument whose first field (argsz) is the struct size."""
    return bytearray(layout.pack(layout.size, *fields))


def irq_set(index: int, flags: int, start: int, fds: list[int]) -> bytearray:
    """``vfio_irq_set`` with ``len(fds)`` eventfds as s32 payload (or none for DATA_NONE)."""
    payload = struct.pack(f"<{len(fds)}i", *fds) if flags & IRQ_SET_DATA_EVENTFD else b""
    head = IRQ_SET.pack(IRQ_SET.size + len(payload), flags, index, start, len(fds))
    return bytearray(head + payload)
