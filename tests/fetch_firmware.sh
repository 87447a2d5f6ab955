#!/usr/bin/env bash
# Fetch Debian's non-free firmware packages the firmware tests parse (specs/data-sources.md):
#   firmware-amd-graphics (amdgpu/*.bin, 530 files) and firmware-nvidia-gsp (nvidia/*/gsp_*.bin) from the
#   machine's own release, and the NVIDIA 570.144 set (ga102/ad102 booter_load, bootloader, gsp) from sid's
#   firmware-nvidia-graphics, the files tinygrad's NVIDIA driver pins by SHA-256 (checked here).
# They are extracted into tinyhw's cache (the same rule as the rest of tinyhw), never into the repository:
#   ${TINYHW_FIRMWARE_DIR:-${TINYHW_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tinyhw}/firmware}/{amd,nvidia-gsp,nvidia-570}
# The tests find them there (tests/helpers/cachedirs.py resolves the same path once, when the session starts).
# The archive is the one this machine's apt already uses: its URI is read from /etc/apt/sources.list(.d) (the
# entry of this release's suite), never written here. The release's non-free-firmware component needs root (or
# sudo) once, to add a sources entry with that URI and apt-get update; TINYHW_FIRMWARE_SOURCES_ONLY=1 does only
# that (tests/setup-system.sh, as root, before fetching as the user). sid is reached through a PRIVATE apt
# configuration (its own sources list, state and cache in a temporary folder): nothing under /etc is changed.
# TINYHW_FIRMWARE_PRINT_ARCHIVE=1 prints the archive URI and keyring it found and stops ($TINYHW_APT_ETC, default
# /etc/apt, and $TINYHW_OS_RELEASE, default /etc/os-release, are where it reads them).
# Idempotent: a second run with every package present does nothing.
set -euo pipefail

DEST="${TINYHW_FIRMWARE_DIR:-${TINYHW_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tinyhw}/firmware}"
APT_ETC="${TINYHW_APT_ETC:-/etc/apt}"
OS_RELEASE="${TINYHW_OS_RELEASE:-/etc/os-release}"
KEYRING_DEFAULT=/usr/share/keyrings/debian-archive-keyring.gpg
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

# sha256 of the 570.144 files, as tinygrad pins them (specs/nv-bringup.md §9.1, specs/data-sources.md)
NV570_SHA256=(
    "a8c3ebeed280323aedb51c061f321e73379cce7a9ae643a33dd03915df027f7f  nvidia/ga102/gsp/gsp-570.144.bin"
    "4497e3eff7e95c774b8a569d17b27c08c9650158d10b229d2be81cdcad9a085b  nvidia/ga102/gsp/booter_load-570.144.bin"
    "82428f532240727e95bb3083fbaaba9b2cc7b937314323f2d546ce7245f27fad  nvidia/ga102/gsp/bootloader-570.144.bin"
    "8b293e19b637c5e22c87a2428d1c71bb13e0904e8a88ac6b3c6c1f2679c6e37a  nvidia/ad102/gsp/booter_load-570.144.bin"
    "65ab2e6b6e0fca95365c4deac79a34582abcfeb15b6ae234138f22e7183118a8  nvidia/ad102/gsp/bootloader-570.144.bin"
)

