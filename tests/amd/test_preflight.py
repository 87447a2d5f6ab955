"""The checks before a boot or a reset writes anything: one library call (tinyhw.boot.amd.preflight_boot /
preflight_reset) that `am boot` and `am reset` only call, so a Python user gets the same refusals."""

from __future__ import annotations

import pytest
from clihelp import run

from tinyhw.boot.amd import AmGpu, preflight_boot, preflight_reset
from tinyhw.connect import open_device
from tinyhw.errors import OperationFailed, Refused
from tinyhw.transport.devstr import parse_device


@pytest.fixture
def transport():
    opened = open_device(parse_device("mock:navi31"))
    try:
        yield opened.transport
    finally:
        opened.close()


def test_a_bootable_gpu_passes_and_is_handed_back(transport) -> None:
    gpu = preflight_boot(transport)
    assert isinstance(gpu, AmGpu) and gpu.discovery is not None
    assert preflight_reset(gpu) is gpu


def test_a_virtual_function_is_refused(transport, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(AmGpu, "is_vf", lambda self: True)
    with pytest.raises(Refused, match="virtual function; its psp and smu belong to the host") as e:
        preflight_boot(transport)
    assert e.value.exit_code == 2
    with pytest.raises(Refused, match="only the host can reset the gpu"):
        preflight_reset(transport)


def test_an_unreadable_discovery_table_fails(transport) -> None:
    gpu = AmGpu(transport)
    gpu.discovery = None
    with pytest.raises(OperationFailed, match="ip discovery table is unreadable"):
        preflight_boot(gpu)


@pytest.mark.parametrize("command", ["boot", "reset"])
def test_the_cli_gives_the_librarys_refusal(command: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(AmGpu, "is_vf", lambda self: True)
    extra = ["--firmware-dir", "/tmp/tinyhw-no-such-dir"] if command == "boot" else []
    r = run("--device", "mock:navi31", "am", command, "--yes", *extra)
    assert r.code == 2 and "sr-iov virtual function" in r.err
    assert "plan:" not in r.out + r.err  # refused before the plan, so before any write
