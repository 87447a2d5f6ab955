"""USB tier: the emulated bridge served by ``tinyhw mock gadget`` (FunctionFS on dummy_hcd) in a QEMU
guest, driven by the unchanged usb transport through the real libusb and the kernel's USB stack.

One boot for all of these (the ``usb_guest`` session fixture); each test asserts on one step of
usbguest_main.py. Specs: specs/usb-real-stack-harness.md; specs/asm24-usb-bridge.md §2-§4, §10.
Functional only: performance is compared on the emulator's counters (the guest is emulated).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tinyhw.connect import open_device
from tinyhw.formats.pciids import PciIds
from tinyhw.probe import probe_device as do_probe
from tinyhw.transport.devstr import parse_device


def step(guest: dict[str, Any], name: str) -> Any:
    r = guest.get(name)
    assert r is not None, f"the guest did not run step {name!r}; console:\n{guest['_boot']['console']}"
    if isinstance(r, dict) and set(r) == {"error"}:
        pytest.fail(f"guest step {name} raised:\n{r['error']}\nconsole:\n{guest['_boot']['console'][-3000:]}",
                    pytrace=False)
    return r


def ok(r: dict[str, Any]) -> str:
    assert r["code"] == 0, f"tinyhw {' '.join(r['args'])} exited {r['code']}: {r['err']}"
    return r["out"]


def one_line_error(r: dict[str, Any], code: int, pattern: str) -> str:
    assert r["code"] == code, (r["code"], r["err"])
    lines = [ln for ln in r["err"].splitlines() if ln.strip()]
    assert lines and lines[-1].startswith("error: ") and re.search(pattern, lines[-1]), r["err"]
    assert "Traceback" not in r["err"]
    return lines[-1]


def test_gadget_modules_and_udc(usb_guest: dict[str, Any]) -> None:
    r = step(usb_guest, "setup")
    for m in ("usbcore", "udc_core", "libcomposite", "usb_f_fs", "dummy_hcd"):
        assert m in r["modules"], r["modules"]
    assert r["udcs"] == ["dummy_udc.0"] and r["gadget_dir"], r


def test_list_and_probe_through_libusb(usb_guest: dict[str, Any]) -> None:
    r = step(usb_guest, "probe")
    listed = json.loads(ok(r["list_json"]))
    usb = [d for d in listed if str(d.get("device", "")).startswith("usb:")]
    assert len(usb) == 1 and re.fullmatch(r"usb:\d+-\d+", usb[0]["device"]), listed
    assert usb[0]["device"] in ok(r["list"])
    doc = json.loads(ok(r["probe"]))
    assert (doc["vendor_id"], doc["device_id"]) == (0x1002, 0x744C)
    assert doc["bridge"]["usb_id"] == "add1:0001" and doc["bridge"]["usb_speed"] == "high-speed"
    assert doc["bridge"]["product"].startswith("custom")


def test_gadget_enumeration_retried_at_most_once_per_start(usb_guest: dict[str, Any]) -> None:
    # A start whose enumeration failed with -EPROTO in a starved guest is repeated once (usbguest_main.Gadget);
    # more than one such start in a run means enumeration itself is broken, not the guest's CPU share.
    retries = usb_guest.get("enumeration_retries")
    assert isinstance(retries, list) and len(retries) <= 1, retries


def test_gadget_stops_cleanly_and_reports(usb_guest: dict[str, Any]) -> None:
    for name, key in (("probe", "gadget"), ("gadget_stop", None)):
        g = step(usb_guest, name)
        g = g[key] if key else g
        assert g["code"] == 0, g["err"]
        assert not g["configfs_left"] and not g["ffs_mounted"], g
        rep = g["report"]
        assert rep is not None and rep["udc"] == "dummy_udc.0" and rep["teardown_errors"] == [], g
        assert rep["errors"] == [], rep["errors"]
        assert rep["counters"]["usb_transfers"] == len(rep["transfers"]) > 0


def test_gadget_core_took_each_streamed_write_before_the_next_request(usb_guest: dict[str, Any]) -> None:
    """Host order kept through FunctionFS: each 0xF0 streamed-write setup (wIndex 1) is followed in the core's
    log by its bulk OUT, taken. (Once its data reached the core after the next 0xF0 request, which cancels
    the stream; a page program then programmed a stale window: the resume step's "flash 0x02".)"""
    log = step(usb_guest, "gadget_stop")["report"]["transfers"]
    streams = [i for i, t in enumerate(log) if t["kind"] == "control" and t["setup"][:2] == [0x40, 0xF0]
               and t["setup"][3] == 1]
    assert streams, "no streamed write was seen (the flash write steps program pages through them)"
    late = [(log[i]["number"], log[i + 1]) for i in streams
            if i + 1 >= len(log) or (log[i + 1]["kind"], log[i + 1]["status"]) != ("bulk_out", "ok")]
    assert not late, late[:3]


def _pyusb_tier_probe_log(tmp_path: Path) -> list[dict[str, Any]]:
    """The same command against the pyusb-backend emulator at the gadget's link speed (High-Speed)."""
    opened = open_device(parse_device(f"mock:navi31-usb,speed=hs,flash={tmp_path / 'flash.bin'}"))
    try:
        do_probe(opened.transport, PciIds.load())
        records = opened.emulator_stats()["transfers"]
    finally:
        opened.close()
    return [{"number": r.number, "kind": r.kind, "setup": list(r.setup) if r.setup else None, "endpoint": r.endpoint,
             "length": r.length, "actual": r.actual, "status": r.status, "crc32": r.crc32} for r in records]


def test_probe_transfers_equal_the_pyusb_tier(usb_guest: dict[str, Any], tmp_path: Path) -> None:
    served = step(usb_guest, "probe")["gadget"]["report"]["transfers"]
    expected = _pyusb_tier_probe_log(tmp_path)
    assert len(served) == len(expected)
    for a, b in zip(served, expected, strict=True):
        assert a == b


def test_flash_info_and_read(usb_guest: dict[str, Any]) -> None:
    r = step(usb_guest, "flash")
    info = json.loads(ok(r["info"]))
    assert (info["jedec_id"], info["size"]) == ("c86015", 2 << 20), info
    ok(r["read"])
    assert r["read_equal"], "flash read over usb differs from the emulated flash file"


def test_flash_write_then_verify_the_range(usb_guest: dict[str, Any]) -> None:
    r = step(usb_guest, "flash_write")
    ok(r["write"])
    assert json.loads(ok(r["verify"]))["match"] is True
    ok(r["read"])
    assert r["read_equal"], "the written range reads back differently over usb"
    assert r["file_equal"], "the emulated flash file does not hold the written image"


def test_write_interrupted_by_a_disconnect_is_finished_by_resume(usb_guest: dict[str, Any]) -> None:
    r = step(usb_guest, "resume")
    assert r["phase_at_unbind"] is not None, r["interrupted"]  # the gadget left while a sector was programmed
    one_line_error(r["interrupted"], 1, r"device disconnected")
    ok(r["resume"])
    assert json.loads(ok(r["verify"]))["match"] is True
    assert r["file_equal"], "after --resume the emulated flash file does not hold the image"


def test_unknown_vendor_request(usb_guest: dict[str, Any]) -> None:
    """§4.8: acknowledged when wLength is 0; otherwise no data stage: the host times out, one line."""
    r = step(usb_guest, "unknown_request")
    assert r["in_type"] == "DeviceTimeout", r
    assert "\n" not in r["in"] and "timed out" in r["in"] and "0xe7" in r["in"], r
    assert r["out0"] == 0, r
    assert r["ltssm_after"] == 0x78


def test_second_process_is_refused_by_the_lock(usb_guest: dict[str, Any]) -> None:
    r = step(usb_guest, "lock")["second"]
    one_line_error(r, 3, r"lock|in use|busy")


def test_unbound_mid_command_is_a_disconnect_not_a_hang(usb_guest: dict[str, Any]) -> None:
    """§10 #10. Through the real stack the transfer in flight when the device goes away fails with
    LIBUSB_ERROR_IO (dummy_hcd completes it with -EPROTO), not NO_DEVICE; only later calls see ENODEV.
    The driver has to tell that apart from a transmission error (is the device still there?)."""
    r = step(usb_guest, "disconnect")
    assert r["running_at_unbind"] and not r["hung"], r
    assert r["cmd"]["code"] == 1 and "Traceback" not in r["cmd"]["err"], r["cmd"]
    last = r["cmd"]["err"].strip().splitlines()[-1]
    assert "disconnected" in last, (
        f"the usb driver reported {last!r}: an i/o error from a device that has left the bus should read "
        "'device disconnected' (tinyhw/usb/device.py convert_usb_error)")
    ok(r["probe_after"])


def test_driver_honours_the_high_speed_limits(usb_guest: dict[str, Any]) -> None:
    """§3/§4.2: at High-Speed, 0xE4 reads are split into pieces of at most 64 bytes (SuperSpeed: 255)."""
    served = step(usb_guest, "probe")["gadget"]["report"]["transfers"]
    e4 = [t["setup"][4] for t in served if t["setup"] and t["setup"][:2] == [0xC0, 0xE4]]
    assert e4 and max(e4) <= 64
    assert all(t["status"] == "ok" for t in served)


def test_queued_bulk_out_through_real_libusb(usb_guest: dict[str, Any]) -> None:
    """Issue 12: libusb's asynchronous bulk transfers (tinyhw.usb.queued, kind "libusb-async", up to four in flight)
    through the kernel's stack: the gadget's core took every piece, whole, in submission order, after its 0xF2
    arm, with no error; the next request is served. Unarmed data times out as one clear error, nothing hangs."""
    r = step(usb_guest, "queued_bulk")
    assert r["kind"] == "libusb-async" and all(s["kind"] == "libusb-async" for s in r["streams"]), r
    g = r["gadget"]
    assert g["code"] == 0 and g["report"]["errors"] == [], g
    for s, landed in zip(r["streams"], r["landed"], strict=True):
        assert s["tickets"] == list(range(1, len(s["lengths"]) + 1))
        # the core's records after the stream's arm are its bytes, whole and in submission order (crc32 per record)
        assert landed["records"] >= 1 and landed["bytes"] == landed["total"] == sum(s["lengths"]), landed
        assert landed["all_ok"] is True, landed
    assert isinstance(r["after"], int)
    # unarmed data: libusb times the transfer out, the queue raises one clear error, cancels the rest, and the
    # next request is served
    u = r["unarmed"]
    assert u["type"] == "DeviceTimeout" and "timed out" in u["error"] and u["lines"] == 1, u
    assert u["s"] < 5, u
    assert isinstance(r["after_unarmed"], int)
