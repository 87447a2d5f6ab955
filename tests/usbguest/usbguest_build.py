"""The USB tier's guest: the real-kernel guest of tests/guest plus the gadget modules, booted once.

specs/usb-real-stack-harness.md (modules, in load order: usb-common, usbcore, udc-core, configfs,
libcomposite, usb_f_fs, dummy_hcd) on top of specs/real-kernel-harness.md. Reuses tests/guest's
builder (kernel package fetched into the cache with ``apt-get download``, busybox initramfs, init
script, QEMU command line); only the module list and the initramfs file name differ. Nothing is
optional: a missing qemu, busybox-static or kernel package raises ``GuestUnavailable`` and the
tier fails with what to install.
"""

from __future__ import annotations

from pathlib import Path

from build import Guest, GuestUnavailable, build_guest  # tests/guest/build.py; conftest.py puts it on sys.path

USB_MODULES = ("usb-common", "usbcore", "udc-core", "configfs", "libcomposite", "usb_f_fs", "dummy_hcd")

__all__ = ["USB_MODULES", "GuestUnavailable", "build_usb_guest"]


def build_usb_guest(cache: Path | None = None) -> Guest:
    """Kernel (cached download) and an initramfs with the gadget modules (cached by recipe)."""
    return build_guest(cache, extra_modules=USB_MODULES, tag="usb")
