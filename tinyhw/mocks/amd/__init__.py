"""The emulated AMD board (Navi31) and its blocks, written from the specs (never from tinyhw.boot.amd).

The board (:mod:`~tinyhw.mocks.amd.board`) and its direct transport (``mock:navi31``), the flash side
(SMUIO ROM_SW engine, GD25LQ16E, PSP mailbox and update, the synthetic IFWI image), the boot path (PSP,
SMU), the GPU blocks (GPU VM, SDMA, command processor, doorbells, SQ indirect registers, performance
counters, thread trace), IP discovery and the board state file. The shader core is
:mod:`tinyhw.mocks.rdna3`; shared parts come from :mod:`tinyhw.mocks.common`.
"""
