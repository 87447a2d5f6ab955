"""NVIDIA bring-up from user space: FWSEC-FRTS, the booter and GSP-RM up to the first RPCs (Ampere/Ada).

Spec: specs/nv-bringup.md §4-§13. From Python::

    with tinyhw.open("mock:ad102") as t:
        gpu = nv.preflight_boot(t)                  # refused (exit 2) before any BAR write
        fw = nv.load_firmware(nv.firmware_dir(None), gpu.chip)
        result = nv.boot(gpu, fw)                   # the GSP's static info in result.gsp
"""

from tinyhw.boot.nv.bootseq import STEPS, BootResult, boot, reset
from tinyhw.boot.nv.fwfiles import NvFirmware, firmware_dir, load_firmware
from tinyhw.boot.nv.fwfiles import locate as locate_firmware
from tinyhw.boot.nv.gpu import NvGpu, preflight_boot, preflight_reset

__all__ = ["STEPS", "BootResult", "NvFirmware", "NvGpu", "boot", "firmware_dir", "load_firmware", "locate_firmware",
           "preflight_boot", "preflight_reset", "reset"]
