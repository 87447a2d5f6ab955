"""``tinyhw flash update`` / ``flash verify --after-update`` / ``mock power-cycle`` end to end on both emulated boards.

specs/navi31-spi-flash.md §e.5-§e.7 and §g.2: the ``ifwi-all`` stream, its preconditions (each refused with
exit 2 before any mailbox write, counted by the emulator), the abort rule, phase 2, the post-update verify that
tolerates exactly the regions the PSP rewrites, and the write paths that stay disabled.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from clihelp import run
from updatehelp import NEW, OLD, board_files, device, last_command, mailboxes  # noqa: F401 (fixture)

import tinyhw
from tinyhw.boards.navi31 import NAVI31
from tinyhw.errors import Refused
from tinyhw.flash import update as update_mod
from tinyhw.flash.update import TOLERATED, Updater, check_image, compare_after_update
from tinyhw.formats.ifwi_layout import ITEMS
from tinyhw.mocks.amd import ifwi_image
from tinyhw.mocks.amd.psp import DATA_TRANSFER, END_TRANSFER, ORDERS, START_TRANSFER
from tinyhw.progress import Progress

BOARDS = ["navi31", "navi31-usb"]


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


# -- end to end ----------------------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("board", BOARDS)
def test_update_power_cycle_verify(tmp_path: Path, board: str) -> None:
    """The update on each board; the 2 MiB after-update verify reads one dword per round trip through the
    aperture (about 1M usb transfers, two minutes of wall time here), so it runs on mock:navi31 — the same
    board and flash file the usb attachment reaches."""
    flash = board_files(tmp_path / "board")
    new = _write(tmp_path, "new.bin", NEW)
    old = _write(tmp_path, "old.bin", OLD)
    d = device(flash, board)
    direct = device(flash, "navi31")
    r = run("--device", d, "mock", "power-cycle")
    assert r.code == 0 and "booted partition A" in r.out
    r = run("--device", d, "--stats", "flash", "update", str(new), "--yes")
    assert r.code == 0, r.err
    assert "phase 2" in r.out and "hard power cycle is required" in r.out and "updated b partition" in r.out
    assert "round trips per KiB" in r.out and "modelled" in r.out
    assert "item 0x08 (ISH A payload): 4096 bytes" in r.err  # progress per item
    counts = last_command(flash)
    assert counts["psp_data_transfers"] == sum(len(NEW_ITEM(i)) for i in STREAMED) // 4
    assert r.stats["round_trips"] > counts["psp_data_transfers"]  # at least one round trip per dword
    r = run("--device", d, "--json", "mock", "power-cycle")
    assert r.code == 0 and json.loads(r.out)["booted"] == "B"
    r = run("--device", direct, "--json", "flash", "verify", str(new), "--after-update")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["match"] and doc["payloads"] == {"A": True, "B": True}
    assert [t["name"] for t in doc["tolerated"]] == [t.name for t in TOLERATED] and all(t["differs"]
                                                                                       for t in doc["tolerated"])
    r = run("--device", direct, "flash", "verify", str(old), "--after-update")
    assert r.code == 1 and "differs from" in r.err
    first = next(i for i in range(len(OLD)) if OLD[i] != NEW[i])
    assert f"0x{first:06x}" in r.err


STREAMED = [v & 0xFF for v in ORDERS["default"]]


def NEW_ITEM(item: int) -> bytes:
    from tinyhw.formats.ifwi_layout import resolve_item

    it = resolve_item(NEW, item)
    assert it.offset is not None and it.size is not None
    return NEW[it.offset:it.offset + it.size]


@pytest.mark.parametrize("order", sorted(ORDERS))
def test_every_item_order_streams_what_the_resolver_gives(tmp_path: Path, order: str,
                                                          mailboxes: list) -> None:  # noqa: F811
    flash = board_files(tmp_path)
    with tinyhw.open(device(flash, extra=f"psp=early,psp-order={order}")) as o:
        result = Updater(o.transport, NEW, confirm=lambda plan: None).run()
    asked = [v & 0xFF for v in ORDERS[order]]
    assert [i.item for i in result.items] == asked
    assert mailboxes[0].payloads == [(i, NEW_ITEM(i)) for i in asked]  # byte for byte what the resolver gives
    assert result.data_transfers == sum(len(NEW_ITEM(i)) for i in asked) // 4


class Recorder(Progress):
    """Every task and advance the update reports."""

    def __init__(self) -> None:
        self.tasks: list[tuple[str, int, list[int]]] = []

    def start(self, label: str, total: int) -> None:
        self.tasks.append((label, total, []))

    def advance(self, n: int) -> None:
        self.tasks[-1][2].append(n)


def test_progress_per_item_and_per_4kib(tmp_path: Path) -> None:
    flash = board_files(tmp_path)
    rec = Recorder()
    with tinyhw.open(device(flash, extra="psp=early")) as o:
        Updater(o.transport, NEW, confirm=lambda plan: None, progress=rec).run()
    assert [t[0] for t in rec.tasks] == [f"item 0x{v & 0xFF:02x}" for v in ORDERS["default"]]
    for _label, total, steps in rec.tasks:
        assert sum(steps) == total and all(s == 0x1000 for s in steps[:-1]) and steps[-1] <= 0x1000


# -- refusals: exit 2, nothing written to the mailbox ---------------------------------------------------------------
def _refused(tmp_path: Path, board: str, image: bytes, extra: str = "psp=early") -> tuple[str, dict[str, int]]:
    flash = board_files(tmp_path / "board")
    before = flash.read_bytes()
    img = _write(tmp_path, "img.bin", image)
    r = run("--device", device(flash, board, extra), "flash", "update", str(img), "--yes")
    assert r.code == 2, (r.code, r.err)
    assert flash.read_bytes() == before
    return r.err, last_command(flash)


def _no_sgn(image: bytes) -> bytes:
    img = bytearray(image)
    struct.pack_into("<I", img, 0x1000, 0x1F8000)  # the $SGN pointer points at erased flash
    return bytes(img)


def _other_board(image: bytes) -> bytes:
    img = bytearray(image)
    for vb in (ifwi_image.VBIOS_A, ifwi_image.VBIOS_B):
        struct.pack_into("<H", img, vb + 0x1C0 + 6, 0x7480)  # the PCIR device id of another Navi3x
    return bytes(img)


@pytest.mark.parametrize("board", BOARDS)
def test_refusals_write_nothing_to_the_mailbox(tmp_path: Path, board: str) -> None:
    err, counts = _refused(tmp_path / "size", board, NEW[:-4096])
    assert "exactly 0x200000" in err and counts == {}  # refused before the device was opened
    err, counts = _refused(tmp_path / "items", board, _no_sgn(NEW))
    assert "may ask for items it does not hold" in err and "$SGN" in err and counts == {}
    err, counts = _refused(tmp_path / "board", board, _other_board(NEW))
    assert "another board" in err and counts["psp_mailbox_writes"] == 0
    err, counts = _refused(tmp_path / "gated", board, NEW, "psp=sos")
    assert "power-cycle the card (off, not a reset) and do not boot it" in err and "0x0a" in err
    assert counts["psp_transfer_commands"] == 0 and counts["psp_mailbox_writes"] == 2  # one GET_TRANSFER_TYPE
    err, counts = _refused(tmp_path / "pbl", board, NEW, "psp=pbl")
    assert "rom_sw path" in err and counts["psp_transfer_commands"] == 0


def test_refusals_sabotaged_checks_would_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the identity check the other board's image is streamed: the refusal above is the check's doing."""
    from tinyhw.flash.identity import BoardCheck

    monkeypatch.setattr(update_mod, "compare", lambda a, b, source: BoardCheck(a, b, source, []))
    flash = board_files(tmp_path / "board")
    img = _write(tmp_path, "img.bin", _other_board(NEW))
    r = run("--device", device(flash, extra="psp=early"), "flash", "update", str(img), "--yes")
    assert r.code != 2 and last_command(flash)["psp_transfer_commands"] > 0


