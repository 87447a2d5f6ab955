#!/usr/bin/env bash
# The cuda:N copy bench on the project's lent H200, in one go (issue 12, item 2, the cuda:N bullet).
#
# NOT RUN YET: prepared without the machine. A session that has it runs, from the repository root,
#     run(command="bash bench/h200_cuda.sh", timeout_s=420)
# and copies the figures it prints into README.md ("## Copy bandwidth"), with the date.
#
# Read-only towards the machine: it queries nvidia-smi and sysfs, allocates and copies buffers through the
# CUDA driver, and never changes driver, clock, persistence or PCI settings. It needs nothing from a
# package index (the machine reaches none): tinyhw runs from this tree with PYTHONPATH, on the image's
# python3, which holds cuda-bindings, numpy, click and rich (.library/device/KINDS.md); pyusb is not needed.
# Results go to $OUT (the device tool brings them back) or /tmp/h200-cuda.
#
# It prints: the kernel driver version and the CUDA driver API version; the GPU's PCIe link (gen, width,
# current and max) as nvidia-smi and sysfs report it; pinned H2D and D2H at 256 MiB as MB/s and as % of the
# link limit; the full table (pinned and pageable, 4K..256M); and `kernels run bandwidth --device cuda:0`.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-/tmp/h200-cuda}"
mkdir -p "$out"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
py="${PYTHON:-python3}"
thw() { "$py" -m tinyhw "$@"; }
date -u +"date: %Y-%m-%dT%H:%MZ" | tee "$out/summary.txt"

echo "== driver and link (nvidia-smi)" | tee -a "$out/summary.txt"
q=name,driver_version,pci.bus_id,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max
nvidia-smi --query-gpu=$q --format=csv 2>&1 | tee -a "$out/summary.txt"
"$py" -c "import importlib.metadata as m, sys, cuda.bindings.driver, numpy, click, rich; print('python', sys.version.split()[0],
'cuda-bindings', m.version('cuda-bindings'), 'numpy', numpy.__version__)" 2>&1 | tee -a "$out/summary.txt"

busid=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader -i 0 2>/dev/null | head -1 | tr 'A-F' 'a-f')
addr="${busid: -12}"   # 00000000:19:00.0 -> 0000:19:00.0
echo "== sysfs link of $addr (read-only)" | tee -a "$out/summary.txt"
for f in current_link_speed current_link_width max_link_speed max_link_width; do
    printf '%s: %s\n' "$f" "$(cat /sys/bus/pci/devices/$addr/$f 2>&1)" | tee -a "$out/summary.txt"
done

echo "== bench copy, pinned, 256 MiB, 5 repeats" | tee -a "$out/summary.txt"
thw --device cuda:0 --json bench copy --sizes 256M --repeat 5 --memory pinned >"$out/pinned_256M.json" \
    2>"$out/pinned_256M.err"
rc=$?
echo "exit $rc" | tee -a "$out/summary.txt"
cat "$out/pinned_256M.err"
# After the copies: the link has trained up (a power-managed link idles at a lower generation).
smi_link=$(nvidia-smi --query-gpu=pcie.link.gen.current,pcie.link.width.current --format=csv,noheader,nounits \
    -i 0 2>/dev/null | head -1)
echo "nvidia-smi link after the copies (gen, width): $smi_link" | tee -a "$out/summary.txt"
[ "$rc" -eq 0 ] && "$py" - "$out/pinned_256M.json" "$smi_link" <<'EOF' | tee -a "$out/summary.txt"
import json, sys
from tinyhw.bench.copy import PCIE_LANE_MBPS
doc = json.load(open(sys.argv[1]))
print(f"gpu {doc['gpu']}, cuda driver api {doc['driver_version']}, link from tinyhw: {doc['link_source']}")
smi = [p.strip() for p in sys.argv[2].split(",")]
smi_limit = PCIE_LANE_MBPS.get(int(smi[0]), 0) * int(smi[1]) if len(smi) == 2 and all(p.isdigit() for p in smi) else 0
for r in doc["results"]:
    limit = r["link_limit_mbps"] or smi_limit or None
    src = "sysfs" if r["link_limit_mbps"] else ("nvidia-smi" if smi_limit else "unknown")
    pct = f"{100 * r['mbps_median'] / limit:.1f}% of {limit:.0f} MB/s ({src})" if limit else "limit unknown"
    print(f"{r['direction']} pinned 256 MiB: median {r['mbps_median']:.0f} MB/s (min {r['mbps_min']:.0f}, "
          f"max {r['mbps_max']:.0f}), verified {r['verified']} bytes, {pct}")
EOF

echo "== bench copy, pinned and pageable, 4K..256M" | tee -a "$out/summary.txt"
thw --device cuda:0 bench copy --repeat 3 2>&1 | tee "$out/table.txt"
thw --device cuda:0 --json bench copy --repeat 3 >"$out/all.json" 2>/dev/null

echo "== kernels run bandwidth --device cuda:0" | tee -a "$out/summary.txt"
thw kernels run bandwidth --device cuda:0 2>&1 | tee -a "$out/summary.txt"
