#!/usr/bin/env bash
# Install what tinyhw's tests need on a Debian 12 machine, then fetch the real firmware inputs.
#
#   bash tests/setup-system.sh
#
# Needs root for apt-get: run it as yourself and it uses sudo for those steps (or run it as root).
# The firmware is extracted into YOUR cache, ${TINYHW_FIRMWARE_DIR:-${XDG_CACHE_HOME:-~/.cache}/tinyhw/firmware}
# (see tests/fetch_firmware.sh); under `sudo bash tests/setup-system.sh` it is fetched as the user who ran
# sudo, into that user's cache. Idempotent, and fast when everything is present: it installs only missing
# packages and runs apt-get update only when something is missing. README's test command and .ci/run call it.
set -euo pipefail
cd "$(dirname "$0")/.."

# The system packages the tests use. One list: add a package here (and say why) when a test needs one.
PACKAGES=(
    python3 python3-venv  # README's test command makes a virtual environment
    pci.ids               # device names, exactly as lspci shows them
    pciutils              # lspci: the oracle for pci list and config-space decoding
    usb.ids               # USB bridge names
    libusb-1.0-0          # pyusb's backend for the usb transport
    linux-source-6.12     # the amdgpu headers the register databases are generated from (discovery.h too)
    xz-utils              # unpacks that kernel source tarball
    qemu-system-x86       # the real-kernel test tiers boot a Debian kernel in QEMU (TCG)
    busybox-static        # the guest's initramfs
    ca-certificates       # apt over https mirrors
    debian-archive-keyring  # Signed-By of the non-free-firmware sources entry fetch_firmware.sh adds
    clang libllvm19       # tinyhw kernels: tinygrad's CPU device compiles with clang, gfx targets with libLLVM 19
    clang-19 lld-19       # tests/data/clcorpus: OpenCL C kernels for gfx1100 and the host (clang-19), linked by ld.lld-19
    llvm-19               # llvm-objdump-19 and llvm-mc-19: the independent disassembler the RDNA3 decoder is checked against
    gcc                   # the protocol-constant tests compile the kernel headers to cross-check offsets
    flashrom              # the flashrom interop tier drives `tinyhw serve serprog` with Debian's flashrom
    openssh-server openssh-client  # remote:ssh:// through a real sshd on 127.0.0.1 (tests/farm/test_remote_sshd.py)
)

missing=()
for pkg in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null || {
            echo "setup-system: missing ${missing[*]}; installing them needs root: run this as root, or install sudo" >&2
            exit 3
        }
        SUDO="sudo"
    fi
    echo "setup-system: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    # --no-install-recommends keeps qemu's graphical and firmware extras out
    $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
    echo "setup-system: all ${#PACKAGES[@]} packages present"
fi

# sshd run as root refuses to start without its privilege separation directory, which Debian's service creates
# when it starts (the tests run their own sshd on 127.0.0.1 with their own config, never the system's service).
if [ "$(id -u)" -eq 0 ] && [ ! -d /run/sshd ]; then
    install -d -m 0755 /run/sshd
fi

# Real firmware inputs (Debian non-free-firmware), extracted into the user's cache, never committed.
if [ "$(id -u)" -eq 0 ] && [ -n "${SUDO_USER:-}" ] && [ "$SUDO_USER" != root ]; then
    home="$(getent passwd "$SUDO_USER" | cut -d: -f6)"
    keep=()
    for var in XDG_CACHE_HOME TINYHW_CACHE TINYHW_FIRMWARE_DIR; do
        if [ -n "${!var:-}" ]; then keep+=("$var=${!var}"); fi
    done
    # the apt step (the non-free-firmware sources entry) runs as root here; the files belong to the user
    TINYHW_FIRMWARE_SOURCES_ONLY=1 bash tests/fetch_firmware.sh
    runuser -u "$SUDO_USER" -- env HOME="$home" "${keep[@]}" bash tests/fetch_firmware.sh
else
    bash tests/fetch_firmware.sh
fi
