"""pytest fixtures for tests that want a tinyhw board from a labgrid place (docs/labgrid.md "pytest").

Load them in a conftest.py with ``pytest_plugins = ["tinyhw.labgrid.fixtures"]`` and run pytest with labgrid's
plugin options (``--lg-env env.yaml``, ``--lg-coordinator HOST:PORT``); the environment's target ``main`` holds
the ``RemotePlace``, a ``TinyhwDriver`` and a ``TinyhwStrategy``. Not an auto-loaded plugin: installing tinyhw must
not load labgrid into every pytest run.

* ``tinyhw_board``: the target's ``TinyhwDriver``, link up (the place's board, opened through its server).
* ``booted_board``: the same board booted (``am boot``), refused unless its description (tinyhw.boards) says it has
  the AMD bring-up (``engines.am_boot``: Navi31, Navi33). ``booted_navi31`` is the same fixture under its first
  name.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import tinyhw.labgrid  # noqa: F401  (registers the resources, the driver and the strategy with labgrid)
from tinyhw.boards import by_pci


def _strategy(target: Any) -> Any:
    return target.get_driver("TinyhwStrategy")


@pytest.fixture
def tinyhw_board(target: Any) -> Iterator[Any]:
    """The place's board with its link up: a ``TinyhwDriver``."""
    strategy = _strategy(target)
    strategy.transition("link_up")
    yield target.get_driver("TinyhwDriver")


def bootable(vendor_id: int, device_id: int) -> str | None:
    """Why the board ``vendor_id:device_id`` cannot be booted by ``am boot`` (its description says so), None when
    it can."""
    spec = by_pci(vendor_id, device_id)
    ids = f"{vendor_id:04x}:{device_id:04x}"
    if spec is None:
        return f"the place's board is {ids}, a board tinyhw does not describe"
    if not spec.engines.am_boot:
        return f"the place's board is a {spec.name} ({ids}), which am boot does not bring up"
    return None


def _booted(target: Any) -> Any:
    strategy = _strategy(target)
    strategy.transition("link_up")
    board = target.get_driver("TinyhwDriver")
    ident = board.transport.identity()
    why = bootable(ident.vendor_id, ident.device_id)
    if why is not None:
        pytest.fail(why)
    strategy.transition("booted")
    return board


@pytest.fixture
def booted_board(target: Any) -> Iterator[Any]:
    """The place's AMD board, booted: a ``TinyhwDriver`` whose ``am boot`` is done."""
    yield _booted(target)


@pytest.fixture
def booted_navi31(target: Any) -> Iterator[Any]:
    """:func:`booted_board` under its first name (any board ``am boot`` brings up, not only a Navi31)."""
    yield _booted(target)
