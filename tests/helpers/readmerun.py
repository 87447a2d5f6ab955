"""Run README's shell examples in the order written, on one emulated board, as a new user would.

Every ``sh`` block's lines are taken in order; ``cmd1 && cmd2`` runs both. A line runs when it talks to an
emulated board or to nothing: ``--device usb`` (the ASM24 bridge) becomes the emulated Navi31 (``mock:navi31-usb``
for ``link power``, which only the bridge has; ``mock:navi31``, the same board attached directly, for the rest,
whose millions of emulated USB transfers would take minutes), and every ``mock:navi31``/``mock:navi31-usb``
command shares one flash file and board state (the test's private cache),
``mock:ad102`` likewise. What needs real hardware or a server (``pci:``, ``vfio:``, ``remote:``, ``labgrid:``,
``cuda:``, ``usb:N``, ``serve``, ``mock gadget``, ``sudo``, host scans), a live view (``smi`` without
``--once``/``--count``), a continued line, or a file the reader brings and README does not make (``*.rom``,
``*.pkl``, ``*.txt`` inputs, a second recording) is skipped and listed. The reader's own image is the factory
image (``image.bin``) and Debian's files are the fetched ones (``$FW``, ``DIR``, ``psp_13_0_0_sos.bin``).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testpaths import ROOT

from tinyhw.boards.navi31 import NAVI31

HARDWARE = re.compile(r"^(pci|vfio|remote|labgrid|cuda):|^usb:\d")
#: input files a reader brings (README never makes them); outputs follow -o/--out/--record
BROUGHT = (".rom", ".pkl", ".txt", ".pcapng", ".elf", ".bin")
OUTPUT_OPTS = {"-o", "--out", "--record", "--backup"}
#: global options that take a value (so the value is not read as a subcommand)
VALUED = {"--device", "--record"}


@dataclass
class Step:
    """One command of README, as written and as run (None: skipped, with the reason)."""

    line: str
    comment: str
    args: list[str] | None = None
    skip: str = ""
    code: int | None = None
    err: str = ""


@dataclass
class Walk:
    """Every command README shows, in order."""

    steps: list[Step] = field(default_factory=list)

    @property
    def failed(self) -> list[Step]:
        """Steps that ran and ended with an exit code README does not announce for them."""
        return [s for s in self.steps if s.args is not None and s.code not in allowed(s)]


def allowed(step: Step) -> set[int]:
    """Exit 0, and what README's comment announces (``exit N``, ``1 different``), and 1 where the device string
    injects a fault (``faults=``, ``gsp-fault=``)."""
    ok = {0} | {int(n) for n in re.findall(r"\bexit (\d)\b", step.comment)}
    if re.search(r"1 different", step.comment) or re.search(r"faults?=", step.line):
        ok.add(1)
    return ok


def commands(readme: Path) -> list[Step]:
    """README's ``sh`` lines in order, one step per command (``&&`` splits, comments kept beside)."""
    out = []
    for block in re.findall(r"```sh\n(.*?)```", readme.read_text(), re.S):
        for line in block.splitlines():
            m = re.search(r"(^|\s)#(\s|$)", line)
            code, comment = (line[:m.start()], line[m.end():]) if m else (line, "")
            for part in code.split("&&"):
                if part.strip():
                    out.append(Step(part.strip(), comment.strip()))
    return out


def plan(step: Step, cwd: Path, fw: Path) -> None:
    """Fill ``step.args`` (what runs) or ``step.skip`` (why not)."""
    text = step.line
    if text.endswith("\\"):
        step.skip = "continued line"
        return
    root = Path(os.environ.get("TINYHW_FIRMWARE_DIR") or fw.parents[3])  # tinyhw's firmware cache (fetched)
    text = text.replace("$FW", str(fw)).replace("/tmp/", f"{cwd}/tmp-").replace("~/.cache/tinyhw/firmware", str(root))
    words = shlex.split(text)
    if re.fullmatch(r"[A-Z_]+=\S*", words[0]):
        step.skip = "shell variable"
        return
    if words[0] == "python" and words[1:2] == ["-c"]:
        step.args = [sys.executable, *words[1:]]
        return
    if words[0] != "tinyhw":
        step.skip = f"not a tinyhw command ({words[0]})"
        return
    args = words[1:]
    if args and args[-1] == "&":
        step.skip = "a server in the background"
        return
    device = args[args.index("--device") + 1] if "--device" in args else None
    if device is not None and HARDWARE.search(device):
        step.skip = f"needs hardware or a server ({device})"
        return
    rest = [a for i, a in enumerate(args) if not a.startswith("-") and not (i and args[i - 1] in VALUED)]
    if device == "usb":  # the same emulated board: behind its bridge where only the bridge can, else direct
        args[args.index("--device") + 1] = "mock:navi31-usb" if rest[:2] == ["link", "power"] else "mock:navi31"
    verb = " ".join(rest[:2])
    if rest[:1] == ["list"] or verb in ("pci list",) or rest[:1] == ["serve"] or verb == "mock gadget":
        step.skip = "scans this machine or serves"
        return
    if rest[:1] == ["smi"] and not {"--once", "--count"} & set(args):
        step.skip = "a live view"
        return
    if verb in ("kernels build",) or (rest[:2] == ["kernels", "run"] and "cpu" in args):
        step.skip = "compiles with tinygrad and clang"
        return
    args = [str(fw) if a == "DIR" else a for a in args]
    if "--firmware-dir" in args and not Path(args[args.index("--firmware-dir") + 1]).exists() \
            and "tmp-" not in args[args.index("--firmware-dir") + 1]:
        step.skip = "firmware the reader brings (not fetched by tests/fetch_firmware.sh)"
        return
    for i, a in enumerate(args):
        if a.endswith(BROUGHT) and not (i and args[i - 1] in OUTPUT_OPTS | VALUED) and not _is_output(args, i) \
                and not (cwd / a).exists():
            step.skip = f"a file the reader brings ({a})"
            return
    step.args = args


def _is_output(args: list[str], i: int) -> bool:
    """The positional output of ``flash dump``."""
    return args[i - 2:i] == ["flash", "dump"] or (i >= 1 and args[i - 1] == "dump")


def walk(readme: Path, cwd: Path, fw: Path, run: Callable[..., Any]) -> Walk:
    """Plan and run every step in ``cwd``; ``run(*args)`` runs the CLI in-process."""
    shutil.copy(fw / "psp_13_0_0_sos.bin", cwd / "psp_13_0_0_sos.bin")
    from tinyhw.mocks.amd.ifwi_image import build_image

    (cwd / "image.bin").write_bytes(build_image(board=NAVI31))
    w = Walk(commands(readme))
    for step in w.steps:
        plan(step, cwd, fw)
        if step.args is None:
            continue
        if step.args[0] == sys.executable:
            p = subprocess.run(step.args, cwd=cwd, capture_output=True, text=True, timeout=300, check=False,
                               env={**os.environ, "PYTHONPATH": str(ROOT)})
            step.code, step.err = p.returncode, p.stderr
        else:
            r = run(*step.args)
            step.code, step.err = r.code, r.err
    return w
