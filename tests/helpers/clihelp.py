"""Run the tinyhw CLI in-process and capture exit code, stdout and stderr."""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Callable
from dataclasses import dataclass

from tinyhw.cli import main


@dataclass
class Result:
    code: int
    out: str
    err: str

    @property
    def no_result(self) -> bool:
        """Nothing but an error on stdout: empty, or (with --json) exactly one error document with this exit code."""
        if self.out == "":
            return True
        import json

        try:
            doc = json.loads(self.out)
        except ValueError:
            return False
        return set(doc) == {"error"} and doc["error"]["exit_code"] == self.code and bool(doc["error"]["message"])

    @property
    def stats(self) -> dict:
        import json

        lines = [ln for ln in self.err.splitlines() if ln.startswith("{")]
        assert lines, f"no --stats line in stderr: {self.err!r}"
        return json.loads(lines[-1])


def run(*args: str) -> Result:
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(args))
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return Result(code, out.getvalue(), err.getvalue())


def as_nobody(work: Callable[[], bytes]) -> bytes:
    """``work()`` in a forked child that dropped to user nobody (65534, needs root); returns what it returned.

    The child does only what ``work`` does (the caller loads what it needs first) and reports through a pipe.
    """
    rd, wr = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        code = 1
        try:
            os.close(rd)
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            os.write(wr, work())
            code = 0
        finally:
            os._exit(code)
    os.close(wr)
    data = b""
    while chunk := os.read(rd, 1 << 16):
        data += chunk
    os.close(rd)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the child running as nobody failed"
    return data
