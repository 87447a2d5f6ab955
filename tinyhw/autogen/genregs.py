"""Generate the register databases ``tinyhw/autogen/<stem>_regs.py`` from the Linux amdgpu headers.

Usage (the committed files were made exactly like this)::

    apt-get install linux-source-6.12          # gives /usr/src/linux-source-6.12.tar.xz
    python -m tinyhw.autogen.genregs           # extracts what it needs into a cache, writes the modules

Only the header pairs listed in ``sources.py`` (plus the tree's top Makefile, for the kernel
version) are extracted, with GNU tar wildcards, into a cache folder (``--cache``, default
``$TINYHW_CACHE`` or ``~/.cache/tinyhw``); the kernel tree is never committed. ``--src DIR``
reads an already extracted tree instead. Every header pair goes through the checker of
``headers.py``; a finding that ``quirks.py`` does not allow stops generation.

The output is deterministic: running the generator twice gives byte-identical files. Exactly
one line of each file (``KERNEL = ...``) names the kernel and package version.

Format of a generated module (small, imported only when its block is first used, parsed lazily
by ``tinyhw.regs``): ``FIELDSETS`` holds one line per distinct field list, made of
``NAME:SHIFT:WIDTH`` tokens (mask = ((1 << WIDTH) - 1) << SHIFT; the checker guarantees every
kernel mask has that form); ``REGS`` holds one line per register in header order:
``NAME SEGMENT DWORD_OFFSET_HEX FIELDSET_INDEX`` (``-`` when the register has no fields).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tinyhw.autogen import headers, quirks, sources

COMMAND = "python -m tinyhw.autogen.genregs"
OUT_DIR = Path(__file__).resolve().parent


def default_cache() -> Path:
    """Cache folder for extracted headers: $TINYHW_CACHE, else $XDG_CACHE_HOME/tinyhw, else ~/.cache/tinyhw."""
    if os.environ.get("TINYHW_CACHE"):
        return Path(os.environ["TINYHW_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tinyhw"


def default_tarball() -> Path:
    """The kernel tarball: $TINYHW_KERNEL_TARBALL, else Debian's linux-source-6.12 location."""
    return Path(os.environ.get("TINYHW_KERNEL_TARBALL") or sources.DEFAULT_TARBALL)


def _wanted_members() -> list[str]:
    out = []
    for stem in sources.STEMS:
        out.extend(f"*/{p}" for p in sources.header_paths(stem))
    return out


