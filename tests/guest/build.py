"""Build the real-kernel test guest from Debian packages (specs/real-kernel-harness.md, "Ingredients").

The guest is a Debian 6.1 kernel plus a busybox initramfs carrying only the modules the
harness needs (virtio, 9p, overlay, vfio). It is built into a cache directory
(``$TINYHW_GUEST_CACHE``, else ``$TINYHW_CACHE/guest``, else ``${XDG_CACHE_HOME:-~/.cache}/tinyhw/guest``;
tests/conftest.py pins it when the session starts),
never into the checkout, and rebuilt only when the kernel package or this recipe changes.

Nothing here is optional: a missing ``qemu-system-x86_64``, ``busybox`` (static) or kernel
package makes :func:`build_guest` raise :class:`GuestUnavailable` with what to install, and the
tier fails with that message (CI installs them).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

RECIPE_VERSION = "3"  # bump when the initramfs layout or init script changes
KERNEL_META = "linux-image-amd64"
# Top-level modules; their dependencies (from each .ko's modinfo) are added in load order.
WANTED_MODULES = ("virtio_pci", "9pnet_virtio", "9p", "overlay", "vfio_pci", "vfio_iommu_type1")

INIT_SCRIPT = r"""#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in $(cat /modules.load); do insmod /lib/tinyhw-modules/$m.ko || echo "guest: insmod $m failed"; done
mkdir -p /host /rw /newroot
O=trans=virtio,version=9p2000.L,msize=262144
mount -t 9p -o $O,ro hostroot /host || echo "guest: cannot mount the host root"
mount -t tmpfs tmpfs /rw
mkdir -p /rw/upper /rw/work
mount -t overlay overlay -o lowerdir=/host,upperdir=/rw/upper,workdir=/rw/work /newroot
mount -t proc proc /newroot/proc
mount -t sysfs sys /newroot/sys
mount -t devtmpfs dev /newroot/dev
# /tmp is left as the overlay shows it: a checkout (and its .venv) under the host's /tmp must stay visible
mount -t tmpfs tmpfs /newroot/run
mkdir -p /newroot/run/out /newroot/run/lock
mount -t 9p -o $O outdir /newroot/run/out || echo "guest: cannot mount the output directory"
chroot /newroot /bin/sh /run/out/run.sh > /newroot/run/out/console.log 2>&1
echo "guest: done rc=$?"
sync
echo o > /proc/sysrq-trigger
sleep 10
"""


class GuestUnavailable(Exception):
    """Something the guest needs is missing on this machine; the message says what to install."""


@dataclass(frozen=True)
class Guest:
    kernel: Path  # vmlinuz
    initrd: Path  # initramfs (newc cpio)
    version: str  # kernel release, e.g. 6.1.0-57-amd64


def cache_dir() -> Path:
    if os.environ.get("TINYHW_GUEST_CACHE"):
        return Path(os.environ["TINYHW_GUEST_CACHE"])
    if os.environ.get("TINYHW_CACHE"):
        return Path(os.environ["TINYHW_CACHE"]) / "guest"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tinyhw" / "guest"


def need_tool(name: str, package: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise GuestUnavailable(f"{name} is missing: install the Debian package {package} "
                               f"(apt-get install --no-install-recommends {package})")
    return path


def _run(cmd: list[str], cwd: Path | None = None) -> str:
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    if r.returncode:
        raise GuestUnavailable(f"`{' '.join(cmd)}` failed ({r.returncode}): {r.stderr.strip()[-400:]}")
    return r.stdout


def kernel_package() -> str:
    """The versioned kernel package the ``linux-image-amd64`` meta package depends on."""
    out = _run(["apt-cache", "depends", KERNEL_META])
    m = re.search(r"Depends:\s*(linux-image-[0-9][^\s]*-amd64)\b", out)
    if not m:
        raise GuestUnavailable(f"cannot tell which kernel {KERNEL_META} depends on; run apt-get update first")
    return m.group(1)


def fetch_kernel(cache: Path) -> Path:
    """The unpacked kernel package under ``cache`` (downloaded with ``apt-get download`` once)."""
    debs = sorted(cache.glob("linux-image-6.1.0-*-amd64_*.deb"))
    if not debs:
        need_tool("apt-get", "apt")
        pkg = kernel_package()
        _run(["apt-get", "download", pkg], cwd=cache)
        debs = sorted(cache.glob(f"{pkg}_*.deb"))
        if not debs:
            raise GuestUnavailable(f"apt-get download {pkg} produced no .deb in {cache}")
    deb = debs[-1]
    unpacked = cache / ("kernel-" + deb.stem)
    if not (unpacked / "boot").is_dir():
        need_tool("dpkg-deb", "dpkg")
        tmp = cache / "unpack.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        _run(["dpkg-deb", "-x", str(deb), str(tmp)])
        tmp.rename(unpacked)
    return unpacked


def _modinfo_depends(ko: Path) -> list[str]:
    m = re.search(rb"\0depends=([^\0]*)\0", b"\0" + ko.read_bytes())
    return [d for d in m.group(1).decode().split(",") if d] if m else []


def module_load_order(moddir: Path, wanted: tuple[str, ...] = WANTED_MODULES) -> list[Path]:
    """The .ko files for ``wanted`` and their dependencies, dependencies first."""
    index = {p.stem.replace("-", "_"): p for p in moddir.rglob("*.ko")}
    builtin_text = (moddir / "modules.builtin").read_text() if (moddir / "modules.builtin").exists() else ""
    builtin = {Path(line).stem.replace("-", "_") for line in builtin_text.split()}
    order: list[Path] = []
    seen: set[str] = set()

    def visit(name: str) -> None:
        name = name.replace("-", "_")
        if name in seen or name in builtin:
            return
        seen.add(name)
        if name not in index:
            raise GuestUnavailable(f"kernel module {name} is not in {moddir}")
        for dep in _modinfo_depends(index[name]):
            visit(dep)
        order.append(index[name])

    for w in wanted:
        visit(w)
    return order


class Cpio:
    """A minimal newc (``070701``) archive writer: directories, files, symlinks, device nodes."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.ino = 1

    def _entry(self, name: str, mode: int, data: bytes = b"", rdev: tuple[int, int] = (0, 0)) -> None:
        fields = [self.ino, mode, 0, 0, 1, 0, len(data), 0, 0, rdev[0], rdev[1], len(name) + 1, 0]
        self.ino += 1
        head = b"070701" + b"".join(b"%08x" % f for f in fields) + name.encode() + b"\0"
        head += b"\0" * (-len(head) % 4)
        self.parts += [head, data, b"\0" * (-len(data) % 4)]

    def dir(self, name: str) -> None:
        self._entry(name, 0o040755)

    def file(self, name: str, data: bytes, mode: int = 0o644) -> None:
        self._entry(name, 0o100000 | mode, data)

    def symlink(self, name: str, target: str) -> None:
        self._entry(name, 0o120777, target.encode())

    def chardev(self, name: str, major: int, minor: int) -> None:
        self._entry(name, 0o020600, rdev=(major, minor))

    def bytes(self) -> bytes:
        self._entry("TRAILER!!!", 0)
        out = b"".join(self.parts)
        return out + b"\0" * (-len(out) % 512)