def test_image_checks_name_every_item() -> None:
    assert check_image(NEW) == sum(len(NEW_ITEM(i)) for i in ITEMS)
    with pytest.raises(Refused, match="item 0x81"):
        check_image(_no_sgn(NEW))
    with pytest.raises(Refused, match="exactly"):
        check_image(NEW + b"\xff")


def test_a_finished_update_needs_a_power_cycle(tmp_path: Path) -> None:
    flash = board_files(tmp_path / "board")
    img = _write(tmp_path, "img.bin", NEW)
    d = device(flash, extra="psp=early")
    assert run("--device", d, "flash", "update", str(img), "--yes").code == 0
    r = run("--device", d, "flash", "update", str(img), "--yes")
    assert r.code == 2 and "power-cycle" in r.err and last_command(flash)["psp_transfer_commands"] == 0


def test_without_yes_nothing_is_sent(tmp_path: Path) -> None:
    flash = board_files(tmp_path / "board")
    img = _write(tmp_path, "img.bin", NEW)
    r = run("--device", device(flash, extra="psp=early"), "flash", "update", str(img))
    assert r.code == 2 and last_command(flash)["psp_transfer_commands"] == 0


# -- the abort rule ---------------------------------------------------------------------------------------------------
def test_abort_sends_one_best_effort_end_with_the_bytes_sent(tmp_path: Path, mailboxes: list) -> None:  # noqa: F811
    # a dry run finds the register access of the 100th DATA_TRANSFER's answer (psp-disconnect stops right there)
    flash = board_files(tmp_path / "dry")
    with tinyhw.open(device(flash, extra="psp=early,faults=psp-disconnect@100")) as o, \
            pytest.raises(update_mod.UpdateFailed):
        Updater(o.transport, NEW, confirm=lambda plan: None).run()
    n = o.transport.accesses - 1  # the abort END_TRANSFER failed at its first access, after the poll
    # that one read times out on a fresh board: the PSP got dword 100, the host counted 99
    flash = board_files(tmp_path / "real")
    with tinyhw.open(device(flash, extra=f"psp=early,faults=timeout@{n}")) as o, \
            pytest.raises(update_mod.UpdateFailed) as info:
        Updater(o.transport, NEW, confirm=lambda plan: None).run()
    assert info.value.outcome == "old" and info.value.exit_code == 1
    log = [(c, a) for c, a, _s, _r in mailboxes[-1].log]
    start = max(i for i, (c, _a) in enumerate(log) if c == START_TRANSFER)
    item = log[start][1] & 0xFF
    tail = log[start + 1:]
    assert [c for c, _a in tail].count(END_TRANSFER) == 1 and tail[-1][0] == END_TRANSFER
    sent = 4 * sum(1 for c, _a in tail if c == DATA_TRANSFER) - 4  # the unanswered dword is not counted as sent
    assert tail[-1][1] == sent << 8 | item
    assert f"at byte {sent}" in str(info.value)


