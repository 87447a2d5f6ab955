"""The ASM24 (ASM2464PD/ASM2364) USB-to-PCIe bridge transport, custom firmware, over pyusb.

Facts: specs/asm24-usb-bridge.md. pyusb is imported lazily (``tinyhw --help`` must stay fast).
"""
