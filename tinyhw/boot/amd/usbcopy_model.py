"""Timing model of the USB copy protocols: tinyhw's real host (queued bulk transfers), its fallback, older hosts.

Spec: specs/asm24-usb-bridge.md §1 (0xF2 SRAM DMA ~700 MB/s on 10 Gbps; a control transfer is a full USB round
trip of the order of 100 us, inferred; PCIe never the bottleneck; published copy-in 276 MB/s (Kryo host), 294 and
323 MB/s (comma) with the async arm + fence read), §9.3/§9.4 (the protocols' steps). The emulator runs the
protocols functionally with tinyhw's real host code (a caller thread and a bulk worker thread, each with its own
virtual time; the emulated SDMA taking time on the board clock): its virtual clock gives what tinyhw's host really
achieves. This model replays each protocol's host loop three ways (``host=``):

* ``"worker"`` — tinyhw's fallback host (:mod:`tinyhw.usb.queued` kind "worker", ``TINYHW_USB_QUEUE=worker``):
  the bulk-OUT transfers on one worker thread making synchronous pyusb calls (one bulk transfer in flight, so each
  pays the full ``bulk_latency_s``), arms and fence reads on the caller. With ``host_costs=False`` (no staging /
  submission CPU time, which the emulator cannot see) it is the cross-check of the emulator's fallback figure.
* ``"sync"`` — tinyhw's earlier host, before the queued bulk transfers: every transfer waited for, in order, on
  one thread.
* ``"async"`` — a libusb-async host (the published host's asynchronous layer, §4.7), which is tinyhw's host now
  (:mod:`tinyhw.usb.queued`, up to 4 bulk transfers in flight): a transfer submitted while the previous one is on
  the pipe pays ``bulk_gap_s``, one submitted to an idle pipe the full ``bulk_latency_s`` (as the emulator). This is
  the figure the copy-in targets are set against; with ``host_costs=False`` it is the cross-check of the emulator's
  figure (tests: per chunk within 1 %, 64 MiB within 1 %).

Resources: the host thread (per-transfer submission cost, staging copies), EP0 (control transfers one at a
time, ``ctrl_s`` each), the bulk-OUT pipe (one transfer at a time, ``bulk_gap_s`` + bytes / ``f2_rate``; the
first byte of a transfer cannot move before its 0xF2 arm completed), the GPU (sentinel seen ``poll_s`` after the
data landed, then bytes / ``gpu_rate`` from the SRAM over PCIe plus the fence write).

Parameters: ``f2_rate`` and ``ctrl_s`` are the spec's figures; ``gpu_rate``, ``poll_s`` and ``bulk_gap_s`` are
inferred; ``stage_rate`` (the host's staging copy, incl. the buffer conversions of a Python host) and
``submit_s`` are two host costs fitted so the seed protocol lands on the published 276-323 MB/s: with them the
seed protocol is host-bound (staging copy + two round trips per chunk before its data may move). No headline
figure uses them: ``bench copy``'s model column and ``bench/bench_usbcopy.py`` use
``host_costs=False``, and the host's real CPU time comes from the hybrid clock (tinyhw.mocks.common.vclock), measured.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

WINDOW, CHUNK, SECTOR = 0x40000, 0x40000 - 4, 512
IB_MIN_CHUNKS, STAGE_MAX = 8, 64 * 1024  # as tinyhw.boot.amd.usbcopy (the model imports nothing of the driver)
RING_IB_DWORDS = 25  # tinyhw with an indirect buffer: one chunk's 19 packets dwords + the 6-dword INDIRECT


@dataclass(frozen=True)
class LinkModel:
    """The model's parameters, in seconds and bytes per second; each comment says where the figure comes from (spec,
    inferred or fitted)."""

    f2_rate: float = 700e6  # §1: 0xF2 SRAM DMA on a 10 Gbps port
    ctrl_s: float = 100e-6  # §1: one control round trip (inferred by the spec)
    bulk_gap_s: float = 10e-6  # per bulk transfer on the pipe when transfers are queued back to back (inferred)
    bulk_latency_s: float = 100e-6  # a lone bulk transfer's fixed cost (the emulator's bulk_overhead_s)
    submit_s: float = 30e-6  # host cost to submit one transfer (fitted)
    stage_rate: float = 0.5e9  # host staging copy, bytes/s (fitted; Python + memcpy on an ARM host)
    gpu_rate: float = 3.0e9  # SDMA reading the bridge SRAM over PCIe Gen3 x4 (inferred)
    poll_s: float = 5e-6  # SDMA poll interval until the sentinel is seen (inferred)
    stream_dword_s: float = 1.1e-6  # §1: one streamed dword written by the 8051 (the ring write goes this way)
    ring_dwords: int = 19  # §9.3: SDMA dwords per chunk (poll 6, copy 7, 64-bit write 6)


def _wire(n: int) -> int:
    return -(-(n + 4) // SECTOR) * SECTOR


HOSTS = ("sync", "worker", "async")


def plan(size: int, protocol: str, m: LinkModel) -> tuple[int, list[tuple[int, list[int], int]]]:
    """What a copy-in of ``size`` bytes sends: the dwords streamed into the ring, and per chunk (payload bytes,
    its bulk transfers' lengths, bytes built on the host). The seed: every chunk staged whole, one transfer, all
    packets streamed. tinyhw: from :data:`IB_MIN_CHUNKS` chunks on, the packets go as a first chunk (an indirect
    buffer, built whole) and the ring gets only that chunk's packets and the INDIRECT; a full chunk followed by
    more data is one transfer from the caller's buffer (its tag is the next dword: random data never collides with
    the stale one); a short last chunk is built whole up to :data:`STAGE_MAX`, else body + tail."""
    sizes = [min(CHUNK, size - o) for o in range(0, size, CHUNK)]
    if protocol == "seed":
        return len(sizes) * m.ring_dwords, [(n, [_wire(n)], _wire(n)) for n in sizes]
    out: list[tuple[int, list[int], int]] = []
    ring = len(sizes) * m.ring_dwords
    if len(sizes) >= IB_MIN_CHUNKS:
        ib = 4 * ring
        out.append((ib, [_wire(ib)], _wire(ib)))
        ring = RING_IB_DWORDS
    for k, n in enumerate(sizes):
        wire = _wire(n)
        if n == CHUNK and k + 1 < len(sizes):
            out.append((n, [wire], 0))
        elif wire <= STAGE_MAX:
            out.append((n, [wire], wire))
        else:
            body = min(wire - 512, n) // 1024 * 1024
            out.append((n, [body, wire - body], wire - body))
    return ring, out


def copy_in(size: int, protocol: str, m: LinkModel | None = None, host: str = "async",
            host_costs: bool = True) -> dict[str, float]:
    """Modelled seconds and MB/s of one copy-in of ``size`` bytes with ``protocol`` ("seed" or "tinyhw") on a
    ``host`` of :data:`HOSTS`; ``host_costs=False`` drops the host's CPU costs (submission, staging copies)."""
    m = m or LinkModel()
    if not host_costs:
        m = replace(m, submit_s=0.0, stage_rate=float("inf"))
    if host in ("sync", "worker"):
        return _copy_in_host(size, protocol, m, worker=host == "worker")
    if host != "async":
        raise ValueError(f"unknown host {host!r}; known: {', '.join(HOSTS)}")
    ring, chunks = plan(size, protocol, m)
    now = ep0 = pipe = 0.0
    # the one SDMA submission before any chunk: streamed ring write (setup + bulk), HDP flush, doorbell (2 TLPs)
    now += m.submit_s + 2 * m.ctrl_s + ring * m.stream_dword_s + 3 * m.ctrl_s
    ep0 = now
    bulk_done: list[float] = []
    drained: list[float] = []
    fence_reads = 0

    def control(at: float) -> float:
        nonlocal ep0
        start = max(at, ep0)
        ep0 = start + m.ctrl_s
        return ep0

    def fence_ok(need: int, at: float) -> float:
        """Host time when a fence read shows chunk ``need`` drained, reading at ``at`` and again as needed."""
        nonlocal fence_reads
        if need < 0:
            return at
        t = at
        while True:
            fence_reads += 1
            done = control(t)
            if drained[need] <= done - m.ctrl_s / 2:
                return done
            t = done

    for k, (n, transfers, staged) in enumerate(chunks):
        if k >= 2:
            now = max(now, bulk_done[k - 2])
        if protocol == "seed":
            now += staged / m.stage_rate + 2 * m.submit_s
            arm_done = control(now)
            if k >= 2:
                now = fence_ok(k - 2, now)
            else:
                fence_reads += 1
                now = control(now)
            now = max(now, arm_done) + m.submit_s
        else:
            now += m.submit_s
            arm_done = control(now)  # arming before the drain is safe (PR #17663); the fence read queues behind it
            if k >= 2 and not _known_drained(k - 2, drained, now, m):
                now = fence_ok(k - 2, now)
            now += staged / m.stage_rate + len(transfers) * m.submit_s
        # a transfer submitted while the previous one is still on the pipe pays only the gap; one submitted to an
        # idle pipe pays the full fixed cost (as the emulator's queued bulk OUT does)
        idle = now >= pipe
        start = max(pipe, arm_done, now)
        for i, b in enumerate(transfers):
            start += (m.bulk_latency_s if idle and i == 0 else m.bulk_gap_s) + b / m.f2_rate
        pipe = start
        bulk_done.append(pipe)
        gpu_start = max(pipe + m.poll_s, drained[-1] if drained else 0.0)
        drained.append(gpu_start + n / m.gpu_rate + 1e-6)
    end = fence_ok(len(chunks) - 1, max(now, bulk_done[-1]))
    return {"seconds": end, "mb_s": size / end / 1e6, "chunks": len(chunks), "fence_reads": fence_reads}