def test_a_failed_end_transfer_is_not_sent_again(tmp_path: Path, mailboxes: list) -> None:  # noqa: F811
    flash = board_files(tmp_path)
    with tinyhw.open(device(flash, extra="psp=early,faults=psp-badsig")) as o, \
            pytest.raises(update_mod.UpdateFailed, match="0x0d"):
        Updater(o.transport, NEW, confirm=lambda plan: None).run()
    log = mailboxes[-1].log
    last_start = max(i for i, e in enumerate(log) if e[0] == START_TRANSFER)
    ends = [e for e in log[last_start:] if e[0] == END_TRANSFER]
    assert len(ends) == 1 and ends[0][2] == 0x0D


# -- the post-update verify -------------------------------------------------------------------------------------------
#: §e.6: the ISH B (0x13000, §g.1) checksum at +0 and update counter at +8; the metadata sector at 0x1ef000
PSP_REWRITES = [(0x13000, 4), (0x13008, 4), (0x1EF000, 0x1000)]


def test_after_update_tolerates_exactly_the_psp_regions() -> None:
    assert [(r.offset, r.size) for r in TOLERATED] == PSP_REWRITES
    flash = bytearray(NEW)
    for start, size in PSP_REWRITES:
        flash[start:start + size] = bytes(size)
    assert compare_after_update(bytes(flash), NEW).match
    for start, size in PSP_REWRITES:  # one byte past each tolerated region is not tolerated
        for off in (start - 1, start + size):
            changed = bytearray(flash)
            changed[off] ^= 0x01
            result = compare_after_update(bytes(changed), NEW)
            assert not result.match and result.first_mismatch == off
    payload = bytearray(flash)
    payload[ifwi_image.PAYLOAD_B + 5] ^= 0xFF
    result = compare_after_update(bytes(payload), NEW)
    assert result.payloads == {"A": True, "B": False} and result.first_mismatch == ifwi_image.PAYLOAD_B + 5


# -- the disabled paths -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["stream", "ifwi-step", "live-flash"])
def test_other_psp_write_paths_stay_disabled(tmp_path: Path, name: str) -> None:
    flash = tmp_path / "flash.bin"
    r = run("--device", device(flash, extra="psp=early"), "flash", name, "0x08", "image.bin", "--yes")
    assert r.code == 2 and "disabled" in r.err and "nothing was opened" in r.err
    assert not flash.exists()  # the board was never built
    r = run("flash", name, "--help")
    assert r.code == 0 and "Disabled" in r.out
    assert not any(hasattr(update_mod, f) for f in ("stream", "ifwi_step", "live_flash", "stream_item"))


