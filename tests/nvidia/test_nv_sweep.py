"""A sweep of disconnects across ``nv boot``'s BAR accesses on the emulated AD102: every cut gives one clear line
naming the boot step and the reset, and the next boot (after that reset when WPR2 was left up) succeeds.

The cut points are every step's first, middle and last access, measured on a clean boot, so each step is cut at
its start, inside and at its end (about 35 boots; a few seconds).
"""

from __future__ import annotations

from pathlib import Path

from nvboothelp import boot, device, firmware_set, reset

from tinyhw.boot import nv
from tinyhw.connect import open_device
from tinyhw.errors import Disconnected, Refused


def _step_ranges(root: Path) -> dict[str, tuple[int, int]]:
    """step -> (first, last) BAR access number of a clean boot (nested steps inside their parent's range)."""
    opened = open_device(device(root))
    t = opened.transport
    marks: dict[str, list[int]] = {}

    def on_step(name: str, phase: str, _doc: dict) -> None:
        marks.setdefault(name, []).append(t.accesses + (1 if phase == "start" else 0))

    try:
        gpu = nv.preflight_boot(t)
        fw = nv.load_firmware(firmware_set(root), gpu.chip, allow_unknown=True)
        nv.boot(gpu, fw, on_step=on_step)
        nv.reset(gpu)
    finally:
        opened.close()
    return {k: (v[0], v[1]) for k, v in marks.items() if v[1] >= v[0]}


def test_every_cut_is_named_and_the_next_boot_succeeds(tmp_path: Path) -> None:
    ranges = _step_ranges(tmp_path)
    assert {"read vbios", "fwsec-frts", "start gsp", "cpu sequencer", "static info"} <= set(ranges)
    cuts = sorted({(n, step) for step, (a, b) in ranges.items() for n in (a, (a + b) // 2, b)})
    resets = 0
    for n, step in cuts:
        _, err, _ = boot(tmp_path, f"faults=disconnect@{n}")
        assert isinstance(err, Disconnected), (n, step, err)
        text = str(err)
        assert "\n" not in text and f"bar access {n}" in text and "(in boot step '" in text, text
        named = text.split("(in boot step '")[1].split("'", maxsplit=1)[0]
        assert named == step or named in ("cpu sequencer",) and step == "init done", (n, step, text)
        assert "nv reset --yes" in err.hint
        _, again, _ = boot(tmp_path)
        if again is not None:
            assert isinstance(again, Refused) and "wpr2 is already up" in str(again) and "nv reset" in again.hint
            reset(tmp_path)
            resets += 1
            _, again, _ = boot(tmp_path)
        assert again is None, (n, step, again)
        reset(tmp_path)
    assert resets  # cuts after fwsec-frts left wpr2 up, and the named reset cleared it
