"""Host <-> VRAM copies over the ASM24 USB bridge through its 512 KiB SRAM and SDMA0 (copy-in, copy-out).

Spec: specs/asm24-usb-bridge.md §4.5 (0xF2 arms: host->SRAM at first slot S, SRAM->host from slot 0 released by a
GPU write into 0x822000), §7.2 (SRAM at PCIe 0x200000, drain fence at 0x820800 = XDATA 0xA800, release word
0x82200C), §9.2-§9.4 (windows, sentinel 0x51000000 | seq mod 2^24 in the last dword of the wire image, wire
length round_up(payload + 4, 512), payload per full chunk 0x40000 - 4, fence = seq + 1 after chunk seq is in
VRAM, first-use zeroing, window-reuse rule, copy-out in 512 KiB pieces). Layer 3: handed a
:class:`~tinyhw.boot.amd.copyengine.CopyEngine` on a transport with the bridge-SRAM ability
(:class:`tinyhw.transport.abilities.BridgeSram`: the ``usb`` transport); nothing else of the transport is used.

Two copy-in protocols share the GPU side (one submission per call: per chunk POLL sentinel, COPY, 64-bit
WRITE of the fence) and differ on the host:

* ``seed`` — the published protocol of §9.3: per chunk copy the payload into a staging buffer with the
  sentinel, send the 0xF2 arm and a fence read, wait for both (and poll the fence until the window is free),
  then send the wire image.
* ``tinyhw`` — the same wire format and safety rule with fewer round trips and (almost) nothing built on the host:
  a full chunk followed by more of the caller's data is ONE bulk transfer of the caller's 256 KiB as they lie
  (payload + the next four bytes, which serve as the chunk's tag: the dword the GPU polls for), unless those four
  bytes equal what the SRAM already holds there (then the chunk falls back to the sentinel); a short last chunk
  is built whole (up to 64 KiB) or sent as a body from the caller's buffer plus a 512-2048-byte built tail (both
  transfers fill one 0xF2 arm: the engine counts sectors, not transfers; inferred for hardware); from 8 chunks on,
  the batch's SDMA packets travel through the SRAM as a first chunk (an indirect buffer copied into VRAM at
  ``IB_VRAM``) and the ring gets only that chunk's packets and an INDIRECT (25 streamed dwords instead of 19 per
  chunk at 1.1 us each); the fence is read only when the last value read cannot prove the window free; the arm
  goes out as soon as the window is known free, without waiting for it before the data is queued.

The host (both protocols): the copy-in's bulk-OUT transfers go to a queue of up to ``DEPTH`` (4) transfers in
flight on the data endpoint (:mod:`tinyhw.usb.queued`: libusb's asynchronous transfers on real hardware, the emulated
backend's own queue on ``mock:navi31-usb``, one worker thread as the fallback); the 0xF2 arms and fence reads stay on
the caller's thread and overlap the data in flight. Ordering (§9.3): a chunk's bulk transfers are queued only after
its arm returned (its data cannot move before it); window-reuse rule: chunk seq is armed and queued only after
chunk seq-2's bulk transfers completed (the queue's ticket) and the fence showed chunk seq-2 drained, so at most two
chunks (four transfers) are in flight and a queued transfer never waits for anything but the pipe. A failure
(disconnect, timeout) is latched by the queue and raised on the caller by its next step as the usual one-line
tinyhw error; outstanding transfers are cancelled and reaped before ``copy_in`` returns or raises. Queued
transfers pay only the pipe's small gap instead of a lone transfer's ~100 us fixed cost. What this achieves on
this machine is what the emulator's hybrid clock gives (modelled device costs + the host's measured CPU time
between transfers: ``bench copy --path sram`` on ``mock:navi31-usb``, ``bench/bench_usbcopy.py``); on the device
clock (no host CPU) the timing model (:mod:`tinyhw.boot.amd.usbcopy_model`, ``host="async"``, ``host_costs=False``)
reproduces it exactly, and ``host="worker"`` the fallback (``TINYHW_USB_QUEUE=worker``). Copy-out stays synchronous.

Stale SRAM equal to an old sentinel: ``seq`` persists across calls on one :class:`UsbCopier` and the SRAM is
zeroed on first use, so an old *sentinel* never matches; but the SRAM also holds copied-out VRAM and older
payloads, which can hold the exact dword 0x51000000 | seq where the GPU looks. The published protocol would
then copy stale bytes (a hazard the tests demonstrate on the emulator); tinyhw's protocol keeps a host mirror
of what it put into the SRAM (wire images, copy-out pieces) and switches that chunk to 0x52000000 | seq.
"""

