"""Optional abilities of a transport, each its own small interface (ARCHITECTURE.md, "The transport seam").

A feature that needs one asks with :func:`tinyhw.transport.base.require`, which returns the
transport or raises a clear "the X transport cannot ..." error, so no feature tests a transport's
class or reaches into its internals. :class:`Batching` (queued accesses sent together, the
``remote:`` transport) lives with its operations in :mod:`tinyhw.transport.batch`.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from tinyhw.transport.batch import Batching

__all__ = ["Batching", "DmaBuffers", "Interrupts", "Resettable"]


@runtime_checkable
class Resettable(Protocol):
    """A function-level reset the transport can issue (sysfs ``reset``, VFIO_DEVICE_RESET)."""

    def reset(self) -> None: ...


@runtime_checkable
class DmaBuffers(Protocol):
    """Pinned host buffers mapped for device DMA at an IOVA (VFIO type1)."""

    def dma_alloc(self, size: int, iova: int | None = None) -> Any: ...

    def dma_free(self, buf: Any) -> None: ...


@runtime_checkable
class Interrupts(Protocol):
    """Device interrupts delivered to the host (VFIO eventfds)."""

    def enable_irqs(self, kind: str = "msi", count: int = 1) -> list[int]: ...

    def wait_irq(self, fd: int, timeout_s: float) -> int: ...


@runtime_checkable
class DeviceAttributes(Protocol):
    """What the OS already knows about the function, read without touching the device (sysfs attribute files
    such as ``vendor``, ``power_state`` or ``power/runtime_status``; ``driver`` and ``iommu_group`` give the
    link's name), and the informational files of the driver that owns it (``/proc/driver/nvidia/...``)."""

    def attribute(self, name: str) -> str | None: ...

    def driver_files(self) -> dict[str, str]: ...


@runtime_checkable
class ReadOnlyPeek(Protocol):
    """Single 32-bit reads of a memory BAR through a read-only mapping of only the page holding the register:
    no write, no lock, no memory-decode change, allowed while a kernel driver owns the device."""

    def peek32(self, bar: int, offset: int) -> int: ...
