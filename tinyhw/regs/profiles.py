"""ASIC profiles: which kernel table each block's registers come from, and that ASIC's segment bases.

Facts only, with their sources. Byte offset of a register = 4 x (base of its segment + its
dword offset) (specs/amd-bringup.md §3.1, specs/navi31-spi-flash.md §a). On a real device the
bases come from its IP discovery table; pass them to ``tinyhw.regs.asic(name, bases=...)``.
The bases below are the offline fallback and are all **inferred**: Linux has no static
``*_ip_offset.h`` for Navi3x or Navi4x (specs/data-sources.md).

Sources of the bases (dwords):

* [sc] Linux 6.12 ``drivers/gpu/drm/amd/include/sienna_cichlid_ip_offset.h`` (Navi21): GC
  0x1260/0xA000/0x1C000/0x2402C00, HDP 0xF20/0x240A400, MMHUB 0x1A000/0x2408800, MP0 = MP1
  0x16000/0xDC0000/0xE00000/0xE40000/0x243FC00, NBIO 0x0/0x14/0xD20/0x10400/0x241B000, OSSSYS
  0x10A0/0x240A000, SMUIO 0x16800/0x16A00/0x440000/0x2401000. With SMUIO seg0 and MP0 seg0 the
  seed's hardware-validated Navi31 byte offsets come out exactly (ROM_SW_CNTL 0x5A3A0,
  C2PMSG_115 0x582CC; navi31-spi-flash.md §a.1), which is why Navi31 uses this table.
* [smuio-hdr] ``smuio_13_0_6_offset.h`` / ``smuio_14_0_2_offset.h`` print each address block's
  absolute byte address (misc 0x5a000 = 4 x 0x16800, tsc 0x5a8a0 = 4 x (0x16A00 + 0x28)).
* [mock] amd-bringup.md §3.4, tinygrad's RDNA4 emulator (GC 12.0.0): the [sc] values, plus NBIO
  seg5 0x4040000.
* [navi2x] Linux 6.12 ``beige_goby_ip_offset.h`` (Navi24) and ``dimgrey_cavefish_ip_offset.h`` (Navi23): NBIO has
  six bases, the [sc] five plus seg5 0x04040000. NBIO 4.3.0 has registers in segment 5 (RCC_DEV0_EPF2_STRAP2,
  BIF_BX_PF1_GPU_HDP_FLUSH_REQ/DONE; amd-bringup.md §4.5), so Navi31's table lists six too; the value is the
  Navi2x one (inferred: no Navi31 dump), kept here only.
* [am-mp1] amd-bringup.md §3.2: tinygrad's AM driver, which runs on Navi48, addresses MP1 with
  the mp 11.0.0 table at MP1 seg0 (C2PMSG_66 at 0x282 -> dword 0x16282). mp_14_0_2, which the
  kernel uses for MP1 14.0.x, puts C2PMSG_66 at segment 1 + 0x82, hence MP1 seg1 = 0x16200
  (inferred; the [mock] value 0xDC0000 would put it outside the 1 MiB register BAR).
"""

from __future__ import annotations

from dataclasses import dataclass, field

SC = "sienna_cichlid_ip_offset.h [sc]"


@dataclass(frozen=True)
class BlockSpec:
    """One block of one ASIC: the generated table its registers come from and its segment bases."""

    table: str  # generated table stem, e.g. "smuio_13_0_6"
    bases: tuple[int | None, ...]  # dword base of each segment; None = unknown
    ip: str  # IP discovery name of the block (HWIP), e.g. "SMUIO"
    version: str  # IP version this ASIC reports, as far as known
    source: str  # why this table, where the bases come from
    prefix: str = ""  # only the registers whose names start with this (SDMA in the GC table, MP0_/MP1_ in mp)
    inferred: bool = True  # bases not read from a device
    bases_ip: str = ""  # the IP whose discovered bases place these registers, when not ``ip`` (SDMA: GC)


@dataclass(frozen=True)
class AsicProfile:
    """What tinyhw knows about one ASIC's register space without a device."""

    name: str
    aliases: tuple[str, ...]
    description: str
    pci_ids: tuple[tuple[int, int], ...]
    bar: int  # BAR index of the register aperture
    blocks: dict[str, BlockSpec] = field(default_factory=dict)


_SC_GC = (0x1260, 0xA000, 0x1C000, 0x2402C00)
_SC_MP = (0x16000, 0xDC0000, 0xE00000, 0xE40000, 0x243FC00)
_SC_SMUIO = (0x16800, 0x16A00, 0x440000, 0x2401000)
_SC_NBIO = (0x0, 0x14, 0xD20, 0x10400, 0x241B000)
_SC_MMHUB = (0x1A000, 0x2408800)
_SC_OSSSYS = (0x10A0, 0x240A000)
_SC_HDP = (0xF20, 0x240A400)

