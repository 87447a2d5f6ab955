"""The CPU sequencer: the register script GSP-RM sends in a ``GSP_RUN_CPU_SEQUENCER`` event.

Spec: specs/nv-bringup.md §13.5: the ``rpc_run_cpu_sequencer_v17_00`` header (40 bytes: bufferSizeDWord,
cmdIndex = the number of command dwords used, regSaveArea[8]) then u32 commands: 0 write, 1
read-modify-write, 2 poll, 3 delay, 4 save into regSaveArea, 5 GSP core reset, 6 start, 7 wait for halt,
8 core resume. The payload layouts are NVIDIA's ``rmgspseq.h`` (open-gpu-kernel-modules
src/nvidia/arch/nvalloc/common/inc/rmgspseq.h): REG_MODIFY is addr, **mask**, val (the spec's table and tinygrad
read value before mask) and sets ``(reg & ~mask) | val``; REG_POLL is addr, mask, val, timeout (us), error, and a
timeout of 0 means the default (nouveau's r535 sequencer: 4 s). The falcon operations (5-8) are handed in as
callables so the interpreter is testable on a fake register file.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from typing import Any

from tinyhw.errors import DeviceTimeout, OperationFailed
from tinyhw.transport.clock import Clock
from tinyhw.transport.wait import poll

HEADER = 40
#: opcode -> (name, argument count)
OPCODES = {0: ("write", 2), 1: ("modify", 3), 2: ("poll", 5), 3: ("delay", 1), 4: ("save", 2),
           5: ("core reset", 0), 6: ("core start", 0), 7: ("core wait halt", 0), 8: ("core resume", 0)}
MAX_COMMANDS = 4096
#: A poll whose timeout is 0 waits this long (us): nouveau's r535 sequencer takes 0 as "the default", 4 s
DEFAULT_POLL_US = 4_000_000


def _poll(rd: Callable[[int], int], clock: Clock, addr: int, mask: int, value: int, timeout_us: int,
          error: int) -> None:
    """REG_POLL: wait until ``rd(addr) & mask == value`` (``timeout_us`` 0: the default); a time-out names ``error``."""
    try:
        poll(clock, lambda: rd(addr), lambda v: (v & mask) == value, timeout=(timeout_us or DEFAULT_POLL_US) / 1e6,
             interval=1e-5, what=f"sequencer poll of 0x{addr:x} & 0x{mask:x} == 0x{value:x}")
    except DeviceTimeout as e:
        raise DeviceTimeout(f"{e.message} (sequencer error 0x{error:x})") from None


def run(payload: bytes, rd: Callable[[int], int], wr: Callable[[int, int], None], clock: Clock,
        core: Mapping[int, Callable[[], None]] | None = None) -> dict[str, Any]:
    """Interpret a sequencer payload: registers through ``rd``/``wr``, waits on ``clock``, opcodes 5-8 through
    ``core``; returns the counts per opcode and the register save area."""
    if len(payload) < HEADER:
        raise OperationFailed(f"the cpu sequencer payload is {len(payload)} bytes, shorter than its 40-byte header")
    _, used = struct.unpack_from("<II", payload, 0)
    save = list(struct.unpack_from("<8I", payload, 8))
    words = payload[HEADER:]
    if used * 4 > len(words) or used > MAX_COMMANDS:
        raise OperationFailed(f"the cpu sequencer says {used} command dwords, the payload holds {len(words) // 4}")
    cmd = list(struct.unpack_from(f"<{used}I", words, 0))
    counts: dict[str, int] = {}
    i = 0
    while i < used:
        op = cmd[i]
        if op not in OPCODES:
            raise OperationFailed(f"the cpu sequencer holds unknown opcode {op} at dword {i}")
        name, nargs = OPCODES[op]
        if i + 1 + nargs > used:
            raise OperationFailed(f"the cpu sequencer's {name} at dword {i} is cut short")
        a = cmd[i + 1:i + 1 + nargs]
        if op == 0:
            wr(a[0], a[1])
        elif op == 1:
            addr, mask, value = a  # GSP_SEQ_BUF_PAYLOAD_REG_MODIFY: addr, mask, val
            wr(addr, (rd(addr) & ~mask) | value)
        elif op == 2:
            addr, mask, value, timeout_us, error = a
            _poll(rd, clock, addr, mask, value, timeout_us, error)
        elif op == 3:
            clock.sleep(a[0] / 1e6)
        elif op == 4:
            if a[1] >= len(save):
                raise OperationFailed(f"the cpu sequencer saves into slot {a[1]}, the save area has 8")
            save[a[1]] = rd(a[0])
        else:
            fn = (core or {}).get(op)
            if fn is None:
                raise OperationFailed(f"the cpu sequencer asks for {name}, which this boot cannot do")
            fn()
        counts[name] = counts.get(name, 0) + 1
        i += 1 + nargs
    return {"commands": counts, "reg_save": save}
