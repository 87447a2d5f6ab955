"""pytest fixtures for tests that want a tinyhw board from a labgrid place (docs/labgrid.md "pytest").

Load them in a conftest.py with ``pytest_plugins = ["tinyhw.labgrid.fixtures"]`` and run pytest with labgrid's
plugin options (``--lg-env env.yaml``, ``--lg-coordinator HOST:PORT``); the environment's target ``main`` holds
the ``RemotePlace``, a ``TinyhwDriver`` and a ``TinyhwStrategy``. Not an auto-loaded plugin: installing tinyhw must
not load labgrid into every pytest run.

* ``tinyhw_board``: the target's ``TinyhwDriver``, link up (the place's board, opened through its server).
* ``booted_navi31``: the same board booted (``am boot``), refused unless it is a Navi31 (1002:744c).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import tinyhw.labgrid  # noqa: F401  (registers the resources, the driver and the strategy with labgrid)

NAVI31 = (0x1002, 0x744C)


def _strategy(target: Any) -> Any:
    return target.get_driver("TinyhwStrategy")


@pytest.fixture
def tinyhw_board(target: Any) -> Iterator[Any]:
    """The place's board with its link up: a ``TinyhwDriver``."""
    strategy = _strategy(target)
    strategy.transition("link_up")
    yield target.get_driver("TinyhwDriver")


@pytest.fixture
def booted_navi31(target: Any) -> Iterator[Any]:
    """The place's Navi31, booted: a ``TinyhwDriver`` whose ``am boot`` is done."""
    strategy = _strategy(target)
    strategy.transition("link_up")
    board = target.get_driver("TinyhwDriver")
    ident = board.transport.identity()
    if (ident.vendor_id, ident.device_id) != NAVI31:
        pytest.fail(f"the place's board is {ident.vendor_id:04x}:{ident.device_id:04x}, not a navi31 (1002:744c)")
    strategy.transition("booted")
    yield board
