"""Runs INSIDE the USB-gadget guest, as its own process: tinygrad 0.14.0's AMD driver, unmodified and with NO adapter,
on the emulated Navi31 that ``tinyhw mock gadget --strict`` serves: tinygrad -> its own libusb ``USB3`` -> usbfs ->
dummy_hcd -> FunctionFS -> the gadget -> the emulated ASM24 bridge -> the emulated Navi31.

Usage: ``python usbguest_tinygrad.py OUT.json [SECONDS]`` (``DEV=USB+AMD`` and a private ``XDG_CACHE_HOME`` are
set by the caller). The only thing tinyhw does here is what tests/peer/test_peer_tinygrad_amd.py does too: give tinygrad
Debian's firmware without network (:func:`tinyhw.peers.tinygrad_amd.provide_firmware`: the files into tinygrad's
download cache, the pins to their SHA-256). Nothing of tinygrad is replaced: its ``USB3`` is the libusb class it
ships.

Milestones are read off the driver without touching it: until the device is up, a profile hook on the main thread
(``sys.setprofile``: every call is seen, however short, unlike a stack sampler) keeps the first time each tinygrad
step (``USB3.__init__``, ``CustomASM24Controller.__init__``, ``pci_setup_usb_bars``, the AM driver's IP discovery,
each IP block's ``init_sw`` / ``init_hw``, PSP bootloader, ...) was called; a sampler thread notes where the driver is
every few seconds (a coarse profile). When ``SECONDS`` pass first, the JSON names the step it was in and its stack
(the run is then cut, and the host test says so). The JSON is written in every case: ``steps`` (name -> seconds
since start), ``boot`` (ok, partial, usb, the error and its trace), ``ops`` (Tensor add vs numpy: the first
differing element), ``timeout`` (null, or the stack where it stood).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

T0 = time.monotonic()
OUT: dict[str, Any] = {"steps": {}, "boot": None, "ops": {}, "timeout": None, "libusb": None, "profile": []}
#: how often the sampler notes the innermost tinygrad function the driver is in
PROFILE_EVERY_S = 5.0
#: tinygrad functions whose first appearance on the main thread's stack is a milestone (file stem, function)
MILESTONE_FILES = ("usb", "system", "ops_amd", "amdev", "ip", "am", "psp", "smu", "gmc", "ih", "sdma", "gfx")


def _now() -> float:
    return round(time.monotonic() - T0, 3)


def _write(path: Path) -> None:
    OUT["total_s"] = _now()
    path.write_text(json.dumps(OUT, default=str))


class Milestones:
    """A profile hook (``sys.setprofile``) that keeps the first call of each tinygrad function of interest: a function
    of the files :data:`MILESTONE_FILES` named by the class of its ``self`` (``AM_GMC.init_hw``). Each code object is
    judged once; only the calls of the ones of interest cost more than a dictionary look-up."""

    def __init__(self) -> None:
        self.wanted: dict[Any, bool] = {}

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        if event != "call":
            return
        code = frame.f_code
        want = self.wanted.get(code)
        if want is None:
            want = self.wanted[code] = ("tinygrad" in code.co_filename
                                        and Path(code.co_filename).stem in MILESTONE_FILES)
        if want:
            owner = frame.f_locals.get("self")
            name = f"{type(owner).__name__}.{code.co_name}" if owner is not None else code.co_name
            OUT["steps"].setdefault(name, _now())


class Sampler(threading.Thread):
    """Notes where the main thread is in tinygrad every :data:`PROFILE_EVERY_S` (a coarse profile, for a failure's
    report; cheap: it looks, it does not trace)."""

    def __init__(self, main_id: int, period: float = 0.5) -> None:
        super().__init__(name="milestones", daemon=True)
        self.main_id, self.period, self.stop = main_id, period, threading.Event()

    def run(self) -> None:
        next_profile = 0.0
        while not self.stop.wait(self.period):
            frame = sys._current_frames().get(self.main_id)
            if frame is not None and _now() >= next_profile:  # where it is, every few seconds (a coarse profile)
                next_profile = _now() + PROFILE_EVERY_S
                inner = frame
                while inner is not None and "tinygrad" not in inner.f_code.co_filename:
                    inner = inner.f_back
                where = inner or frame
                OUT["profile"].append([_now(), f"{Path(where.f_code.co_filename).name}:{where.f_code.co_name}"])


def watchdog(main_id: int, seconds: float, path: Path) -> None:
    """After ``seconds``: record where the driver stands (its stack), write the JSON, end the process."""
    time.sleep(seconds)
    frame = sys._current_frames().get(main_id)
    stack = traceback.format_stack(frame) if frame is not None else []
    OUT["timeout"] = {"after_s": seconds, "stack": "".join(stack[-14:])}
    _write(path)
    os._exit(4)


def main(argv: list[str]) -> int:
    path = Path(argv[0])
    limit = float(argv[1]) if len(argv) > 1 else 1500.0
    main_id = threading.get_ident()
    sampler = Sampler(main_id)
    sampler.start()
    threading.Thread(target=watchdog, args=(main_id, limit, path), name="watchdog", daemon=True).start()
    rc = 0
    try:
        import numpy as np

        from tinyhw.boards.navi31 import FIRMWARE
        from tinyhw.peers.tinygrad_amd import default_firmware_dir, provide_firmware

        OUT["firmware"] = sorted(provide_firmware(default_firmware_dir(), FIRMWARE.files))
        OUT["steps"]["firmware provided"] = _now()
        from tinygrad import Device, Tensor
        from tinygrad.runtime.support import usb as tg_usb

        OUT["libusb"] = {"class": f"{tg_usb.USB3.__module__}.{tg_usb.USB3.__qualname__}",
                         "dll": str(getattr(tg_usb.libusb.dll, "_name", ""))}
        OUT["steps"]["tinygrad imported"] = _now()
        try:
            sys.setprofile(Milestones())  # this thread only: the boot runs here
            try:
                dev = Device["AMD"]
            finally:
                sys.setprofile(None)
            am = dev.iface.dev_impl
            OUT["boot"] = {"ok": True, "partial": bool(am.partial_boot), "usb": bool(dev.is_usb()),
                           "iface": type(dev.iface).__name__, "usb_class": type(dev.iface.pci_dev.usb.usb).__module__
                           + "." + type(dev.iface.pci_dev.usb.usb).__qualname__,
                           "product": dev.iface.pci_dev.usb.usb.product}
            OUT["steps"]["device up"] = _now()
        except Exception as exc:
            OUT["boot"] = {"ok": False, "error": f"{type(exc).__name__}: {exc}",
                           "trace": traceback.format_exc()[-4000:]}
            return 1
        a = np.arange(64, dtype=np.float32) * 0.5
        b = np.linspace(-3.0, 3.0, 64, dtype=np.float32)
        try:
            got = (Tensor(a, device="AMD") + Tensor(b, device="AMD")).numpy()
            want = a + b
            bad = [i for i in range(len(want)) if got[i] != want[i]]
            OUT["ops"]["add"] = {"ok": not bad and got.shape == want.shape,
                                 "detail": "" if not bad else f"{len(bad)} of {len(want)} differ; first at [{bad[0]}]: "
                                 f"expected {want[bad[0]]!r}, got {got[bad[0]]!r}"}
        except Exception as exc:
            OUT["ops"]["add"] = {"ok": False, "detail": f"{type(exc).__name__}: {exc}",
                                 "trace": traceback.format_exc()[-4000:]}
        OUT["steps"]["add done"] = _now()
        return rc
    finally:
        sampler.stop.set()
        _write(path)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
