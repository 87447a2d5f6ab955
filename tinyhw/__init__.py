"""tinyhw: bring up and rescue GPUs from user space.

The package is layered (see ARCHITECTURE.md): ``autogen`` (data) < core (``errors``,
``transport``, ``regs``, ``formats``, ``boards``) < transports (``pci``, ``usb``,
``mocks``) < features (``probe``, ``flash``, ...) < ``cli``.
"""

__version__ = "0.1.0"
