"""AMD bring-up from user space: identify, PSP and SMU boot, mode-1 reset, SMU metrics (specs/amd-bringup.md §1-§7).

Layer 3: handed a transport (never constructing one, never importing mocks, usb or pci). Typical use::

    gpu = preflight_boot(transport)                  # ip discovery; refused (vf, unknown part) before any write
    doc = identify.info(gpu, firmware_dir(None))     # `am info`, read-only
    fw = firmware.load(firmware_dir(None), gpu.discovery.versions())   # exit 2 before any write
    result = sequence.boot(gpu, fw, on_step=print)   # full, partial, or mode-1 reset then full
    Smi(gpu).refresh()                               # metrics of a board a tinyhw boot brought up

Copies host <-> VRAM after a boot: :mod:`tinyhw.boot.amd.usbcopy` (the USB bridge's SRAM + SDMA0) and
:mod:`tinyhw.boot.amd.dmacopy` (a pinned DMA buffer + SDMA0, on transports with DMA buffers: ``vfio:``,
``mock:navi31``).
"""

from tinyhw.boot.amd import firmware, identify, ids, layout, metrics, sequence
from tinyhw.boot.amd.firmware import FirmwareSet, firmware_dir
from tinyhw.boot.amd.gpu import AmGpu
from tinyhw.boot.amd.preflight import preflight_boot, preflight_reset
from tinyhw.boot.amd.psp import Psp, PspError
from tinyhw.boot.amd.smi import Smi
from tinyhw.boot.amd.smu import Smu, SmuError
from tinyhw.boot.amd.state import BoardState, read_state

__all__ = [
    "AmGpu", "BoardState", "FirmwareSet", "Psp", "PspError", "Smi", "Smu", "SmuError", "firmware", "firmware_dir",
    "identify", "ids", "layout", "metrics", "preflight_boot", "preflight_reset", "read_state", "sequence",
]
