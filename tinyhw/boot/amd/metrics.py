"""Decode the SMU 13.0.0 metrics table (``SmuMetricsExternal_t``) into what ``smi`` shows.

Spec: specs/amd-bringup.md §6.4: field offsets come from the layout generated from
smu13_driver_if_v13_0_0.h (:data:`tinyhw.boot.amd.ids.METRICS_FIELDS`, never typed here); the GFX
clock shown is the post-deep-sleep average when GFX activity is at most 15 %, else the
pre-deep-sleep one, and the same rule on memory (UCLK) activity picks the FCLK and memory clock;
temperatures that read 0 are hidden; names of temperatures, voltage planes, clocks and
throttlers come from the header's TEMP_, SVI_PLANE_, PPCLK_ and THROTTLER_ constants.
"""

from __future__ import annotations

import struct
from typing import Any

from tinyhw.boot.amd import ids
from tinyhw.errors import OperationFailed

#: §6.4: PostDs is shown at or below this activity (percent) on MP1 13.0.x
DEEP_SLEEP_THRESHOLD = 15
_FMT = {"uint8_t": "B", "uint16_t": "H", "uint32_t": "I", "int8_t": "b", "int16_t": "h", "int32_t": "i"}


def field(data: bytes, name: str) -> int | list[int]:
    """One field of the table by its header name (an array field gives a list)."""
    off, ctype, count = ids.METRICS_FIELDS[name]
    code = _FMT[ctype]
    vals = list(struct.unpack_from(f"<{count}{code}", data, off))
    return vals if count > 1 else vals[0]


def _by_index(values: list[int], names: dict[str, int]) -> dict[str, int]:
    return {n.lower(): values[i] for n, i in sorted(names.items(), key=lambda kv: kv[1]) if i < len(values)}


def decode(data: bytes) -> dict[str, Any]:
    """The metrics of one refresh as a JSON-ready document."""
    if len(data) < ids.METRICS_SIZE:
        raise OperationFailed(f"metrics table of {len(data)} bytes, {ids.METRICS_SIZE} expected")

    def f(name: str) -> Any:
        return field(data, name)

    gfx_act, mem_act = int(f("AverageGfxActivity")), int(f("AverageUclkActivity"))
    gfx_ds = "PostDs" if gfx_act <= DEEP_SLEEP_THRESHOLD else "PreDs"
    mem_ds = "PostDs" if mem_act <= DEEP_SLEEP_THRESHOLD else "PreDs"
    curr = f("CurrClock")
    assert isinstance(curr, list)
    temps = f("AvgTemperature")
    volts = f("AvgVoltage")
    throttle = f("ThrottlingPercentage")
    assert isinstance(temps, list) and isinstance(volts, list) and isinstance(throttle, list)
    return {
        "clocks_mhz": {
            "gfx": f(f"AverageGfxclkFrequency{gfx_ds}"),
            "soc": curr[ids.CLOCKS["SOCCLK"]],
            "mem": f(f"AverageMemclkFrequency{mem_ds}"),
            "fclk": f(f"AverageFclkFrequency{mem_ds}"),
        },
        "deep_sleep_view": {"gfx": gfx_ds.lower(), "mem": mem_ds.lower()},
        "current_clocks_mhz": _by_index(curr, ids.CLOCKS),
        "activity_percent": {"gfx": gfx_act, "mem": mem_act},
        "power_w": {"socket": f("AverageSocketPower"), "limit": f("dGPU_W_MAX")},
        "temperatures_c": {k: v for k, v in _by_index(temps, ids.TEMPS).items() if v},
        "fan": {"pwm_percent": f("AvgFanPwm"), "rpm": f("AvgFanRpm")},
        "voltages_mv": _by_index(volts, ids.SVI_PLANES),
        "throttling_percent": _by_index(throttle, ids.THROTTLERS),
        "metrics_counter": f("MetricsCounter"),
    }
