"""Core transport interfaces, device strings, clocks, counters and the device lock."""

from tinyhw.transport.base import BarInfo, BarRegion, Identity, Transport, TransportInfo, require
from tinyhw.transport.clock import Clock, WallClock
from tinyhw.transport.counters import Counters

__all__ = [
    "BarInfo",
    "BarRegion",
    "Clock",
    "Counters",
    "Identity",
    "Transport",
    "TransportInfo",
    "WallClock",
    "require",
]
