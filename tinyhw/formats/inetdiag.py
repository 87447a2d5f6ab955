"""Linux sock_diag for TCP: the request that looks up one socket by its exact 4-tuple, and the kernel's answer.

Used by ``tinyhw serve serprog``: flashrom cannot authenticate, so on loopback TCP the server asks the kernel who
owns the client's end of the connection. An exact lookup (a ``SOCK_DIAG_BY_FAMILY`` request without ``NLM_F_DUMP``)
is a hash lookup in the kernel: it answers with that one socket, or an error, whatever else is open on the machine.

Layouts (all from the kernel's uapi headers):

- ``linux/netlink.h``: ``struct nlmsghdr`` {u32 len, u16 type, u16 flags, u32 seq, u32 pid} in host order;
  ``NLM_F_REQUEST`` 0x1; ``NLMSG_ERROR`` 2 followed by ``struct nlmsgerr`` {s32 error (a negative errno), ...};
  ``NLMSG_DONE`` 3; messages aligned to 4 bytes.
- ``linux/sock_diag.h``: ``SOCK_DIAG_BY_FAMILY`` 20; the protocol ``NETLINK_SOCK_DIAG`` is 4.
- ``linux/inet_diag.h``: ``struct inet_diag_sockid`` {be16 sport, be16 dport, be32 src[4], be32 dst[4], u32 if,
  u32 cookie[2]} (48 bytes; ``INET_DIAG_NOCOOKIE`` is ~0 in both cookie words); ``struct inet_diag_req_v2``
  {u8 family, u8 protocol, u8 ext, u8 pad, u32 states, sockid} (56 bytes); ``struct inet_diag_msg`` {u8 family,
  u8 state, u8 timer, u8 retrans, sockid, u32 expires, u32 rqueue, u32 wqueue, u32 uid, u32 inode} (72 bytes).
  In a request and in an answer, ``src``/``sport`` are the socket's own end and ``dst``/``dport`` the other end;
  an IPv4 address sits in ``src[0]``.
- ``net/tcp_states.h``: ``TCP_ESTABLISHED`` 1, ... ``TCP_CLOSING`` 11. A kernel timewait socket (a closed
  connection's leftover, ``FIN_WAIT2`` or ``TIME_WAIT``) is listed with uid 0 and inode 0: it names no owner.

Pure: :func:`request` builds bytes, :func:`parse` reads them; sending them is the caller's business.
"""

from __future__ import annotations

import ipaddress
import struct
from typing import NamedTuple

from tinyhw.errors import Refused

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST = 0x1
NLMSG_ERROR = 2
NLMSG_DONE = 3
IPPROTO_TCP = 6
NOCOOKIE = 0xFFFFFFFF
TCP_ESTABLISHED = 1
#: net/tcp_states.h, for audit lines
STATES = {1: "established", 2: "syn_sent", 3: "syn_recv", 4: "fin_wait1", 5: "fin_wait2", 6: "time_wait",
          7: "close", 8: "close_wait", 9: "last_ack", 10: "listen", 11: "closing", 12: "new_syn_recv"}
#: an exact lookup is answered by one message; more in one datagram is not an answer to it
MAX_MESSAGES = 4

NLMSGHDR = struct.Struct("=IHHII")
REQ_HEAD = struct.Struct("=BBBBI")
MSG_HEAD = struct.Struct("=BBBB")
MSG_TAIL = struct.Struct("=IIIII")
SOCKID_SIZE = 48
MSG_SIZE = MSG_HEAD.size + SOCKID_SIZE + MSG_TAIL.size  # 72


class Endpoint(NamedTuple):
    """One end of a TCP connection: the 16-byte address field as the kernel stores it, and the port."""
    address: bytes
    port: int


class DiagEntry(NamedTuple):
    """One socket as the kernel describes it: its own end, the other end, TCP state, owning uid, inode."""
    local: Endpoint
    remote: Endpoint
    state: int
    uid: int
    inode: int


class Reply(NamedTuple):
    """What one answer held: the socket entries, the errno of an error message (0: none), and how many netlink
    messages were read (the cost of the lookup)."""
    entries: list[DiagEntry]
    errno: int
    messages: int


def endpoint(host: str, port: int) -> Endpoint:
    """``host`` (an IPv4 or IPv6 address, a scope id after ``%`` ignored) and ``port`` as an :class:`Endpoint`."""
    ip = ipaddress.ip_address(host.split("%", 1)[0])
    return Endpoint(ip.packed.ljust(16, b"\0"), int(port))


def _sockid(local: Endpoint, remote: Endpoint) -> bytes:
    return (struct.pack(">HH", local.port, remote.port) + local.address + remote.address
            + struct.pack("=III", 0, NOCOOKIE, NOCOOKIE))


def request(family: int, local: Endpoint, remote: Endpoint, seq: int) -> bytes:
    """The netlink message asking for the one TCP socket whose own end is ``local`` and other end ``remote``."""
    body = REQ_HEAD.pack(family, IPPROTO_TCP, 0, 0, 0xFFFFFFFF) + _sockid(local, remote)
    return NLMSGHDR.pack(NLMSGHDR.size + len(body), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST, seq, 0) + body


def _entry(body: bytes) -> DiagEntry:
    _family, state, _timer, _retrans = MSG_HEAD.unpack_from(body, 0)
    sport, dport = struct.unpack_from(">HH", body, 4)
    src, dst = body[8:24], body[24:40]
    _expires, _rq, _wq, uid, inode = MSG_TAIL.unpack_from(body, MSG_HEAD.size + SOCKID_SIZE)
    return DiagEntry(Endpoint(src, sport), Endpoint(dst, dport), state, uid, inode)


def parse(data: bytes, seq: int) -> Reply:
    """The answer to request ``seq``; raises Refused for a malformed datagram or one answering another request.

    At most :data:`MAX_MESSAGES` messages are read, so the cost is bounded whatever the datagram holds.
    """
    entries: list[DiagEntry] = []
    errno, pos, n = 0, 0, 0
    while pos + NLMSGHDR.size <= len(data):
        if n >= MAX_MESSAGES:
            raise Refused(f"sock_diag answer has more than {MAX_MESSAGES} messages")
        length, kind, _flags, got_seq, _pid = NLMSGHDR.unpack_from(data, pos)
        if length < NLMSGHDR.size or pos + length > len(data):
            raise Refused(f"sock_diag message of length {length} does not fit the {len(data)}-byte answer")
        if got_seq != seq:
            raise Refused(f"sock_diag answer to request {got_seq}, not {seq}")
        body = data[pos + NLMSGHDR.size:pos + length]
        n += 1
        if kind == NLMSG_ERROR:
            if len(body) < 4:
                raise Refused("sock_diag error message too short")
            errno = -struct.unpack_from("=i", body, 0)[0]
        elif kind == SOCK_DIAG_BY_FAMILY:
            if len(body) < MSG_SIZE:
                raise Refused(f"sock_diag entry of {len(body)} bytes, want {MSG_SIZE}")
            entries.append(_entry(body))
        elif kind != NLMSG_DONE:
            raise Refused(f"sock_diag message of type {kind}")
        pos += (length + 3) & ~3
    return Reply(entries, errno, n)
