"""The one error family of tinyhw and its exit codes (ARCHITECTURE.md, "CLI conventions").

Every layer raises a :class:`TinyhwError` subclass; transports convert their native
errors (OSError, usb.core.USBError, socket errors) into these at one choke point.
Messages are one line, lowercase, values in hex, and say what to do next.
"""

from __future__ import annotations

from typing import Any


def install_hint(extra: str | None, detail: str = "") -> str:
    """The one wording of "install what is missing": tinyhw is installed from its checkout (no package index
    serves it), so ``pip install -e '.[EXTRA]'`` run there; ``extra`` None: the package itself (a declared
    dependency is missing); ``detail`` (e.g. the pinned version) is added in parentheses."""
    what = f"the {extra} extra" if extra else "tinyhw and its dependencies"
    spec = f"'.[{extra}]'" if extra else "."
    return f"install {what} from the tinyhw checkout: pip install -e {spec}" + (f" ({detail})" if detail else "")


class TinyhwError(Exception):
    """Base of all tinyhw errors. ``exit_code`` is what the CLI exits with."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.context: dict[str, str] = {}  # where it happened (e.g. the boot step); also in the --json error

    def add_context(self, key: str, value: str, phrase: str) -> TinyhwError:
        """Say where the error happened: ``phrase`` is appended to the message and ``key: value`` goes into
        ``context`` (the CLI's --json error document carries it). The innermost context wins: a key already
        set is kept, so a step inside a step names the inner one."""
        if key not in self.context:
            self.context[key] = value
            self.message = f"{self.message} {phrase}"
        return self

    def __str__(self) -> str:
        return f"{self.message}; {self.hint}" if self.hint else self.message


class OperationFailed(TinyhwError):
    """Exit 1: the operation failed while running (timeout, disconnect, mismatch, bad chip id)."""

    exit_code = 1


class Refused(TinyhwError):
    """Exit 2: refused before touching anything because of the user's input or options."""

    exit_code = 2


class BadDeviceString(Refused):
    """A device string that does not parse."""


class EnvironmentProblem(TinyhwError):
    """Exit 3: device not found, device locked, missing permission or package."""

    exit_code = 3


class DeviceNotFound(EnvironmentProblem):
    """No device matches what the user asked for."""


class DeviceLocked(EnvironmentProblem):
    """Another process holds the device lock."""

    holder: dict[str, Any] | None = None  # what a remote client may learn: key, pid and tool of the holder


class NotAvailableYet(EnvironmentProblem):
    """A transport or feature this version of tinyhw does not deliver yet."""


class TransportError(OperationFailed):
    """A transport-level failure while talking to a device."""


class DeviceTimeout(TransportError):
    """The device did not answer (or a poll did not finish) in time."""


class Disconnected(TransportError):
    """The device went away (cable pulled, power lost, re-enumeration)."""


class LinkDown(TransportError):
    """The PCIe link behind a bridge is not trained."""


class CompletionError(TransportError):
    """A PCIe completion came back with a non-successful status (UR, CRS, CA)."""

    def __init__(self, message: str, *, status: int, address: int | None = None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.status = status
        self.address = address


class StrictEmulationError(OperationFailed):
    """An emulated board was accessed where its model does not cover the register."""


class Interrupted(TinyhwError):
    """Ctrl-C: exit 130."""

    exit_code = 130
