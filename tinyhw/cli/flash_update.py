"""``tinyhw flash update`` (and the PSP write paths that stay disabled): a healthy board's flash through its PSP.

Front end of :class:`tinyhw.flash.update.Updater` (specs/navi31-spi-flash.md §e.5-§e.7): loads and checks
the image before the device is opened (exit 2), asks for confirmation (``--yes``), draws a bar per item on a
terminal, prints the throughput and what the next boot needs. The ``stream``, ``ifwi-step`` and
``live-flash`` paths of the seed are refused before anything is opened (§e.7: not validated).
"""

from __future__ import annotations

import click

from tinyhw.cli.app import App
from tinyhw.cli.flash_common import device_text, load_image, say
from tinyhw.cli.progressbar import ProgressBar
from tinyhw.errors import Refused


@click.command()
@click.argument("image", type=click.Path())
@click.option("--yes", is_flag=True, help="Do it without asking.")
@click.pass_obj
def update(app: App, image: str, yes: bool) -> None:
    """Update a healthy (booted) board's flash with IMAGE through the PSP early-boot mailbox.

    Streams the IFWI's items in the order the PSP asks for them (at most 19), one mailbox round
    trip per dword; the PSP checks their signatures, writes its own partitions and picks the one
    the next boot selects. Works only right after a power-on, before any driver (amdgpu, tinyhw am
    boot) has loaded the PSP's secure OS: reset the card and do not boot it first. Refused (exit 2,
    nothing sent) when IMAGE is not a complete 2 MiB IFWI, when it lacks an item the PSP may ask
    for, when its VBIOS names another board than the flash's, or when the mailbox is gated.

    When the PSP reports phase 2 a hard power cycle is required; afterwards flash verify IMAGE
    --after-update checks the result. Writes the flash (through the PSP).

    \b
    Example:
      tinyhw --device usb flash update image.bin --yes
      tinyhw --device mock:navi31-usb,psp=early flash update image.bin --yes
    """
    from tinyhw.flash.update import Updater, check_image

    data = load_image(image)
    check_image(data)  # before the device is opened
    transport = app.open_transport(writes=True)
    result = Updater(transport, data, confirm=lambda plan: app.confirm(yes, plan), progress=ProgressBar(app),
                     log=app.log, image_path=image).run()
    doc = result.as_dict()
    where = "modelled (the emulated board's virtual clock)" if transport.emulated else "measured"

    def human() -> None:
        say(app, f"flash update streamed {len(result.items)} items, {result.bytes_sent} bytes, in "
                  f"{result.seconds:.2f} s: {result.rate / 1024:.1f} KiB/s, {result.round_trips_per_kib:.0f} round "
                  f"trips per KiB ({result.data_transfers} DATA_TRANSFERs; time {where})")
        say(app, f"the psp reports phase 2 (transfer type 0x{result.final_state:x}): {result.next_boot}")
        dev = device_text(app)
        if transport.emulated:
            say(app, f"on the emulated board the power cycle is: tinyhw --device {dev} mock power-cycle")
        say(app, f"then check it: tinyhw --device {dev} flash verify {image} --after-update")

    app.emit({**doc, "time": where}, human)


def _disabled(name: str, what: str) -> click.Command:
    @click.command(name, context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
    @click.pass_context
    def cmd(ctx: click.Context) -> None:
        raise Refused(f"flash {name} is disabled: {what} was never validated on hardware; nothing was opened",
                      hint="update a healthy board with flash update IMAGE --yes; recover one with flash write")

    cmd.help = (f"Disabled: {what}. Refused with or without --yes, before the device is opened (the path was "
                "never validated on hardware). Use flash update (healthy board) or flash write (ROM_SW).\n\n"
                f"\b\nExample:\n  tinyhw flash {name}   # refused, exit 2")
    return cmd


#: §e.7: the seed's other write paths, kept refused
DISABLED = [
    _disabled("stream", "streaming one arbitrary item through the psp mailbox"),
    _disabled("ifwi-step", "streaming only the one item the psp asks for next"),
    _disabled("live-flash", "the linux live spi-rom update (UPDATE_ROM_IMAGE_ADDR_LO/HI, UPDATE_FLASH_IMAGE) "
                            "with sos running, which failed with 0x0c on stock hardware"),
]
