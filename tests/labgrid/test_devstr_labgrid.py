"""``labgrid:PLACE`` device strings: parsing, options, the remote device a place's resource names, a missing labgrid.

The place itself (coordinator, exporter, locks) is the farm tier's (tests/farm/test_labgrid_farm.py); these run without
labgrid installed.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from clihelp import run

from tinyhw.connect.place import PlaceResource, coordinator_address, remote_spec
from tinyhw.errors import BadDeviceString, EnvironmentProblem
from tinyhw.transport.devstr import parse_device


def test_a_place_parses_and_its_options_are_typed() -> None:
    spec = parse_device("labgrid:gpu-bench,coordinator=10.0.0.5:20408")
    assert (spec.kind, spec.target, spec.options) == ("labgrid", "gpu-bench", {"coordinator": "10.0.0.5:20408"})
    for bad in ("labgrid", "labgrid:", "labgrid:a/b", "labgrid:-x", "labgrid:" + "p" * 65, "labgrid:a b"):
        with pytest.raises(BadDeviceString, match="labgrid needs a place name"):
            parse_device(bad)


def test_bad_options_are_refused_before_the_coordinator_is_asked() -> None:
    r = run("--device", "labgrid:gpu,key=/x", "probe")
    assert r.code == 2 and "does not take option(s) key" in r.err and r.err.count("\n") == 1, r.err
    r = run("--device", "labgrid:gpu,coordinator=no/where", "probe")
    assert r.code == 2 and "coordinator" in r.err, r.err


def test_serve_refuses_a_place() -> None:
    r = run("serve", "remote", "--device", "labgrid:gpu")
    assert r.code == 2 and "not a labgrid: one" in r.err, r.err


def test_the_coordinator_comes_from_the_option_then_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LG_COORDINATOR", raising=False)
    assert coordinator_address(None) == "127.0.0.1:20408"
    monkeypatch.setenv("LG_COORDINATOR", "10.1.1.1:1234")
    assert coordinator_address(None) == "10.1.1.1:1234"
    assert coordinator_address("127.0.0.1:9") == "127.0.0.1:9"


def _res(**params: object) -> PlaceResource:
    return PlaceResource("ci/bench1/TinyhwRemote/TinyhwRemote", dict(params), {"proxy": "exp", "proxy_required": False},
                         True)


def test_a_tcp_resource_names_the_authenticated_tcp_server_and_its_key_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LG_PROXY", raising=False)
    spec = remote_spec(_res(host="127.0.0.1", port=7788, key_file="/keys/bench1.key", device="usb:0"))
    assert str(spec) == "remote:127.0.0.1:7788,key=/keys/bench1.key"
    assert str(remote_spec(_res(host="::1", port=7788))) == "remote:[::1]:7788"


def test_an_ssh_resource_runs_the_stdio_server_there() -> None:
    spec = remote_spec(_res(host="lab1", via="ssh", ssh_user="ci", device="mock:navi31,strict"))
    assert spec.target == "ssh://ci@lab1/mock:navi31" and spec.options == {"strict": True}
    with pytest.raises(EnvironmentProblem, match="names no device"):
        remote_spec(_res(host="lab1", via="ssh"))


@pytest.mark.parametrize(("params", "why"), [
    ({"port": 7788}, "names no host"),
    ({"host": "127.0.0.1", "port": 0}, "no valid port"),
    ({"host": "127.0.0.1", "port": "7788"}, "no valid port"),
    ({"host": "127.0.0.1", "port": 7788, "via": "telnet"}, "via: telnet"),
    ({"host": "lab1", "via": "ssh", "device": "usb:0", "ssh_user": 7}, "ssh_user: an int, not a string"),
    ({"host": "lab1", "via": "ssh", "device": "usb:0", "ssh_user": ["ci"]}, "ssh_user: a list, not a string"),
    ({"host": "lab1", "via": "ssh", "device": {"a": 1}}, "device: a dict, not a string"),
    ({"host": ["lab1"], "port": 7788}, "host: a list, not a string"),
    ({"host": "127.0.0.1", "port": 7788, "key_file": 5}, "key_file: an int, not a string"),
    ({"host": "127.0.0.1", "port": 7788, "via": {"x": 1}}, "via: a dict, not a string"),
    ({"host": "127.0.0.1", "port": True}, r"no valid port \(a bool\)"),
    ({"host": "127.0.0.1", "port": 1 << 100}, r"no valid port \(an int\)"),
    ({"host": "lab1\x1b[2J", "port": 7788}, "not a short printable string"),
])
def test_a_broken_resource_is_an_environment_problem(params: dict, why: str) -> None:
    with pytest.raises(EnvironmentProblem, match=why) as e:
        remote_spec(_res(**params))
    assert e.value.exit_code == 3


def test_without_labgrid_a_place_is_exit_3_with_the_install_hint() -> None:
    code = ("import sys\n"
            "sys.modules['labgrid'] = None\n"  # as if it were not installed
            "from tinyhw.cli import main\n"
            "main(['--device', 'labgrid:gpu-bench', 'probe'])\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 3, r.stderr
    assert "labgrid: devices need the labgrid package" in r.stderr and "pip install -e '.[labgrid]'" in r.stderr
    assert r.stderr.count("\n") == 1, r.stderr


def test_a_bad_ssh_device_in_a_resource_is_an_environment_problem() -> None:
    with pytest.raises(EnvironmentProblem, match="names a bad ssh device"):
        remote_spec(_res(host="lab1", via="ssh", device="mock:navi31,,strict"))
