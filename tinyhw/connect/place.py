"""``labgrid:PLACE``: a board in a labgrid farm, reached through the place's tinyhw server.

The labgrid coordinator (gRPC; ``$LG_COORDINATOR``, else ``127.0.0.1:20408``, or the ``coordinator=`` option)
knows the place and its lock. Opening the device acquires the place (or uses it when this host and user
already hold it, as after ``labgrid-client acquire``), finds the one ``TinyhwRemote`` resource among its
acquired resources and opens it with the remote transport (``tinyhw.remote``): TCP with the key file the
resource names, or ``remote:ssh://`` when the resource says ``via: ssh``. Closing releases the place if
this process acquired it.

The two locks nest in one order: the place first, then the device lock the server takes for the session;
closing drops them in reverse. Neither is ever waited for: a place held by another host or user is refused
at once naming the holder, and a device held by another process of the same user is refused by the server
(both exit 3), so holding one never blocks on the other.

The labgrid package is imported here only, inside functions: nothing else in tinyhw's import graph loads it.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from tinyhw.errors import (
    BadDeviceString,
    DeviceLocked,
    DeviceNotFound,
    EnvironmentProblem,
    OperationFailed,
    TinyhwError,
    install_hint,
)
from tinyhw.transport.devstr import DeviceSpec, parse_device

DEFAULT_COORDINATOR = "127.0.0.1:20408"
#: the resource class a place must hold (tinyhw.labgrid.resources.TinyhwRemote)
REMOTE_CLASS = "TinyhwRemote"
#: seconds one conversation with the coordinator may take (connect, sync, acquire or release); the coordinator
#: itself waits up to 10 s for an exporter to confirm an acquire or release, so this is more
COORDINATOR_TIMEOUT = 30.0
INSTALL_HINT = install_hint("labgrid")


@dataclass(frozen=True)
class PlaceResource:
    """The place's ``TinyhwRemote`` resource as the coordinator lists it: its parameters and ``extra``."""

    path: str  # exporter/group/class/name
    params: dict[str, Any]
    extra: dict[str, Any]
    avail: bool


@dataclass
class Lease:
    """A place held for this process: ``ours`` when this process acquired it (and so releases it)."""

    place: str
    coordinator: str
    resource: PlaceResource
    ours: bool
    holder: str


def coordinator_address(option: str | None) -> str:
    """The coordinator to ask: the ``coordinator=`` option, else ``$LG_COORDINATOR``, else the default."""
    return option or os.environ.get("LG_COORDINATOR") or DEFAULT_COORDINATOR


def _labgrid() -> Any:
    try:
        from labgrid.remote import client
    except ImportError:
        raise EnvironmentProblem("labgrid: devices need the labgrid package, which is not installed",
                                 hint=INSTALL_HINT) from None
    return client


WORKER = "tinyhw-labgrid"


