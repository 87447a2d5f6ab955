"""The emulated blocks' name for :mod:`tinyhw.commands` (the command tables live in the core, where the
serprog server, which never imports an emulator, uses them too)."""

from tinyhw.commands import CommandTable, Handler

__all__ = ["CommandTable", "Handler"]
