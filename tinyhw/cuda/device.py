"""One NVIDIA GPU through the CUDA driver API (``cuda-bindings``): the ``cuda:N`` device object.

specs/compiler-library.md §5: ``cuda-bindings`` is a thin wrapper over libcuda; every call returns a tuple
whose first item is a ``CUresult``; this module is the one choke point that turns a failed ``CUresult`` into a
tinyhw error. Used by two features, which are handed the open device (built by
:func:`tinyhw.connect.open_cuda`):

* ``kernels run --device cuda:N``: PTX text (committed under ``tinyhw/kernels/prebuilt/sm_90``) is handed to
  ``cuModuleLoadData`` (the driver JIT-compiles it), each kernel launched with ``cuLaunchKernel`` with the
  grid and block from the manifest, parameters passed as the address of an array of pointers to the argument
  values (each a 64-bit device pointer).
* ``bench copy --device cuda:N``: host buffers pinned (``cuMemHostAlloc``) or pageable (plain
  numpy memory), copied with ``cuMemcpyHtoDAsync``/``cuMemcpyDtoHAsync`` on a stream of its own, each copy
  bracketed by two events recorded on that stream (``cuEventElapsedTime``); the PCI address from the device
  attributes, for the link limit.

The module is imported lazily; a machine without ``cuda-bindings`` or without a driver gets exit 3 with the
reason. Untested on a real GPU in this repository: the tests drive it with a FAKE ``cuda.bindings.driver``
(tests/helpers/fakecuda.py).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from tinyhw.cuda.pcilink import PciLink, read_pci_link
from tinyhw.errors import DeviceNotFound, EnvironmentProblem, OperationFailed, install_hint

__all__ = ["INSTALL_HINT", "CudaDevice", "CudaPeak", "HostBuffer", "fp32_lanes_per_sm", "load_driver"]

INSTALL_HINT = install_hint("cuda", "cuda-bindings")
# FP32 lanes per SM by compute capability (NVIDIA's CUDA C programming guide, "arithmetic instructions" table)
_LANES = {(7, 0): 64, (7, 5): 64, (8, 0): 64, (8, 6): 128, (8, 7): 128, (8, 9): 128, (9, 0): 128, (10, 0): 128,
          (12, 0): 128}


def fp32_lanes_per_sm(major: int, minor: int) -> int | None:
    """FP32 lanes (CUDA cores) per SM of compute capability ``major.minor``, or None for one tinyhw does not know."""
    return _LANES.get((major, minor))


def load_driver() -> Any:
    """The CUDA driver API module of cuda-bindings (imported on first use); raises EnvironmentProblem (exit 3) when it
    is not installed."""
    try:
        from cuda.bindings import driver
    except ImportError as e:
        raise EnvironmentProblem(f"cuda-bindings is not installed ({e})", hint=INSTALL_HINT) from None
    return driver


@dataclass(frozen=True)
class CudaPeak:
    """Theoretical figures from the driver's device attributes (a clock x width product, not a measurement)."""

    name: str
    cc: tuple[int, int]
    sms: int
    sm_clock_khz: int
    mem_clock_khz: int
    bus_bits: int

    @property
    def gbps(self) -> float | None:
        """DRAM bandwidth: 2 transfers per memory clock x bus width."""
        return 2.0 * self.mem_clock_khz * 1e3 * self.bus_bits / 8 / 1e9 if self.mem_clock_khz and self.bus_bits \
            else None

    @property
    def tflops(self) -> float | None:
        """FP32: SMs x FP32 lanes x 2 FLOPs per FMA x SM clock."""
        lanes = fp32_lanes_per_sm(*self.cc)
        return self.sms * lanes * 2 * self.sm_clock_khz * 1e3 / 1e12 if lanes and self.sm_clock_khz else None


@dataclass
class HostBuffer:
    """Host memory a copy reads or writes: ``addr`` is what the driver is handed, ``array`` a uint8 view."""

    addr: int
    size: int
    pinned: bool
    array: np.ndarray


