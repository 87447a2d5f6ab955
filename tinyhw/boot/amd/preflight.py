"""The checks made before a boot or a mode-1 reset writes anything (``am boot``, ``am reset``), in one call.

A Python user gets the same refusals as the CLI::

    gpu = preflight_boot(transport)          # or preflight_boot(AmGpu(transport)); refused before any write
    fw = firmware.load(firmware_dir(None), gpu.discovery.versions())
    sequence.boot(gpu, fw)

Read-only: the IP discovery table (read when the :class:`~tinyhw.boot.amd.gpu.AmGpu` is made) and the SR-IOV function
identifier register.
"""

from __future__ import annotations

from collections.abc import Callable

from tinyhw.boot.amd.gpu import AmGpu
from tinyhw.errors import OperationFailed, Refused
from tinyhw.transport.base import Transport

__all__ = ["preflight_boot", "preflight_reset"]


def _gpu(target: Transport | AmGpu, warn: Callable[[str], None] | None) -> AmGpu:
    return target if isinstance(target, AmGpu) else AmGpu(target, warn=warn)


def preflight_boot(target: Transport | AmGpu, *, warn: Callable[[str], None] | None = None) -> AmGpu:
    """The :class:`AmGpu` of a GPU tinyhw can boot, else the error that says why, before anything is written: an
    unreadable IP discovery table (exit 1: the firmware it needs is unknown), an SR-IOV virtual function (exit 2:
    its PSP and SMU belong to the host), a part whose PSP/SMU protocol tinyhw does not carry (exit 3).
    ``target``: a transport (``warn`` receives AmGpu's one-line notes) or an AmGpu already made."""
    gpu = _gpu(target, warn)
    if gpu.discovery is None:
        raise OperationFailed("the ip discovery table is unreadable, so the firmware the gpu needs is unknown",
                              hint="check that the gpu is powered (tinyhw am info) and try again")
    if gpu.is_vf():
        raise Refused("this function is an sr-iov virtual function; its psp and smu belong to the host",
                      hint="boot the physical function instead")
    gpu.check_supported()
    return gpu


def preflight_reset(target: Transport | AmGpu, *, warn: Callable[[str], None] | None = None) -> AmGpu:
    """:func:`preflight_boot` for a mode-1 reset: a virtual function is refused first (only the host resets)."""
    gpu = _gpu(target, warn)
    if gpu.is_vf():
        raise Refused("this function is an sr-iov virtual function; only the host can reset the gpu")
    return preflight_boot(gpu)