from __future__ import annotations

import array
from typing import TYPE_CHECKING, Any

from tinyhw.boot.amd import sdmapkt
from tinyhw.boot.amd.copyengine import CQ_BUF_BUS, PT_BASE, SRAM_BUS, SRAM_SIZE, SYS_BUF_BUS, MiB, bridge_va
from tinyhw.errors import DeviceTimeout, Refused
from tinyhw.transport.abilities import BridgeSram
from tinyhw.transport.base import Transport, require
from tinyhw.transport.wait import poll

if TYPE_CHECKING:
    from tinyhw.boot.amd.copyengine import CopyEngine

WINDOW = 0x40000  # 256 KiB, 16 slots
CHUNK = WINDOW - 4  # payload of a full chunk (§9.2)
SLOT = 16 * 1024
SECTOR = 512
FENCE_XDATA = 0xA800  # PCIe 0x820800 (§7.2)
FENCE_BUS = SYS_BUF_BUS + 0x800
RELEASE_BUS = CQ_BUF_BUS + 12
GO_XDATA = FENCE_XDATA + 0x10  # tinyhw's copy-out: the go byte the host writes per piece (PCIe 0x820810)
GO_BUS = FENCE_BUS + 0x10
OUT_BATCH = 1024  # copy-out pieces per SDMA submission (17 dwords each: 68 KiB of the 1 MiB ring)
OUT_PIECE = SRAM_SIZE
SENTINEL = 0x51000000
ALT_SENTINEL = 0x52000000  # tinyhw's protocol: used when the stale SRAM already holds SENTINEL | seq
IB_DWORDS_PER_CHUNK = 19  # §9.3: POLL 6 + COPY 7 + 64-bit WRITE 6
#: chunks per SDMA submission: 3400 * 19 dwords = 252 KiB, inside the 1 MiB ring and, as tinyhw's indirect buffer,
#: inside one window with its tag (the indirect buffer's chunk must leave room: wire_len(...) <= WINDOW - 512)
BATCH = 3400
IB_MIN_CHUNKS = 8  # tinyhw: from this many chunks on, the packets go over the fast path (an indirect buffer)
IB_VRAM = PT_BASE + 3 * MiB  # where the indirect buffer lands in VRAM (above the copy engine's IH rings)
STAGE_MAX = 64 * 1024  # tinyhw: a chunk whose wire image is at most this long is built whole and sent as one transfer
PROTOCOLS = ("seed", "tinyhw")
DEPTH = 4  # bulk transfers in flight at most: two chunks of tinyhw's protocol (body + tail each)


