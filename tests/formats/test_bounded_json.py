"""The one bounded JSON loader (tinyhw.formats.boundedjson) and the state files that read through it.

Deep JSON in the flash journal, the emulated Navi31's board state file and ``mock:ad102,state=FILE`` ended in
``internal error: RecursionError``; a capture.json of empty objects cost about 25 times its size. Sabotage shown
red: the journal, board-state and ad102 loaders back on ``json.loads`` (the three state-file tests fail with
RecursionError), the value bound removed (the empty-objects tests fail).
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import pytest
from clihelp import run

from tinyhw.boards.navi31 import NAVI31
from tinyhw.errors import OperationFailed, Refused
from tinyhw.flash import Journal
from tinyhw.flash import journal as journal_mod
from tinyhw.formats import boundedjson
from tinyhw.mocks.amd import boardstate
from tinyhw.mocks.amd.ifwi_image import build_image

DEEP = b'{"version": 1, "x": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"


def _depth(o: object) -> int:
    if isinstance(o, dict):
        o = list(o.values())
    return 1 + max(map(_depth, o), default=0) if isinstance(o, list) else 0


def _tree(rng: random.Random, d: int = 0) -> object:
    r = rng.random()
    if d > 6 or r < 0.3:
        return rng.choice([1, 'a\\"[{', "\\\\", 'x"]', None, 2.5, "[]{}", "\\"])
    if r < 0.65:
        return [_tree(rng, d + 1) for _ in range(rng.randint(0, 4))]
    return {rng.choice(["k", '\\"', "[", "}\\"]) + str(i): _tree(rng, d + 1) for i in range(rng.randint(0, 4))}


def test_the_scan_counts_depth_outside_strings_across_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(boundedjson, "_CHUNK", 5)   # escapes, quotes and brackets split between chunks
    rng = random.Random(7)
    for _ in range(400):
        o = _tree(rng)
        text = json.dumps(o, indent=rng.choice([None, 1]))
        assert boundedjson.shape(text.encode())[0] == _depth(o), text
        assert boundedjson.loads(text, "t") == o


@pytest.mark.parametrize(("data", "says"), [
    (DEEP, "nests json deeper than 64 levels"),
    (b"[" + b"{}," * 2_000_000 + b"{}]", "holds more than 1048576 json values"),
    (b'{"a": NaN}', "not json (nan is not json"),
    (b'{"a": "\xff"}', "is not utf-8 text"),
    (b'{"a": 1', "not json (expecting"),
    (b"[1]" + b" " * (16 << 20), "over the 16777216-byte limit"),
])
def test_refusals_are_one_line(data: bytes, says: str) -> None:
    with pytest.raises(Refused, match=None) as e:
        boundedjson.loads(data, "the file f")
    assert says in e.value.message and e.value.message.startswith("the file f") and "\n" not in e.value.message


def test_a_deep_flash_journal_is_one_line_not_a_recursion_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) \
        -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    key = journal_mod.write_key("ab" * 32)
    path = journal_mod.journal_path(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(DEEP)
    with pytest.raises(OperationFailed, match="nests json deeper than 64") as e:
        Journal.load(key)
    assert "inspect or remove it" in str(e.value)
    path.write_bytes(b"[1, 2]")
    with pytest.raises(OperationFailed, match="holds a json list, not an object"):
        Journal.load(key)
    # through the CLI: resuming the write of this very image reads its journal
    image = build_image(board=NAVI31)
    (tmp_path / "img.bin").write_bytes(image)
    journal_mod.journal_path(journal_mod.write_key(hashlib.sha256(image).hexdigest())).write_bytes(DEEP)
    r = run("--device", f"mock:navi31,flash={tmp_path / 'flash.bin'},timing=instant", "flash", "write",
            str(tmp_path / "img.bin"), "--resume", "--yes")
    assert r.code == 1 and "nests json deeper than 64 levels" in r.err and r.err.count("\n") == 1, r.err


def test_a_deep_board_state_file_is_a_cold_board(tmp_path: Path) -> None:
    flash = tmp_path / "flash.bin"
    boardstate.state_path(flash).write_bytes(DEEP)
    assert boardstate.load(flash) == {}
    r = run("--device", f"mock:navi31,flash={flash},timing=instant", "flash", "info")
    assert r.code == 0 and "internal error" not in r.err, r.err
    boardstate.state_path(flash).write_bytes(b'{"version": 1, "x": [' + b"{}," * (1 << 22) + b"{}]}")
    assert boardstate.load(flash) == {}


@pytest.mark.parametrize("doc", [DEEP, b'{"wpr2": "ab"}', b'{"wpr2": [1e308, 1]}', b'{"wpr2": [1, 2, 3]}',
                                 b'{"wpr2": [-1, 0]}', b'{"wpr2": [true, 0], "gsp_running": "yes"}'])
def test_a_bad_ad102_state_file_is_a_cold_board(tmp_path: Path, doc: bytes) -> None:
    state = tmp_path / "board.json"
    state.write_bytes(doc)
    r = run("--device", f"mock:ad102,state={state}", "probe")
    assert r.code == 0 and "internal error" not in r.err, r.err


def test_the_small_input_loop_and_the_numpy_scan_count_alike() -> None:
    """Small files (a board state, a journal) are scanned by a plain loop, larger ones with numpy: both give the same
    depth and value count on JSON text with nesting, escaped quotes and backslashes inside strings."""
    import json
    import random

    from tinyhw.formats import boundedjson

    rng = random.Random(7)

    def value(depth: int) -> object:
        kind = rng.randrange(5 if depth < 6 else 3)
        if kind == 0:
            return rng.randrange(-5, 5)
        if kind == 1:
            return "".join(rng.choice('ab"\\[]{},: ') for _ in range(rng.randrange(6)))
        if kind == 2:
            return None
        if kind == 3:
            return [value(depth + 1) for _ in range(rng.randrange(4))]
        return {f"k{i}\"\\": value(depth + 1) for i in range(rng.randrange(4))}

    for _ in range(300):
        text = json.dumps(value(0)).encode()
        assert boundedjson._shape_loop(text) == boundedjson._shape_numpy(text), text
