"""Helpers shared by the ``tinyhw flash`` commands: the flash device, progress bar, numbers, image files, output.

Front end of :mod:`tinyhw.flash` (specs/navi31-spi-flash.md); images and output paths follow
:mod:`tinyhw.fileio` (checked before the device is touched, exit 2).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import click

from tinyhw.cli.app import App
from tinyhw.fileio import read_input
from tinyhw.flash import FlashDevice
from tinyhw.flash.files import MAX_IMAGE

META = "tinyhw.flash"


def load_image(path: str) -> bytes:
    """A flash image: a regular file of at most the flash size, checked before a byte is read (exit 2)."""
    return read_input(path, MAX_IMAGE, "image")


def say(app: App, text: str) -> None:
    """A line of output, printed literally: a path with ``[red]`` or ``:smile:`` in it stays what it is."""
    app.out.print(text, markup=False, emoji=False)


FORCE_HELP = "Overwrite FILE if it exists (a regular file only; device nodes, fifos and directories are refused)."


@contextmanager
def open_flash(app: App, *, writes: bool = False) -> Iterator[FlashDevice]:
    """Context manager: open the device and its SPI flash driver with the ``flash`` group's options (chained reads,
    clock prescale), logging the chip's notes; yields the :class:`FlashDevice`."""
    opts = click.get_current_context().meta.get(META, {})
    transport = app.open_transport(writes=writes)
    dev = FlashDevice(transport, chain=opts.get("chain", True), prescale=opts.get("prescale", 8))
    with dev:
        for note in dev.chip.notes:
            app.log(f"note: {note}")
        yield dev


def device_text(app: App) -> str:
    """The device string to repeat in a resume hint (an emulated board's one-shot faults= left out)."""
    from dataclasses import replace

    from tinyhw.transport.devstr import given_device

    spec = given_device(app.device)
    if spec is None:
        return "DEVICE"
    return str(replace(spec, options={k: v for k, v in spec.options.items() if k != "faults"}))
