"""`kernels exec` / `kernels run` on a booted board move their buffers over the copy engine (the bridge SRAM + SDMA
behind the USB bridge, a DMA buffer + SDMA on mock:navi31), verified through the BAR as `bench copy` verifies, and
name the path in --json (tinyhw.boot.amd.buffers)."""

from __future__ import annotations

import json
from pathlib import Path

from amfake import boot_emulated_board
from clihelp import run

from tinyhw.boot.amd.buffers import windows
from tinyhw.kernels.manifest import prebuilt_dir

SIZE = 512 * 1024


def _exec(device: str, *args: str):
    elf = str(next((prebuilt_dir() / "gfx1100").glob("pattern.*.elf")))
    return run("--device", device, "--json", "kernels", "exec", elf, "--grid", "8", "--block", "32", *args)


def test_exec_over_the_bridge_moves_a_512k_buffer_over_the_sram_100x_faster(tmp_path: Path) -> None:
    """On mock:navi31-usb the 512 KiB buffer goes in and out over the SRAM (named in --json, windows verified through
    the BAR) >= 100x faster than over BAR writes and reads (modelled, the device clock), with the same result."""
    device = f"mock:navi31-usb,clock=device,flash={tmp_path / 'flash.bin'}"
    boot_emulated_board(device)
    docs, outs = {}, {}
    for path in ("auto", "bar"):
        outs[path] = tmp_path / f"{path}.bin"
        r = _exec(device, "--buffer", f"zeros:{SIZE}", "--out", f"0:{outs[path]}", "--buffer-path", path)
        assert r.code == 0, r.err
        docs[path] = json.loads(r.out)["buffer_path"]
    fast, bar = docs["auto"], docs["bar"]
    assert fast["path"] == "sram" and bar["path"] == "bar" and fast["time_kind"] == "modelled"
    assert fast["in"]["bytes"] == fast["out"]["bytes"] == SIZE
    assert fast["verified_bytes"] == 2 * sum(n for _s, n in windows(SIZE)) and bar["verified_bytes"] == 0
    assert outs["auto"].read_bytes() == outs["bar"].read_bytes() != bytes(SIZE)
    total = {k: d["in"]["seconds"] + d["out"]["seconds"] for k, d in docs.items()}
    assert total["bar"] / total["auto"] >= 100, total


def test_a_copy_engine_that_moves_nothing_fails_the_exec(tmp_path: Path) -> None:
    """sdma=nop: every COPY is consumed and moves nothing; the BAR windows catch it (exit 1, one line naming the
    address); the BAR path still works on the same board."""
    device = f"mock:navi31-usb,sdma=nop,flash={tmp_path / 'flash.bin'}"
    boot_emulated_board(device)
    r = _exec(device, "--buffer", "zeros:65536")
    assert r.code == 1
    lines = r.err.splitlines()
    assert len(lines) == 1 and "buffer copy through bridge sram + sdma0 came back wrong at vram 0x" in lines[0], r.err
    r = _exec(device, "--buffer", "zeros:65536", "--buffer-path", "bar")
    assert r.code == 0, r.err


def test_exec_on_the_direct_board_uses_a_dma_buffer(tmp_path: Path) -> None:
    device = f"mock:navi31,flash={tmp_path / 'flash.bin'}"
    boot_emulated_board(device)
    out = tmp_path / "o.bin"
    r = _exec(device, "--buffer", "zeros:8192", "--out", f"0:{out}")
    assert r.code == 0, r.err
    doc = json.loads(r.out)["buffer_path"]
    assert doc["path"] == "dma" and doc["verified_bytes"] > 0
    assert out.read_bytes()[:4096] != bytes(4096)


def test_an_unknown_or_missing_buffer_path_is_refused(tmp_path: Path) -> None:
    device = f"mock:navi31,flash={tmp_path / 'flash.bin'}"
    boot_emulated_board(device)
    r = _exec(device, "--buffer", "zeros:4096", "--buffer-path", "sram")
    assert r.code == 2 and "usb bridge's sram" in r.err
