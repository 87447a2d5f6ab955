"""The USB tier's guest: the real-kernel guest of tests/guest plus the gadget modules, booted once.

specs/usb-real-stack-harness.md (modules, in load order: usb-common, usbcore, udc-core, configfs,
libcomposite, usb_f_fs, dummy_hcd) on top of specs/real-kernel-harness.md. Reuses tests/guest's
builder (kernel package fetched into the cache with ``apt-get download``, busybox initramfs, init
script, QEMU command line); only the module list and the initramfs file name differ. Nothing is
optional: a missing qemu, busybox-static or kernel package raises ``GuestUnavailable`` and the
tier fails with what to install.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from build import (  # tests/guest/build.py; conftest.py puts tests/guest on sys.path
    INIT_SCRIPT,
    RECIPE_VERSION,
    WANTED_MODULES,
    Cpio,
    Guest,
    GuestUnavailable,
    cache_dir,
    fetch_kernel,
    module_load_order,
    need_tool,
)

USB_MODULES = ("usb-common", "usbcore", "udc-core", "configfs", "libcomposite", "usb_f_fs", "dummy_hcd")

__all__ = ["USB_MODULES", "GuestUnavailable", "build_usb_guest"]


def _initramfs(tree: Path, version: str, busybox: Path) -> bytes:
    mods = module_load_order(tree / "lib" / "modules" / version, WANTED_MODULES + USB_MODULES)
    c = Cpio()
    for d in ("bin", "dev", "proc", "sys", "lib", "lib/tinyhw-modules", "tmp", "mnt"):
        c.dir(d)
    c.chardev("dev/console", 5, 1)
    c.chardev("dev/null", 1, 3)
    c.file("bin/busybox", busybox.read_bytes(), 0o755)
    c.symlink("bin/sh", "busybox")
    for ko in mods:
        c.file(f"lib/tinyhw-modules/{ko.stem}.ko", ko.read_bytes())
    c.file("modules.load", "".join(ko.stem + "\n" for ko in mods).encode())
    c.file("init", INIT_SCRIPT.encode(), 0o755)
    return c.bytes()


def build_usb_guest(cache: Path | None = None) -> Guest:
    """Kernel (cached download) and an initramfs with the gadget modules (cached by recipe)."""
    need_tool("qemu-system-x86_64", "qemu-system-x86")
    busybox = Path(need_tool("busybox", "busybox-static"))
    if b"ld-linux" in busybox.read_bytes()[:4096]:
        raise GuestUnavailable(f"{busybox} is dynamically linked: install busybox-static")
    cache = cache or cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    tree = fetch_kernel(cache)
    vmlinuz = sorted((tree / "boot").glob("vmlinuz-*"))
    if not vmlinuz:
        raise GuestUnavailable(f"no vmlinuz in {tree / 'boot'}")
    version = vmlinuz[-1].name.removeprefix("vmlinuz-")
    recipe = f"usb|{RECIPE_VERSION}|{version}|{busybox.stat().st_size}|{USB_MODULES}|{INIT_SCRIPT}"
    initrd = cache / f"initramfs-usb-{version}-{hashlib.sha256(recipe.encode()).hexdigest()[:16]}.cpio"
    if not initrd.exists():
        tmp = initrd.with_suffix(".tmp")
        tmp.write_bytes(_initramfs(tree, version, busybox))
        tmp.rename(initrd)
    return Guest(vmlinuz[-1], initrd, version)
