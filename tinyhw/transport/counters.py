"""Transport counters (ARCHITECTURE.md, "Counters").

Counted on the driver side, by the transport, for the whole command:

- ``usb_transfers``: vendor control and bulk transfers the driver submits;
- ``round_trips``: transfers or requests after which the driver waited for the device;
- ``tlp_reads`` / ``tlp_writes``: TLP requests (a streamed read of N dwords is one);
- ``reg_reads`` / ``reg_writes``: dwords read or written on BARs;
- ``bytes_in`` / ``bytes_out``: payload bytes moved over the transport.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields


@dataclass
class Counters:
    """What a transport has done since it opened (or the last :meth:`reset`): USB transfers, round trips, TLPs, register
    accesses and bytes each way."""

    usb_transfers: int = 0
    round_trips: int = 0
    tlp_reads: int = 0
    tlp_writes: int = 0
    reg_reads: int = 0
    reg_writes: int = 0
    bytes_in: int = 0
    bytes_out: int = 0

    def as_dict(self) -> dict[str, int]:
        """The counters as a ``{name: count}`` dict (for ``--stats``)."""
        return asdict(self)

    def reset(self) -> None:
        """Set every counter to 0."""
        for f in fields(self):
            setattr(self, f.name, 0)

    def __sub__(self, other: Counters) -> Counters:
        return Counters(**{f.name: getattr(self, f.name) - getattr(other, f.name) for f in fields(self)})

    def copy(self) -> Counters:
        """An independent snapshot of the counters (subtract two to get one step's counts)."""
        return Counters(**asdict(self))
