"""``tinyhw am info|boot|reset``: AMD bring-up from user space (front end of :mod:`tinyhw.boot`).

specs/amd-bringup.md §1-§7: ``info`` reads (VRAM size, IP discovery, harvest, GC info, gfx target,
VF bit, boot flags, sOS/SMU state, needed firmware); ``boot`` checks every firmware file first
(exit 2 before any write), prints its plan, needs --yes, then brings the PSP secure OS and the SMU
up with a progress line per step (stderr: on a terminal, or with -v anywhere); ``reset`` is a mode-1 reset.
"""

from __future__ import annotations

from typing import Any

import click

from tinyhw.cli.app import App

_FW_HELP = ("Directory of the amdgpu firmware files (default: $TINYHW_AMDGPU_FIRMWARE, else the first of tinyhw's "
            "firmware cache, where tests/fetch_firmware.sh puts them, and /lib/firmware/amdgpu that holds them).")


class StepDisplay:
    """Per-step progress on stderr: on a terminal a spinner for the running step and a line per finished one;
    elsewhere (a log file, a pipe) plain lines with -v (a ``step NAME ...`` line as each starts, so a log shows
    where a boot stopped, and an ``ok`` line as it ends). Nothing with -q."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.live = not app.quiet and not app.json and app.err.is_terminal
        self.plain = not app.quiet and not self.live and app.verbose > 0
        self._status: Any = None

    def __call__(self, name: str, phase: str, detail: dict[str, Any]) -> None:
        if self.plain:
            self._plain(name, phase, detail)
        if not self.live:
            return
        if phase == "start":
            if self._status is None:
                self._status = self.app.err.status(f"{name} ...")
                self._status.start()
            else:
                self._status.update(f"{name} ...")
            return
        self.app.err.print(f"[green]ok[/green] {name:<28} {detail['seconds']:9.3f} s{_size(detail)}")

    def _plain(self, name: str, phase: str, detail: dict[str, Any]) -> None:
        if phase == "start":
            self.app.log(f"step {name} ...")
        else:
            self.app.log(f"ok {name:<28} {detail['seconds']:9.3f} s{_size(detail)}")

    def stop(self) -> None:
        """Remove the live status line, if one is shown."""
        if self._status is not None:
            self._status.stop()
            self._status = None


def _size(detail: dict[str, Any]) -> str:
    return f"  {detail['bytes']:,} bytes" if detail.get("bytes") else ""


def _gpu(app: App, *, writes: bool) -> Any:
    from tinyhw.boot.amd import AmGpu

    transport = app.open_transport(writes=writes)
    return AmGpu(transport, warn=lambda line: click.echo(line, err=True))


@click.group("am")
def am() -> None:
    """AMD GPUs without the amdgpu driver: identify, boot the PSP and SMU, reset; status, rings, waves, hang reports.

    \b
    Examples:
      tinyhw --device mock:navi31 am info
      tinyhw --device mock:navi31-usb am boot --yes --firmware-dir ~/.cache/tinyhw/firmware/amd/lib/firmware/amdgpu
      tinyhw --device mock:navi31 am reset --yes
      tinyhw --device mock:navi31 am status
      tinyhw --device mock:navi31 am hang-report -o hang.json
    """


@am.command("info")
@click.option("--firmware-dir", metavar="DIR", help=_FW_HELP)
@click.option("--probe-smu", is_flag=True, help="Also ask the SMU for its version (one mailbox message).")
@click.pass_obj
def info_cmd(app: App, firmware_dir: str | None, probe_smu: bool) -> None:
    """Identify the GPU (read-only): VRAM, IP discovery, GC info, gfx target, flags, sOS/SMU, firmware.

    Touches nothing: only register and VRAM reads (the discovery table at VRAM size - 64 KiB);
    --probe-smu sends one GetSmuVersion message through the SMU mailbox.

    \b
    Example:
      tinyhw --device mock:navi31 --json am info
    """
    from tinyhw.boot.amd import firmware, identify

    gpu = _gpu(app, writes=False)
    where = firmware.locate(firmware_dir, gpu.discovery.versions())
    doc = identify.info(gpu, where.path, smu_probe=probe_smu)
    doc["firmware"]["source"] = where.source
    app.emit(doc, lambda: _show_info(app, doc))


def _show_info(app: App, doc: dict[str, Any]) -> None:
    from rich.table import Table

    out = app.out
    out.print(f"[bold]{doc['device']}[/bold]  {doc['vendor_id']:04x}:{doc['device_id']:04x}  {doc['asic']}  "
              f"gfx target {doc.get('gfx_target') or '?'}")
    out.print(f"vram {doc['vram_mib']} MiB, bar0 {doc['bar0_bytes'] >> 20} MiB "
              f"({'large' if doc['large_bar'] else 'small'} bar), virtual function: {'yes' if doc['vf'] else 'no'}")
    disc = doc.get("discovery")
    if disc:
        t = Table(title=f"ip discovery (binary v{disc['version']}, ip table v{disc['ip_table_version']}, "
                        f"read via {disc['path']})")
        for col in ("block", "hw_id", "die", "inst", "version", "bases"):
            t.add_column(col)
        for ip in disc["ips"]:
            t.add_row(ip["block"], str(ip["hw_id"]), str(ip["die"]), str(ip["instance"]), ip["version"],
                      " ".join(f"0x{b:x}" for b in ip["bases"]))
        out.print(t)
        harvest = ", ".join(f"{h['block']}#{h['instance']}" for h in disc["harvest"]) or "none"
        out.print(f"harvested: {harvest}")
    gc = doc.get("gc_info")
    if gc and "derived" in gc:
        d = gc["derived"]
        out.print(f"gc info v{gc['version']}: {d['shader_engines']} shader engines, {d['shader_arrays']} arrays, "
                  f"{d['compute_units']} CUs, wave{d['wave_size']}, {d['max_waves_per_simd']} waves/simd, "
                  f"lds {d['lds_kib']} KiB")
    elif gc:
        out.print(f"gc info v{gc['version']}: {gc.get('problem', 'not decoded')}")
    st = doc["state"]
    flags = (f"tinyhw boot flags set (tmr 0x{st['scratch_reg5_tmr_size']:x}, reg6 {st['scratch_reg6']})"
             if st["tinyhw_booted"] else "no tinyhw boot flags")
    out.print(f"{flags}; psp sos {'alive' if st['sos_alive'] else 'not running'}; "
              f"smu {'answered' if st['smu_answered'] else 'no answer recorded'}; "
              f"km ring {'present' if st['km_ring_size'] else 'none'}")
    out.print(f"next am boot: {st['next_boot']} ({st['next_boot_reason']})")
    if "smu" in doc:
        smu = doc["smu"]
        out.print("smu probe: " + (f"alive, version 0x{smu['version']:08x}" if smu.get("version") is not None
                                   else "alive" if smu["alive"] else "no answer in 100 ms"))
    fw = doc.get("firmware") or {}
    if "files" in fw:
        t = Table(title=f"firmware ({fw['directory']}" + (f", {fw['source']})" if fw.get("source") else ")"))
        for col in ("file", "status", "version"):
            t.add_column(col)
        for f in fw["files"]:
            status = "ok" if f.get("ok") else ("missing" if not f["present"] else f.get("problem", "bad"))
            t.add_row(f["file"], status, f"0x{f['ucode_version']:x}" if "ucode_version" in f else "")
        out.print(t)
    elif fw:
        out.print(f"firmware: {fw.get('problem')}")


@am.command("boot")
@click.option("--yes", is_flag=True, help="Do it without asking (the plan is still printed).")
@click.option("--firmware-dir", metavar="DIR", help=_FW_HELP)
@click.option("--allow-unknown-firmware", is_flag=True,
              help="Load files whose sha256 is not the Debian package's (newer linux-firmware releases).")
@click.option("--no-copy-engine", is_flag=True,
              help="Stop after the PSP/SMU boot: leave the page tables, GC/MM hubs, IH rings, MEC and SDMA0 alone.")
@click.option("--firmware-path", type=click.Choice(["auto", "sram", "bar"]), default="auto", show_default=True,
              help="Where the PSP reads the firmware: the usb bridge's sram through MMHUB VMID0 (auto: when the "
                   "transport has it) or vram written through the bar.")
@click.pass_obj
def boot_cmd(app: App, yes: bool, firmware_dir: str | None, allow_unknown_firmware: bool,
             no_copy_engine: bool, firmware_path: str) -> None:
    """Boot the PSP secure OS and the SMU (full, partial, or after a mode-1 reset).

    Every firmware file is checked before anything is written; a missing, truncated, damaged or
    another ASIC's file is refused (exit 2). Writes VRAM (the boot region below 64 MiB, the copy
    engine's page tables and rings below 83 MiB) and PSP, SMU, GC, MMHUB, IH and SDMA registers. The
    last step before the flags brings up the copy engine (VMID0 page tables, GC/MM hubs, IH rings, MEC
    enable, SDMA0 ring and doorbell: amd-bringup.md §4.2 steps 3-4, 9a, 9d, 10) unless --no-copy-engine.
    Behind the usb bridge the firmware goes into the bridge's sram (one bulk transfer per batch instead of
    streamed bar writes) and the PSP reads it through MMHUB VMID0 (docs/usb-copy.md).

    \b
    Example:
      tinyhw --device mock:navi31 am boot --yes --firmware-dir ~/.cache/tinyhw/firmware/amd/lib/firmware/amdgpu
    """
    from tinyhw.boot.amd import firmware, fwstage, preflight_boot, read_state, sequence
    from tinyhw.errors import Refused

    gpu = preflight_boot(_gpu(app, writes=True))
    fwstage.open_stage(gpu, firmware_path)  # --firmware-path sram without the bridge's sram: refused before anything
    where = firmware.locate(firmware_dir, gpu.discovery.versions())
    directory = where.path
    try:
        fw = firmware.load(directory, gpu.discovery.versions(), allow_unknown=allow_unknown_firmware)
    except Refused as e:
        if where.searched:  # no directory was named: say where it looked
            e.add_context("firmware_dir", str(directory), f"(firmware from {where.describe()}; looked in "
                          + ", ".join(str(d) for d in where.searched) + ")")
        raise
    state = read_state(gpu)
    kind, reason = sequence.plan(state)
    steps = {"partial": "check the smu, pin clocks to the highest dpm level, "
                        + ("" if no_copy_engine else "copy engine, ") + "rewrite the flags",
             "full": "psp bootloader, km ring, toc/tmr, load_ip_fw (smu first), autoload rlc, smu, clocks, "
                     + ("" if no_copy_engine else "copy engine, ") + "flags",
             "reset+full": "mode-1 reset, then the full boot"}[kind]
    lines = [f"plan: {kind} boot of {gpu.transport.identity().location} ({reason})", f"  {steps}"]
    if kind != "partial":
        lines.append(f"  firmware from {where.describe()}: " + ", ".join(f.name for f in fw.files.values()))
    app.confirm(yes, "\n".join(lines))
    display = StepDisplay(app)
    try:
        result = sequence.boot(gpu, fw, on_step=display, state=state, copy_engine=not no_copy_engine,
                               firmware_path=firmware_path)
    finally:
        display.stop()
    doc = {"device": gpu.transport.identity().location, **result.to_doc(),
           "firmware": {"directory": str(directory), "source": where.source}}
    total = sum(s["seconds"] for s in result.steps)
    app.emit(doc, lambda: app.out.print(
        f"{result.kind} boot done in {total:.3f} s: psp sos alive, smu 0x{result.smu_version:08x}, "
        f"tmr 0x{result.tmr_size:x}, clocks " + ", ".join(f"{k} {v} MHz" for k, v in result.clocks.items())))


@am.command("reset")
@click.option("--yes", is_flag=True, help="Do it without asking (the plan is still printed).")
@click.pass_obj
def reset_cmd(app: App, yes: bool) -> None:
    """Mode-1 reset the whole GPU (SMU debug mailbox; PSP fallback) and clear tinyhw's boot flags.

    An active compute queue is dequeued first (its waves reset); one that does not dequeue stops the command.

    Waits until the PSP bootloader answers again. Everything the firmware held is lost.

    \b
    Example:
      tinyhw --device mock:navi31 am reset --yes
    """
    from tinyhw.boot.amd import preflight_reset, read_state, sequence

    gpu = preflight_reset(_gpu(app, writes=True))
    state = read_state(gpu)
    app.confirm(yes, f"plan: mode-1 reset of {gpu.transport.identity().location} "
                     f"({'firmware running' if state.firmware_running else 'no firmware running'}) after dequeuing "
                     "an active compute queue, wait for the psp bootloader, clear the boot flags")
    t0 = gpu.clock.now()
    done = sequence.reset_gpu(gpu)
    doc = {"device": gpu.transport.identity().location, "reset": done["path"], "compute_queue": done["compute_queue"],
           "seconds": round(gpu.clock.now() - t0, 6), "state": read_state(gpu).to_doc()}
    how = {"smu": "through the smu", "psp": "through the psp", "function-reset": "by a pci function reset",
           "none": "not needed (no firmware answered)"}
    q = done["compute_queue"]
    queue = f"compute queue me{q['me']} pipe{q['pipe']} queue{q['queue']} dequeued; " if q["dequeued"] else ""
    app.emit(doc, lambda: app.out.print(f"{queue}mode-1 reset {how[done['path']]}; bootloader ready, flags cleared"))


def _views() -> None:
    from tinyhw.cli.am_debug_cmd import COMMANDS

    for command in COMMANDS:
        am.add_command(command)


_views()