def make_initramfs(kernel_tree: Path, version: str, busybox: Path, extra_modules: tuple[str, ...] = ()) -> bytes:
    moddir = kernel_tree / "lib" / "modules" / version
    mods = module_load_order(moddir, WANTED_MODULES + extra_modules)
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


def build_guest(cache: Path | None = None, extra_modules: tuple[str, ...] = (), tag: str = "") -> Guest:
    """Fetch and unpack the kernel, build the initramfs (with ``extra_modules`` loaded after the
    base ones; ``tag`` names that variant's file); cached across runs."""
    need_tool("qemu-system-x86_64", "qemu-system-x86")
    busybox = Path(need_tool("busybox", "busybox-static"))
    if b"ld-linux" in busybox.read_bytes()[:4096]:  # a PT_INTERP path sits in the first page
        raise GuestUnavailable(f"{busybox} is dynamically linked: install busybox-static")
    cache = cache or cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    tree = fetch_kernel(cache)
    vmlinuz = sorted((tree / "boot").glob("vmlinuz-*"))
    if not vmlinuz:
        raise GuestUnavailable(f"no vmlinuz in {tree / 'boot'}")
    version = vmlinuz[-1].name.removeprefix("vmlinuz-")
    recipe = f"{RECIPE_VERSION}|{version}|{busybox.stat().st_size}|{extra_modules}|{INIT_SCRIPT}"
    key = hashlib.sha256(recipe.encode()).hexdigest()[:16]
    initrd = cache / f"initramfs-{tag + '-' if tag else ''}{version}-{key}.cpio"
    if not initrd.exists():
        tmp = initrd.with_suffix(".tmp")
        tmp.write_bytes(make_initramfs(tree, version, busybox, extra_modules))
        tmp.rename(initrd)
    return Guest(vmlinuz[-1], initrd, version)
