"""The committed register databases are exactly what the generator makes from the kernel tarball.

Needs Debian's linux-source-6.12 (``apt-get install linux-source-6.12``): without the tarball
this test FAILS, on purpose, so a CI without it cannot pass silently. The extracted headers
are cached (pytest's cache dir, or $TINYHW_CACHE), so only the first run pays the ~10 s
decompression. Only the ``KERNEL = ...`` line (kernel and package version) may differ.
"""

from __future__ import annotations

import difflib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tinyhw.autogen import genregs, sources

COMMITTED = Path(genregs.__file__).parent


def _without_version(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if not ln.startswith("KERNEL = ")]


@pytest.mark.slow
def test_committed_tables_match_a_fresh_generation(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    tarball = genregs.default_tarball()
    if not tarball.is_file():
        pytest.fail(
            f"kernel tarball {tarball} is missing, so the register databases cannot be checked: "
            f"run `apt-get install {sources.KERNEL_PACKAGE}` (or set TINYHW_KERNEL_TARBALL)"
        )
    cache_provider = getattr(request.config, "cache", None)
    if os.environ.get("TINYHW_CACHE"):
        cache = Path(os.environ["TINYHW_CACHE"])
    elif cache_provider is not None:
        cache = Path(cache_provider.mkdir("tinyhw-kernel-headers"))
    else:
        cache = tmp_path / "cache"
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "tinyhw.autogen.genregs", "--tarball", str(tarball), "--cache", str(cache)]
    proc = subprocess.run([*cmd, "--out", str(out)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, f"generator failed: {proc.stderr}"

    fresh = {p.name: p.read_text() for p in out.glob("*_regs.py")}
    committed = {p.name: p.read_text() for p in COMMITTED.glob("*_regs.py")}
    assert sorted(fresh) == sorted(f"{s}_regs.py" for s in sources.STEMS)
    assert sorted(committed) == sorted(fresh), "committed *_regs.py files differ from the generated set"
    problems = []
    for name, text in sorted(fresh.items()):
        kernel_lines = [ln for ln in text.splitlines() if ln.startswith("KERNEL = ")]
        assert len(kernel_lines) == 1 and kernel_lines[0].startswith('KERNEL = "Linux 6.12.'), kernel_lines
        a, b = _without_version(committed[name]), _without_version(text)
        if a != b:
            diff = list(difflib.unified_diff(a, b, f"committed/{name}", f"generated/{name}", lineterm="", n=1))
            problems.append("\n".join(diff[:30]))
    assert not problems, (
        "the committed register databases differ from a fresh generation; "
        f"regenerate with `{genregs.COMMAND}` and commit:\n" + "\n".join(problems)
    )
