#!/usr/bin/env bash
# Read-only real-hardware check of tinyhw's NVIDIA support (issue 14 item 4), for a session that has the
# lent GPU machine (an H200: GH100). Run from the repository root, in one go:
#
#     OUT=/some/dir bash bench/nv_hw_check.sh            # the device tool sets $OUT itself
#
# It needs python3 with click and rich importable (carry a .venv made with `pip install -e .`, or set
# TINYHW="path/to/.venv/bin/tinyhw"). Everything it runs only reads: `tinyhw pci list` against
# `lspci -Dnn`; `tinyhw pci show` against `lspci -vvv -nn -D` for the first NVIDIA display/3D function;
# `tinyhw probe` tier 0 (sysfs attributes, /proc/driver/nvidia); tier 2 (`probe --registers`, single
# read-only BAR0 page mappings of PMC_BOOT_0/42, VRAM, GFW, WPR2) only as root with the GPU in D0 and
# runtime-active. It never dumps the VBIOS (the PROM window belongs to the driver), never writes sysfs,
# never unbinds or resets anything. Outputs land under $OUT; $OUT/summary.txt has one line per check.
set -u
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
cd "$(dirname "$0")/.." || exit 3
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
TINYHW=${TINYHW:-}
if [ -z "$TINYHW" ]; then
    if [ -x .venv/bin/tinyhw ]; then TINYHW=.venv/bin/tinyhw; else TINYHW="python3 -m tinyhw"; fi
fi
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
note() { echo "$*" | tee -a "$SUMMARY"; }
th() { $TINYHW "$@"; }

{
    date -u; uname -a; echo "uid $(id -u)"; lspci --version 2>&1
    echo "tinyhw: $TINYHW"; th --version 2>&1
    cat /sys/module/nvidia/version 2>/dev/null && echo "(nvidia module version)"
    head -2 /proc/driver/nvidia/version 2>/dev/null
    command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,pci.bus_id,vbios_version,memory.total,driver_version \
        --format=csv 2>&1
} > "$OUT/env.txt" 2>&1

if ! th --help > /dev/null 2>&1; then
    note "FAIL tinyhw does not run ($TINYHW): carry a .venv or set TINYHW; see $OUT/env.txt"
    exit 3
fi

# 1. pci list, byte for byte as lspci -Dnn
th pci list > "$OUT/tinyhw_pci_list.txt" 2> "$OUT/tinyhw_pci_list.err"
lspci -Dnn > "$OUT/lspci_Dnn.txt" 2>&1
if diff -u "$OUT/lspci_Dnn.txt" "$OUT/tinyhw_pci_list.txt" > "$OUT/pci_list.diff"; then
    note "PASS pci list equals lspci -Dnn ($(wc -l < "$OUT/lspci_Dnn.txt") functions)"
else
    note "FAIL pci list differs from lspci -Dnn: $OUT/pci_list.diff"
fi

# the first NVIDIA display (03xx) function
ADDR=$(lspci -Dn -d 10de: | awk '$2 ~ /^03/ {print $1; exit}')
if [ -z "$ADDR" ]; then
    note "FAIL no nvidia display/3d function found by lspci"
    exit 1
fi
note "INFO nvidia function $ADDR, driver $(basename "$(readlink "/sys/bus/pci/devices/$ADDR/driver" 2>/dev/null)" 2>/dev/null)"

# 2. pci show against lspci -vvv (config-space decode; lspci reads the same config file)
th --device "pci:$ADDR" pci show > "$OUT/tinyhw_pci_show.txt" 2> "$OUT/tinyhw_pci_show.err"
echo "pci show exit $?" >> "$OUT/tinyhw_pci_show.err"
lspci -vvv -nn -D -s "$ADDR" > "$OUT/lspci_vvv.txt" 2>&1
th --device "pci:$ADDR" --json pci show > "$OUT/tinyhw_pci_show.json" 2>> "$OUT/tinyhw_pci_show.err"
if diff -u "$OUT/lspci_vvv.txt" "$OUT/tinyhw_pci_show.txt" > "$OUT/pci_show.diff"; then
    note "PASS pci show equals lspci -vvv -nn -D"
else
    note "DIFF pci show vs lspci -vvv: $(grep -c '^[-+][^-+]' "$OUT/pci_show.diff") differing lines in $OUT/pci_show.diff"
fi

# 3. probe tier 0 (attributes only) and a cross-check with sysfs
th --device "pci:$ADDR" --json --stats probe > "$OUT/probe_tier0.json" 2> "$OUT/probe_tier0.err"
rc=$?
if [ $rc -eq 0 ] && python3 - "$OUT/probe_tier0.json" "$ADDR" >> "$SUMMARY" 2>&1 <<'EOF'
import json, os, sys
doc, addr = json.load(open(sys.argv[1])), sys.argv[2]
d = f"/sys/bus/pci/devices/{addr}"
read = lambda n: open(os.path.join(d, n)).read().strip()
bad = [n for n, k in (("vendor", "vendor_id"), ("device", "device_id")) if int(read(n), 16) != doc[k]]
if doc.get("power_state") != read("power_state"):
    bad.append("power_state")
print(("PASS" if not bad else "FAIL") + f" probe tier 0: {doc['name']}, driver {doc['driver']}, "
      f"power {doc['power_state']}/{doc['runtime_status']}, nvidia driver "
      f"{(doc.get('nvidia_driver') or {}).get('version')}" + (f"; mismatched: {bad}" if bad else ""))
sys.exit(1 if bad else 0)
EOF
then :; else note "FAIL probe tier 0 (exit $rc): $OUT/probe_tier0.err"; fi

# 4. probe tier 2, only as root with the gpu powered
POWER=$(cat "/sys/bus/pci/devices/$ADDR/power_state" 2>/dev/null)
RUNTIME=$(cat "/sys/bus/pci/devices/$ADDR/power/runtime_status" 2>/dev/null)
if [ "$(id -u)" != 0 ]; then
    note "SKIP probe tier 2: not root"
elif [ "$POWER" != D0 ] || { [ "$RUNTIME" != active ] && [ "$RUNTIME" != unsupported ]; }; then
    note "SKIP probe tier 2: power_state $POWER runtime_status $RUNTIME (tinyhw must refuse, checking)"
    th --device "pci:$ADDR" probe --registers > /dev/null 2> "$OUT/probe_tier2_refusal.err"
    [ $? -eq 2 ] && note "PASS tier 2 refused (exit 2)" || note "FAIL tier 2 was not refused"
else
    th --device "pci:$ADDR" --json --stats probe --registers > "$OUT/probe_tier2.json" 2> "$OUT/probe_tier2.err"
    rc=$?
    if [ $rc -eq 0 ]; then
        python3 - "$OUT/probe_tier2.json" >> "$SUMMARY" 2>&1 <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
c = d.get("chip") or {}
regs = " ".join(f"{k}=0x{v:08x}" for k, v in d["registers"].items())
ok = c.get("name") == "GH100"
print(("PASS" if ok else "CHECK") + f" probe tier 2: chip {c.get('name')} chipset 0x{c.get('chipset', 0):x}, "
      f"vram {d.get('vram_bytes')}, gfw {d.get('gfw_boot_completed')}, gsp {d.get('gsp_running')}; {regs}; "
      f"problems {d.get('problems')}")
EOF
    else
        note "FAIL probe tier 2 (exit $rc): $(tail -1 "$OUT/probe_tier2.err")"
    fi
fi
note "done: outputs in $OUT"
