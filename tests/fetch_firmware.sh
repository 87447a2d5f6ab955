#!/usr/bin/env bash
# Fetch Debian's non-free firmware packages the firmware tests parse (specs/data-sources.md):
#   firmware-amd-graphics (amdgpu/*.bin, 530 files) and firmware-nvidia-gsp (nvidia/*/gsp_*.bin).
# They are extracted into tinyhw's cache (the same rule as the rest of tinyhw), never into the repository:
#   ${TINYHW_FIRMWARE_DIR:-${TINYHW_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tinyhw}/firmware}/{amd,nvidia-gsp}
# The tests find them there (tests/cachedirs.py resolves the same path once, when the session starts).
# Needs root (or sudo) once, to add the bookworm non-free-firmware sources entry and apt-get update;
# TINYHW_FIRMWARE_SOURCES_ONLY=1 does only that (tests/setup-system.sh, as root, before fetching as the user).
# Idempotent: a second run with both packages present does nothing.
set -euo pipefail

DEST="${TINYHW_FIRMWARE_DIR:-${TINYHW_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tinyhw}/firmware}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

if [ -z "${TINYHW_FIRMWARE_SOURCES_ONLY:-}" ] && [ -f "$DEST/amd/.complete" ] && [ -f "$DEST/nvidia-gsp/.complete" ]; then
    echo "fetch_firmware: already in $DEST"
    exit 0
fi

SOURCES=/etc/apt/sources.list.d/tinyhw-non-free-firmware.sources
if ! grep -rqs "non-free-firmware" /etc/apt/sources.list /etc/apt/sources.list.d/; then
    $SUDO tee "$SOURCES" >/dev/null <<'EOF'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: non-free-firmware
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    $SUDO apt-get update -qq
fi
[ -z "${TINYHW_FIRMWARE_SOURCES_ONLY:-}" ] || exit 0

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$DEST"
fetch() {  # package, target subdirectory
    local pkg="$1" sub="$2"
    [ -f "$DEST/$sub/.complete" ] && return 0
    (cd "$work" && apt-get download -qq "$pkg" 2>/dev/null) || {
        $SUDO apt-get update -qq
        (cd "$work" && apt-get download -qq "$pkg")
    }
    rm -rf "$DEST/$sub.tmp"
    mkdir -p "$DEST/$sub.tmp"
    dpkg-deb -x "$work/${pkg}"_*.deb "$DEST/$sub.tmp"
    dpkg-deb -f "$work/${pkg}"_*.deb Package Version > "$DEST/$sub.tmp/.complete"
    rm -rf "${DEST:?}/$sub"
    mv "$DEST/$sub.tmp" "$DEST/$sub"
    echo "fetch_firmware: $pkg $(dpkg-deb -f "$work/${pkg}"_*.deb Version) -> $DEST/$sub"
}
fetch firmware-amd-graphics amd
fetch firmware-nvidia-gsp nvidia-gsp
