"""The whole-batch wait bound of tinyhw.transport.batch (issue 21 item 7): 65,536 sleeps of 60 s, each acceptable on
its own, are 45 days on hardware; a batch may wait :data:`MAX_BATCH_WAIT_S` in all (its sleeps plus its polls'
timeouts), checked before the first operation runs, locally and by `tinyhw serve remote`."""

from __future__ import annotations

from pathlib import Path

import pytest
from flashhelp import dev as mockdev
from remotehelp import served

from tinyhw.connect import open_device
from tinyhw.errors import Refused, TinyhwError
from tinyhw.flash.romsw import BATCH_READS, DONE_TIMEOUT
from tinyhw.transport.batch import MAX_BATCH_WAIT_S, MAX_WAIT_S, R32, Poll32, Sleep, batch_wait, check_ops

ATTACK = [Sleep(MAX_WAIT_S)] * (1 << 16)


def _poll(timeout: float) -> Poll32:
    return Poll32(5, 0, 0, 0, timeout, 0.0, "x")


def test_the_total_counts_sleeps_and_poll_timeouts() -> None:
    assert batch_wait([Sleep(1.5), R32(5, 0), _poll(2.0), Sleep(0.5)]) == 4.0
    assert batch_wait(ATTACK) == 65536 * 60.0


def test_the_largest_batch_the_flash_driver_sends_fits_with_margin() -> None:
    # a streamed ROM_SW read over remote: BATCH_READS + 1 DONE polls in one message
    assert (BATCH_READS + 1) * DONE_TIMEOUT * 1.5 < MAX_BATCH_WAIT_S


def test_check_ops_refuses_a_batch_whose_waits_add_up(tmp_path: Path) -> None:
    with open_device(mockdev(tmp_path)) as o:
        t = o.transport
        check_ops(t, [Sleep(MAX_WAIT_S), _poll(MAX_WAIT_S)])  # exactly the limit
        with pytest.raises(Refused, match=r"may wait 3932160 s in all .* over the limit of 120 s per batch"):
            check_ops(t, ATTACK)
        with pytest.raises(Refused, match="over the limit"):
            check_ops(t, [Sleep(MAX_WAIT_S), _poll(MAX_WAIT_S), Sleep(0.001)])
        with pytest.raises(Refused, match="outside 0..60"):  # one operation's own bound still comes first
            check_ops(t, [Sleep(float("nan"))])


def test_the_server_refuses_65536_sleeps_of_60_s_before_anything_runs(tmp_path: Path) -> None:
    with served(mockdev(tmp_path)) as sv, open_device(sv.device()) as o:
        o.transport.bar(5).read32(0)  # the session is open and works
        server_side = sv.opened[-1].transport
        reads, clock = server_side.counters.reg_reads, server_side.clock.now()
        with pytest.raises(TinyhwError, match="over the limit of 120 s per batch") as e:
            o.transport.submit([R32(5, 0)] + ATTACK[1:]).get()  # 65,536 operations: one message
        assert e.value.exit_code == 2
        assert server_side.counters.reg_reads == reads  # not even the read in front ran
        assert server_side.clock.now() == clock
        assert o.transport.bar(5).read32(0) is not None  # the connection goes on
    assert any("refused: batch of 65536 operations may wait" in ln for ln in sv.audit.lines), sv.audit.lines[-5:]
