from __future__ import annotations

import pytest

from tinyhw.errors import BadDeviceString
from tinyhw.transport.devstr import parse_device


@pytest.mark.parametrize(
    ("text", "kind", "target"),
    [
        ("pci:0000:03:00.0", "pci", "0000:03:00.0"),
        ("pci:03:00.0", "pci", "0000:03:00.0"),
        ("0000:0A:00.1", "pci", "0000:0a:00.1"),
        ("pci:10000:e1:00.0", "pci", "10000:e1:00.0"),
        ("03:00.0", "pci", "0000:03:00.0"),
        ("vfio:0000:03:00.0", "vfio", "0000:03:00.0"),
        ("usb", "usb", ""),
        ("usb:0", "usb", "0"),
        ("usb:02", "usb", "2"),
        ("usb:2-7", "usb", "2-7"),
        ("remote:127.0.0.1:7788", "remote", "127.0.0.1:7788"),
        ("remote:gpu-box:1", "remote", "gpu-box:1"),
        ("mock:navi31", "mock", "navi31"),
        ("MOCK:Navi31-USB", "mock", "navi31-usb"),
    ],
)
def test_accepted_forms(text: str, kind: str, target: str) -> None:
    spec = parse_device(text)
    assert (spec.kind, spec.target) == (kind, target)
    assert spec.options == {}


def test_options() -> None:
    spec = parse_device("mock:navi31-usb,flash=/tmp/f.bin,faults=timeout@5+stuck-busy,strict")
    assert spec.options == {"flash": "/tmp/f.bin", "faults": "timeout@5+stuck-busy", "strict": True}
    assert str(spec) == "mock:navi31-usb,flash=/tmp/f.bin,faults=timeout@5+stuck-busy,strict"


@pytest.mark.parametrize(
    "text",
    ["", "pci", "pci:", "pci:3:0.0", "pci:0000:03:00.8", "usb:x", "usb:1-", "remote:host", "remote::5",
     "remote:h:0", "remote:h:70000", "mock:navi99", "frob:1", "mock:navi31,", "mock:navi31,=x", "mock:navi31,flash="],
)
def test_malformed_strings_show_the_accepted_forms(text: str) -> None:
    with pytest.raises(BadDeviceString) as e:
        parse_device(text)
    assert "accepted forms" in str(e.value)
    assert e.value.exit_code == 2
