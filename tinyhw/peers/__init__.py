"""Peer drivers on the emulated boards: drivers that have run on real GPUs, attached by one small adapter each.

ARCHITECTURE.md "Testing tiers" item 5. Each module replaces exactly one lowest layer of a peer driver with the
emulated board and leaves everything above it unmodified (docs/peer-drivers.md lists what is replaced and why):

* :mod:`tinyhw.peers.tinygrad_amd`: tinygrad's AMD driver (``DEV=AMD``, its AM driver, no kernel driver) on
  ``mock:navi31`` (tinygrad's ``PCIDevice``) and ``mock:navi31-usb`` (tinygrad's ``USB3``).
* :mod:`tinyhw.peers.tinygrad_nv`: tinygrad's NVIDIA driver (``NVDev``) on ``mock:ad102`` (tinygrad's ``PCIDevice``).
"""
