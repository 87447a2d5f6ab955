"""Where GSP-RM's host-interface structures keep their fields, per release branch (535 and 570).

The kernel driver and GSP-RM of one release share these structures byte for byte, and they move between
branches: 535's ``MESSAGE_QUEUE_INIT_ARGUMENTS`` carries two lockless-queue offsets that 570 dropped, 570's
``GspSystemInfo`` gained the PCI ids and an I/O BAR address, and ``GspStaticConfigInfo`` lost the per-GPC tables.
Every offset here is derived, field by field, in docs/nv-gsp-layouts.md from NVIDIA's published headers
(535.113.01 and 570.144 as nouveau carries them); the derivation, not this table, is the reference. Nothing here
has met a real GSP-RM.

Structures that did not change between the two branches (``LibosMemoryRegionInitArgument``, ``msgqTxHeader``,
the queue element header, ``rpc_message_header_v03_00``, the ``GspFwWprMeta`` fields tinyhw writes) keep their
single layout in :mod:`~tinyhw.boot.nv.gspmem`, :mod:`~tinyhw.boot.nv.rpc` and :mod:`~tinyhw.boot.nv.layout`.
"""

from __future__ import annotations

from dataclasses import dataclass

from tinyhw.errors import Refused


@dataclass(frozen=True)
class GspLayouts:
    """Sizes and byte offsets of one GSP-RM branch's boot structures (``None``: the branch has no such field)."""

    branch: int
    #: MESSAGE_QUEUE_INIT_ARGUMENTS: 535 appends locklessCmdQueueOffset @32, locklessStatQueueOffset @40
    queue_args_size: int
    #: GSP_ARGUMENTS_CACHED: total size, srInitArguments, gpuInstance, bDmemStack, profilerArgs offsets
    rm_args_size: int
    sr_init_at: int
    gpu_instance_at: int
    dmem_stack_at: int | None
    profiler_at: int
    #: GspSystemInfo: total size and the offsets of the fields tinyhw sets
    system_info_size: int
    sys_phys_io_at: int | None
    sys_bdf_at: int
    sys_max_user_va_at: int
    sys_config_mirror_at: int
    sys_pci_ids_at: int | None  # PCIDeviceID, PCISubDeviceID, PCIRevisionID as three u32
    sys_passthru_at: int
    #: GspStaticConfigInfo: total size and the offsets of the fields tinyhw reads
    static_info_size: int
    fb_regions_at: int
    fb_length_at: int
    gpu_name_at: int
    gpu_short_name_at: int


BRANCH_535 = GspLayouts(
    branch=535, queue_args_size=48, rm_args_size=80, sr_init_at=48, gpu_instance_at=60, dmem_stack_at=None,
    profiler_at=64, system_info_size=664, sys_phys_io_at=None, sys_bdf_at=24, sys_max_user_va_at=56,
    sys_config_mirror_at=64, sys_pci_ids_at=None, sys_passthru_at=608, static_info_size=2168, fb_regions_at=840,
    fb_length_at=1752, gpu_name_at=1820, gpu_short_name_at=1884)

BRANCH_570 = GspLayouts(
    branch=570, queue_args_size=32, rm_args_size=72, sr_init_at=32, gpu_instance_at=44, dmem_stack_at=48,
    profiler_at=56, system_info_size=928, sys_phys_io_at=24, sys_bdf_at=32, sys_max_user_va_at=72,
    sys_config_mirror_at=80, sys_pci_ids_at=88, sys_passthru_at=840, static_info_size=1656, fb_regions_at=344,
    fb_length_at=1224, gpu_name_at=1260, gpu_short_name_at=1324)

BRANCHES = {535: BRANCH_535, 570: BRANCH_570}


def layouts_for(version: str) -> GspLayouts:
    """The layouts of GSP-RM release ``version`` (``535.261.03`` -> the 535 branch); any other branch is refused,
    since its structures are not known to tinyhw."""
    head = version.split(".", 1)[0]
    branch = BRANCHES.get(int(head)) if head.isdigit() else None
    if branch is None:
        raise Refused(f"gsp-rm {version} is of a release branch whose boot structures tinyhw does not know "
                      f"(it knows {' and '.join(str(b) for b in BRANCHES)})",
                      hint="use a 535.x or 570.x firmware set (docs/nv-gsp-layouts.md)")
    return branch