NAVI31 = AsicProfile(
    name="navi31",
    aliases=("gfx1100",),
    description="Navi31, RX 7900 series (GC 11.0.0, gfx1100)",
    pci_ids=((0x1002, 0x744C),),  # navi31-spi-flash.md §0; pci.ids "Navi 31 [Radeon RX 7900 XT/7900 XTX]"
    bar=5,  # navi31-spi-flash.md §0: BAR5 is the 1 MiB register aperture
    blocks={
        "smuio": BlockSpec(
            "smuio_13_0_6",
            _SC_SMUIO,
            "SMUIO",
            "13.0.6-style map (version not stated by the kernel)",
            "gfx_v11_0.c uses smuio_13_0_6 for SMUIO < 15; seed offsets confirm (navi31-spi-flash.md §a.2); "
            f"bases {SC}, [smuio-hdr]",
        ),
        "mp0": BlockSpec(
            "mp_13_0_2",
            _SC_MP,
            "MP0",
            "13.0.0",
            f"psp_v13_0.c uses mp_13_0_2 for every MP0 13.0.x (mp_13_0_0 lacks C2PMSG_115/116); bases {SC}; "
            "seg0 confirmed by the seed's C2PMSG_73/115/116 offsets",
            "MP0_",
        ),
        "mp1": BlockSpec(
            "mp_13_0_2",
            _SC_MP,
            "MP1",
            "13.0.0",
            f"smu_v13_0.c uses mp_13_0_2; bases {SC} (amd-bringup.md §3.4 assumes MP1 seg0 = MP0 seg0)",
            "MP1_",
        ),
        "gc": BlockSpec("gc_11_0_0", _SC_GC, "GC", "11.0.0", f"gfx_v11_0.c; bases {SC} (amd-bringup.md §3.4)"),
        "sdma": BlockSpec(
            "gc_11_0_0",
            _SC_GC,
            "SDMA0",
            "6.0.0",
            f"sdma_v6_0.c: SDMA registers of gc_11_0_0 at GC bases; {SC}",
            "SDMA",
            bases_ip="GC",
        ),
        "nbio": BlockSpec(
            "nbio_4_3_0", (*_SC_NBIO, 0x4040000), "NBIO", "4.3.0", f"nbio_v4_3.c; bases {SC}, seg5 [navi2x]"
        ),
        "mmhub": BlockSpec("mmhub_3_0_0", _SC_MMHUB, "MMHUB", "3.0.0", f"mmhub_v3_0.c; bases {SC}"),
        "osssys": BlockSpec("osssys_6_0_0", _SC_OSSSYS, "OSSSYS", "6.0.0", f"ih_v6_0.c; bases {SC}"),
        "hdp": BlockSpec("hdp_6_0_0", _SC_HDP, "HDP", "6.0.0", f"hdp_v6_0.c; bases {SC}"),
    },
)

GFX1200 = AsicProfile(
    name="gfx1200",
    aliases=("navi48", "navi44", "gfx1201"),
    description="Navi4x, RX 9000 series (GC 12.0.x, gfx1200/gfx1201); kernel 6.12 has one GC 12 table",
    # amd-bringup.md §1.1: 0x7550/0x7551 Navi48, 0x7590 Navi44 (names inferred there)
    pci_ids=((0x1002, 0x7550), (0x1002, 0x7551), (0x1002, 0x7590)),
    bar=5,
    blocks={
        "smuio": BlockSpec("smuio_14_0_2", _SC_SMUIO, "SMUIO", "14.0.2", f"smuio_v14_0_2.c; bases [smuio-hdr], {SC}"),
        "mp0": BlockSpec(
            "mp_14_0_2", _SC_MP, "MP0", "14.0.2", f"psp_v14_0.c uses mp_14_0_2; bases [mock] = {SC}", "MPASP_"
        ),
        "mp1": BlockSpec(
            "mp_14_0_2",
            (0x16000, 0x16200, None, None, None, None, None, None),
            "MP1",
            "14.0.2",
            "smu_v14_0_2_ppt.c uses mp_14_0_2; seg0 [mock], seg1 derived from [am-mp1]; seg2-7 unknown",
            "MP1_",
        ),
        "gc": BlockSpec("gc_12_0_0", _SC_GC, "GC", "12.0.0", "gfx_v12_0.c; bases [mock]"),
        "sdma": BlockSpec(
            "gc_12_0_0", _SC_GC, "SDMA0", "7.0.0", "sdma_v7_0.c: SDMA registers of gc_12_0_0; bases [mock]", "SDMA",
            bases_ip="GC",
        ),
        "nbio": BlockSpec(
            "nbif_6_3_1", (*_SC_NBIO, 0x4040000), "NBIO", "6.3.1", "nbif_v6_3_1.c (NBIO 6.3.1 = NBIF); bases [mock]"
        ),
        "mmhub": BlockSpec("mmhub_4_1_0", _SC_MMHUB, "MMHUB", "4.1.0", "mmhub_v4_1_0.c; bases [mock]"),
        "osssys": BlockSpec("osssys_7_0_0", _SC_OSSSYS, "OSSSYS", "7.0.0", "ih_v7_0.c; bases [mock]"),
        "hdp": BlockSpec("hdp_7_0_0", _SC_HDP, "HDP", "7.0.0", "hdp_v7_0.c; bases [mock]"),
    },
)

PROFILES: dict[str, AsicProfile] = {p.name: p for p in (NAVI31, GFX1200)}


def all_profiles() -> dict[str, AsicProfile]:
    """Every profile by name: the ones above, then those of the board descriptions (tinyhw.boards: a board described
    there brings its own register profile, e.g. tinyhw.boards.navi33)."""
    from tinyhw.boards.registry import specs

    out = dict(PROFILES)
    for spec in specs():
        if spec.profile is not None:
            out.setdefault(spec.profile.name, spec.profile)
    return out


def profile_names() -> list[str]:
    """Every accepted ASIC name (profile names, then aliases)."""
    found = all_profiles()
    return [*found, *(a for p in found.values() for a in p.aliases)]


def find_profile(name: str) -> AsicProfile | None:
    """The profile called ``name`` or with that alias (case-insensitive)."""
    want = name.strip().lower()
    for p in all_profiles().values():
        if want == p.name or want in p.aliases:
            return p
    return None


def profile_for_pci(vendor_id: int, device_id: int) -> AsicProfile | None:
    """The profile of PCI function ``vendor_id:device_id`` (1002:744c -> navi31), or None."""
    for p in all_profiles().values():
        if (vendor_id, device_id) in p.pci_ids:
            return p
    return None