# -- over remote: one batch (one round trip) per dword ---------------------------------------------------------------
def test_update_over_remote_is_one_round_trip_per_dword(tmp_path: Path) -> None:
    from remotehelp import served

    from tinyhw.mocks.amd.board import power_cycle_flash

    flash = board_files(tmp_path)
    power_cycle_flash(flash, spec=NAVI31)
    with served(device(flash)) as s, tinyhw.open(s.device()) as o:
        result = Updater(o.transport, NEW, confirm=lambda plan: None).run()
    assert result.data_transfers == sum(len(NEW_ITEM(i)) for i in STREAMED) // 4
    # START + END + GET_TRANSFER_TYPE per item cost a few round trips each; every dword exactly one
    assert result.data_transfers <= result.round_trips < result.data_transfers + 16 * len(result.items)
    assert last_command(flash)["psp_data_transfers"] == result.data_transfers


def test_the_psp_refuses_a_payload_its_signature_does_not_cover(tmp_path: Path) -> None:
    from tinyhw.mocks.amd.board import power_cycle_flash

    unsigned = bytearray(NEW)
    unsigned[ifwi_image.PAYLOAD_A + 0x300] ^= 0xFF  # changed after signing
    flash = board_files(tmp_path)
    power_cycle_flash(flash, spec=NAVI31)
    with tinyhw.open(device(flash)) as o, pytest.raises(update_mod.UpdateFailed, match="0x0d") as info:
        Updater(o.transport, bytes(unsigned), confirm=lambda plan: None).run()
    assert info.value.outcome == "old" and last_command(flash)["psp_sector_writes"] == 0
    assert power_cycle_flash(flash, spec=NAVI31)[0] == "A" and flash.read_bytes()[:0x1EF000] == OLD[:0x1EF000]


def test_refusal_hints_name_no_option_flash_update_lacks(tmp_path: Path) -> None:
    """``flash write``'s refusals offer --force / --force-board-mismatch; flash update has neither, so its
    refusals must not send the user to them."""
    garbage = bytearray(NEW)
    garbage[:4] = b"\x00\x11\x22\x33"
    for name, data in (("magic", bytes(garbage)), ("board", _other_board(NEW))):
        err, _ = _refused(tmp_path / name, "navi31", data)
        assert "refusing the image" in err and "--force" not in err, err


def test_the_next_steps_name_the_device(tmp_path: Path) -> None:
    """The printed next steps are copy-paste commands: they name the device (a bare ``tinyhw flash verify``
    would look for another device), and on the emulated board the power cycle is ``mock power-cycle``."""
    flash = board_files(tmp_path / "board")
    img = _write(tmp_path, "img.bin", NEW)
    d = device(flash, extra="psp=early")
    r = run("--device", d, "flash", "update", str(img), "--yes")
    assert r.code == 0, r.err
    assert f"tinyhw --device {d} mock power-cycle" in r.out
    assert f"tinyhw --device {d} flash verify {img} --after-update" in r.out


def test_verify_after_update_refuses_a_foreign_file_without_a_force_hint(tmp_path: Path) -> None:
    """A file that is no ifwi is refused (exit 2) without pointing at a --force the command does not have."""
    flash = board_files(tmp_path / "board")
    img = bytearray(NEW)
    img[:4] = b"\x00\x11\x22\x33"
    path = _write(tmp_path, "img.bin", bytes(img))
    r = run("--device", device(flash), "flash", "verify", str(path), "--after-update")
    assert r.code == 2 and "ifwi magic" in r.err and "--force" not in r.err, (r.code, r.err)


def test_mock_power_cycle_and_reset_refuse_a_global_record(tmp_path: Path) -> None:
    """They open no device, so there is nothing to record: --record is refused (exit 2) before the board's files
    change, as every command that cannot honour a global option does."""
    flash = board_files(tmp_path / "board")
    def files() -> dict[str, bytes]:
        return {p.name: p.read_bytes() for p in flash.parent.iterdir()}

    before = files()
    for cmd in (["mock", "power-cycle"], ["mock", "reset", "--yes"]):
        r = run("--device", device(flash), "--record", str(tmp_path / "r.pcapng"), *cmd)
        assert r.code == 2 and "--record" in r.err, (cmd, r.code, r.err)
    assert files() == before
    assert not (tmp_path / "r.pcapng").exists()
