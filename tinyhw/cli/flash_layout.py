"""``tinyhw flash layout [IMAGE]``: the regions of an IFWI, from an image file or the flash's own tables.

Front end of :mod:`tinyhw.flash.layout` and :func:`tinyhw.formats.ifwi_regions.flash_regions`
(specs/navi31-spi-flash.md §g.1-§g.3): lists name, start, end and what each region is; the names
are what ``flash dump --region`` and ``flash write --region`` take.
"""

from __future__ import annotations

import click

from tinyhw.cli.app import App
from tinyhw.cli.flash_common import load_image, open_flash, say
from tinyhw.cli.numbers import Number
from tinyhw.errors import Refused


@click.command()
@click.argument("image", type=click.Path(), required=False)
@click.option("--reads", type=Number(minimum=1, maximum=15), default=1, show_default=True,
              help="Without IMAGE: read the flash's tables this many times (3..15) and vote per byte.")
@click.pass_obj
def layout(app: App, image: str | None, reads: int) -> None:
    """List the regions of an IFWI: PSP directories, ISH A/B and their payloads, $SGN entries, VBIOS, metadata.

    From IMAGE (a raw 2 MiB flash image), or without it from the flash itself: only its tables
    are read (a few KiB through the ROM_SW engine). Each region has a name (what flash dump
    --region and flash write --region take), a start, an end (inclusive in the listing,
    exclusive in --json) and what it is. Regions may overlap (the VBIOS sits inside a payload).

    Read-only.

    \b
    Examples:
      tinyhw flash layout image.bin
      tinyhw --device usb --json flash layout
    """
    from tinyhw.flash import vote
    from tinyhw.flash.layout import chip_layout, image_layout

    vote.check_reads(reads)
    if image is not None:
        if reads != 1:
            raise Refused("--reads reads the flash: give it without IMAGE")
        lay, source = image_layout(load_image(image)), image
    else:
        with open_flash(app) as dev:
            lay, source = chip_layout(dev, reads), f"the flash on {dev.location}"
    doc = {"source": source, **lay.to_doc()}

    def human() -> None:
        say(app, f"{len(lay.regions)} regions in {source}")
        width = max((len(r.name) for r in lay.regions), default=4)
        for r in lay.regions:
            say(app, f"  0x{r.start:06x}-0x{r.end - 1:06x}  {r.name:<{width}}  {r.what}")
        for p in lay.problems:
            say(app, f"  not resolved: {p}")

    app.emit(doc, human)
