"""``tinyhw list``: every device reachable, read-only."""

from __future__ import annotations

import click

from tinyhw.cli.app import App


@click.command("list")
@click.pass_obj
def list_cmd(app: App) -> None:
    """List every reachable device: AMD/NVIDIA GPUs in this machine's sysfs, ASM24 USB
    bridges with the custom firmware, and the built-in emulated boards (marked emulated).
    With --device remote:..., the device that server serves instead.

    Read-only: nothing is configured or written (a remote server is asked in one session).

    \b
    Example:
      tinyhw list
      tinyhw --json list
      tinyhw --device remote:unix:/run/tinyhw.sock list
    """
    from tinyhw.connect.discover import list_devices
    from tinyhw.transport.devstr import given_device

    spec = given_device(app.device)
    if spec is not None and spec.kind != "remote" and app.device is not None:
        app.refuse_device("it lists every device here (only a remote: --device is listed through)")
    rows = list_devices(device=spec if spec is not None and spec.kind == "remote" else None)
    app.emit([r.as_dict() for r in rows], lambda: _human(app, rows))


def _human(app: App, rows) -> None:
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, pad_edge=False)
    table.add_column("device")
    table.add_column("kind")
    table.add_column("description")
    for r in rows:
        table.add_row(Text(r.device), r.kind + (" (emulated)" if r.emulated else ""), Text(r.description))
    app.out.print(table)
