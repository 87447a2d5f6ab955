"""Running a prebuilt PTX probe on an NVIDIA GPU through the CUDA driver API (``cuda-bindings``).

specs/compiler-library.md §5: ``cuda-bindings`` is a thin wrapper over libcuda; every call returns a tuple
whose first item is a ``CUresult``. tinyhw never uses tinygrad's own device drivers for this: the PTX text
that the seam produced at build time (committed under ``prebuilt/sm_90``) is handed to ``cuModuleLoadData``
(the driver JIT-compiles it for the GPU present), and each kernel is launched with ``cuLaunchKernel`` with
tinygrad's ``global_size`` as the grid and ``local_size`` as the block. Parameters are passed the classic
way, as the address of an array of pointers to the argument values (each a 64-bit device pointer).

The module is imported lazily; a machine without ``cuda-bindings`` or without a driver gets exit 3 with the
reason. Untested on a real GPU in this repository: the tests drive it with a fake ``cuda.bindings.driver``.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

from tinyhw.errors import DeviceNotFound, EnvironmentProblem, OperationFailed

__all__ = ["CudaDevice", "CudaPeak", "fp32_lanes_per_sm", "load_driver"]

INSTALL_HINT = "install the cuda extra: pip install 'tinyhw[cuda]' (cuda-bindings)"
# FP32 lanes per SM by compute capability (NVIDIA's CUDA C programming guide, "arithmetic instructions" table)
_LANES = {(7, 0): 64, (7, 5): 64, (8, 0): 64, (8, 6): 128, (8, 7): 128, (8, 9): 128, (9, 0): 128, (10, 0): 128,
          (12, 0): 128}


def fp32_lanes_per_sm(major: int, minor: int) -> int | None:
    return _LANES.get((major, minor))


def load_driver() -> Any:
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


class CudaDevice:
    """One GPU's primary context; :meth:`close` releases everything it allocated."""

    def __init__(self, ordinal: int) -> None:
        self.drv = load_driver()
        self.ordinal = ordinal
        self._allocs: list[Any] = []
        self._modules: list[Any] = []
        self._ctx_dev: Any = None
        try:
            err = self.drv.cuInit(0)[0]
        except Exception as e:  # noqa: BLE001 - no libcuda raises (DynamicLibNotFoundError, RuntimeError, OSError)
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
        self._call("cuCtxSetCurrent", ctx)
        self.driver_version = self._call("cuDriverGetVersion")

    # -- error handling: one choke point ----------------------------------------------------------
    def _ok(self, err: Any) -> bool:
        return int(err) == int(self.drv.CUresult.CUDA_SUCCESS)

    def _name(self, err: Any) -> str:
        try:
            res = self.drv.cuGetErrorName(err)
            name = res[1]
            return name.decode() if isinstance(name, bytes) else str(name)
        except Exception:  # noqa: BLE001 - best effort naming of an error code
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

    def peak(self) -> CudaPeak:
        raw = self._call("cuDeviceGetName", 256, self.dev)
        name = raw.split(b"\0", 1)[0].decode(errors="replace") if isinstance(raw, bytes) else str(raw)
        a = "CU_DEVICE_ATTRIBUTE_"
        return CudaPeak(name, (self._attr(a + "COMPUTE_CAPABILITY_MAJOR"), self._attr(a + "COMPUTE_CAPABILITY_MINOR")),
                        self._attr(a + "MULTIPROCESSOR_COUNT"), self._attr(a + "CLOCK_RATE"),
                        self._attr(a + "MEMORY_CLOCK_RATE"), self._attr(a + "GLOBAL_MEMORY_BUS_WIDTH"))

    # -- memory, modules, launches ------------------------------------------------------------------------
    def alloc(self, nbytes: int) -> Any:
        ptr = self._call("cuMemAlloc", nbytes)
        self._allocs.append(ptr)
        return ptr

    def upload(self, ptr: Any, data: bytes) -> None:
        self._call("cuMemcpyHtoD", ptr, data, len(data))

    def download(self, ptr: Any, nbytes: int) -> bytes:
        buf = bytearray(nbytes)
        self._call("cuMemcpyDtoH", buf, ptr, nbytes)
        return bytes(buf)

    def load_ptx(self, ptx: bytes, name: str) -> Any:
        module = self._call("cuModuleLoadData", ptx if ptx.endswith(b"\0") else ptx + b"\0")
        self._modules.append(module)
        return self._call("cuModuleGetFunction", module, name.encode())

    def launch(self, func: Any, grid: tuple[int, ...], block: tuple[int, ...], ptrs: list[Any]) -> None:
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
        self._call("cuCtxSynchronize")

    def close(self) -> None:
        for ptr in self._allocs:
            self.drv.cuMemFree(ptr)
        for m in self._modules:
            self.drv.cuModuleUnload(m)
        self._allocs.clear()
        self._modules.clear()
        if self._ctx_dev is not None:
            self.drv.cuDevicePrimaryCtxRelease(self._ctx_dev)
            self._ctx_dev = None
