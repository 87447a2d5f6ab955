"""Test helper: the emulated Navi31 behind the emulated ASM24 bridge with the copy engine brought up."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tinyhw.boards.navi31 import NAVI31, Navi31UsbOptions
from tinyhw.boot.amd import copyengine
from tinyhw.boot.amd.gpu import AmGpu
from tinyhw.boot.amd.usbcopy import UsbCopier
from tinyhw.mocks.amd.board import Navi31Board
from tinyhw.mocks.bridge.pyusb_backend import make_backend
from tinyhw.mocks.common.vclock import VirtualClock
from tinyhw.usb.transport import UsbTransport


@dataclass
class Rig:
    t: UsbTransport
    board: Navi31Board
    gpu: AmGpu
    engine: copyengine.CopyEngine
    copier: UsbCopier
    bridge: object


@contextmanager
def rig(tmp: Path, *, boot=None, **options: str) -> Iterator[Rig]:
    """``boot``: a callable run on the AmGpu before the copy engine comes up (e.g. a full firmware boot)."""
    tmp.mkdir(parents=True, exist_ok=True)  # flash= refuses a file in a missing directory
    opts = Navi31UsbOptions.from_options({"flash": str(tmp / "flash.bin"), "strict": True, **options})
    clock = VirtualClock(mode=opts.clock)  # clock=hybrid: host cpu time on the clock too
    board = Navi31Board(opts, clock, attach="usb", spec=NAVI31)
    backend = make_backend(board, opts, clock)
    t = UsbTransport("", backend=backend, clock=clock, lock=False, emulated=True, connect=False)  # the board locks
    try:
        t.connect()
        gpu = AmGpu(t)
        if boot is not None:
            boot(gpu)
        engine = copyengine.bring_up(gpu)
        yield Rig(t, board, gpu, engine, UsbCopier(engine, timeout=0.5), backend.bridge)
    finally:
        try:
            t.close()
        finally:
            board.close()
