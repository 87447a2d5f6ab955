"""A FAKE ``cuda.bindings.driver`` for the ``kernels run`` and ``bench copy`` ``--device cuda:N`` tests.
No GPU and no CUDA driver are involved: every figure it produces is the model below, not a measurement.

Written from NVIDIA's CUDA driver API reference and the cuda-bindings convention (every call returns a tuple
whose first item is a ``CUresult``), not from tinyhw's code. It keeps device memory as bytearrays, accepts PTX
only NUL-terminated and for ``.target sm_90``, reads ``cuLaunchKernel``'s parameters through the ``void**``
address it is given, and "executes" a kernel with the formula the test registers for that entry name, over
exactly grid x block x per-thread elements (so a wrong launch shape leaves output unwritten). Events return
the time the test's model says the launches took, so the reported figure can be checked exactly.

For the copy bench: page-locked host memory (``cuMemHostAlloc``, real ctypes buffers whose addresses are
handed out), streams, and ``cuMemcpyHtoDAsync``/``cuMemcpyDtoHAsync`` that take a host *address* (an int, as
cuda-bindings accepts), really move the bytes through it, and advance the clock by a fixed latency plus
bytes / rate, the rate depending on whether the host address lies in pinned memory (:data:`COPY_RATES`).
``corrupt`` flips one byte of one chosen copy, so the bench's verification can be checked. The PCI address
comes from the domain/bus/device attributes (0000:19:00.0).
"""

from __future__ import annotations

import ctypes
import enum
import re
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass, field


class CUresult(enum.IntEnum):
    CUDA_SUCCESS = 0
    CUDA_ERROR_INVALID_VALUE = 1
    CUDA_ERROR_NO_DEVICE = 100
    CUDA_ERROR_INVALID_DEVICE = 101
    CUDA_ERROR_INVALID_IMAGE = 200
    CUDA_ERROR_INVALID_PTX = 218
    CUDA_ERROR_NOT_FOUND = 500
    CUDA_ERROR_LAUNCH_FAILED = 719


class CUdevice_attribute(enum.IntEnum):
    CU_DEVICE_ATTRIBUTE_CLOCK_RATE = 13
    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16
    CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE = 36
    CU_DEVICE_ATTRIBUTE_PCI_BUS_ID = 33
    CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID = 34
    CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH = 37
    CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID = 50
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76


H200_ATTRS = {13: 1_980_000, 16: 132, 36: 2_619_000, 37: 6144, 75: 9, 76: 0,  # kHz, count, kHz, bits, cc
              33: 0x19, 34: 0, 50: 0}  # pci 0000:19:00.0
PCI_ADDRESS = "0000:19:00.0"
# The fake's copy model (bytes/s by host memory kind and direction; seconds per copy on top): invented
# round figures of the right size for a PCIe gen5 x16 GPU, not measurements of anything.
COPY_RATES = {("pinned", "h2d"): 50e9, ("pinned", "d2h"): 40e9, ("pageable", "h2d"): 20e9,
              ("pageable", "d2h"): 10e9}
COPY_LATENCY_S = 8e-6


class CUdeviceptr:
    def __init__(self, addr: int) -> None:
        self.addr = addr

    def __int__(self) -> int:
        return self.addr


@dataclass
class Kernel:
    """What the test says an entry computes: fn(memory, pointers, elements) and the modelled seconds."""

    per_thread: int
    fn: Callable[[FakeGpu, list[int], int], None]
    seconds: Callable[[int], float]


