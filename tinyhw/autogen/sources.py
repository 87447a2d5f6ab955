"""Which kernel register headers the generated databases come from (layer 0: data only).

The reference tree is Debian's ``linux-source-6.12`` package (``apt-get install
linux-source-6.12`` gives ``/usr/src/linux-source-6.12.tar.xz``; see
specs/data-sources.md). Each entry of :data:`TABLES` is one IP block version: the
generator reads ``<dir>/<stem>_offset.h`` and ``<dir>/<stem>_sh_mask.h`` under
:data:`ASIC_REG_DIR` and writes ``tinyhw/autogen/<stem>_regs.py``.

Why these tables (the kernel's own choices, Linux 6.12):

* Navi31 (GC 11.0.0, gfx1100): ``gfx_v11_0.c`` -> gc_11_0_0 and smuio_13_0_6;
  ``psp_v13_0.c`` (every MP0 13.0.x, Navi31 is 13.0.0) and ``smu_v13_0.c`` -> mp_13_0_2
  (mp_13_0_0 lacks MP0 C2PMSG_115/116; ``soc21.c`` includes it, so it is kept for reference);
  ``sdma_v6_0.c`` -> the SDMA registers of gc_11_0_0; ``nbio_v4_3.c`` -> nbio_4_3_0;
  ``mmhub_v3_0.c`` -> mmhub_3_0_0; ``ih_v6_0.c`` -> osssys_6_0_0; ``hdp_v6_0.c`` -> hdp_6_0_0.
* Navi33 (GC 11.0.2, gfx1102): the Navi31 tables, except ``mmhub_v3_0_2.c`` (MMHUB 3.0.2) -> mmhub_3_0_2.
* gfx1200 / Navi4x (GC 12.0.x): ``gfx_v12_0.c`` and ``sdma_v7_0.c`` -> gc_12_0_0;
  ``smuio_v14_0_2.c`` -> smuio_14_0_2; ``psp_v14_0.c`` and ``smu_v14_0_2_ppt.c`` -> mp_14_0_2;
  ``nbif_v6_3_1.c`` -> nbif_6_3_1; ``mmhub_v4_1_0.c`` -> mmhub_4_1_0; ``ih_v7_0.c`` ->
  osssys_7_0_0; ``hdp_v7_0.c`` -> hdp_7_0_0.
* gfx950 (GC 9.5.0, MI350) has no headers in Linux 6.12 (no gc_9_5_0_*), so it is not covered.
"""

from __future__ import annotations

#: Debian package whose tarball is the reference kernel tree.
KERNEL_PACKAGE = "linux-source-6.12"
#: Where that package puts the tarball.
DEFAULT_TARBALL = "/usr/src/linux-source-6.12.tar.xz"
#: Header directory inside the kernel tree.
ASIC_REG_DIR = "drivers/gpu/drm/amd/include/asic_reg"

#: (directory under ASIC_REG_DIR, header stem), one generated module per entry.
TABLES: tuple[tuple[str, str], ...] = (
    ("smuio", "smuio_13_0_6"),
    ("smuio", "smuio_14_0_2"),
    ("mp", "mp_13_0_0"),
    ("mp", "mp_13_0_2"),
    ("mp", "mp_14_0_2"),
    ("gc", "gc_11_0_0"),
    ("gc", "gc_12_0_0"),
    ("nbio", "nbio_4_3_0"),
    ("nbif", "nbif_6_3_1"),
    ("mmhub", "mmhub_3_0_0"),
    ("mmhub", "mmhub_3_0_2"),
    ("mmhub", "mmhub_4_1_0"),
    ("oss", "osssys_6_0_0"),
    ("oss", "osssys_7_0_0"),
    ("hdp", "hdp_6_0_0"),
    ("hdp", "hdp_7_0_0"),
)

STEMS: tuple[str, ...] = tuple(stem for _, stem in TABLES)


def header_paths(stem: str) -> tuple[str, str]:
    """Kernel-relative paths of the offset and sh_mask headers of ``stem``."""
    directory = dict((s, d) for d, s in TABLES)[stem]
    base = f"{ASIC_REG_DIR}/{directory}/{stem}"
    return f"{base}_offset.h", f"{base}_sh_mask.h"


def module_name(stem: str) -> str:
    """Import name of the generated module of ``stem``."""
    return f"tinyhw.autogen.{stem}_regs"
