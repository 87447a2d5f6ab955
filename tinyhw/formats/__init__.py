"""Pure parsers: bytes (or a ``read(offset, n)`` callable) in, dataclasses out.

Nothing here touches a device or the filesystem beyond reading a named file; every
module imports only the standard library and :mod:`tinyhw.errors`, so any layer may
use them (ARCHITECTURE.md, "Layers").
"""