class CudaDevice:
    """One GPU's primary context; :meth:`close` (or leaving the ``with`` block) releases everything it made."""

    def __init__(self, ordinal: int, sysfs: str = "/sys") -> None:
        self.drv = load_driver()
        self.ordinal = ordinal
        self.sysfs = sysfs
        self._allocs: list[Any] = []
        self._host: list[int] = []
        self._streams: list[Any] = []
        self._modules: list[Any] = []
        self._ctx_dev: Any = None
        try:
            err = self.drv.cuInit(0)[0]
        except Exception as e:
            raise EnvironmentProblem(f"no cuda driver on this machine: {type(e).__name__}: {e}",
                                     hint="cuda:N needs an nvidia gpu with its driver loaded") from None
        if not self._ok(err):
            raise EnvironmentProblem(f"cuInit failed: {self._name(err)}",
                                     hint="cuda:N needs an nvidia gpu with its driver loaded")
        count = self._call("cuDeviceGetCount")
        if ordinal >= count:
            raise DeviceNotFound(f"cuda:{ordinal} does not exist: the driver sees {count} gpu(s)")
        self.dev = self._call("cuDeviceGet", ordinal)
        ctx = self._call("cuDevicePrimaryCtxRetain", self.dev)
        self._ctx_dev = self.dev
        try:
            self._call("cuCtxSetCurrent", ctx)
            self.driver_version = int(self._call("cuDriverGetVersion"))
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> CudaDevice:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def label(self) -> str:
        """The device string of this GPU: ``cuda:N``."""
        return f"cuda:{self.ordinal}"

    @property
    def driver_version_text(self) -> str:
        """``12080`` -> ``"12.8"`` (the driver API's encoding: 1000 x major + 10 x minor)."""
        return f"{self.driver_version // 1000}.{self.driver_version % 1000 // 10}"

    # -- error handling: one choke point ----------------------------------------------------------
    def _ok(self, err: Any) -> bool:
        return int(err) == int(self.drv.CUresult.CUDA_SUCCESS)

    def _name(self, err: Any) -> str:
        try:
            res = self.drv.cuGetErrorName(err)
            name = res[1]
            return name.decode() if isinstance(name, bytes) else str(name)
        except Exception:
            return f"error {int(err)}"

    def _call(self, fn: str, *args: Any) -> Any:
        res = getattr(self.drv, fn)(*args)
        err, rest = res[0], res[1:]
        if not self._ok(err):
            raise OperationFailed(f"{fn} failed: {self._name(err)}")
        return rest[0] if len(rest) == 1 else (rest or None)

    # -- device ---------------------------------------------------------------------------------------
    def _attr(self, name: str) -> int:
        """An attribute, or 0 when this driver/bindings no longer has it (clock rates are deprecated in CUDA 13)."""
        attr = getattr(self.drv.CUdevice_attribute, name, None)
        if attr is None:
            return 0
        try:
            return int(self._call("cuDeviceGetAttribute", attr, self.dev))
        except OperationFailed:
            return 0

    def name(self) -> str:
        """The GPU's product name as the driver reports it (cuDeviceGetName)."""
        raw = self._call("cuDeviceGetName", 256, self.dev)
        return raw.split(b"\0", 1)[0].decode(errors="replace") if isinstance(raw, bytes) else str(raw)

    def pci_address(self) -> str | None:
        """``DDDD:BB:DD.0`` from the PCI domain/bus/device attributes (None when the driver has none)."""
        a = "CU_DEVICE_ATTRIBUTE_PCI_"
        attrs = [getattr(self.drv.CUdevice_attribute, a + n, None) for n in ("DOMAIN_ID", "BUS_ID", "DEVICE_ID")]
        if any(x is None for x in attrs):
            return None
        try:
            dom, bus, dev = (int(self._call("cuDeviceGetAttribute", x, self.dev)) for x in attrs)
        except OperationFailed:
            return None
        return f"{dom:04x}:{bus:02x}:{dev:02x}.0"

    def pci_link(self) -> PciLink | None:
        """The GPU's PCIe link from sysfs (read-only); None when the address or the sysfs entry is missing."""
        address = self.pci_address()
        return read_pci_link(self.sysfs, address) if address else None

    def peak(self) -> CudaPeak:
        """The driver's device attributes behind the theoretical figures: compute capability, SM count, SM and memory
        clocks (kHz; 0 where CUDA 13 dropped them) and memory bus width."""
        name = self.name()
        a = "CU_DEVICE_ATTRIBUTE_"
        return CudaPeak(name, (self._attr(a + "COMPUTE_CAPABILITY_MAJOR"), self._attr(a + "COMPUTE_CAPABILITY_MINOR")),
                        self._attr(a + "MULTIPROCESSOR_COUNT"), self._attr(a + "CLOCK_RATE"),
                        self._attr(a + "MEMORY_CLOCK_RATE"), self._attr(a + "GLOBAL_MEMORY_BUS_WIDTH"))

    # -- memory, modules, launches ------------------------------------------------------------------------
    def alloc(self, nbytes: int) -> Any:
        """``nbytes`` of device memory (cuMemAlloc), freed by :meth:`close`; raises OperationFailed when the driver
        refuses."""
        ptr = self._call("cuMemAlloc", nbytes)
        self._allocs.append(ptr)
        return ptr

    def upload(self, ptr: Any, data: bytes) -> None:
        """Copy ``data`` to device memory at ``ptr`` (synchronous cuMemcpyHtoD)."""
        self._call("cuMemcpyHtoD", ptr, data, len(data))

    def download(self, ptr: Any, nbytes: int) -> bytes:
        """``nbytes`` of device memory from ``ptr`` (synchronous cuMemcpyDtoH)."""
        buf = bytearray(nbytes)
        self._call("cuMemcpyDtoH", buf, ptr, nbytes)
        return bytes(buf)

    def host_buffer(self, nbytes: int, pinned: bool) -> HostBuffer:
        """Host memory for copies: page-locked through the driver (``cuMemHostAlloc``), or ordinary pageable
        memory (a numpy array, its pages touched so the first copy does not pay for page faults)."""
        if pinned:
            addr = int(self._call("cuMemHostAlloc", nbytes, 0))
            self._host.append(addr)
            array = np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(addr))
        else:
            array = np.zeros(nbytes, dtype=np.uint8)
            array.fill(0xA5)
            addr = array.ctypes.data
        return HostBuffer(addr, nbytes, pinned, array)

    def stream(self) -> Any:
        """A new CUDA stream, destroyed by :meth:`close`."""
        s = self._call("cuStreamCreate", 0)
        self._streams.append(s)
        return s

    def copy_async(self, direction: str, dptr: Any, host: HostBuffer, nbytes: int, stream: Any) -> None:
        """Enqueue one copy (``h2d``: host -> device memory, ``d2h``: device memory -> host) on ``stream``."""
        if nbytes > host.size:
            raise OperationFailed(f"copy of {nbytes} bytes does not fit the {host.size}-byte host buffer")
        if direction == "h2d":
            self._call("cuMemcpyHtoDAsync", dptr, host.addr, nbytes, stream)
        else:
            self._call("cuMemcpyDtoHAsync", host.addr, dptr, nbytes, stream)

    def time_on_stream(self, stream: Any, work: Callable[[], None]) -> float:
        """Seconds the GPU spent on what ``work()`` enqueues on ``stream``, between two events on that stream."""
        start, end = self._call("cuEventCreate", 0), self._call("cuEventCreate", 0)
        try:
            self._call("cuEventRecord", start, stream)
            work()
            self._call("cuEventRecord", end, stream)
            self._call("cuEventSynchronize", end)
            return float(self._call("cuEventElapsedTime", start, end)) / 1e3
        finally:
            self._call("cuEventDestroy", start)
            self._call("cuEventDestroy", end)

    def stream_synchronize(self, stream: Any) -> None:
        """Block until everything enqueued on ``stream`` finished; raises OperationFailed on a failed operation."""
        self._call("cuStreamSynchronize", stream)

    def load_ptx(self, ptx: bytes, name: str) -> Any:
        """Load the PTX text ``ptx`` as a module (the driver compiles it for this GPU) and return its kernel ``name``;
        unloaded by :meth:`close`."""
        module = self._call("cuModuleLoadData", ptx if ptx.endswith(b"\0") else ptx + b"\0")
        self._modules.append(module)
        return self._call("cuModuleGetFunction", module, name.encode())

    def launch(self, func: Any, grid: tuple[int, ...], block: tuple[int, ...], ptrs: list[Any]) -> None:
        """Launch ``func`` on a ``grid`` of blocks of ``block`` threads, one 64-bit pointer argument per entry of
        ``ptrs`` (no shared memory, default stream; returns at once)."""
        values = (ctypes.c_uint64 * len(ptrs))(*[int(p) for p in ptrs])
        params = (ctypes.c_void_p * len(ptrs))(*[ctypes.addressof(values) + 8 * i for i in range(len(ptrs))])
        self._call("cuLaunchKernel", func, *grid, *block, 0, 0, ctypes.addressof(params), 0)

    def timed(self, run: Any, repeats: int) -> list[float]:
        """Seconds per call of ``run()``, measured with CUDA events around each call."""
        start, end = self._call("cuEventCreate", 0), self._call("cuEventCreate", 0)
        try:
            out = []
            for _ in range(repeats):
                self._call("cuEventRecord", start, 0)
                run()
                self._call("cuEventRecord", end, 0)
                self._call("cuEventSynchronize", end)
                out.append(float(self._call("cuEventElapsedTime", start, end)) / 1e3)
            return out
        finally:
            self._call("cuEventDestroy", start)
            self._call("cuEventDestroy", end)

    def synchronize(self) -> None:
        """Block until all work in the context finished (cuCtxSynchronize); raises OperationFailed on a failed kernel.
        """
        self._call("cuCtxSynchronize")

    def close(self) -> None:
        """Release everything, even after a failed call (errors while releasing are ignored). Safe twice."""
        if self._ctx_dev is not None and (self._allocs or self._host or self._streams):
            self.drv.cuCtxSynchronize()
        for s in self._streams:
            self.drv.cuStreamDestroy(s)
        for ptr in self._allocs:
            self.drv.cuMemFree(ptr)
        for addr in self._host:
            self.drv.cuMemFreeHost(addr)
        for m in self._modules:
            self.drv.cuModuleUnload(m)
        self._streams.clear()
        self._allocs.clear()
        self._host.clear()
        self._modules.clear()
        if self._ctx_dev is not None:
            self.drv.cuDevicePrimaryCtxRelease(self._ctx_dev)
            self._ctx_dev = None
