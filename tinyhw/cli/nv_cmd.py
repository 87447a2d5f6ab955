"""``tinyhw nv info|boot|reset``: NVIDIA bring-up from user space (front end of :mod:`tinyhw.boot.nv`).

specs/nv-bringup.md §4-§13: ``boot`` refuses a GPU a driver owns, one not in D0 or one whose WPR2 is up, and
checks every firmware file, before any write; prints its plan, needs --yes, then runs FWSEC-FRTS, the booter
and GSP-RM up to its first RPCs with a progress line per step (the AMD ``am boot`` display); ``info`` reads;
``reset`` is a function-level reset.
"""

from __future__ import annotations

from typing import Any

import click

from tinyhw.cli.am_cmd import StepDisplay
from tinyhw.cli.app import App

#: the device the errors' hints show when no --device was given
EXAMPLE_DEVICE = "mock:ad102"
_FW_HELP = ("Directory of the NVIDIA firmware (default: $TINYHW_NVIDIA_FIRMWARE, else the first of tinyhw's firmware "
            "cache, where tests/fetch_firmware.sh puts Debian's files, and /lib/firmware/nvidia that holds gsp-rm): "
            "<version>/gsp_ga10x.bin or ga102/gsp/gsp-<version>.bin, and <chip>/gsp/booter_load-<version>.bin, "
            "bootloader-<version>.bin.")


@click.group("nv")
def nv() -> None:
    """NVIDIA GPUs without a driver (Ampere GA10x, Ada AD10x): boot GSP-RM, show what it reports, reset.

    \b
    Examples:
      tinyhw --device mock:ad102 nv info
      tinyhw --device vfio:0000:01:00.0 nv boot --yes --firmware-dir /lib/firmware/nvidia
      tinyhw --device mock:ad102 nv reset --yes
    """


@nv.command("info")
@click.option("--firmware-dir", metavar="DIR", help=_FW_HELP)
@click.pass_obj
def info_cmd(app: App, firmware_dir: str | None) -> None:
    """Identify the GPU and show what its GSP reported at boot (read-only).

    Reads BAR0 registers (chip, VRAM size, WPR2, the GSP's RISC-V state) and the PROM window (VBIOS version);
    writes nothing. Refused for a GPU a driver owns (use tinyhw probe there).

    \b
    Example:
      tinyhw --device mock:ad102 --json nv info
    """
    from tinyhw.boot.nv import locate_firmware
    from tinyhw.boot.nv.info import info

    where = locate_firmware(firmware_dir)
    t = app.open_transport(writes=False, example=EXAMPLE_DEVICE)
    doc = info(t, where.path)
    if isinstance(doc.get("firmware"), dict):
        doc["firmware"]["source"] = where.source
    app.emit(doc, lambda: _show_info(app, doc))


def _show_info(app: App, doc: dict[str, Any]) -> None:
    out = app.out
    chip = doc["chip"]
    out.print(f"[bold]{doc['device']}[/bold]  {doc['vendor_id']:04x}:{doc['device_id']:04x}  "
              f"{chip['name'] or hex(chip['chipset'])} ({chip['architecture_name'] or '?'})  "
              f"driver {doc['driver'] or 'none'}")
    gsp = doc["gsp"] or {}
    rows = [("gpu name", chip["name"] or "?", gsp.get("gpu_name")),
            ("memory", f"{doc['vram_mib']} MiB", f"{gsp['fb_size'] >> 20} MiB" if gsp else None),
            ("gsp version", doc.get("gsp_firmware_version") or "-", None),  # the static info carries none
            ("vbios", doc["vbios_version"] or "?", None)]
    out.print(f"{'':12} {'tinyhw read':28} gsp reported")
    for name, own, theirs in rows:
        out.print(f"{name:12} {own:28} {theirs if theirs is not None else '-'}")
    state = "up" if doc["wpr2_up"] else "down"
    out.print(f"wpr2 {state} (lo 0x{doc['wpr2_addr_lo']:08x} hi 0x{doc['wpr2_addr_hi']:08x}); gsp risc-v "
              f"{'running' if doc['gsp_riscv_active'] else 'stopped'}"
              + ("" if doc["gsp"] or not doc["wpr2_up"] else "; no record of that boot (booted elsewhere?)"))


