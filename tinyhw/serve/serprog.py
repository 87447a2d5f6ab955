"""``tinyhw serve serprog``: a flashrom serprog programmer backed by the board's SMUIO ROM_SW engine.

Implements specs/flashrom-serprog.md (the commands flashrom 1.3 sends, and the mapping onto ROM_SW).
Each O_SPIOP (one chip-select assertion: write bytes, then read bytes) becomes ROM_SW
transactions through :class:`tinyhw.flash.romsw.RomSw` (the same engine driver ``tinyhw flash`` uses):

* read length 0: one TX transaction: opcode, then a 3-byte address when at least 3 bytes follow it,
  then up to 256 data bytes (on the wire that is the same byte stream either way);
* read length > 0: opcode plus no address or a 3-byte address (plus dummy bytes for the fast-read,
  SFDP and security-register opcodes, clocked as extra read bytes and dropped), then RX; an array read
  longer than 256 bytes is split into 256-byte transactions chained as ``tinyhw flash`` chains them;
* anything else (data out and in together, TX data over 256 bytes, RX over 256 bytes of a
  non-array opcode) is answered NAK, because the engine cannot do it.

The query commands answer what is true: interface 1, SPI only, the supported-command bitmap, the
largest write (256 data bytes) and read (:data:`MAX_READ`) per operation, and buffer sizes. O_DELAY
and O_EXEC advance the device's clock (virtual on an emulated board, so nothing sleeps needlessly).

Access: flashrom cannot authenticate, so only the server's own uid may connect: the default
pseudo-terminal is mode 0600, and on loopback TCP (the only TCP there is) the client's socket is looked up with
the kernel's sock_diag (an exact lookup; it must be established and owned, so a closing socket cannot pass for
root) and any other uid, or a lookup that fails, is refused and audited (:func:`serprog_listener`).
Delays: one O_DELAY (microseconds, u32) may ask for at most :data:`MAX_DELAY_US`, the delays queued
before one O_EXEC as much, and a session :data:`MAX_SESSION_DELAY_US` in all; beyond that O_DELAY is answered NAK.
"""

from __future__ import annotations

import contextlib
import struct
import threading
from collections import Counter
from collections.abc import Callable

from tinyhw.commands import CommandTable
from tinyhw.connect import Opened, open_device
from tinyhw.errors import DeviceTimeout, Refused, TinyhwError
from tinyhw.flash.device import require_flash
from tinyhw.flash.romsw import WINDOW_BYTES, RomSw, Rx
from tinyhw.remote.channel import Channel
from tinyhw.serve.listen import Audit, Listener, SockDiag, end_reason, is_loopback, parse_listen, tcp_listener
from tinyhw.transport.devstr import DeviceSpec

ACK, NAK = b"\x06", b"\x15"
(NOP, Q_IFACE, Q_CMDMAP, Q_PGMNAME, Q_SERBUF, Q_BUSTYPE, Q_OPBUF, Q_WRNMAXLEN, O_INIT, O_DELAY, O_EXEC,
 SYNCNOP, Q_RDNMAXLEN, S_BUSTYPE, O_SPIOP) = (0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x07, 0x08, 0x0B, 0x0E, 0x0F,
                                              0x10, 0x11, 0x12, 0x13)
#: The commands this programmer answers: command byte -> handler (:class:`Session`'s methods); the supported list
#: (:data:`SUPPORTED`, the Q_CMDMAP bitmap) is what this table holds.
COMMANDS: CommandTable[int] = CommandTable("serprog command")
BUS_SPI = 0x08
PROGRAMMER_NAME = b"tinyhw-romsw"
SERIAL_BUFFER = 4096
OP_BUFFER = 4096
#: Largest read per O_SPIOP we accept (and announce), and largest write stream we read.
MAX_READ = 1 << 16
MAX_WRITE = 4 + WINDOW_BYTES
#: Opcodes whose address is followed by one dummy byte (fast read, SFDP, security registers, unique id).
DUMMY_OPS = {0x0B: 1, 0x5A: 1, 0x48: 1, 0x4B: 4}
ARRAY_READS = {0x03, 0x0B}
#: Opcodes that change the flash (audited one by one, except page programs, which are counted).
ERASES = {0x20: "sector erase", 0x52: "32k block erase", 0xD8: "64k block erase", 0x60: "chip erase",
          0xC7: "chip erase", 0x01: "status write", 0x31: "status write", 0x11: "status write"}
IDLE_TIMEOUT = 600.0
#: Longest delay one O_DELAY may ask for, and all the delays queued before one O_EXEC together (10 s: flashrom
#: polls a chip erase in 1 s steps, the longest delay it asks for).
MAX_DELAY_US = 10_000_000
#: All the delays of one session together (as long as the session may sit idle; a whole-chip erase and write
#: on the GD25LQ16 at its datasheet maximums waits well under that).
MAX_SESSION_DELAY_US = int(IDLE_TIMEOUT * 1e6)