def extract(tarball: Path, cache: Path, members: list[str] | None = None, subdir: str = "kernel-headers") -> Path:
    """Extract ``members`` (default: the register headers) and the top Makefile of ``tarball`` into
    ``cache/subdir``; return the tree root. Shared by every generator that reads the kernel sources.

    The result is reused while the tarball (name, size, mtime) and the member list are unchanged.
    """
    if not tarball.is_file():
        raise FileNotFoundError(
            f"kernel tarball {tarball} not found; install it with `apt-get install {sources.KERNEL_PACKAGE}` "
            "or set TINYHW_KERNEL_TARBALL"
        )
    st = tarball.stat()
    members = _wanted_members() if members is None else members
    digest = hashlib.sha256("\n".join(members).encode()).hexdigest()[:12]
    dest = cache / subdir / f"{tarball.name}-{st.st_size}-{int(st.st_mtime)}-{digest}"
    if not (dest / ".complete").is_file():
        tmp = dest.with_name(dest.name + f".tmp{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        cmd = ["tar", "-xJf", str(tarball), "-C", str(tmp), "--wildcards", *members]
        cmd += ["--no-wildcards-match-slash", "*/Makefile"]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            raise RuntimeError(f"tar failed ({proc.returncode}): {proc.stderr.strip()}")
        (tmp / ".complete").write_text(str(tarball) + "\n")
        shutil.rmtree(dest, ignore_errors=True)
        tmp.rename(dest)
    tops = [p for p in dest.iterdir() if p.is_dir()]
    if len(tops) != 1:
        raise RuntimeError(f"expected one top folder in {dest}, found {len(tops)}")
    return tops[0]


def linux_version(root: Path) -> str:
    """``6.12.117`` from the tree's top Makefile (``unknown`` without one)."""
    makefile = root / "Makefile"
    if not makefile.is_file():
        return "unknown"
    pattern = r"^(VERSION|PATCHLEVEL|SUBLEVEL|EXTRAVERSION)[ \t]*=[ \t]*(\S*)"
    vals = dict(re.findall(pattern, makefile.read_text(), re.M))
    version = ".".join(vals.get(k, "?") for k in ("VERSION", "PATCHLEVEL", "SUBLEVEL"))
    return version + vals.get("EXTRAVERSION", "")


def package_version(tarball: Path | None) -> str:
    """Debian version of the installed linux-source package when ``tarball`` is its file, else ``unknown``."""
    if tarball is None or str(tarball) != sources.DEFAULT_TARBALL or not shutil.which("dpkg-query"):
        return "unknown"
    proc = subprocess.run(
        ["dpkg-query", "-W", "-f=${Version}", sources.KERNEL_PACKAGE], capture_output=True, text=True, check=False
    )
    return proc.stdout.strip() if proc.returncode == 0 and proc.stdout.strip() else "unknown"


def parse_stem(root: Path, stem: str) -> tuple[headers.Table, list[str]]:
    """Parse, check and clean one header pair of the tree at ``root``; return the table and what was left out."""
    off_path, mask_path = sources.header_paths(stem)
    table = headers.parse_offset((root / off_path).read_text(errors="replace"))
    headers.parse_sh_mask((root / mask_path).read_text(errors="replace"), table)
    omitted = headers.apply_quirks(stem, table, quirks.QUIRKS)
    return table, omitted


def render(stem: str, table: headers.Table, omitted: list[str], kernel: str) -> str:
    """The text of ``<stem>_regs.py``."""
    fieldsets: dict[str, int] = {}
    reg_lines = []
    nfields = 0
    for reg in table.regs.values():
        tokens = " ".join(f"{f.name}:{f.shift}:{bin(f.mask or 0).count('1')}" for f in reg.fields)
        nfields += len(reg.fields)
        idx = str(fieldsets.setdefault(tokens, len(fieldsets))) if tokens else "-"
        reg_lines.append(f"{reg.name} {reg.segment} {reg.offset:x} {idx}")
    off_path, mask_path = sources.header_paths(stem)
    ip, _, ver = stem.partition("_")
    out = [
        "# Generated from the Linux amdgpu register headers by tinyhw/autogen/genregs.py; do not edit.",
        f"# Command: {COMMAND}   (reads {sources.DEFAULT_TARBALL} of Debian's {sources.KERNEL_PACKAGE})",
        f"# Headers: {off_path}",
        f"#          {mask_path}",
        f"# Contents: {len(table.regs)} registers, {nfields} fields ({len(fieldsets)} distinct field lists);",
        f"# skipped: {table.skipped_defines} non-register defines (ix/smn/guards) of the offset header,",
        f"# {table.orphan_fields} sh_mask fields of registers the offset header does not place.",
        "# Left out as allow-listed kernel quirks (see tinyhw/autogen/quirks.py):" + ("" if omitted else " none"),
        *(f"#   {o}" for o in omitted),
        f'"""Registers of {ip.upper()} {ver.replace("_", ".")}: see tinyhw/autogen/genregs.py for the format."""',
        "",
        f'KERNEL = "Linux {kernel}"',
        f'STEM = "{stem}"',
        f'HEADERS = ("{off_path}", "{mask_path}")',
        "",
        'FIELDSETS = """\\',
        *fieldsets,
        '"""',
        "",
        'REGS = """\\',
        *reg_lines,
        '"""',
        "",
    ]
    return "\n".join(out)


def generate(root: Path, kernel: str) -> dict[str, str]:
    """File name -> text of every generated module, from the tree at ``root``.

    Raises :class:`headers.CheckFailed` with the problems of all tables together.
    """
    files: dict[str, str] = {}
    problems: list[str] = []
    for stem in sources.STEMS:
        try:
            table, omitted = parse_stem(root, stem)
        except headers.CheckFailed as exc:
            problems.extend(exc.problems)
            continue
        files[f"{stem}_regs.py"] = render(stem, table, omitted, kernel)
    if problems:
        raise headers.CheckFailed(problems)
    return files


def write(files: dict[str, str], out: Path, stale: str | None = "*_regs.py") -> list[str]:
    """Write ``files`` into ``out`` and delete the files there matching ``stale`` that are not among them;
    return the names changed."""
    out.mkdir(parents=True, exist_ok=True)
    changed = []
    for name, text in sorted(files.items()):
        path = out / name
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)
            changed.append(name)
    for path in sorted(out.glob(stale)) if stale else []:
        if path.name not in files:
            path.unlink()
            changed.append(path.name + " (deleted)")
    return changed


def source_parser(prog: str, description: str) -> argparse.ArgumentParser:
    """The command line every generator shares: where the kernel tree comes from and where the output goes."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--tarball", type=Path, default=None, help=f"kernel source tarball ({sources.DEFAULT_TARBALL})")
    parser.add_argument("--src", type=Path, default=None, help="an extracted kernel tree to read instead of a tarball")
    parser.add_argument("--cache", type=Path, default=None, help="where extracted files are kept (~/.cache/tinyhw)")
    parser.add_argument("--out", type=Path, default=OUT_DIR, help="output folder (tinyhw/autogen)")
    return parser


def kernel_tree(args: argparse.Namespace, extractor: Callable[[Path, Path], Path] | None = None) -> tuple[Path, str]:
    """The kernel tree ``args`` name and its version label; a tarball is unpacked by ``extractor`` (the
    generator's own selection of files; this module's :func:`extract` by default)."""
    if args.src is not None:
        root, tarball = args.src, None
    else:
        tarball = args.tarball or default_tarball()
        root = (extractor or extract)(tarball, args.cache or default_cache())
    return root, f"{linux_version(root)} (Debian {sources.KERNEL_PACKAGE} {package_version(tarball)})"


def main(argv: list[str] | None = None) -> int:
    """``python -m tinyhw.autogen.genregs``: regenerate the register databases from the kernel headers; prints what
    changed; returns 1 when the register checker or reading fails (listing the checker's problems)."""
    args = source_parser(COMMAND, __doc__.split("\n\n")[0]).parse_args(argv)
    try:
        root, kernel = kernel_tree(args)
        files = generate(root, kernel)
    except headers.CheckFailed as exc:
        print("genregs: the register checker stopped generation:", file=sys.stderr)
        for p in exc.problems:
            print("  " + p, file=sys.stderr)
        return 1
    except (OSError, RuntimeError) as exc:
        print(f"genregs: {exc}", file=sys.stderr)
        return 1
    changed = write(files, args.out)
    print(f"genregs: {len(files)} modules in {args.out}; changed: {', '.join(changed) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
