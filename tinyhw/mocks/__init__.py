"""Emulated boards and bridges, written from the specs (never from the driver code they test).

``mocks`` is a transport layer: it may import layers 0-1 (``autogen``, ``errors``,
``transport``, ``regs``, ``formats``, ``boards``) and pyusb, never ``usb``, ``pci``
or any feature package.
"""