class _QuietWorker(logging.Filter):
    """Drops the records labgrid's client logs on the root logger from :data:`WORKER` threads: tinyhw says what
    went wrong in its one error line (``ERROR:root:coordinator is unavailable`` would be a second)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.threadName != WORKER


def _quiet_root_logger() -> None:
    root = logging.getLogger()
    if not any(isinstance(f, _QuietWorker) for f in root.filters):
        root.addFilter(_QuietWorker())


def _in_thread(make: Callable[[], Coroutine[Any, Any, Any]], timeout: float) -> Any:
    """Run one coroutine on a fresh event loop in its own thread (the caller may run a loop of its own)."""
    _quiet_root_logger()
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = asyncio.run(asyncio.wait_for(make(), timeout))
        except BaseException as e:  # handed to the caller's thread
            box["error"] = e

    worker = threading.Thread(target=run, name=WORKER, daemon=True)
    worker.start()
    worker.join(timeout + 5)
    if worker.is_alive():
        raise DeviceNotFound(f"the labgrid coordinator did not answer within {timeout:g} s")
    if "error" in box:
        raise box["error"]
    return box["value"]


async def _session(address: str, place: str) -> Any:
    client = _labgrid()
    session = client.ClientSession(client.proxymanager.get_grpc_address(address, default_port=20408),
                                   asyncio.get_running_loop(),
                                   args=argparse.Namespace(place=place, allow_unmatched=False, kick=False))
    try:
        await session.start()
    except asyncio.CancelledError:
        await _close(session)
        raise
    except Exception:
        await _close(session)
        raise DeviceNotFound(f"cannot reach the labgrid coordinator at {address}",
                             hint="start labgrid-coordinator, or set LG_COORDINATOR (or coordinator=HOST:PORT)") \
            from None
    return session


async def _close(session: Any) -> None:
    try:
        await session.stop()
    finally:
        await session.close()


def _holder(session: Any) -> str:
    return f"{session.gethostname()}/{session.getuser()}"


def _find_place(session: Any, name: str, address: str) -> Any:
    place = session.places.get(name)  # the exact name: labgrid's own lookup also matches substrings
    if place is None:
        known = ", ".join(sorted(session.places)) or "none"
        raise DeviceNotFound(f"no labgrid place {name!r} on the coordinator at {address} (places: {known})",
                             hint="create it: labgrid-client -p NAME create && labgrid-client -p NAME add-match ...")
    return place


def _refusal(name: str, held_by: str) -> DeviceLocked:
    return DeviceLocked(f"labgrid place {name} is acquired by {held_by}",
                        hint=f"wait until {held_by} releases it (labgrid-client -p {name} who/show)")


def _remote_resource(session: Any, place: Any) -> PlaceResource:
    found = []
    for exporter, group, cls, name in place.acquired_resources:
        if cls != REMOTE_CLASS:
            continue
        entry = session.resources.get(exporter, {}).get(group, {}).get(name)
        if entry is not None:
            found.append(PlaceResource(f"{exporter}/{group}/{cls}/{name}", dict(entry.args), dict(entry.extra),
                                       bool(entry.avail)))
    if len(found) != 1:
        what = "no" if not found else f"{len(found)} ({', '.join(r.path for r in found)})"
        raise EnvironmentProblem(f"labgrid place {place.name} holds {what} {REMOTE_CLASS} resource(s); tinyhw needs "
                                 "exactly one", hint="export one TinyhwRemote per board and match it into the place")
    return found[0]


async def _acquire(address: str, name: str) -> Lease:
    from labgrid.remote.generated import labgrid_coordinator_pb2 as pb2

    session = await _session(address, name)
    try:
        me = _holder(session)
        place = _find_place(session, name, address)
        ours = False
        if place.acquired and place.acquired != me:
            raise _refusal(name, place.acquired)
        if not place.acquired:
            try:
                await session.stub.AcquirePlace(pb2.AcquirePlaceRequest(placename=name))
            except Exception as e:  # grpc's refusal: someone won the race, or a resource is held elsewhere
                detail = e.details() if hasattr(e, "details") else str(e)
                await session.sync_with_coordinator()
                held = _find_place(session, name, address).acquired
                if held and held != me:
                    raise _refusal(name, held) from None
                raise DeviceLocked(f"labgrid refused to acquire place {name}: {detail}",
                                   hint="another place may hold one of its resources (labgrid-client who)") \
                    from None
            ours = True
            await session.sync_with_coordinator()
            place = _find_place(session, name, address)
        try:
            resource = _remote_resource(session, place)
        except TinyhwError:
            if ours:
                await session.stub.ReleasePlace(pb2.ReleasePlaceRequest(placename=name))
            raise
        return Lease(name, address, resource, ours, me)
    finally:
        await _close(session)


async def _release(lease: Lease) -> None:
    from labgrid.remote.generated import labgrid_coordinator_pb2 as pb2

    session = await _session(lease.coordinator, lease.place)
    try:
        place = _find_place(session, lease.place, lease.coordinator)
        if place.acquired == lease.holder:
            await session.stub.ReleasePlace(pb2.ReleasePlaceRequest(placename=lease.place))
            await session.sync_with_coordinator()
    finally:
        await _close(session)


def acquire(place: str, coordinator: str | None = None, timeout: float = COORDINATOR_TIMEOUT) -> Lease:
    """Acquire ``place`` (or take it as held when this host and user hold it already) and find its resource."""
    address = coordinator_address(coordinator)
    _labgrid()
    try:
        return _in_thread(lambda: _acquire(address, place), timeout)
    except TimeoutError:
        raise DeviceNotFound(f"the labgrid coordinator at {address} did not answer within {timeout:g} s",
                             hint="check that labgrid-coordinator runs there (LG_COORDINATOR)") from None


def release(lease: Lease, timeout: float = COORDINATOR_TIMEOUT) -> None:
    """Release the place if this process acquired it; one that was held before is left held."""
    if not lease.ours:
        return
    try:
        _in_thread(lambda: _release(lease), timeout)
    except TinyhwError as e:
        raise OperationFailed(f"could not release labgrid place {lease.place}: {e.message}",
                              hint=f"release it by hand: labgrid-client -p {lease.place} release") from None
    except TimeoutError:
        raise OperationFailed(f"could not release labgrid place {lease.place}: the coordinator did not answer",
                              hint=f"release it by hand: labgrid-client -p {lease.place} release") from None


MAX_PARAM = 1024   # characters of one text parameter of a resource


def _text_param(resource: PlaceResource, name: str, default: str = "") -> str:
    """Parameter ``name`` of the resource: a short string (or unset: ``default``); anything else exit 3."""
    v = resource.params.get(name)
    if v is None or v == "":
        return default
    if not isinstance(v, str):
        kind = type(v).__name__
        raise EnvironmentProblem(f"labgrid resource {resource.path} has {name}: {'an' if kind[0] in 'aeiou' else 'a'} "
                                 f"{kind}, not a string",
                                 hint="fix the exporter's configuration")
    if len(v) > MAX_PARAM or not v.isprintable():
        raise EnvironmentProblem(f"labgrid resource {resource.path} has a {name} that is not a short printable "
                                 "string", hint="fix the exporter's configuration")
    return v


def remote_spec(resource: PlaceResource) -> DeviceSpec:
    """The ``remote:`` device the resource names: TCP ``HOST:PORT`` with ``key=`` (forwarded over ssh when the
    exporter is isolated or ``$LG_PROXY`` is set), or ``ssh://[user@]host/DEVICE`` for ``via: ssh``; a parameter of
    the wrong type is an environment problem (exit 3) naming it."""
    params = resource.params
    via = _text_param(resource, "via", "tcp")
    host = _text_param(resource, "host")
    if not host:
        raise EnvironmentProblem(f"labgrid resource {resource.path} names no host")
    if via == "ssh":
        device = _text_param(resource, "device")
        if not device:
            raise EnvironmentProblem(f"labgrid resource {resource.path} has via: ssh but names no device")
        user = _text_param(resource, "ssh_user")
        try:  # the options after commas belong to the device there, as in any remote:ssh:// string
            return parse_device(f"remote:ssh://{user + '@' if user else ''}{host}/{device}")
        except BadDeviceString as e:
            raise EnvironmentProblem(f"labgrid resource {resource.path} names a bad ssh device: {e.message}") \
                from None
    if via != "tcp":
        raise EnvironmentProblem(f"labgrid resource {resource.path} has via: {via} (tcp or ssh)")
    port = params.get("port")
    if type(port) is not int or not 0 < port < 65536:
        kind = type(port).__name__
        shown = repr(port) if type(port) is int and port.bit_length() <= 64 else \
            f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}"
        raise EnvironmentProblem(f"labgrid resource {resource.path} has no valid port ({shown})")
    proxy = resource.extra.get("proxy") if resource.extra.get("proxy_required") else os.environ.get("LG_PROXY")
    if proxy:
        from labgrid.util.ssh import sshmanager

        port, host = sshmanager.request_forward(proxy, host, port), "localhost"
    options: dict[str, str | bool] = {}
    key_file = _text_param(resource, "key_file")
    if key_file:
        options["key"] = key_file
    target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return DeviceSpec("remote", target, options, f"remote:{target}")