def _copy_in_host(size: int, protocol: str, m: LinkModel, worker: bool) -> dict[str, float]:
    """tinyhw's host loop (tinyhw.boot.amd.usbcopy) step by step: arms and fence reads on the caller; the bulk
    transfers either on the caller too (``worker=False``: every transfer waited for in order) or on one worker
    thread (one synchronous transfer at a time, each starting when handed over and the previous one finished).
    Window reuse waits for chunk seq-2's transfers and a fence showing it drained. The GPU drains a chunk
    ``poll_s`` after its last byte landed, at ``gpu_rate``; a fence read sees the drains of its midpoint."""
    ring, chunks = plan(size, protocol, m)
    t = m.submit_s + 2 * m.ctrl_s + ring * m.stream_dword_s + 3 * m.ctrl_s  # the caller
    free = t  # when the worker (or, without one, the caller) may start the next bulk transfer
    drained: list[float] = []
    done: list[float] = []
    seen = 0  # the last fence value read
    reads = 0

    def read_fence() -> None:
        nonlocal t, seen, reads
        reads += 1
        mid = t + m.submit_s + m.ctrl_s / 2
        t += m.submit_s + m.ctrl_s
        seen = next((k for k, d in enumerate(drained) if d > mid), len(drained))

    def wait_fence(target: int) -> None:
        while seen < target:
            read_fence()

    def bulk(n: int) -> float:
        nonlocal t, free
        t += m.submit_s
        free = max(free, t) + m.bulk_latency_s + n / m.f2_rate
        if not worker:
            t = free
        return free

    for k, (n, transfers, staged) in enumerate(chunks):
        if k >= 2:
            t = max(t, done[k - 2])
        if protocol == "seed":
            t += staged / m.stage_rate
            t += m.submit_s + m.ctrl_s  # arm
            read_fence()
            wait_fence(k - 1)
            end = bulk(transfers[0])
        else:
            t += m.submit_s + m.ctrl_s  # arm
            wait_fence(k - 1)
            if len(transfers) == 2:
                bulk(transfers[0])
            t += staged / m.stage_rate
            end = bulk(transfers[-1])
        done.append(end)
        drained.append(max(end + m.poll_s, drained[-1] if drained else 0.0) + n / m.gpu_rate + 1e-6)
    t = max(t, done[-1])
    wait_fence(len(chunks))
    return {"seconds": t, "mb_s": size / t / 1e6, "chunks": len(chunks), "fence_reads": reads}