def wire_len(payload: int) -> int:
    """Bytes on the wire for a chunk of ``payload`` bytes: payload plus its 4-byte sentinel, rounded up to 512."""
    return -(-(payload + 4) // SECTOR) * SECTOR


def sentinel(seq: int) -> int:
    """The sentinel word of chunk ``seq``: :data:`SENTINEL` with the low 24 bits of ``seq``."""
    return SENTINEL | (seq & 0xFFFFFF)


class UsbCopier:
    """Copy-in / copy-out state of one bridge + GPU (``seq`` never resets while this object lives)."""

    def __init__(self, engine: CopyEngine, *, timeout: float = 10.0) -> None:
        self.engine = engine
        self.gpu = engine.gpu
        self.sram: BridgeSram = require_sram(engine.gpu.transport)
        self.clock = engine.gpu.clock
        self.timeout = timeout
        self.seq = 0
        self.fence_seen = 0
        self.primed = False
        self.fence_synced = False  # copy_in_sync read the fence (instead of zeroing it, as priming does)
        self.go: int | None = None  # the copy-out go byte last written (None: not written by this copier yet)
        self._recv: dict[int, array.array] = {}  # copy-out receive buffers by wire length
        self.mirror = bytearray(SRAM_SIZE)
        self._staging: tuple[bytearray, bytearray] | None = None  # the seed protocol's two staging buffers
        self.stats = {"chunks": 0, "fence_reads": 0, "arms": 0, "bulk_out": 0, "staged_bytes": 0, "pieces_out": 0,
                      "alt_sentinels": 0, "data_tags": 0, "ib_dwords": 0, "pieces_in": 0}

    # -- helpers --------------------------------------------------------------------------------------------
    def _read_fence(self) -> int:
        self.stats["fence_reads"] += 1
        self.fence_seen = int.from_bytes(self.sram.read_xdata(FENCE_XDATA, 8), "little")
        return self.fence_seen

    def _wait_fence(self, target: int, what: str) -> None:
        if self.fence_seen >= target:
            return
        try:
            # back to back: each read is a full control round trip (~100 us) already; a sleep would only add to it
            poll(self.clock, self._read_fence, lambda v: v >= target, timeout=self.timeout, interval=0.0, what=what)
        except DeviceTimeout as e:
            raise DeviceTimeout(f"{what}: the gpu did not drain it in {self.timeout:g} s (fence {self.fence_seen}, "
                                f"sdma read pointer 0x{self.engine.rptr():x} of 0x{self.engine.wptr:x})",
                                hint="the copy engine is hung: reset the gpu (`tinyhw am reset`) and boot again") from e

    def _prime(self) -> None:
        """First use (§9.3): zero the fence (eight E5 writes) and both windows (so old SRAM is no sentinel)."""
        if self.primed:
            return
        for i in range(8):
            self.sram.write_xdata(FENCE_XDATA + i, 0)
        self.sram.write_sram(0, bytes(SRAM_SIZE))
        self.mirror = bytearray(SRAM_SIZE)  # what the SRAM holds, as far as this copier wrote it
        self.fence_seen = 0
        self.seq_base_fence = 0
        self.primed = True

    def _arm(self, window: int, length: int) -> None:
        self.stats["arms"] += 1
        self.sram.arm_host_to_sram(WINDOW // SLOT * window, length)

    def _bulk(self, q: Any, data: bytes | bytearray | memoryview) -> int:
        """Queue one bulk OUT of copy-in data; its ticket."""
        self.stats["bulk_out"] += 1
        return q.submit(data)

    # -- copy-in ---------------------------------------------------------------------------------------------
    def copy_in(self, dst_offset: int, data: bytes | bytearray | memoryview, protocol: str = "tinyhw") -> dict:
        """Copy ``data`` to VRAM byte ``dst_offset`` (any length, any alignment of the size). ``data`` is sent from
        where it lies (a contiguous buffer is never copied whole; only a non-contiguous view is)."""
        if protocol not in PROTOCOLS:
            raise Refused(f"unknown copy-in protocol {protocol!r}; known: {', '.join(PROTOCOLS)}")
        view = memoryview(data)
        if not view.c_contiguous:
            view = memoryview(view.tobytes())
        view = view.cast("B") if view.format != "B" or view.ndim != 1 else view
        if dst_offset < 0 or dst_offset + len(view) > self.gpu.vram_size:
            raise Refused(f"copy-in of {len(view)} bytes at vram 0x{dst_offset:x} is outside vram")
        if not view:
            return {"bytes": 0, "chunks": 0}
        self._prime()
        starts = range(0, len(view), CHUNK)
        for first in range(0, len(starts), BATCH):  # one SDMA submission per batch
            self._copy_batch(view, dst_offset, starts[first:first + BATCH], protocol)
        return {"bytes": len(view), "chunks": len(starts), "protocol": protocol}

    def _copy_batch(self, view: memoryview, dst_offset: int, starts: range, protocol: str) -> None:
        base = self.seq
        own = protocol == "tinyhw"
        chunks = [view[o:o + CHUNK] for o in starts]
        # tinyhw: a full chunk followed by at least one more dword of the caller's data goes as ONE transfer of
        # view[o:o + WINDOW] straight from the caller's buffer: the dword after the payload is its tag
        wires: list[memoryview | None] = [view[o:o + WINDOW] if own and o + WINDOW <= len(view) else None
                                          for o in starts]
        dsts = [dst_offset + o for o in starts]
        ib = own and len(chunks) >= IB_MIN_CHUNKS
        if ib:  # chunk base carries the batch's packets (the indirect buffer) into VRAM over the fast path
            chunks.insert(0, memoryview(bytes(IB_DWORDS_PER_CHUNK * 4 * len(starts))))  # its size; bytes follow
            wires.insert(0, None)
            dsts.insert(0, IB_VRAM)
        tags = self._tags(base, chunks, wires, protocol)
        packets = [self._chunk_packets(base + c, len(chunks[c]), dsts[c], tags[c]) for c in range(len(chunks))]
        if ib:
            body = [d for pk in packets[1:] for d in pk]
            if 4 * len(body) != len(chunks[0]):
                raise RuntimeError(f"indirect buffer of {len(body)} dwords, {len(chunks[0]) // 4} planned")
            image = bytearray(wire_len(4 * len(body)))
            image[:4 * len(body)] = b"".join(d.to_bytes(4, "little") for d in body)
            image[-4:] = tags[0].to_bytes(4, "little")
            chunks[0] = memoryview(image)[:4 * len(body)]
            wires[0] = memoryview(image)
            self.stats["staged_bytes"] += len(image)
            self.stats["ib_dwords"] += len(body)
            self.engine.submit(packets[0] + sdmapkt.indirect(self.gpu.mc(IB_VRAM), len(body)))
        else:
            self.engine.submit([d for pk in packets for d in pk])
        last: dict[int, int] = {}  # seq -> ticket of its last bulk transfer
        send = self._send_seed if protocol == "seed" else self._send_tinyhw
        with self.sram.open_sram_queue(DEPTH, 10.0, "copy-in data") as q:
            self.stats["queue"] = q.kind
            for c, chunk in enumerate(chunks):
                seq = base + c
                q.wait(last.pop(seq - 2, 0))  # window-reuse rule (a): chunk seq-2's data has left the host
                last[seq] = send(q, seq, chunk, tags[c], wires[c])
                self.stats["chunks"] += 1
        self.seq = base + len(chunks)
        self._remember(base, chunks, tags)
        self._wait_fence(self.seq, f"gpu failed to drain usb copy-in chunk {self.seq - 1}")

    def _chunk_packets(self, seq: int, n: int, dst: int, tag: int) -> list[int]:
        """A chunk's SDMA packets (§9.3): POLL its tag at the wire image's last dword, COPY into VRAM, 64-bit WRITE
        of the drain fence seq + 1."""
        win = SRAM_BUS + WINDOW * (seq % 2)
        return (sdmapkt.poll_mem_equal(bridge_va(win + wire_len(n) - 4), tag)
                + sdmapkt.copy_linear(bridge_va(win), self.gpu.mc(dst), n)
                + sdmapkt.write64(bridge_va(FENCE_BUS), seq + 1))

    # -- what the SRAM holds: the tinyhw protocol never uses a tag that is already where the GPU looks ----------
    def _tags(self, base: int, chunks: list[memoryview], wires: list[memoryview | None], protocol: str) -> list[int]:
        """Tag per chunk (the dword the GPU polls for at the wire image's end). The seed protocol always uses
        0x51000000 | seq (§9.2) and trusts that stale SRAM never holds it at that place (copied-out VRAM or an
        older payload can). tinyhw checks the dword the GPU will poll, as it will be when the GPU polls (after chunk
        seq-2 filled the window): a whole-window chunk (``wires[c]``) uses the caller's dword after its payload
        when that differs from the stale one, else 0x51000000 | seq, else 0x52000000 | seq. A chunk that falls
        back loses its whole-window wire (``wires[c] = None``)."""
        tags: list[int] = []
        for c in range(len(chunks)):
            seq = base + c
            tag = sentinel(seq)
            if protocol == "tinyhw":
                stale = self._stale_at(base, chunks, tags, c)
                wire = wires[c]
                if wire is not None:
                    own = int.from_bytes(wire[WINDOW - 4:], "little")
                    if own != stale:
                        self.stats["data_tags"] += 1
                        tags.append(own)
                        continue
                    wires[c] = None
                if stale == tag:
                    tag = ALT_SENTINEL | (seq & 0xFFFFFF)
                    self.stats["alt_sentinels"] += 1
            tags.append(tag)
        return tags

    def _stale_at(self, base: int, chunks: list[memoryview], tags: list[int], c: int) -> int:
        """The dword at chunk c's tag place in its window just before chunk c's data lands. (An indirect-buffer
        chunk's bytes are not known yet here; it is never consulted: the chunks after it in its window are whole
        windows, whose tag place lies past its wire image.)"""
        n = wire_len(len(chunks[c]))
        pos = n - 4
        for prev in range(c - 2, -1, -2):  # earlier chunks of this call in the same window, newest first
            pn = wire_len(len(chunks[prev]))
            if pos < pn:
                return int.from_bytes(_image_bytes(chunks[prev], pn, tags[prev], pos), "little")
        at = WINDOW * ((base + c) % 2) + pos
        return int.from_bytes(self.mirror[at:at + 4], "little")

    def _remember(self, base: int, chunks: list[memoryview], tags: list[int]) -> None:
        """Update the SRAM mirror with the wire images that are still there (at most two per window)."""
        for w in (0, 1):
            mine = [c for c in range(len(chunks)) if (base + c) % 2 == w]
            full = [c for c in mine if wire_len(len(chunks[c])) == WINDOW]
            for c in mine[mine.index(full[-1]):] if full else mine:
                n = wire_len(len(chunks[c]))
                at = WINDOW * w
                self.mirror[at:at + len(chunks[c])] = chunks[c]
                self.mirror[at + len(chunks[c]):at + n - 4] = bytes(n - 4 - len(chunks[c]))
                self.mirror[at + n - 4:at + n] = tags[c].to_bytes(4, "little")

    def _send_seed(self, q: Any, seq: int, chunk: memoryview, tag: int, wire: memoryview | None = None) -> int:
        """The seed's host work per chunk (§9.3), no more: the payload copied into staging buffer seq mod 2 (two
        buffers, allocated once; the window-reuse rule has freed it), the sentinel stored, the arm and a fence
        read (one after the other: EP0 carries one control transfer at a time), the fence polled, one bulk OUT."""
        n = wire_len(len(chunk))
        if self._staging is None:
            self._staging = (bytearray(WINDOW), bytearray(WINDOW))
        staging = self._staging[seq % 2]
        staging[:len(chunk)] = chunk
        if n - 4 > len(chunk):
            staging[len(chunk):n - 4] = bytes(n - 4 - len(chunk))  # the pad the mirror assumes (< 512 bytes)
        staging[n - 4:n] = tag.to_bytes(4, "little")
        self.stats["staged_bytes"] += n
        self._arm(seq % 2, n)
        self._read_fence()
        self._wait_fence(seq - 1, f"usb copy-in window {seq % 2} for chunk {seq}")
        return self._bulk(q, staging if n == len(staging) else memoryview(staging)[:n])

    def _send_tinyhw(self, q: Any, seq: int, chunk: memoryview, tag: int, wire: memoryview | None = None) -> int:
        """tinyhw's host work per chunk: the arm (before the window is known drained: safe, §9.3), the fence read
        only when needed, then ONE bulk OUT of the whole wire image where it lies (``wire``: the caller's buffer,
        or the indirect buffer's image), or for a short last chunk (or one whose data tag collided) one staged image
        of up to :data:`STAGE_MAX` bytes, or a body from the caller's buffer plus a small built tail."""
        n = wire_len(len(chunk))
        self._arm(seq % 2, n)  # arming before the window drained is safe (§9.3 observed tolerance)
        self._wait_fence(seq - 1, f"usb copy-in window {seq % 2} for chunk {seq}")
        if wire is not None:
            return self._bulk(q, wire)
        # the body goes straight from the caller's buffer: whole 1024-byte SuperSpeed packets of payload only;
        # the tail (payload rest, zero pad, sentinel) is the only part built on the host
        body_len = 0 if n <= STAGE_MAX else min(n - 512, len(chunk)) // 1024 * 1024
        tail = n - body_len
        if body_len:
            self._bulk(q, chunk[:body_len])
        last = bytearray(tail)
        rest = chunk[body_len:]
        last[:len(rest)] = rest
        last[tail - 4:] = tag.to_bytes(4, "little")
        self.stats["staged_bytes"] += tail
        return self._bulk(q, last)

    # -- synchronous copy-in (small buffers: a dispatch's) ------------------------------------------------------
    def copy_in_sync(self, dst_offset: int, data: bytes | bytearray | memoryview) -> dict:
        """Copy ``data`` to VRAM byte ``dst_offset`` in pieces of up to 512 KiB, each written whole into the SRAM
        (one 0xF2 arm and one bulk OUT, waited for) before its SDMA COPY and fence WRITE are submitted, then the
        fence read until it shows the piece drained. No sentinel, no priming (the piece is in the SRAM before the
        GPU is told): for buffers of a few hundred KiB this costs less than the pipelined protocol's first-use
        zeroing of the SRAM. The first call reads the fence once, so a value a previous process left there never
        passes for a drain."""
        view = memoryview(data).cast("B") if isinstance(data, memoryview) else memoryview(data)
        if dst_offset < 0 or dst_offset + len(view) > self.gpu.vram_size:
            raise Refused(f"copy-in of {len(view)} bytes at vram 0x{dst_offset:x} is outside vram")
        if view and not self.primed and not self.fence_synced:
            self.seq = max(self.seq, self._read_fence())  # fence targets from here on are above what it holds
            self.fence_synced = True
        for o in range(0, len(view), SRAM_SIZE):
            piece = view[o:o + SRAM_SIZE]
            self.sram.write_sram(0, piece)
            wire = -(-len(piece) // SECTOR) * SECTOR
            self._mirror_piece(piece)
            self.mirror[len(piece):wire] = bytes(wire - len(piece))  # write_sram pads the last sector with zeros
            self.engine.submit(sdmapkt.copy_linear(bridge_va(SRAM_BUS), self.gpu.mc(dst_offset + o), len(piece))
                               + sdmapkt.write64(bridge_va(FENCE_BUS), self.seq + 1))
            self.seq += 1
            self._wait_fence(self.seq, f"gpu failed to copy the sram piece at vram 0x{dst_offset + o:x} in")
            self.stats["pieces_in"] += 1
        return {"bytes": len(view), "pieces": -(-len(view) // SRAM_SIZE)}

    def poison(self, length: int, byte: int = 0xA5) -> None:
        """Fill the SRAM a copy-out of ``length`` bytes lands in (slot 0 on, at most the whole SRAM) with ``byte``, so a
        copy that moves nothing cannot hand back what the SRAM held before (an earlier copy-in chunk). The mirror
        follows; 0xA5A5A5A5 is no sentinel."""
        n = min(-(-length // SECTOR) * SECTOR, SRAM_SIZE)
        if n:
            self.sram.write_sram(0, bytes([byte]) * n)
            self.mirror[:n] = bytes([byte]) * n

    # -- copy-out --------------------------------------------------------------------------------------------
    def copy_out(self, src_offset: int, length: int, into: Any = None, protocol: str = "tinyhw"
                 ) -> bytearray | memoryview:
        """Read ``length`` bytes of VRAM at ``src_offset`` through the SRAM (§9.4), 512 KiB per piece, into one
        result allocated once (a ``bytearray``), or into ``into`` (a writable buffer of ``length`` bytes, returned as
        a byte memoryview). Each piece is read into a reused receive buffer and copied once into its place; nothing
        is allocated per piece. The mirror keeps only what a tag check can ask (each sector's last dword).

        ``protocol``: ``"seed"`` submits each piece's SDMA packets after its read arm (§9.4 as published: per piece
        the arm, a streamed ring write, an HDP flush and a doorbell, then the bulk IN); ``"tinyhw"`` (default)
        submits the packets of up to :data:`OUT_BATCH` pieces at once, each piece's copy behind a POLL on a go byte
        in the bridge's ``sys_buf`` page (XDATA 0xA810 = PCIe 0x820810, beside the copy-in fence), and per piece
        sends only the read arm, one E5 write of the go byte and the bulk IN (3 transfers instead of 7; that the
        GPU may read the ``sys_buf`` page the host writes with E5 is the fence's path backwards: inferred)."""
        if protocol not in PROTOCOLS:
            raise Refused(f"unknown copy-out protocol {protocol!r}; known: {', '.join(PROTOCOLS)}")
        if src_offset < 0 or length < 0 or src_offset + length > self.gpu.vram_size:
            raise Refused(f"copy-out of {length} bytes at vram 0x{src_offset:x} is outside vram")
        out = bytearray(length) if into is None else memoryview(into).cast("B")
        if len(out) < length:
            raise Refused(f"copy-out of {length} bytes into a buffer of {len(out)} bytes")
        view = memoryview(out)
        self.engine.wait_idle(self.timeout)
        pieces = [(o, min(OUT_PIECE, length - o)) for o in range(0, length, OUT_PIECE)]
        pending: tuple[int, int, array.array] | None = None  # the piece in the receive buffer, not yet in place
        batched = protocol == "tinyhw"
        if batched and pieces and self.go is None:
            self.sram.write_xdata(GO_XDATA, 0)  # the host is the go byte's only writer from here on
            self.go = 0
        for first in range(0, len(pieces), OUT_BATCH if batched else 1):
            batch = pieces[first:first + (OUT_BATCH if batched else 1)]
            if batched:
                assert self.go is not None  # written before the first batch
                body: list[int] = []
                for k, (o, n) in enumerate(batch):
                    body += sdmapkt.poll_mem_equal(bridge_va(GO_BUS), (self.go + 1 + k) & 0xFF, mask=0xFF)
                    body += self._piece_packets(src_offset + o, n)
                self.engine.submit(body)
            for o, n in batch:
                self.sram.arm_sram_to_host(n)
                if batched:
                    assert self.go is not None
                    self.go = (self.go + 1) & 0xFF
                    self.sram.write_xdata(GO_XDATA, self.go)  # the GPU's POLL sees it: this piece goes
                else:
                    self.engine.submit(self._piece_packets(src_offset + o, n))
                # the previous piece is in the receive buffer and the sram is the gpu's again: its copy into the
                # result (and the mirror) overlaps this piece's copy into the sram
                self._land(pending, view)
                recv = self._receive_buffer(-(-n // SECTOR) * SECTOR)
                try:
                    self.sram.collect_sram(n, into=recv)
                except DeviceTimeout as e:
                    raise DeviceTimeout(f"usb copy-out piece at vram 0x{src_offset + o:x} never arrived: the gpu "
                                        f"did not release the sram (sdma read pointer 0x{self.engine.rptr():x} of "
                                        f"0x{self.engine.wptr:x})",
                                        hint="the copy engine is hung: reset the gpu (`tinyhw am reset`) and boot "
                                        "again") from e
                pending = (o, n, recv)
                self.stats["pieces_out"] += 1
        self._land(pending, view)
        return out if into is None else view[:length]

    def _piece_packets(self, src: int, n: int) -> list[int]:
        """One copy-out piece's SDMA packets (§9.4): COPY ``n`` bytes of VRAM at ``src`` into SRAM slot 0, then the
        32-bit release write into 0x82200C."""
        return (sdmapkt.copy_linear(self.gpu.mc(src), bridge_va(SRAM_BUS), n)
                + sdmapkt.fence(bridge_va(RELEASE_BUS), 0))

    def _receive_buffer(self, wire: int) -> array.array:
        """The copier's bulk-IN receive buffer of ``wire`` bytes (kept per length: full pieces and a last one), which
        pyusb fills in place."""
        buf = self._recv.get(wire)
        if buf is None:
            if len(self._recv) >= 2:
                self._recv.clear()
            buf = self._recv[wire] = array.array("B", bytes(wire))
        return buf

    def _land(self, pending: tuple[int, int, array.array] | None, view: memoryview) -> None:
        """Copy a received piece (offset, length, receive buffer) into its place in the result and the mirror."""
        if pending is not None:
            o, n, recv = pending
            piece = memoryview(recv)[:n]
            view[o:o + n] = piece
            self._mirror_piece(piece)  # the GPU wrote n bytes from SRAM offset 0 (slot 0)

    def _mirror_piece(self, piece: memoryview) -> None:
        """The mirror after the GPU wrote ``piece`` at SRAM offset 0: the last dword of every whole sector (where a
        chunk's tag can sit) and the bytes of a last, partial sector."""
        whole = len(piece) // SECTOR * SECTOR
        if whole:
            dwords = memoryview(self.mirror).cast("I")
            dwords[SECTOR // 4 - 1:whole // 4:SECTOR // 4] = piece[:whole].cast("I")[SECTOR // 4 - 1::SECTOR // 4]
        self.mirror[whole:len(piece)] = piece[whole:]


def open_copier(transport: Transport, *, timeout: float = 10.0) -> UsbCopier:
    """A ready copier for a booted GPU behind the USB bridge: finds the registers (discovery), brings the copy
    engine up (:func:`tinyhw.boot.amd.copyengine.bring_up`) and returns the copier. ``transport`` must have the
    bridge-SRAM ability (the usb transport); anything else is refused (:func:`require_sram`)."""
    from tinyhw.boot.amd.copyengine import bring_up
    from tinyhw.boot.amd.gpu import AmGpu

    require_sram(transport)
    return UsbCopier(bring_up(AmGpu(transport)), timeout=timeout)


def require_sram(transport: Transport) -> BridgeSram:
    """``transport`` as a :class:`~tinyhw.transport.abilities.BridgeSram`, or the refusal (exit 2) every sram copy
    path gives on a transport without the usb bridge's sram (``pci:``, ``vfio:``, ``mock:navi31``, ``remote:``)."""
    return require(transport, BridgeSram, "copy through the usb bridge's sram (usb: or mock:navi31-usb only)",
                   refuse=True, hint="use --path bar (the bar mapping) or a device behind the usb bridge")


def _image_bytes(chunk: memoryview, n: int, tag: int, pos: int) -> bytes:
    """Four bytes at ``pos`` of the wire image of ``chunk`` (payload, zero pad, tag in the last dword)."""
    image = bytearray(4)
    for i in range(4):
        p = pos + i
        if p < len(chunk):
            image[i] = chunk[p]
        elif p >= n - 4:
            image[i] = tag.to_bytes(4, "little")[p - (n - 4)]
    return bytes(image)