# The machine's Debian archive: "URI KEYRING" of the first apt entry (one-line .list or deb822 .sources) whose
# suites include this release's codename (so not the security archive).
archive() {
    local codename
    codename="$(. "$OS_RELEASE" && echo "${VERSION_CODENAME:-}")"
    [ -n "$codename" ] || { echo "fetch_firmware: no VERSION_CODENAME in $OS_RELEASE" >&2; return 3; }
    local files=()
    [ -f "$APT_ETC/sources.list" ] && files+=("$APT_ETC/sources.list")
    for f in "$APT_ETC"/sources.list.d/*.list "$APT_ETC"/sources.list.d/*.sources; do
        [ -f "$f" ] && files+=("$f")
    done
    [ "${#files[@]}" -gt 0 ] || { echo "fetch_firmware: no apt sources under $APT_ETC" >&2; return 3; }
    local found
    found="$(awk -v want="$codename" -v keyring="$KEYRING_DEFAULT" '
        function flush() {
            if (uri != "" && suites ~ ("(^| )" want "( |$)") && !done) { print uri, (key != "" ? key : keyring); done = 1 }
            uri = ""; suites = ""; key = ""
        }
        FNR == 1 { flush() }
        /^[ \t]*#/ { next }
        FILENAME ~ /\.sources$/ {
            if ($0 ~ /^[ \t]*$/) { flush(); next }
            if (tolower($1) == "uris:") uri = $2
            if (tolower($1) == "suites:") { $1 = ""; suites = $0; gsub(/^ +/, "", suites) }
            if (tolower($1) == "signed-by:") key = $2
            next
        }
        $1 == "deb" {
            i = 2; k = ""
            if ($2 ~ /^\[/) {
                while (i <= NF) { if ($i ~ /^signed-by=/) { k = $i; sub(/^signed-by=/, "", k); sub(/\]$/, "", k) }
                                  if ($i ~ /\]$/) { i++; break }; i++ }
            }
            if ($(i + 1) == want && !done) { print $i, (k != "" ? k : keyring); done = 1 }
        }
        END { flush() }' "${files[@]}")"
    [ -n "$found" ] || { echo "fetch_firmware: no apt entry for $codename under $APT_ETC" >&2; return 3; }
    echo "$found"
}

if [ -z "${TINYHW_FIRMWARE_PRINT_ARCHIVE:-}${TINYHW_FIRMWARE_SOURCES_ONLY:-}" ] && [ -f "$DEST/amd/.complete" ] \
        && [ -f "$DEST/nvidia-gsp/.complete" ] && [ -f "$DEST/nvidia-570/.complete" ]; then
    echo "fetch_firmware: already in $DEST"
    exit 0
fi

found="$(archive)" || exit 3
read -r ARCHIVE KEYRING <<<"$found"
CODENAME="$(. "$OS_RELEASE" && echo "$VERSION_CODENAME")"
if [ -n "${TINYHW_FIRMWARE_PRINT_ARCHIVE:-}" ]; then
    echo "$ARCHIVE $KEYRING"
    exit 0
fi

SOURCES="$APT_ETC/sources.list.d/tinyhw-non-free-firmware.sources"
if ! grep -rqs "non-free-firmware" "$APT_ETC/sources.list" "$APT_ETC/sources.list.d/"; then
    printf 'Types: deb\nURIs: %s\nSuites: %s\nComponents: non-free-firmware\nSigned-By: %s\n' \
        "$ARCHIVE" "$CODENAME" "$KEYRING" | $SUDO tee "$SOURCES" >/dev/null
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

# The 570.144 set from sid, through a private apt configuration (no root needed, nothing under /etc written).
fetch_nv570() {
    [ -f "$DEST/nvidia-570/.complete" ] && return 0
    local apt="$work/apt-sid"
    mkdir -p "$apt/parts" "$apt/state/lists/partial" "$apt/cache/archives/partial" "$apt/deb"
    echo "deb [signed-by=$KEYRING] $ARCHIVE sid non-free-firmware" > "$apt/sources.list"
    local opts=(-o "Dir::Etc::sourcelist=$apt/sources.list" -o "Dir::Etc::sourceparts=$apt/parts"
                -o "Dir::State=$apt/state" -o "Dir::Cache=$apt/cache" -o "APT::Sandbox::User=$(id -un)")
    apt-get "${opts[@]}" update -qq
    (cd "$apt/deb" && apt-get "${opts[@]}" download -qq firmware-nvidia-graphics)
    local deb=("$apt"/deb/firmware-nvidia-graphics_*.deb)
    rm -rf "$DEST/nvidia-570.tmp"
    mkdir -p "$DEST/nvidia-570.tmp"
    # only the 570.144 files of ga102 and ad102 (the package holds every chip and release: ~104 MB)
    dpkg-deb --fsys-tarfile "${deb[0]}" | tar -x -C "$DEST/nvidia-570.tmp" --wildcards --strip-components=4 \
        './usr/lib/firmware/nvidia/ga102/gsp/*-570.144.bin' './usr/lib/firmware/nvidia/ad102/gsp/*-570.144.bin'
    if ! (cd "$DEST/nvidia-570.tmp" && printf '%s\n' "${NV570_SHA256[@]}" | sha256sum --quiet -c -); then
        rm -rf "$DEST/nvidia-570.tmp"
        echo "fetch_firmware: firmware-nvidia-graphics does not hold the 570.144 files tinygrad pins" >&2
        return 1
    fi
    dpkg-deb -f "${deb[0]}" Package Version > "$DEST/nvidia-570.tmp/.complete"
    rm -rf "${DEST:?}/nvidia-570"
    mv "$DEST/nvidia-570.tmp" "$DEST/nvidia-570"
    echo "fetch_firmware: firmware-nvidia-graphics $(dpkg-deb -f "${deb[0]}" Version) (sid, 570.144) -> $DEST/nvidia-570"
}
fetch_nv570
