"""SPI flash recovery for Navi31 boards through the GPU's SMUIO ROM_SW engine (specs/navi31-spi-flash.md).

Also, engine-independent: :mod:`~tinyhw.flash.aperture` (the read-only ROM_INDEX/ROM_DATA dump, §f),
:mod:`~tinyhw.flash.psp` (the read-only PSP early-boot mailbox probe, §e.4),
:mod:`~tinyhw.flash.update` (a healthy board's update through that mailbox, §e.5-§e.6),
:mod:`~tinyhw.flash.identity` (board identity from the VBIOS, §g.3, checked before a write),
:mod:`~tinyhw.flash.vote` (majority-vote reads: every sector read N times) and
:mod:`~tinyhw.flash.layout` (the IFWI's regions as a flash layout, the layout check before a write).

Layer 3: handed a :class:`~tinyhw.transport.Transport`, never constructing one. Typical use::

    with FlashDevice(transport) as dev:          # engine set up once, chip identified (JEDEC first)
        data = ops.dump(dev)                     # chained priming: N + 1 transactions for N reads
        voted = vote.read(dev, 0, dev.size, 3)   # each sector read 3 times, each byte's majority
        region = layout.chip_layout(dev).find("vbios-a")
        result = ops.verify(dev, image)
        Writer(dev, Job("write", image=image), confirm=lambda plan: None).run()
"""

from tinyhw.flash import aperture, identity, layout, ops, psp, update, vote
from tinyhw.flash.chip import CHIP_NAME, Gd25, Status
from tinyhw.flash.device import FlashDevice
from tinyhw.flash.journal import Journal, state_dir
from tinyhw.flash.ops import VerifyResult, check_sector_range
from tinyhw.flash.protection import Protection, protected_range
from tinyhw.flash.romsw import RomSw, Rx
from tinyhw.flash.writer import Job, JobResult, Writer
from tinyhw.progress import Progress

__all__ = [
    "CHIP_NAME",
    "FlashDevice",
    "Gd25",
    "Job",
    "JobResult",
    "Journal",
    "Progress",
    "Protection",
    "RomSw",
    "Rx",
    "Status",
    "VerifyResult",
    "Writer",
    "check_sector_range",
    "aperture",
    "identity",
    "layout",
    "ops",
    "protected_range",
    "psp",
    "state_dir",
    "update",
    "vote",
]
