"""Generate the AMD protocol-constant and struct-layout modules from the Linux amdgpu headers (layer 0).

Usage (the committed files were made exactly like this)::

    apt-get install linux-source-6.12          # gives /usr/src/linux-source-6.12.tar.xz
    python -m tinyhw.autogen.genproto          # extracts what it needs into a cache, writes the modules

Each entry of :data:`PROTOCOLS` names one generated module ``tinyhw/autogen/<name>.py``, the
kernel files it is read from, the constant-name prefixes it keeps and the structs whose layout
it records. What they hold (specs/amd-bringup.md §5.1, §5.2, §6.1, §6.2, §6.4, §2.8):

* ``smu_v13_0_0_ppsmc``: SMU 13.0.0 response codes and message ids (``PPSMC_MSG_*``), the debug
  mailbox messages (``DEBUGSMC_MSG_*``, including ``DEBUGSMC_MSG_Mode1Reset`` of ``smu_v13_0_0_ppt.c``).
* ``smu13_driver_if_v13_0_0``: driver-interface version, table ids (``TABLE_SMU_METRICS``), clock,
  temperature, SVI-plane, throttler and feature indices, DPM level counts, and the layouts of
  ``SmuMetrics_t`` / ``SmuMetricsExternal_t``.
* ``psp_gfx_if``: sOS control ids (``GFX_CTRL_CMD_ID_*``), KM ring command ids (``GFX_CMD_ID_*``),
  LOAD_IP_FW firmware types (``GFX_FW_TYPE_*``), statuses (``PSP_ERR_UNKNOWN_COMMAND``, ``TEE_*``),
  response masks, and the layouts of the ring frame and the 1 KiB command/response buffer.
* ``amdgpu_psp``: bootloader commands (``PSP_BL__*``), sOS component types (``PSP_FW_TYPE_*``) and
  the driver's ucode ids (``AMDGPU_UCODE_ID_*``).
* ``amd_discovery``: discovery signatures and the GC info table layouts (``gc_info_v1_0`` .. ``v2_1``).
* ``sdma_v6_0_0_pkt_open``: SDMA 6 packet opcodes and sub-opcodes and the dword/field offsets, masks
  and shifts of the packets the copy paths use (COPY_LINEAR, WRITE_UNTILED, POLL_REGMEM, FENCE,
  TIMESTAMP, TRAP, INDIRECT) (specs/asm24-usb-bridge.md §9.3, packet formats of the header).

Module format: ``CONSTANTS`` maps each kept name to its integer value, in header order;
``STRUCTS`` maps a struct name to ``(size, {path: (offset, ctype, count)})`` where nested
structs are flattened to dotted paths (``SmuMetrics.CurrClock``), union members share their
offset and a bit field's ctype reads ``uint32_t:1``. Output is deterministic; only the
``KERNEL = ...`` line names the kernel and package version.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tinyhw.autogen import cheader, genregs, sources

COMMAND = "python -m tinyhw.autogen.genproto"
OUT_DIR = Path(__file__).resolve().parent
AMD = "drivers/gpu/drm/amd"

#: (module, [(kernel path, defines_only)], kept constant prefixes, structs).
PROTOCOLS: tuple[tuple[str, tuple[tuple[str, bool], ...], tuple[str, ...], tuple[str, ...]], ...] = (
    (
        "smu_v13_0_0_ppsmc",
        ((f"{AMD}/pm/swsmu/inc/pmfw_if/smu_v13_0_0_ppsmc.h", False), (f"{AMD}/pm/swsmu/smu13/smu_v13_0_0_ppt.c", True)),
        ("PPSMC_", "DEBUGSMC_"),
        (),
    ),
    (
        "smu13_driver_if_v13_0_0",
        ((f"{AMD}/pm/swsmu/inc/pmfw_if/smu13_driver_if_v13_0_0.h", False),),
        ("SMU13_0_0_DRIVER_IF_VERSION", "TABLE_", "PPCLK_", "TEMP_", "SVI_PLANE_", "THROTTLER_", "FEATURE_",
         "NUM_", "D3HOT_SEQUENCE_COUNT", "WORKLOAD_PPLIB_"),
        ("SmuMetrics_t", "SmuMetricsExternal_t"),
    ),
    (
        "psp_gfx_if",
        ((f"{AMD}/amdgpu/psp_gfx_if.h", False),),
        ("PSP_GFX_CMD_BUF_VERSION", "GFX_CMD_", "GFX_CTRL_CMD_ID_", "GFX_FLAG_", "GFX_FW_TYPE_", "PSP_ERR_",
         "TEE_", "FRAME_TYPE_"),
        ("struct psp_gfx_rb_frame", "struct psp_gfx_cmd_resp"),
    ),
    (
        "amdgpu_psp",
        ((f"{AMD}/amdgpu/amdgpu_psp.h", False), (f"{AMD}/amdgpu/amdgpu_ucode.h", False)),
        ("PSP_BL__", "PSP_FW_TYPE_", "AMDGPU_UCODE_ID_"),
        (),
    ),
    (
        "amd_discovery",
        ((f"{AMD}/include/discovery.h", False),),
        ("BINARY_SIGNATURE", "DISCOVERY_TABLE_SIGNATURE", "GC_TABLE_ID", "HARVEST_TABLE_SIGNATURE",
         "VCN_INFO_TABLE_ID", "MALL_INFO_TABLE_ID", "NPS_INFO_TABLE_ID", "PSP_HEADER_SIZE"),
        ("struct gpu_info_header", "struct gc_info_v1_0", "struct gc_info_v1_1", "struct gc_info_v1_2",
         "struct gc_info_v1_3", "struct gc_info_v2_0", "struct gc_info_v2_1"),
    ),
    (
        "sdma_v6_0_0_pkt_open",
        ((f"{AMD}/amdgpu/sdma_v6_0_0_pkt_open.h", True),),
        ("SDMA_OP_", "SDMA_SUBOP_", "SDMA_PKT_COPY_LINEAR_", "SDMA_PKT_WRITE_UNTILED_",
         "SDMA_PKT_POLL_REGMEM_", "SDMA_PKT_FENCE_", "SDMA_PKT_TIMESTAMP_", "SDMA_PKT_TRAP_", "SDMA_PKT_INDIRECT_"),
        (),
    ),
    (
        "nvd",
        ((f"{AMD}/amdgpu/nvd.h", True),),
        ("PACKET_TYPE", "PACKET3_"),
        (),
    ),
)

NAMES: tuple[str, ...] = tuple(p[0] for p in PROTOCOLS)


def kernel_paths() -> list[str]:
    """The kernel source paths every protocol module of :data:`PROTOCOLS` is generated from, sorted."""
    return sorted({path for _, files, _, _ in PROTOCOLS for path, _ in files})


def extract(tarball: Path, cache: Path) -> Path:
    """Extract the needed files and the top Makefile of ``tarball`` into ``cache``; return the tree root."""
    return genregs.extract(tarball, cache, [f"*/{p}" for p in kernel_paths()], subdir="kernel-proto")


def read(root: Path, files: tuple[tuple[str, bool], ...]) -> cheader.Header:
    """One :class:`cheader.Header` fed with every file of an entry, in order."""
    header = cheader.Header()
    for path, defines_only in files:
        header.feed((root / path).read_text(errors="replace"), defines_only=defines_only)
    return header


def _hex(value: int) -> str:
    return f"0x{value:X}" if value >= 0 else str(value)


def render(name: str, files: tuple[tuple[str, bool], ...], prefixes: tuple[str, ...], structs: tuple[str, ...],
           header: cheader.Header, kernel: str) -> str:
    """The text of ``<name>.py``."""
    kept = [n for n in header.order if n.startswith(prefixes)]
    missing = [p for p in prefixes if not any(n.startswith(p) for n in kept)]
    if missing:
        raise RuntimeError(f"{name}: no constant starts with {', '.join(missing)}")
    out = [
        "# Generated from the Linux amdgpu headers by tinyhw/autogen/genproto.py; do not edit.",
        f"# Command: {COMMAND}   (reads {sources.DEFAULT_TARBALL} of Debian's {sources.KERNEL_PACKAGE})",
        *(f"# Source: {path}{' (#define lines only)' if d else ''}" for path, d in files),
        f"# Contents: {len(kept)} constants, {len(structs)} struct layouts; constant prefixes:",
        *(f"#   {p}" for p in prefixes),
        f'"""{name}: protocol constants and layouts; see tinyhw/autogen/genproto.py for the format."""',
        "",
        f'KERNEL = "Linux {kernel}"',
        "HEADERS = (",
        *(f'    "{p}",' for p, _ in files),
        ")",
        "",
        "CONSTANTS = {",
        *(f'    "{n}": {_hex(header.constants[n])},' for n in kept),
        "}",
        "",
        "STRUCTS = {",
    ]
    for struct in structs:
        out.append(f'    "{struct}": ({header.sizeof(struct)}, {{')
        for e in header.layout(struct):
            ctype = e.ctype if e.bits is None else f"{e.ctype}:{e.bits}"
            out.append(f'        "{e.path}": ({e.offset}, "{ctype}", {e.count}),')
        out.append("    }),")
    out += ["}", ""]
    return "\n".join(out)


def generate(root: Path, kernel: str) -> dict[str, str]:
    """File name -> text of every generated module, from the tree at ``root``."""
    files: dict[str, str] = {}
    for name, paths, prefixes, structs in PROTOCOLS:
        files[f"{name}.py"] = render(name, paths, prefixes, structs, read(root, paths), kernel)
    return files


def main(argv: list[str] | None = None) -> int:
    """``python -m tinyhw.autogen.genproto``: regenerate the protocol modules from the kernel source; prints what
    changed; returns 1 when reading or parsing fails."""
    args = genregs.source_parser(COMMAND, __doc__.split("\n\n")[0]).parse_args(argv)
    try:
        root, kernel = genregs.kernel_tree(args, extract)
        files = generate(root, kernel)
    except (OSError, RuntimeError, cheader.CError) as exc:
        print(f"genproto: {exc}", file=sys.stderr)
        return 1
    changed = genregs.write(files, args.out, stale=None)
    print(f"genproto: {len(files)} modules in {args.out}; changed: {', '.join(changed) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