def _known_drained(need: int, drained: list[float], host: float, m: LinkModel) -> bool:
    """tinyhw reads the fence only when its last reading cannot prove the window free: modelled as "the
    previous read (issued one chunk earlier) already covered it", i.e. the drain happened a round trip ago."""
    return drained[need] + m.ctrl_s <= host


def copy_out(size: int, m: LinkModel | None = None, protocol: str = "tinyhw") -> dict[str, float]:
    """Modelled copy-out (§9.4), piece by piece (one bulk IN of up to 512 KiB at a time). ``"seed"`` (as published):
    per piece the 0xF2 read arm, the SDMA submission (streamed ring write of 11 dwords: setup + bulk; HDP flush;
    64-bit doorbell as two TLPs, the second one starts the engine half way through its round trip), then one bulk
    IN whose data flows once both its fixed cost has passed and the GPU's copy into the SRAM (``gpu_rate``) is done.
    ``"tinyhw"``: one submission up front (the engine's read pointer read, a streamed ring write of 17 dwords per
    piece, HDP flush, doorbell), then per piece the read arm and one E5 write of the go byte the GPU polls for (it
    sees it when that control transfer ends), then the bulk IN as above."""
    m = m or LinkModel()
    sizes = [min(512 * 1024, size - o) for o in range(0, size, 512 * 1024)]
    t = 0.0
    if protocol == "tinyhw":
        if sizes:
            t = m.ctrl_s + 2 * m.ctrl_s + m.bulk_latency_s + 17 * len(sizes) * m.stream_dword_s + 3 * m.ctrl_s
        for n in sizes:
            kick = t + 2 * m.ctrl_s
            gpu_done = kick + n / m.gpu_rate
            t = max(kick + m.bulk_latency_s, gpu_done) + _wire(n - 4) / m.f2_rate
        return {"seconds": t, "mb_s": size / t / 1e6 if t else 0.0}
    for n in sizes:
        kick = t + m.ctrl_s + m.ctrl_s + m.bulk_latency_s + 11 * m.stream_dword_s + 2 * m.ctrl_s + m.ctrl_s / 2
        gpu_done = kick + n / m.gpu_rate
        t = max(kick + m.ctrl_s / 2 + m.bulk_latency_s, gpu_done) + _wire(n - 4) / m.f2_rate
    return {"seconds": t, "mb_s": size / t / 1e6 if t else 0.0}
