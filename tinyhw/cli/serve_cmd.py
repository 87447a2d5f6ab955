"""``tinyhw serve remote|serprog|keygen``: serve a device to ``remote:`` clients or to flashrom.

Front end of :mod:`tinyhw.serve`: parses options, prints where it listens (one JSON document with
--json, so scripts can use port 0), and runs until Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from pathlib import Path
from typing import Any

import click

from tinyhw.cli.app import App
from tinyhw.errors import Refused


@click.group()
def serve() -> None:
    """Serve a device to other programs: remote: clients, or flashrom as a serprog programmer.
    A server opens the device (with its lock) for each connection and releases it afterwards.

    \b
    Examples:
      tinyhw serve remote --device usb:0
      tinyhw --device remote:ssh://lab1/usb:0 flash info
      tinyhw serve serprog --device mock:navi31 --listen 127.0.0.1:7789
    """


def _spec(app: App) -> Any:
    from tinyhw.transport.devstr import parse_device

    text = app.device
    if not text:
        raise Refused("serve needs an explicit device (serving allows writes, so it never guesses)",
                      hint="pass --device, e.g. tinyhw serve remote --device mock:navi31")
    spec = parse_device(text)
    if spec.kind in ("remote", "labgrid"):
        raise Refused(f"serve serves a local device, not a {spec.kind}: one")
    return spec


def _run(app: App, listener: Any, what: str, extra: dict[str, Any]) -> None:
    stop = threading.Event()

    def on_term(_sig: int, _frame: object) -> None:
        stop.set()
        listener.stop(0)

    old = signal.signal(signal.SIGTERM, on_term) if threading.current_thread() is threading.main_thread() else None
    doc = {"serving": what, "address": listener.address, **extra}
    if app.json:
        sys.stdout.write(json.dumps(doc) + "\n")
        sys.stdout.flush()
    app.log(f"serving {what} on {listener.address} (ctrl-c stops)")
    try:
        listener.serve_forever()
    finally:
        if old is not None:
            signal.signal(signal.SIGTERM, old)


def _timeout(_ctx: click.Context, _param: click.Parameter, value: float) -> float:
    """--idle-timeout: a positive finite number of seconds (nan, inf, 0 and negatives are refused, exit 2)."""
    from tinyhw.serve.remote import check_timeout

    check_timeout("idle timeout", value)
    return value


@serve.command("remote")
@click.option("--socket", "socket_path", type=click.Path(dir_okay=False), help="Unix socket path "
              "(default $XDG_RUNTIME_DIR/tinyhw/remote.sock).")
@click.option("--listen", metavar="HOST:PORT", help="Listen on loopback TCP instead (a non-loopback address is "
              "refused: reach other machines over ssh); clients must hold the key.")
@click.option("--stdio", is_flag=True, help="Serve one client on stdin/stdout (what remote:ssh:// runs).")
@click.option("--key", "key", type=click.Path(dir_okay=False), help="Secret for TCP clients (default "
              "$TINYHW_REMOTE_KEY or ${XDG_CONFIG_HOME:-~/.config}/tinyhw/remote.key).")
@click.option("--idle-timeout", default=600.0, show_default=True, callback=_timeout,
              help="Close a connection idle this long (s, more than 0, at most a day).")
@click.option("--audit", "audit_path", metavar="FILE", help="Audit log (- for stderr; default stderr, or "
              "~/.local/state/tinyhw/serve-audit.log with --stdio).")
@click.option("--allow-config-writes", is_flag=True, help="Let clients write any config register. By default only "
              "COMMAND's bus master and INTx disable bits may change; every other config write (BARs, capability "
              "headers, COMMAND's decode bits, PCIe device control with FLR, AER, ACS, link control, Resizable BAR) "
              "is refused.")
@click.pass_obj
def remote(app: App, socket_path: str | None, listen: str | None, stdio: bool,
           key: str | None, idle_timeout: float, audit_path: str | None, allow_config_writes: bool) -> None:
    """Serve one device to remote: clients. Each connection opens the device (with the same device lock
    as local users: a second client, or a local tinyhw, is refused while one holds it) and releases it
    on disconnect. What clients do goes through the device as if they ran tinyhw locally. The device
    is opened once at start, so a missing one is said at once (exit 3), not when a client connects.
    The audit log has a line per connection, refusal and error; -v adds one per batch that writes.

    \b
    Unix socket (default): only this user's processes may connect (peer uid checked both ways).
    TCP (--listen): loopback only; client and server each prove they hold the shared key
    (HMAC-SHA256) and every frame is authenticated. From another machine, clients use
    remote:ssh://host/DEV, which runs --stdio here (ssh authenticates and encrypts).

    \b
    Examples:
      tinyhw serve remote --device mock:navi31 &
      tinyhw --device remote:unix flash dump out.bin
      tinyhw serve keygen && tinyhw serve remote --device usb:0 --listen 127.0.0.1:7788
      tinyhw --device remote:ssh://lab1/usb:0 probe
    """
    from tinyhw.remote.secret import default_key_path, default_socket_path, load_secret
    from tinyhw.serve import audit_stream, make_listener
    from tinyhw.serve.listen import Audit
    from tinyhw.serve.remote import RemoteServer

    if stdio:
        _serve_stdio(app, audit_path, idle_timeout, allow_config_writes)
        return
    spec = _spec(app)
    if sum(bool(x) for x in (socket_path, listen, stdio)) > 1:
        raise Refused("choose one of --socket, --listen and --stdio")
    if listen:
        from tinyhw.serve.listen import check_network, parse_listen

        check_network(parse_listen(listen)[0])
    audit = Audit(audit_stream(audit_path, stdio))
    secret = load_secret(Path(key) if key else default_key_path()) if listen else None
    server = RemoteServer(spec, audit, secret=secret, idle_timeout=idle_timeout,
                          allow_config_writes=allow_config_writes, log_batches=app.verbose > 0)
    server.check_device()  # a missing device is said now (exit 3), not to the first client
    path = Path(socket_path) if socket_path else default_socket_path()
    listener = make_listener(server.handle, audit, listen=listen, socket_path=path, handshakes=True)
    _run(app, listener, str(spec), {"auth": "hmac-sha256" if listen else "peer-uid"})


def _serve_stdio(app: App, audit_path: str | None, idle_timeout: float,
                 allow_config_writes: bool) -> None:
    """One client on stdin/stdout; an error in the device string reaches the client through the protocol."""
    from tinyhw.errors import TinyhwError
    from tinyhw.serve import audit_stream, serve_stdio
    from tinyhw.serve.listen import Audit
    from tinyhw.serve.remote import RemoteServer

    audit = Audit(audit_stream(audit_path, True))
    try:
        spec = _spec(app)
        opener = None
    except TinyhwError as e:
        spec, problem = None, e

        def opener(_spec: Any) -> Any:
            raise problem
    server = RemoteServer(spec, audit, idle_timeout=idle_timeout, allow_config_writes=allow_config_writes,
                          log_batches=app.verbose > 0, **({"opener": opener} if opener else {}))
    serve_stdio(server.handle, audit)


@serve.command("serprog")
@click.option("--listen", metavar="HOST:PORT", help="Serve on loopback TCP instead, for flashrom -p "
              "serprog:ip=HOST:PORT (loopback only; only this user's uid may connect; port 0 picks a free one).")
@click.option("--pty", is_flag=True, help="Serve on a mode-0600 pseudo-terminal (the default): flashrom -p "
              "serprog:dev=PTY:115200; the device stays open while the server runs.")
@click.option("--idle-timeout", default=600.0, show_default=True, callback=_timeout,
              help="Close a connection idle this long (s, more than 0, at most a day).")
@click.option("--audit", "audit_path", metavar="FILE", help="Audit log (default stderr).")
@click.pass_obj
def serprog(app: App, listen: str | None, pty: bool, idle_timeout: float,
            audit_path: str | None) -> None:
    """A flashrom serprog programmer backed by the board's SMUIO ROM_SW engine: flashrom reads,
    writes, verifies and erases the GPU's SPI flash through it. Works on every transport (usb:,
    pci:, emulated boards). Each connection opens the device, sets the engine up, and restores it
    on disconnect. Writes happen only when flashrom asks for them (-w, -E).

    \b
    flashrom cannot authenticate, so only this user may connect: by default the server makes a
    pseudo-terminal of mode 0600; with --listen it serves loopback TCP and refuses (and audits) a
    connection from any other uid (asked of the kernel's sock_diag: the client's socket must be
    established and owned, so a closing socket names no one), or one whose uid cannot be told.
    Delays flashrom asks for (O_DELAY) are capped at 10 s each and per O_EXEC, 600 s per session.

    \b
    Examples:
      tinyhw serve serprog --device usb:0           # prints the pty: flashrom -p serprog:dev=/dev/pts/N:115200
      tinyhw serve serprog --device mock:navi31 --listen 127.0.0.1:7789 &
      flashrom -p serprog:ip=127.0.0.1:7789 -r board.bin
    """
    from tinyhw.serve import audit_stream
    from tinyhw.serve.listen import Audit
    from tinyhw.serve.serprog import SerprogServer, serprog_listener

    if pty and listen:
        raise Refused("choose one of --pty and --listen")
    spec = _spec(app)
    audit = Audit(audit_stream(audit_path or "-", False))
    server = SerprogServer(spec, audit, idle_timeout=idle_timeout)
    if not listen:
        _serve_pty(app, server, str(spec))
        return
    listener = serprog_listener(server.handle, audit, listen)
    _run(app, listener, str(spec), {"flashrom": f"flashrom -p serprog:ip={listener.address}"})


def _serve_pty(app: App, server: Any, what: str) -> None:
    from tinyhw.remote.channel import PipeChannel
    from tinyhw.serve.serprog import open_pty

    master, _slave, path = open_pty()
    doc = {"serving": what, "address": path, "flashrom": f"flashrom -p serprog:dev={path}:115200"}
    if app.json:
        sys.stdout.write(json.dumps(doc) + "\n")
        sys.stdout.flush()
    app.log(f"serving {what} on {path} (ctrl-c stops)")
    server.handle(PipeChannel(master, master, path, owns=False), "pty")


@serve.command("keygen")
@click.option("--out", "out", type=click.Path(dir_okay=False), help="Where (default $TINYHW_REMOTE_KEY or "
              "${XDG_CONFIG_HOME:-~/.config}/tinyhw/remote.key).")
@click.option("--force", is_flag=True, help="Replace an existing key.")
@click.pass_obj
def keygen(app: App, out: str | None, force: bool) -> None:
    """Create the shared secret for TCP remote clients: 32 random bytes as hex, mode 0600.
    Copy it to the client machine (same path, or pass key=FILE in the device string).

    \b
    Example:
      tinyhw serve keygen
      tinyhw --device remote:gpu-box:7788,key=/path/remote.key probe
    """
    from tinyhw.remote.secret import default_key_path, write_secret

    path = write_secret(Path(out) if out else default_key_path(), force=force)
    app.emit({"path": str(path)}, lambda: app.out.print(f"key written: {path} (mode 0600)"))
