"""Where tinyhw's boot puts things in VRAM: a fixed layout, so another process can find them again.

Spec: specs/amd-bringup.md §4.5 (a boot region at the bottom of VRAM whose allocations come in a
fixed order, so a second process recomputes the same addresses: that is how ``smi`` finds the SMU
driver table of a board another tinyhw process booted, without re-pointing the SMU), §5.1 (the
bootloader message buffer is 1 MiB aligned: C2PMSG_36 takes MC >> 20), §5.2 (64 KiB KM ring, 1 KiB
command buffer, fence page), §5.3 (TMR 1 MiB aligned, sized by LOAD_TOC), §6.4 / §4.2 step 8 (16 KiB
SMU driver table). The layout is tinyhw's own (it does not replay AM's page-table and IH
allocations, which tinyhw does not make); everything sits below 80 MiB, inside even a small 256 MiB BAR0.
"""

from __future__ import annotations

KiB, MiB = 1 << 10, 1 << 20

#: message buffer: the TOC for LOAD_TOC (1 MiB aligned, up to 1 MiB)
MSG_BUF, MSG_BUF_SIZE = 0x0, 1 * MiB
#: KM ring command buffer (``psp_gfx_cmd_resp``, 1 KiB used of a 4 KiB page)
CMD_BUF = 0x100000
#: fence page: the PSP writes each frame's fence value here
FENCE = 0x101000
#: KM ring, 64 KiB of 64-byte frames
RING, RING_SIZE = 0x102000, 64 * KiB
#: SMU driver table (metrics land here): 16 KiB
SMU_TABLE, SMU_TABLE_SIZE = 0x112000, 16 * KiB
#: bootloader components, one 1 MiB-aligned slot each (C2PMSG_36 takes MC >> 20). All are copied before
#: the first bootloader command, so an interrupted copy never leaves the bootloader part-way through.
BL_SLOTS, BL_SLOT_SIZE, BL_SLOT_COUNT = 0x200000, 1 * MiB, 8
#: trusted memory region, 1 MiB aligned; the TOC reports its size (at most TMR_MAX here)
TMR, TMR_MAX = 0x1000000, 32 * MiB
#: staging area of the LOAD_IP_FW images, written in one streamed transfer
STAGING, STAGING_MAX = 0x3000000, 32 * MiB
#: alignment of each image inside the staging area
STAGING_ALIGN = 4 * KiB

#: tinyhw's boot flag in SCRATCH_REG7 (amd-bringup.md §4.1 keeps the same three registers; the value is
#: tinyhw's own so that AM and tinyhw never mistake each other's boots for their own)
BOOT_MAGIC = 0x7E1B0001


def stage(sizes: list[int]) -> list[int]:
    """Offsets (from STAGING) of images of ``sizes`` packed with STAGING_ALIGN alignment."""
    out, at = [], 0
    for n in sizes:
        out.append(at)
        at += -(-n // STAGING_ALIGN) * STAGING_ALIGN
    if at > STAGING_MAX:
        raise ValueError(f"firmware images of 0x{at:x} bytes do not fit the 0x{STAGING_MAX:x}-byte staging area")
    return out