@dataclass
class FakeGpu:
    kernels: dict[str, Kernel]
    devices: int = 1
    init_error: Exception | None = None
    init_result: CUresult = CUresult.CUDA_SUCCESS
    mem: dict[int, bytearray] = field(default_factory=dict)
    next_addr: int = 0x7F00_0000_0000
    clock: float = 0.0
    launches: list[tuple] = field(default_factory=list)
    modules: int = 0
    contexts: int = 0
    events: int = 0
    ptx_seen: list[str] = field(default_factory=list)
    pinned: dict[int, ctypes.Array] = field(default_factory=dict)
    streams: int = 0
    copies: list[tuple[str, int, str]] = field(default_factory=list)  # (direction, bytes, host memory kind)
    corrupt: tuple[str, int, int] | None = None  # (direction, copy number counted from 1 in it, byte offset)

    # memory helpers for the kernel formulas
    def buf(self, addr: int) -> bytearray:
        return self.mem[addr]

    # -- the driver API ---------------------------------------------------------------------------
    def cuInit(self, flags: int):
        if self.init_error is not None:
            raise self.init_error
        return (self.init_result,)

    def cuDriverGetVersion(self):
        return (CUresult.CUDA_SUCCESS, 12080)

    def cuDeviceGetCount(self):
        return (CUresult.CUDA_SUCCESS, self.devices)

    def cuDeviceGet(self, ordinal: int):
        if not 0 <= ordinal < self.devices:
            return (CUresult.CUDA_ERROR_INVALID_DEVICE, None)
        return (CUresult.CUDA_SUCCESS, ordinal)

    def cuDeviceGetName(self, length: int, dev: int):
        return (CUresult.CUDA_SUCCESS, b"NVIDIA H200 (fake driver)".ljust(length, b"\0"))

    def cuDeviceGetAttribute(self, attr, dev: int):
        return (CUresult.CUDA_SUCCESS, H200_ATTRS[int(attr)])

    def cuDevicePrimaryCtxRetain(self, dev: int):
        self.contexts += 1
        return (CUresult.CUDA_SUCCESS, object())

    def cuDevicePrimaryCtxRelease(self, dev: int):
        self.contexts -= 1
        return (CUresult.CUDA_SUCCESS,)

    def cuCtxSetCurrent(self, ctx):
        return (CUresult.CUDA_SUCCESS,)

    def cuCtxSynchronize(self):
        return (CUresult.CUDA_SUCCESS,)

    def cuMemAlloc(self, nbytes: int):
        addr = self.next_addr
        self.next_addr += (nbytes + 0xFFFF) & ~0xFFFF
        self.mem[addr] = bytearray(nbytes)
        return (CUresult.CUDA_SUCCESS, CUdeviceptr(addr))

    def cuMemFree(self, ptr):
        return (CUresult.CUDA_SUCCESS,) if self.mem.pop(int(ptr), None) is not None else \
            (CUresult.CUDA_ERROR_INVALID_VALUE,)

    def cuMemcpyHtoD(self, dst, src, nbytes: int):
        buf = self.mem.get(int(dst))
        if buf is None or nbytes > len(buf) or len(src) < nbytes:
            return (CUresult.CUDA_ERROR_INVALID_VALUE,)
        buf[:nbytes] = bytes(src[:nbytes])
        return (CUresult.CUDA_SUCCESS,)

    def cuMemcpyDtoH(self, dst, src, nbytes: int):
        buf = self.mem.get(int(src))
        if buf is None or nbytes > len(buf) or len(dst) < nbytes:
            return (CUresult.CUDA_ERROR_INVALID_VALUE,)
        dst[:nbytes] = buf[:nbytes]
        return (CUresult.CUDA_SUCCESS,)

    # -- host memory, streams and async copies (the copy bench) ----------------------------------
    def cuMemHostAlloc(self, nbytes: int, flags: int):
        buf = (ctypes.c_uint8 * nbytes)()
        addr = ctypes.addressof(buf)
        self.pinned[addr] = buf
        return (CUresult.CUDA_SUCCESS, addr)

    def cuMemFreeHost(self, addr):
        return (CUresult.CUDA_SUCCESS,) if self.pinned.pop(addr, None) is not None else \
            (CUresult.CUDA_ERROR_INVALID_VALUE,)

    def cuStreamCreate(self, flags: int):
        self.streams += 1
        return (CUresult.CUDA_SUCCESS, {"stream": self.streams})

    def cuStreamDestroy(self, stream):
        self.streams -= 1
        return (CUresult.CUDA_SUCCESS,)

    def cuStreamSynchronize(self, stream):
        return (CUresult.CUDA_SUCCESS,)

    def _kind(self, addr: int, nbytes: int) -> str:
        for base, buf in self.pinned.items():
            if base <= addr and addr + nbytes <= base + len(buf):
                return "pinned"
        return "pageable"

    def _async(self, direction: str, dptr, host, nbytes: int, stream):
        buf = self.mem.get(int(dptr))
        if buf is None or nbytes > len(buf) or not isinstance(host, int) or not isinstance(stream, dict):
            return (CUresult.CUDA_ERROR_INVALID_VALUE,)
        kind = self._kind(host, nbytes)
        if direction == "h2d":
            buf[:nbytes] = ctypes.string_at(host, nbytes)
        else:
            ctypes.memmove(host, bytes(buf[:nbytes]), nbytes)
        self.copies.append((direction, nbytes, kind))
        number = sum(1 for c in self.copies if c[0] == direction)
        if self.corrupt and self.corrupt[:2] == (direction, number):
            off = self.corrupt[2]
            if direction == "h2d":
                buf[off] ^= 0x40
            else:
                ctypes.c_uint8.from_address(host + off).value ^= 0x40
        self.clock += COPY_LATENCY_S + nbytes / COPY_RATES[(kind, direction)]
        return (CUresult.CUDA_SUCCESS,)

    def cuMemcpyHtoDAsync(self, dst, src, nbytes: int, stream):
        return self._async("h2d", dst, src, nbytes, stream)

    def cuMemcpyDtoHAsync(self, dst, src, nbytes: int, stream):
        return self._async("d2h", src, dst, nbytes, stream)

    def cuModuleLoadData(self, image):
        raw = bytes(image)
        if not raw.endswith(b"\0") or b".target sm_90" not in raw:
            return (CUresult.CUDA_ERROR_INVALID_PTX, None)
        text = raw[:-1].decode()
        self.ptx_seen.append(text)
        self.modules += 1
        entries = {m.group(1): m.group(2).count(".param") for m in re.finditer(r"\.entry (\w+)\s*\(([^)]*)\)", text)}
        return (CUresult.CUDA_SUCCESS, {"entries": entries})

    def cuModuleUnload(self, module):
        self.modules -= 1
        return (CUresult.CUDA_SUCCESS,)

    def cuModuleGetFunction(self, module, name: bytes):
        entry = name.decode()
        if entry not in module["entries"]:
            return (CUresult.CUDA_ERROR_NOT_FOUND, None)
        return (CUresult.CUDA_SUCCESS, (entry, module["entries"][entry]))

    def cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra):
        entry, nparams = f
        if bx * by * bz > 1024 or not isinstance(params, int) or extra not in (0, None):
            return (CUresult.CUDA_ERROR_INVALID_VALUE,)
        slots = (ctypes.c_void_p * nparams).from_address(params)
        pointers = [ctypes.c_uint64.from_address(slots[i]).value for i in range(nparams)]
        if any(p not in self.mem for p in pointers):
            return (CUresult.CUDA_ERROR_LAUNCH_FAILED,)
        k = self.kernels[entry]
        elements = gx * gy * gz * bx * by * bz * k.per_thread
        k.fn(self, pointers, elements)
        self.clock += k.seconds(elements)
        self.launches.append((entry, (gx, gy, gz), (bx, by, bz)))
        return (CUresult.CUDA_SUCCESS,)

    def cuEventCreate(self, flags: int):
        self.events += 1
        return (CUresult.CUDA_SUCCESS, {"t": None})

    def cuEventDestroy(self, ev):
        self.events -= 1
        return (CUresult.CUDA_SUCCESS,)

    def cuEventRecord(self, ev, stream):
        if not (stream == 0 or isinstance(stream, dict)):
            return (CUresult.CUDA_ERROR_INVALID_VALUE,)
        ev["t"] = self.clock
        return (CUresult.CUDA_SUCCESS,)

    def cuEventSynchronize(self, ev):
        return (CUresult.CUDA_SUCCESS,)

    def cuEventElapsedTime(self, start, end):
        return (CUresult.CUDA_SUCCESS, (end["t"] - start["t"]) * 1e3)

    def cuGetErrorName(self, err):
        return (CUresult.CUDA_SUCCESS, CUresult(int(err)).name.encode())


def install(monkeypatch, gpu: FakeGpu) -> None:
    """Make ``from cuda.bindings import driver`` return a module whose calls go to ``gpu``."""
    driver = types.ModuleType("cuda.bindings.driver")
    driver.__doc__ = "FAKE cuda driver for tests (tests/helpers/fakecuda.py); no GPU"
    driver.CUresult = CUresult
    driver.CUdevice_attribute = CUdevice_attribute
    for name in dir(gpu):
        if name.startswith("cu"):
            setattr(driver, name, getattr(gpu, name))
    bindings = types.ModuleType("cuda.bindings")
    bindings.driver = driver
    cuda = types.ModuleType("cuda")
    cuda.bindings = bindings
    for name, mod in (("cuda", cuda), ("cuda.bindings", bindings), ("cuda.bindings.driver", driver)):
        monkeypatch.setitem(sys.modules, name, mod)
    assert "cuda.bindings.driver" in sys.modules
