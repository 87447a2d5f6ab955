"""``tinyhw kernels list|build|run``: probe kernels compiled through tinygrad.

Self-contained (registered as ``tinyhw.cli.kernels_cmd:kernels``). tinygrad is imported only by
``tinyhw.kernels.seam``, and only by ``build`` and ``run --device cpu``; ``list`` and ``run --device cuda:N``
use the committed binaries and need no compiler.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from tinyhw.cli.app import App
from tinyhw.cli.numbers import Number

TARGET_CHOICES = ("gfx1100", "gfx1200", "sm_90", "cpu")


@click.group()
def kernels() -> None:
    """Probe kernels (pattern fill, copy bandwidth, FMA throughput, atomic counter), written once with
    tinygrad: list them, build them for a GPU target, run them on the CPU, an NVIDIA GPU or an AMD board
    tinyhw booted; exec runs your own gfx1100 code object on such a board.

    Building needs the compile extra (pip install -e '.[compile]' from the checkout; libLLVM >= 18 for gfx targets);
    running on cuda:N needs the cuda extra and uses the committed PTX. On an AMD board (the global --device)
    run and exec create a compute queue through its registers and write its VRAM.

    \b
    Examples:
      tinyhw kernels list
      tinyhw kernels build --target gfx1100 -o build/gfx1100 --show-isa
      tinyhw kernels run bandwidth --device cpu
      tinyhw kernels run fma --device cuda:0
      tinyhw --device mock:navi31 kernels run pattern
      tinyhw --device mock:navi31 kernels exec k.elf --grid 4 --block 32 --buffer zeros:2048 --out 0:o.bin
    """


@kernels.command("list")
@click.pass_obj
def list_cmd(app: App) -> None:
    """List the probe kernels, what each checks and measures, and the targets with committed binaries.

    Reads the committed manifests only (no compiler, no device).

    \b
    Examples:
      tinyhw kernels list
      tinyhw --json kernels list
    """
    from tinyhw.kernels.manifest import GPU_TARGETS, prebuilt_dir
    from tinyhw.kernels.probes import PROBES

    app.refuse_device("it reads the committed manifests only")
    prebuilt = [t for t in GPU_TARGETS if (prebuilt_dir() / t / "manifest.json").exists()]
    doc = {"probes": [{"name": p.name, "metric": p.metric, "summary": p.summary, "gpu_n": p.gpu_n,
                       "cpu_n": p.cpu_n, "cpu_n_allowed": p.allowed_n(), "cpu_note": p.cpu_note or None}
                      for p in PROBES.values()], "prebuilt_targets": prebuilt,
           "figures": "measured (best of the timed repeats); the peak beside a gpu figure is theoretical"}

    def human() -> None:
        from rich.markup import escape
        from rich.table import Table

        table = Table(box=None, show_edge=False)
        for col in ("probe", "measures", "elements (gpu / cpu)", "what it does"):
            table.add_column(col)
        for p in PROBES.values():
            table.add_row(p.name, p.metric or "check only", f"{p.gpu_n} / {p.cpu_n}", escape(p.summary))
        app.out.print(table)
        for p in PROBES.values():
            if p.cpu_note:
                app.out.print(f"{p.name}: {escape(p.cpu_note)}")
        app.out.print(f"committed binaries: {', '.join(prebuilt) or 'none'}; figures are measured")

    app.emit(doc, human)


@kernels.command("build")
@click.option("--target", "-t", required=True, type=click.Choice(TARGET_CHOICES), help="What to compile for.")
@click.option("-o", "--output", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Folder for the binaries and manifest.json (default: ./kernels-TARGET).")
@click.option("--probe", "names", multiple=True, help="Only this probe (repeatable; default: all).")
@click.option("--force", is_flag=True, help="Replace files of the same names in a folder that holds no earlier build.")
@click.option("--show-isa", is_flag=True, help="Print the code: RDNA disassembly (gfx), PTX (sm_90), C (cpu).")
@click.pass_obj
def build_cmd(app: App, target: str, out_dir: Path | None, names: tuple[str, ...], force: bool, show_isa: bool
              ) -> None:
    """Compile the probe kernels for TARGET and write the binaries plus a manifest (kernel names,
    grid/block sizes, argument layout, source and binary sha256, tinygrad version).

    gfx1100/gfx1200: AMDGPU ELF objects (tinygrad's LLVM renderer; libLLVM >= 18), checked with tinyhw's
    own ELF parser; sm_90: PTX text (no CUDA toolkit needed); cpu: x86-64 ELF objects (clang).
    Writes only into the output folder and tinyhw's compile cache (~/.cache/tinyhw). An earlier build's files
    (the folder holds its manifest.json) are replaced; any other existing file of the same name only with --force
    (a FIFO, device node or directory never); each file is written atomically.

    \b
    Examples:
      tinyhw kernels build --target sm_90 -o /tmp/sm90
      tinyhw kernels build --target gfx1200 --probe bandwidth --show-isa
      tinyhw --json kernels build --target cpu -o /tmp/cpu
    """
    from tinyhw.kernels.manifest import build_target, write_build
    from tinyhw.kernels.probes import get_probe

    app.refuse_device("it compiles for --target and touches no device")
    for n in names:
        get_probe(n)
    app.log(f"compiling {', '.join(names) or 'all probes'} for {target} with tinygrad ...")
    manifest, files, sources = build_target(target, list(names) or None)
    folder = out_dir or Path(f"kernels-{target}")
    written = write_build(folder, manifest, files, force=force)
    isa = {f: _isa(target, files[f], sources[f]) for f in files} if show_isa else {}
    doc = {"target": target, "output": str(folder), "files": [str(p) for p in written], "manifest": manifest}
    if show_isa:
        doc["isa"] = isa

    def human() -> None:
        for p in manifest["probes"]:
            for k in p["kernels"]:
                extra = ""
                if "amdgpu" in k:
                    kd = k["amdgpu"]
                    extra = (f"  kernarg {kd['kernarg_size']} B, lds {kd['lds_bytes']} B, "
                             f"{'wave32' if kd['wave32'] else 'wave64'}, {kd['vgprs']} vgprs")
                args = ", ".join(a["buffer"] for a in k["args"])
                print(f"{p['name']:10} {k['file']:34} grid {tuple(k['grid'])} block {tuple(k['block'])} "
                      f"args ({args}) {k['binary_bytes']} B{extra}")
                if show_isa:
                    print(isa[k["file"]])
        print(f"wrote {len(written)} files to {folder} (tinygrad {manifest['tinygrad']})")

    app.emit(doc, human)


def _isa(target: str, binary: bytes, source: str) -> str:
    if target.startswith("gfx"):
        from tinyhw.formats.elf import parse_elf
        from tinyhw.kernels import seam

        elf = parse_elf(binary)
        text = elf.section(".text")
        code = binary[text.offset:text.offset + text.size] if text else b""
        family = seam.TARGETS[target][3] or "rdna3"
        return "\n".join(f"  {off:04x}: {line}" for off, line in seam.disassemble_amd(code, family))
    if target == "sm_90":
        return binary.decode(errors="replace").rstrip("\0")
    return source


@kernels.command("run")
@click.argument("name")
@click.option("--repeats", "-r", default=None, type=Number(),
              help="Timed runs after a first, checked one (default 5; 1 on an AMD board).")
@click.option("--n", "n", type=Number(minimum=1),
              help="Elements (cpu; on an AMD board a multiple of one workgroup's up to the binary's size).")
@click.option("--build-dir", type=click.Path(file_okay=False, exists=True, path_type=Path),
              help="Use this `kernels build` folder instead of the committed binaries (cuda, AMD boards).")
@click.option("--timeout", type=float, default=10.0, show_default=True,
              help="Seconds an AMD board's dispatch may take, from its submission to its fence (on an emulated "
                   "board: in wall time too).")
@click.pass_obj
def run_cmd(app: App, name: str, repeats: int | None, n: int | None, build_dir: Path | None,
            timeout: float) -> None:
    """Run probe NAME, check its result against the host's expected answer, and report the figure
    (GB/s or TFLOP/s) as measured, or as modelled on an emulated board.

    Where it runs is the --device (before or after the command; default cpu).
    cpu: tinygrad's CPU device (needs the compile extra and clang). cuda:N: the committed sm_90 PTX,
    loaded and launched with the CUDA driver API through cuda-bindings (needs the cuda extra and an NVIDIA
    driver), never through tinygrad's drivers. An AMD board (the global --device mock:navi31, mock:navi31-usb,
    usb, pci:, vfio:) that `am boot` brought up: the committed gfx1100 code object on a compute queue tinyhw
    creates through registers. Exit 1 when the result check fails.

    \b
    Examples:
      tinyhw kernels run bandwidth --device cpu
      tinyhw --json kernels run pattern --device cpu --n 4096
      tinyhw kernels run fma --device cuda:0 --repeats 20
      tinyhw --device mock:navi31 kernels run pattern --n 4096
    """
    from tinyhw.errors import Refused
    from tinyhw.kernels.run import amd_mock_boards, is_amd_device, parse_run_device, plan_cuda, run_cuda, run_probe

    device = app.device  # where to run: the global --device (cpu, cuda:N or an AMD board); else cpu
    if device is not None and is_amd_device(device):
        from tinyhw.kernels.amd import plan_amd, run_amd

        if not 0 < timeout <= 3600:
            raise Refused(f"--timeout {timeout:g}: more than 0 and at most 3600 seconds")
        plan = plan_amd(name, 1 if repeats is None else repeats, n, build_dir)  # refusals before the device opens
        doc = run_amd(plan, app.open_transport(writes=True), timeout=timeout)
    else:
        repeats = 5 if repeats is None else repeats
        if device is not None and not device.strip().lower().startswith(("cuda", "cpu")):
            # a register device that is no AMD board (mock:ad102, remote:) cannot run kernels: never the cpu
            app.refuse_device("it runs on cpu, cuda:N or an AMD board only (an emulated one such as "
                              f"{' or '.join(amd_mock_boards())}, usb, pci:, vfio:)")
        device = device or "cpu"
        kind, _ordinal = parse_run_device(device)
        if kind == "cpu":
            doc = run_probe(name, device, repeats=repeats, n=n)
        else:
            from tinyhw.connect import open_cuda

            plan = plan_cuda(name, repeats, n, build_dir)  # refusals come before the driver is touched
            with open_cuda(device) as gpu:
                doc = run_cuda(plan, gpu)

    def human() -> None:
        verdict = "pass" if doc["check"]["ok"] else "FAIL"
        where = doc["device"] + (f" ({doc['gpu']}, cc {doc['cc']})" if "gpu" in doc else "")
        print(f"{doc['probe']} on {where}: {doc['n']} elements, {doc['kernels']} kernel(s)")
        print(f"check: {verdict}: {doc['check']['detail']}")
        if doc["metric"]:
            peak = f"{doc['peak']} {doc['metric']} peak ({doc['peak_note']})" if doc["peak"] else doc["peak_note"]
            unit = "FLOPs" if doc["metric"] == "TFLOP/s" else "bytes"
            print(f"{doc.get('figure_kind') or 'measured'}: {doc['figure']:.4f} {doc['metric']} "
                  f"(best of {len(doc['seconds'])}, "
                  f"{doc['best_s'] * 1e3:.3f} ms, {doc['work_per_run']:.0f} {unit} per run)   {peak}")
        else:
            kind = f" {doc['figure_kind']}" if doc.get("figure_kind") == "modelled" else ""
            print(f"time{kind}: {doc['best_s'] * 1e3:.3f} ms (best of {len(doc['seconds'])})")
        print(f"binary: {doc['binary']}")

    app.emit(doc, human)
    if not doc["check"]["ok"]:
        sys.exit(1)


@kernels.command("exec")
@click.argument("code_object", type=click.Path(path_type=Path))
@click.option("--kernel", "kernel", help="Kernel name in the code object (default: its only kernel).")
@click.option("--grid", required=True, metavar="X[,Y,Z]", help="Workgroups per dimension.")
@click.option("--block", required=True, metavar="X[,Y,Z]", help="Work-items per workgroup.")
@click.option("--buffer", "buffers", multiple=True, metavar="FILE|zeros:N",
              help="A pointer argument, in order: a file's bytes or N zero bytes (repeat).")
@click.option("--out", "outs", multiple=True, metavar="INDEX:FILE", help="Write buffer INDEX back to FILE (repeat).")
@click.option("--force", is_flag=True, help="Let --out replace existing regular files (never a FIFO or device).")
@click.option("--timeout", type=float, default=10.0, show_default=True,
              help="Seconds the dispatch may take, from its submission to its fence (on an emulated board: in wall "
                   "time too); past it: exit 1, the queue left for `am reset`.")
@click.option("--buffer-path", type=click.Choice(["auto", "sram", "dma", "bar"]), default="auto", show_default=True,
              help="How buffers travel: the copy engine (sram behind the usb bridge, dma with dma buffers, verified "
                   "through the bar) or bar writes and reads.")
@click.pass_obj
def exec_cmd(app: App, code_object: Path, kernel: str | None, grid: str, block: str, buffers: tuple[str, ...],
             outs: tuple[str, ...], force: bool, timeout: float, buffer_path: str) -> None:
    """Run a kernel of your own gfx1100 code object on an AMD board `am boot` brought up (the global --device:
    mock:navi31, mock:navi31-usb, usb, pci:, vfio:), with the buffers given, and write buffers back.

    Refused before the device is touched (exit 2): a buffer of 0 bytes or more than the compute region holds, an
    --out INDEX that is not a buffer, an --out FILE that exists (without --force) or is a FIFO, device node or
    socket. Only the buffers are mapped for the kernel, each ending at a page's end (within its 256-byte
    alignment) with an unmapped page after it: one that reads or writes past the end of any buffer faults, and the
    run fails (exit 1) naming the address and the buffer; the --out files are written, atomically, only after a
    run that completed.

    \b
    Examples:
      tinyhw --device mock:navi31 kernels exec k.elf --grid 4 --block 32 --buffer zeros:2048 --out 0:out.bin
      tinyhw --device mock:navi31 --json kernels exec k.elf --kernel add --grid 8,2 --block 64 \\
          --buffer a.bin --buffer b.bin --buffer zeros:4096 --out 2:sum.bin
    """
    from tinyhw.errors import Refused
    from tinyhw.kernels.execute import plan_exec, run_exec
    from tinyhw.kernels.run import amd_mock_boards, is_amd_device

    if app.device is None or not is_amd_device(app.device):
        raise Refused("kernels exec runs on an AMD board: give the global --device (an emulated one such as "
                      f"{' or '.join(amd_mock_boards())}, usb, pci:, vfio:)",
                      hint="tinyhw --device mock:navi31 kernels exec ...")
    plan = plan_exec(code_object, kernel=kernel, grid=grid, block=block, buffers=list(buffers), outs=list(outs),
                     timeout=timeout, force=force)  # every refusal before the device is opened
    doc = run_exec(plan, app.open_transport(writes=True), buffer_path=buffer_path)

    def human() -> None:
        print(f"{doc['kernel']} ({doc['code_object']}): grid {tuple(doc['grid'])} block {tuple(doc['block'])}, "
              f"{len(doc['buffers'])} buffer(s), dispatch {doc['dispatch_s'] * 1e3:.3f} ms ({doc['time_kind']})")
        bp = doc["buffer_path"]
        print(f"buffers over {bp['label']}: in {bp['in']['bytes']} bytes in {bp['in']['seconds'] * 1e3:.3f} ms, out "
              f"{bp['out']['bytes']} bytes in {bp['out']['seconds'] * 1e3:.3f} ms ({bp['time_kind']}); "
              f"{bp['verified_bytes']} bytes verified through the bar")
        for o in doc["outputs"]:
            print(f"wrote buffer {o['index']} ({o['bytes']} bytes) to {o['file']}")

    app.emit(doc, human)