@nv.command("boot")
@click.option("--yes", is_flag=True, help="Do it without asking (the plan is still printed).")
@click.option("--firmware-dir", metavar="DIR", help=_FW_HELP)
@click.option("--gsp-version", metavar="VERSION", help="The GSP-RM release to load when the directory holds several.")
@click.option("--allow-unknown-firmware", is_flag=True,
              help="Load well-formed files whose sha256 is not a known release's (linux-firmware's newer files).")
@click.pass_obj
def boot_cmd(app: App, yes: bool, firmware_dir: str | None, gsp_version: str | None,
             allow_unknown_firmware: bool) -> None:
    """Boot GSP-RM: FWSEC-FRTS, the booter, the GSP's RISC-V core, up to its first RPCs.

    Refused (exit 2) before any BAR write for a GPU bound to nvidia or nouveau, one not in D0, one whose WPR2
    is already up (reset it first: nv reset), and for a missing, damaged or unknown firmware file. Writes the
    GSP and SEC2 falcons, VRAM at 2 MiB and 4 MiB (the FWSEC and booter images) and host memory it maps for
    the GSP; the GSP-RM then owns the top of VRAM (WPR2). Over vfio: the IOMMU maps that memory; over pci:
    (as root) it is 2 MiB huge pages at physical addresses, refused behind an IOMMU that translates the GPU's
    DMA. It ends with bus mastering off, before the host memory is freed.

    \b
    Examples:
      tinyhw --device vfio:0000:01:00.0 nv boot --yes --firmware-dir /lib/firmware/nvidia
      echo 32 > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
      tinyhw --device pci:0000:01:00.0 nv boot --yes --firmware-dir /lib/firmware/nvidia
      tinyhw --device mock:ad102 nv boot --yes --firmware-dir /tmp/nvfw --allow-unknown-firmware
    (the emulated board's invented firmware set: see docs/nv-boot.md)
    """
    from tinyhw.boot import nv as engine
    from tinyhw.errors import Refused

    where = engine.locate_firmware(firmware_dir)
    directory = where.path
    t = app.open_transport(writes=True, example=EXAMPLE_DEVICE)
    gpu = engine.preflight_boot(t)
    try:
        fw = engine.load_firmware(directory, gpu.chip, version=gsp_version, allow_unknown=allow_unknown_firmware)
    except Refused as e:
        if where.searched:  # no directory was named: say where it looked
            e.add_context("firmware_dir", str(directory), f"(firmware from {where.describe()}; looked in "
                          + ", ".join(str(d) for d in where.searched) + ")")
        raise
    assert gpu.chip is not None
    app.confirm(yes, "\n".join([
        f"plan: boot gsp-rm {fw.version} on {t.identity().location} ({gpu.chip.name}, {gpu.vram_size >> 20} MiB)",
        "  " + ", ".join(engine.STEPS),
        f"  firmware from {where.describe()}: " + ", ".join(f.path.name for f in fw.files.values())]))
    display = StepDisplay(app)
    try:
        result = engine.boot(gpu, fw, on_step=display)
    finally:
        display.stop()
    done = result.to_doc()
    doc = {"device": t.identity().location, **done,
           "firmware": {**done.get("firmware", {}), "directory": str(directory), "source": where.source}}
    total = sum(s["seconds"] for s in result.steps)
    g = result.gsp
    app.emit(doc, lambda: app.out.print(
        f"gsp-rm {fw.version} up in {total:.3f} s: {g['gpu_name']}, {g['fb_size'] >> 20} MiB; "
        f"wpr2 0x{result.wpr2[0]:08x}..0x{result.wpr2[1]:08x}"))


@nv.command("reset")
@click.option("--yes", is_flag=True, help="Do it without asking (the plan is still printed).")
@click.pass_obj
def reset_cmd(app: App, yes: bool) -> None:
    """Tear down: bus mastering off, a function-level reset (VFIO or sysfs), then WPR2 must read 0.

    Everything the GSP held is lost. Refused for a GPU a driver owns.

    \b
    Example:
      tinyhw --device mock:ad102 nv reset --yes
    """
    from tinyhw.boot import nv as engine

    t = app.open_transport(writes=True, example=EXAMPLE_DEVICE)
    gpu = engine.preflight_reset(t)
    lo, hi = gpu.wpr2()
    app.confirm(yes, f"plan: function-level reset of {t.identity().location} (wpr2 {'up' if hi else 'down'}), "
                     "then check that wpr2 reads 0")
    done = engine.reset(gpu)
    doc = {"device": t.identity().location, **done}
    app.emit(doc, lambda: app.out.print(f"function reset done; wpr2 down (was 0x{lo:08x}..0x{hi:08x})"))
