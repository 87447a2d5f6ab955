"""The emulated ASM2464/ASM2364 USB-to-PCIe bridge (custom firmware), from specs/asm24-usb-bridge.md.

Its USB device core, memory and TLP engine, the PCIe hierarchy behind it, and its fronts: a pyusb
backend (``mock:NAME-usb``) and a FunctionFS gadget (``tinyhw mock gadget``). It sits in front of any
board that answers the ``Endpoint`` protocol of :mod:`tinyhw.mocks.bridge.pcie_switch` and never
imports a board: :func:`tinyhw.connect.bridged_board` puts the two together.
"""
