"""Mutual authentication and authenticated frames of the tinyhw remote protocol, version 2.

specs/pci-vfio-remote.md §12.2 item 2 asks for a challenge-response with HMAC-SHA256 over nonces with a
>= 32-byte secret and a constant-time compare; version 2 adds that the server proves itself too and that
every later frame is authenticated. Everything here is Python's ``hmac``/``hashlib``:

* The transcript is the server's HELLO (44 bytes, with its nonce and auth mode) followed by the client's
  hello up to its proof (44 bytes, with its nonce). Proofs: ``HMAC(secret, "tinyhw-remote-2 client proof"
  + transcript)`` and ``... "server proof" ...``: two directions with distinct labels, both bound to both
  nonces, so neither a reflected nor a replayed proof passes.
* Session keys, HKDF-SHA256 style: ``prk = HMAC(salt = SHA256(transcript), secret)`` (an empty secret on
  the OS-authenticated channels: a Unix socket with the peer uid checked, or ssh), then ``key_c2s =
  HMAC(prk, "tinyhw-remote-2 c2s" + 01)`` and ``key_s2c`` likewise.
* Every frame after the client's hello: ``header + htag [+ payload + ptag]`` with ``htag = HMAC(key, "H"
  + seq + header)[:16]`` and ``ptag = HMAC(key, "P" + seq + header + payload)[:16]`` (HMAC-SHA256
  truncated to 128 bits); ``seq`` is a u64 counter per direction that is never sent (the first frame of
  each direction is 0: the server's handshake reply, the client's first request). A replayed, reordered,
  dropped (with a later frame arriving), injected or altered frame fails its tag, and the header tag is
  checked before the length it carries is used, so a flipped length is caught at once instead of
  stalling the reader. The receiver ends the session on the first failure.
"""

from __future__ import annotations

import hashlib
import hmac
import struct

from tinyhw.errors import OperationFailed

LABEL = b"tinyhw-remote-2"
TAG = 16
_SEQ = struct.Struct("<Q")


class FrameRejected(OperationFailed):
    """A frame failed its tag: altered, replayed, reordered, dropped or injected on the way."""


def _mac(key: bytes, data: bytes) -> bytes:
    return hmac.digest(key, data, "sha256")


def client_proof(secret: bytes, transcript: bytes) -> bytes:
    """The client's HMAC-SHA256 proof of the shared ``secret`` over the handshake ``transcript``."""
    return _mac(secret, LABEL + b" client proof" + transcript)


def server_proof(secret: bytes, transcript: bytes) -> bytes:
    """The server's HMAC-SHA256 proof of the shared ``secret`` over the handshake ``transcript`` (a distinct label from
    the client's)."""
    return _mac(secret, LABEL + b" server proof" + transcript)


def session_keys(secret: bytes, transcript: bytes) -> tuple[bytes, bytes]:
    """(client-to-server key, server-to-client key) for one session."""
    prk = _mac(hashlib.sha256(transcript).digest(), secret)
    return _mac(prk, LABEL + b" c2s\x01"), _mac(prk, LABEL + b" s2c\x01")


class Direction:
    """The tags of one direction of one session: a keyed HMAC and the implicit frame counter."""

    def __init__(self, key: bytes) -> None:
        self._base = hmac.new(key, digestmod=hashlib.sha256)
        self.seq = 0

    def _tag(self, kind: bytes, header: bytes, payload: bytes | None = None) -> bytes:
        m = self._base.copy()
        m.update(kind + _SEQ.pack(self.seq) + header)
        if payload is not None:
            m.update(payload)
        return m.digest()[:TAG]

    def seal(self, header: bytes, payload: bytes = b"") -> bytes:
        """The frame as it goes on the wire; advances the counter."""
        frame = header + self._tag(b"H", header)
        if payload:
            frame += payload + self._tag(b"P", header, payload)
        self.seq += 1
        return frame

    def check_header(self, header: bytes, tag: bytes, peer: str) -> None:
        """Raise FrameRejected (the session is closed) unless ``tag`` authenticates frame ``header`` at this direction's
        sequence number."""
        if not hmac.compare_digest(tag, self._tag(b"H", header)):
            raise self._rejected(peer)

    def check_payload(self, header: bytes, payload: bytes, tag: bytes, peer: str) -> None:
        """Raise FrameRejected unless ``tag`` authenticates ``payload`` with its ``header`` at this direction's sequence
        number."""
        if not hmac.compare_digest(tag, self._tag(b"P", header, payload)):
            raise self._rejected(peer)

    def verifies(self, header: bytes, tag: bytes, payload: bytes | None = None) -> bool:
        """Whether ``tag`` authenticates ``header`` (or, with ``payload``, the payload with its header) at this
        direction's sequence number; nothing is raised or closed."""
        want = self._tag(b"H", header) if payload is None else self._tag(b"P", header, payload)
        return hmac.compare_digest(tag, want)

    def advance(self) -> None:
        """Move to the next frame's sequence number (after a frame was sent or accepted)."""
        self.seq += 1

    def _rejected(self, peer: str) -> FrameRejected:
        return FrameRejected(f"frame {self.seq} from {peer} failed authentication (altered, replayed, reordered, "
                             "dropped or injected on the way); the session is closed",
                             hint="check the path to the server; reconnect to start a new session")
