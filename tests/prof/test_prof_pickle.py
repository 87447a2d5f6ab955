"""The restricted profile-pickle loader: real files load, anything that could execute is refused (exit 2)."""

from __future__ import annotations

import os
import pickle
import random
from pathlib import Path

import pytest
from clihelp import run
from testpaths import DATA as TEST_DATA

from tinyhw.errors import Refused
from tinyhw.formats.tgpickle import Record, loads_profile

DATA = TEST_DATA / "sqtt"


class _Evil:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):  # the attack: unpickling would call os.system
        return (os.system, (f"touch {self.marker}",))


class _EvalEvil:
    def __reduce__(self):
        return (eval, ("__import__('os').getpid()",))


def test_real_pickles_load_as_inert_records() -> None:
    for f in sorted((DATA / "pickles").glob("*/*.pkl")):
        events = loads_profile(f.read_bytes())
        kinds = {type(e).__name__ for e in events}
        assert {"ProfileSQTTEvent", "ProfilePMCEvent", "ProfileDeviceEvent", "ProfileProgramEvent"} <= kinds
        assert all(isinstance(e, Record) for e in events if type(e).__name__.startswith("Profile"))


def test_malicious_pickle_is_refused_and_not_run(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    bad = tmp_path / "profile.pkl"
    bad.write_bytes(pickle.dumps([_Evil(marker)]))
    with pytest.raises(Refused, match="os.system|posix.system"):
        loads_profile(bad.read_bytes())
    r = run("prof", "summary", str(bad))
    assert r.code == 2, r
    assert "error:" in r.err and "not loaded" in r.err
    assert r.no_result
    assert not marker.exists()


@pytest.mark.parametrize("payload", [
    pickle.dumps([_EvalEvil()]),
    b"cbuiltins\nexec\n(Vprint(1)\ntR.",               # protocol 0 GLOBAL + REDUCE
    b"csubprocess\ncall\n((Vtrue\nltR.",
    b"\x80\x04\x95\x10\x00\x00\x00\x00\x00\x00\x00\x8c\x02os\x8c\x06getcwd\x93)R.",
])
def test_other_globals_are_refused(payload: bytes, tmp_path: Path) -> None:
    f = tmp_path / "p.pkl"
    f.write_bytes(payload)
    r = run("--json", "prof", "summary", str(f))
    assert r.code == 2 and r.no_result and len(r.err.strip().splitlines()) == 1


def test_tinygrad_names_become_inert_even_when_called() -> None:
    # "calling" a tinygrad function (REDUCE) only records the call; nothing is imported (checked in a fresh
    # interpreter: other tests of this session may have imported tinygrad for the kernels feature)
    import subprocess
    import sys

    out = loads_profile(b"(ctinygrad.helpers\ngetenv\n(VHOME\ntRl.")
    assert len(out) == 1 and isinstance(out[0], Record)
    assert (out[0]._module, out[0].type_name, out[0].args) == ("tinygrad.helpers", "getenv", ("HOME",))
    code = ("import sys\nfrom tinyhw.formats.tgpickle import loads_profile\n"
            "loads_profile(b'(ctinygrad.helpers\\ngetenv\\n(VHOME\\ntRl.')\n"
            "print(any(m == 'tinygrad' or m.startswith('tinygrad.') for m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout.strip() == "False"


@pytest.mark.parametrize("blob", [b"", b"\x80", b"not a pickle at all", pickle.dumps({"a": 1}), pickle.dumps([1, 2])])
def test_garbage_is_refused_with_exit_2(blob: bytes, tmp_path: Path) -> None:
    f = tmp_path / "p.pkl"
    f.write_bytes(blob)
    r = run("prof", "summary", str(f))
    assert r.code == 2, r


def test_oversized_input_is_refused_before_reading(tmp_path: Path) -> None:
    f = tmp_path / "huge.pkl"
    with open(f, "wb") as fh:          # sparse: no disk space used
        fh.truncate((1 << 30) + 1)
    r = run("prof", "summary", str(f))
    assert r.code == 2 and "limit" in r.err
    with pytest.raises(Refused, match="limit"):
        loads_profile(b"x" * 100, max_bytes=10)


def test_directory_capture_names_only_plain_files(tmp_path: Path) -> None:
    (tmp_path / "capture.json").write_text('{"sqtt": [{"kern": 0, "se": 0, "file": "../../etc/passwd"}]}')
    r = run("prof", "summary", str(tmp_path))
    assert r.code == 2 and "plain name" in r.err
    r = run("prof", "summary", str(tmp_path / "missing"))
    assert r.code == 2


def _truncated() -> bytes:
    blob = (DATA / "pickles" / "gfx1200" / "profile_empty_run_0.pkl").read_bytes()
    return blob[:len(blob) // 2]


@pytest.mark.parametrize(("blob", "says"), [
    (random.Random(1).randbytes(3000), "it holds bytes that are not a pickle"),
    (_truncated(), "it ends early, after"),
    (b"\x80\x04\x95\x05\x00\x00\x00\x00\x00\x00\x00h\xaa.", "damaged (it refers to a value it never stored)"),
    (b"\x80\x04\xff.", "damaged (an opcode no pickle has)"),
    (b'[{"a": 1}]\n', "it is text (json)"),
    (b"hello, this is a readme\n", "it is text"),
    (b"\x7fELF\x02\x01\x01" + bytes(100), "it is an ELF file"),
    (b"\xfd7zXZ\x00" + bytes(30), "it is xz-compressed"),
])
def test_a_wrong_file_says_what_it_is_not_in_one_line(blob: bytes, says: str, tmp_path: Path) -> None:
    """Not ``KeyError: 170`` or ``UnpicklingError: Memo value not found``: what the file is not, and what it is."""
    f = tmp_path / "p.pkl"
    f.write_bytes(blob)
    r = run("prof", "summary", str(f))
    assert r.code == 2 and r.err.count("\n") == 1, r.err
    assert r.err.startswith(f"error: {f} is not a tinygrad profile pickle: ") and says in r.err, r.err
    assert "Error" not in r.err and "KeyError" not in r.err, r.err