def command_map() -> bytes:
    """The 32-byte serprog command bitmap (Q_CMDMAP answer): bit N set for each supported command N."""
    bits = bytearray(32)
    for op in COMMANDS:
        bits[op // 8] |= 1 << (op % 8)
    return bytes(bits)


class SpiOpRefused(Exception):
    """The engine cannot perform this SPI operation (answered NAK)."""


def spi_op(sw: RomSw, write: bytes, rlen: int) -> bytes:
    """One chip-select assertion as ROM_SW transactions; :class:`SpiOpRefused` when the engine cannot do it."""
    if not write:
        raise SpiOpRefused("no opcode")
    op, rest = write[0], write[1:]
    if rlen == 0:
        addr = int.from_bytes(rest[:3], "big") if len(rest) >= 3 else None
        data = rest[3:] if addr is not None else rest
        if len(data) > WINDOW_BYTES:
            raise SpiOpRefused(f"{len(data)} data bytes out (the engine sends at most {WINDOW_BYTES})")
        sw.transmit(op, addr, bytes(data))
        return b""
    if not rest:
        addr, skip = None, 0
    elif len(rest) == 3 or (len(rest) == 3 + DUMMY_OPS.get(op, -9)):
        addr, skip = int.from_bytes(rest[:3], "big"), len(rest) - 3
    else:
        raise SpiOpRefused(f"opcode {op:02x} sends {len(rest)} bytes before reading (data out and in together)")
    if rlen + skip <= WINDOW_BYTES:
        return sw.receive(op, rlen + skip, addr)[skip:]
    if op not in ARRAY_READS or addr is None:
        raise SpiOpRefused(f"read of {rlen} bytes with opcode {op:02x} (over {WINDOW_BYTES} only for array reads)")
    reqs, a, left = [], addr, rlen
    while left:
        n = min(WINDOW_BYTES - skip, left)
        reqs.append(Rx(op, a & 0xFFFFFF, n + skip))
        a, left = a + n, left - n
    return b"".join(chunk[skip:] for chunk in sw.receive_stream(reqs))


class SerprogServer:
    """Speaks serprog on each channel handed to :meth:`handle`; opens the device per connection, in the background
    while the handshake is answered."""

    def __init__(self, spec: DeviceSpec, audit: Audit, *, idle_timeout: float = IDLE_TIMEOUT,
                 opener: Callable[[DeviceSpec], Opened] = open_device) -> None:
        self.spec = spec
        self.audit = audit
        self.idle_timeout = idle_timeout
        self.opener = opener
        #: one flashrom at a time: a connection waits until the previous one has released the device
        self._session = threading.Lock()

    def handle(self, ch: Channel, name: str) -> None:
        """Serve one connection on ``ch`` (``name`` in the audit log): one at a time, so a second waits up to the idle
        time-out for the first to end and then gives up."""
        if not self._session.acquire(timeout=self.idle_timeout):
            self.audit(name, "gave up waiting for the previous connection to end")
            return
        try:
            self._handle(ch, name)
        finally:
            self._session.release()

    def _handle(self, ch: Channel, name: str) -> None:
        device = _Opening(self, name)
        counts: Counter[str] = Counter()
        reason = "closed"
        try:
            reason = self.session(ch, name, device, counts)
        except Exception as e:  # a bug must end this connection, never the server
            reason = end_reason(e)
        finally:
            device.release(reason, counts)

    def session(self, ch: Channel, name: str, device: _Opening, counts: Counter[str]) -> str:
        """Answer serprog commands from ``ch`` until the peer goes (the channel raises), asks for an oversized SPI
        operation or the device cannot be opened; counts each kind of operation in ``counts``; returns why it
        ended. The device (``device``, opening in the background) is waited for only by the commands that use it,
        so flashrom's handshake is answered at once however long the board takes to open."""
        state = Session(self, ch, name, device, counts)
        while True:
            cmd = ch.recv_exact(1, self.idle_timeout)[0]
            handler = COMMANDS.get(cmd)
            if handler is None:
                counts["unsupported"] += 1
                ch.sendall(NAK)
            elif (end := handler(state)) is not None:
                return end


class _OpenFailed(Exception):
    """The device of a connection could not be opened (the audit log has why); ends that connection."""


class _Opening:
    """One connection's device, opened in a thread while the session answers what needs no device.

    flashrom synchronises by sending SYNCNOPs and dropping whatever answers come after one second; a server that
    opened the board before answering them (a boot of the emulated board on a loaded machine takes longer) left late
    NAK/ACK pairs in the stream, which flashrom then read as the answer to its next query.
    """

    def __init__(self, server: SerprogServer, name: str) -> None:
        self.server, self.name = server, name
        self.opened: Opened | None = None
        self.sw: RomSw | None = None
        self.error: str | None = None
        self.thread = threading.Thread(target=self._open, name=f"serprog-open {name}", daemon=True)
        self.thread.start()

    def _open(self) -> None:
        server = self.server
        try:
            self.opened = server.opener(server.spec)
        except TinyhwError as e:
            self.error = f"cannot open {server.spec}: {e.message}"
            server.audit(self.name, self.error)
            return
        except Exception as e:  # a bug in the opener ends this connection only
            self.error = f"cannot open {server.spec}: {end_reason(e)}"
            server.audit(self.name, self.error)
            return
        try:
            asic, ident, _ = require_flash(self.opened.transport)
            sw = RomSw(self.opened.transport, asic)
            sw.__enter__()
            self.sw = sw
            server.audit(self.name, f"opened {server.spec} ({ident.location}); rom_sw engine set up")
        except Exception as e:
            self.error = f"cannot set up the flash engine on {server.spec}: {end_reason(e)}"
            server.audit(self.name, self.error)

    def get(self) -> RomSw:
        """The open device's engine; waits up to the idle time-out for the opening; raises :class:`_OpenFailed`."""
        self.thread.join(self.server.idle_timeout)
        if self.sw is None:
            raise _OpenFailed(self.error or f"{self.server.spec} did not open within {self.server.idle_timeout:g} s")
        return self.sw

    def release(self, reason: str, counts: Counter[str]) -> None:
        """Wait for the opening to end, then let the engine and the device go and audit it (if it was opened)."""
        self.thread.join()
        try:
            if self.sw is not None:
                try:
                    self.sw.close()
                except (TinyhwError, OSError) as e:     # a pulled cable fails the restore too: said, not raised
                    why = e.message if isinstance(e, TinyhwError) else str(e)
                    reason = f"{reason}; restoring the rom_sw controls failed: {why}"
        finally:
            if self.opened is not None:
                self.opened.close()
                self.server.audit(self.name, f"device released ({reason}); operations {dict(counts)}")


class Session:
    """One connection's serprog state: the delays queued and used, and a handler per command (:data:`COMMANDS`).

    Each handler answers one command (reading its parameters from the channel first) and returns None to go on,
    or why the session ends.
    """

    def __init__(self, server: SerprogServer, ch: Channel, name: str, device: _Opening, counts: Counter[str]) -> None:
        self.server = server
        self.ch = ch
        self.name = name
        self.device = device
        self.counts = counts
        self.delay_us = 0  # queued since O_INIT / the last O_EXEC
        self.total_us = 0  # this session's, executed or queued

    @COMMANDS.handles(NOP, answer=b"")
    @COMMANDS.handles(Q_IFACE, answer=struct.pack("<H", 1))
    @COMMANDS.handles(Q_PGMNAME, answer=PROGRAMMER_NAME.ljust(16, b"\0"))
    @COMMANDS.handles(Q_SERBUF, answer=struct.pack("<H", SERIAL_BUFFER))
    @COMMANDS.handles(Q_OPBUF, answer=struct.pack("<H", OP_BUFFER))
    @COMMANDS.handles(Q_BUSTYPE, answer=bytes([BUS_SPI]))
    @COMMANDS.handles(Q_WRNMAXLEN, answer=WINDOW_BYTES.to_bytes(3, "little"))
    @COMMANDS.handles(Q_RDNMAXLEN, answer=MAX_READ.to_bytes(3, "little"))
    def answer(self, answer: bytes) -> str | None:
        """A query (or NOP): ACK and the fixed ``answer``."""
        self.ch.sendall(ACK + answer)
        return None

    @COMMANDS.handles(Q_CMDMAP)
    def query_command_map(self) -> str | None:
        """Q_CMDMAP: ACK and the bitmap of :data:`COMMANDS`."""
        self.ch.sendall(ACK + command_map())
        return None

    @COMMANDS.handles(SYNCNOP)
    def sync_nop(self) -> str | None:
        """SYNCNOP: NAK then ACK (what flashrom synchronises on)."""
        self.ch.sendall(NAK + ACK)
        return None

    @COMMANDS.handles(S_BUSTYPE)
    def set_bus_type(self) -> str | None:
        """S_BUSTYPE: ACK when the requested buses are SPI only, else NAK."""
        bus = self.ch.recv_exact(1, self.server.idle_timeout)[0]
        self.ch.sendall(ACK if bus and not bus & ~BUS_SPI else NAK)
        return None

    @COMMANDS.handles(O_INIT)
    def init_buffer(self) -> str | None:
        """O_INIT: drop the queued delays."""
        self.delay_us = 0
        self.ch.sendall(ACK)
        return None

    @COMMANDS.handles(O_DELAY)
    def delay(self) -> str | None:
        """O_DELAY: queue a delay (microseconds, u32), or NAK one over the limits (:func:`delay_refusal`)."""
        us = int.from_bytes(self.ch.recv_exact(4, self.server.idle_timeout), "little")
        why = delay_refusal(us, self.delay_us, self.total_us)
        if why:
            self.counts["delay refused"] += 1
            if self.counts["delay refused"] == 1:  # the first in full, the rest counted at release
                self.server.audit(self.name, f"nak: {why}")
            self.ch.sendall(NAK)
            return None
        self.delay_us, self.total_us = self.delay_us + us, self.total_us + us
        self.ch.sendall(ACK)
        return None

    @COMMANDS.handles(O_EXEC)
    def execute(self) -> str | None:
        """O_EXEC: wait out the queued delays on the device's clock (virtual on an emulated board)."""
        try:
            sw = self.device.get()
        except _OpenFailed as e:
            self.ch.sendall(NAK)
            return str(e)
        sw.clock.sleep(self.delay_us * 1e-6)
        self.delay_us = 0
        self.ch.sendall(ACK)
        return None

    @COMMANDS.handles(O_SPIOP)
    def spi_operation(self) -> str | None:
        """O_SPIOP: one SPI operation through the engine; an oversized one ends the session (NAK, the stream
        cannot go on), one the engine cannot do or that times out is answered NAK."""
        ch, name, counts = self.ch, self.name, self.counts
        head = ch.recv_exact(6, self.server.idle_timeout)
        wlen, rlen = int.from_bytes(head[:3], "little"), int.from_bytes(head[3:], "little")
        if wlen > MAX_WRITE or rlen > MAX_READ:  # refused before reading the data; the stream cannot go on
            self.server.audit(name, f"refused spi operation of {wlen} bytes out, {rlen} in (limits {MAX_WRITE}, "
                                    f"{MAX_READ})")
            ch.sendall(NAK)
            return "oversized spi operation"
        write = ch.recv_exact(wlen, self.server.idle_timeout) if wlen else b""
        if write and write[0] in ERASES:
            self.server.audit(name, f"{ERASES[write[0]]} ({write[:4].hex()})")
        try:
            sw = self.device.get()
        except _OpenFailed as e:
            ch.sendall(NAK)
            return str(e)
        try:
            data = spi_op(sw, write, rlen)
        except SpiOpRefused as e:
            counts["refused"] += 1
            self.server.audit(name, f"nak: {e}")
            ch.sendall(NAK)
            return None
        except DeviceTimeout as e:
            counts["failed"] += 1
            self.server.audit(name, f"nak: {e.message}")
            ch.sendall(NAK)
            return None
        counts[f"{write[0]:02x}"] += 1
        ch.sendall(ACK + data)
        return None


#: The supported commands, in order: what :data:`COMMANDS` holds.
SUPPORTED = tuple(sorted(COMMANDS))


def delay_refusal(us: int, queued_us: int, session_us: int) -> str | None:
    """Why an O_DELAY of ``us`` microseconds is refused, given what is queued and what the session used; else None."""
    if us > MAX_DELAY_US:
        return f"o_delay of {us} us is over the limit of {MAX_DELAY_US} us per delay"
    if queued_us + us > MAX_DELAY_US:
        return f"o_delay would queue {queued_us + us} us before o_exec, over the limit of {MAX_DELAY_US} us"
    if session_us + us > MAX_SESSION_DELAY_US:
        return f"o_delay would bring this session's delays to {session_us + us} us, over the limit of " \
               f"{MAX_SESSION_DELAY_US} us"
    return None


def serprog_listener(handle: Callable[[Channel, str], None], audit: Audit, listen: str,
                     *, diag: SockDiag | None = None) -> Listener:
    """A loopback TCP listener that serves only this uid (flashrom cannot authenticate, so no other address
    is allowed and no other local user either); ``diag`` is for tests (the kernel socket lookup)."""
    host, port = parse_listen(listen)
    if not is_loopback(host):
        raise Refused(f"{host} is not a loopback address; serve serprog listens on loopback only, because flashrom "
                      "cannot authenticate",
                      hint="use --listen 127.0.0.1:PORT, or the default pseudo-terminal (no --listen); for a board "
                           "on another machine, run serve serprog and flashrom there (over ssh)")
    return Listener(tcp_listener(host, port), handle, audit, same_uid=True, diag=diag)


def open_pty() -> tuple[int, int, str]:
    """A pseudo-terminal in raw mode, mode 0600 (this uid only, whatever the devpts mount's default):
    (master fd, slave fd kept open, slave path for flashrom's dev=)."""
    import os
    import tty

    master, slave = os.openpty()
    os.fchmod(slave, 0o600)
    tty.setraw(slave)
    with contextlib.suppress(OSError):
        os.set_blocking(master, True)
    return master, slave, os.ttyname(slave)
