"""The rich progress bar every long command draws: bytes, rate and ETA on stderr, only on a terminal and
without -q. It is the CLI's :class:`tinyhw.progress.Progress`; the library only reports to it."""

from __future__ import annotations

from typing import Any

from tinyhw.cli.app import App
from tinyhw.progress import Progress


class ProgressBar(Progress):
    """A rich progress bar (bytes, rate, ETA) on stderr, only when stderr is a terminal and not -q."""

    def __init__(self, app: App) -> None:
        self.app = app
        self._bar: Any = None
        self._task: Any = None

    def start(self, label: str, total: int) -> None:
        """Show a bar for ``label`` with ``total`` bytes, only when stderr is a terminal and not ``-q``."""
        if self.app.quiet or not self.app.err.is_terminal:
            return
        from rich.progress import BarColumn, DownloadColumn, TextColumn, TimeRemainingColumn, TransferSpeedColumn
        from rich.progress import Progress as RichProgress

        self._bar = RichProgress(TextColumn(f"{label:<12}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                                 TimeRemainingColumn(), console=self.app.err, transient=True)
        self._bar.start()
        self._task = self._bar.add_task(label, total=total)

    def advance(self, n: int) -> None:
        """Advance the bar by ``n`` bytes (nothing when no bar is shown)."""
        if self._bar is not None:
            self._bar.advance(self._task, n)

    def stop(self) -> None:
        """Remove the bar (it is transient), if one is shown."""
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
