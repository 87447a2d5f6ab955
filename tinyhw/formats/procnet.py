"""Linux ``/proc/net/tcp`` and ``/proc/net/tcp6``: which uid owns the socket at the other end of a loopback connection.

Used by ``tinyhw serve serprog``: flashrom cannot authenticate, so on loopback TCP the server
looks the client's socket up here and serves only its own uid. Format (the kernel's ``tcp4_seq_show`` and
``tcp6_seq_show``, one socket per line after a header line)::

    sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
     0: 0100007F:1F91 0100007F:A3C2 01 00000000:00000000 00:00000000 00000000  1000        0 5531 ...

An address is the raw network-order IPv4 address (tcp) or four network-order 32-bit words (tcp6), each printed as a
host-order integer in hex (so ``0100007F`` is 127.0.0.1 on a little-endian machine); the port is in host order. The
uid is the one that created the socket. TIME_WAIT and LISTEN entries own nothing (their uid column is 0 or the
listener's) and are never matched.

Pure: :func:`socket_uid` takes the files' text; reading them is the caller's business.
"""

from __future__ import annotations

import ipaddress
import sys
from typing import Literal, NamedTuple

Address = tuple[str, int]
IpAddr = ipaddress.IPv4Address | ipaddress.IPv6Address

#: States whose uid column says nothing about who connected (the kernel's TCP_TIME_WAIT, TCP_LISTEN).
UNOWNED_STATES = {0x06, 0x0A}


class Entry(NamedTuple):
    """One socket line: local and remote address and port, TCP state, owning uid."""
    local: tuple[IpAddr, int]
    remote: tuple[IpAddr, int]
    state: int
    uid: int


def _address(field: str, byteorder: Literal["little", "big"]) -> tuple[IpAddr, int]:
    host, sep, port = field.partition(":")
    if not sep or len(port) != 4 or len(host) not in (8, 32):
        raise ValueError(field)
    raw = b"".join(int(host[i:i + 8], 16).to_bytes(4, byteorder) for i in range(0, len(host), 8))
    return _plain(ipaddress.ip_address(raw)), int(port, 16)


def _plain(ip: IpAddr) -> IpAddr:
    """An IPv4-mapped IPv6 address (``::ffff:127.0.0.1``) as the IPv4 address it maps."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def parse_table(text: str, byteorder: Literal["little", "big"] | None = None) -> list[Entry]:
    """Every well-formed socket line of one table; malformed lines (and the header) are skipped."""
    order = byteorder or sys.byteorder
    out: list[Entry] = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 8 or not parts[0].endswith(":") or not parts[0][:-1].isdigit():
            continue
        try:
            out.append(Entry(_address(parts[1], order), _address(parts[2], order), int(parts[3], 16),
                             int(parts[7], 10)))
        except ValueError:
            continue
    return out


def _key(addr: Address) -> tuple[IpAddr, int]:
    host = addr[0].split("%", 1)[0]  # an IPv6 scope id (fe80::1%lo) is not in the table
    return _plain(ipaddress.ip_address(host)), int(addr[1])


def socket_uid(tables: str, local: Address, remote: Address,
               byteorder: Literal["little", "big"] | None = None) -> int | None:
    """The uid owning the socket whose local end is ``local`` and remote end ``remote`` (host, port), or None.

    ``tables`` is the text of ``/proc/net/tcp`` and/or ``/proc/net/tcp6`` (concatenated is fine). None when no owned
    entry matches, or when several match with different uids (the answer would be a guess).
    """
    want_local, want_remote = _key(local), _key(remote)
    uids = {e.uid for e in parse_table(tables, byteorder)
            if e.local == want_local and e.remote == want_remote and e.state not in UNOWNED_STATES}
    return uids.pop() if len(uids) == 1 else None
