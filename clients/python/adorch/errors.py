"""Exceptions: one per error of the IDLs (io.adorch.Ads, io.adorch.Manager), the connection-level
and org.varlink.service errors the daemon answers with, and the client's own connection errors."""
from __future__ import annotations

from typing import Any, ClassVar


class AdorchError(Exception):
    """An error reply of the daemon: `name` is its qualified name (io.adorch.Ads.NoAdReady),
    `message` its message (empty if it has none), `parameters` the reply's parameters."""

    #: The unqualified IDL name this class stands for; the base class stands for any other name.
    error: ClassVar[str] = ""

    def __init__(self, name: str, parameters: dict[str, Any] | None = None) -> None:
        self.name = name
        self.parameters: dict[str, Any] = dict(parameters or {})
        self.message: str = str(self.parameters.get("message", ""))
        super().__init__(f"{name}: {self.message}" if self.message else name)


class ConnectionFailure(AdorchError):
    """Base of the client's own connection errors (no reply of the daemon behind them)."""

    def __init__(self, message: str) -> None:
        super().__init__(f"adorch.{type(self).__name__}", {"message": message})


class CannotConnect(ConnectionFailure):
    """The socket could not be connected to (within the reconnect time, when reconnecting)."""


class ConnectionLost(ConnectionFailure):
    """The connection broke after a call that may have taken effect (Show, Load, Report,
    AckReward, session calls) was sent: it is not retried, since it might run twice."""


class Timeout(ConnectionFailure):
    """No reply (or event) within the timeout."""


# io.adorch.Ads and io.adorch.Manager errors. LedgerFailed and PermissionDenied are in both
# interfaces with the same fields, so one class stands for both qualified names.

class NoAdReady(AdorchError):
    error = "NoAdReady"

    @property
    def slot(self) -> str:
        return str(self.parameters.get("slot", ""))


class SlotNotFound(AdorchError):
    error = "SlotNotFound"

    @property
    def slot(self) -> str:
        return str(self.parameters.get("slot", ""))


class AdNotValid(AdorchError):
    error = "AdNotValid"

    @property
    def ad_id(self) -> str:
        return str(self.parameters.get("ad_id", ""))


class SessionNotFound(AdorchError):
    error = "SessionNotFound"

    @property
    def session_id(self) -> str:
        return str(self.parameters.get("session_id", ""))


class LoadFailed(AdorchError):
    """A Load ended without ads; `attempts` are the waterfall's tries (network, ad_unit_id, error)."""
    error = "LoadFailed"

    @property
    def slot(self) -> str:
        return str(self.parameters.get("slot", ""))

    @property
    def code(self) -> str:
        """The host error code of the last attempt (no_fill, timeout, ...): the IDL's `error`."""
        return str(self.parameters.get("error", ""))

    @property
    def attempts(self) -> list[dict[str, str]]:
        return list(self.parameters.get("attempts", []))


class InvalidParameter(AdorchError):
    """io.adorch.Ads.InvalidParameter (and org.varlink.service.InvalidParameter: see VarlinkInvalidParameter)."""
    error = "InvalidParameter"

    @property
    def parameter(self) -> str:
        return str(self.parameters.get("parameter", ""))


class RewardNotFound(AdorchError):
    error = "RewardNotFound"

    @property
    def trans_id(self) -> str:
        return str(self.parameters.get("trans_id", ""))


class LedgerFailed(AdorchError):
    error = "LedgerFailed"


class ShuttingDown(AdorchError):
    error = "ShuttingDown"


class RateLimited(AdorchError):
    error = "RateLimited"

    @property
    def retry_after_ms(self) -> int:
        return int(self.parameters.get("retry_after_ms", 0))


class TooManyOpenAds(AdorchError):
    error = "TooManyOpenAds"

    @property
    def budget(self) -> str:
        return str(self.parameters.get("budget", ""))

    @property
    def limit(self) -> int:
        return int(self.parameters.get("limit", 0))

    @property
    def open(self) -> int:
        return int(self.parameters.get("open", 0))

    @property
    def loading(self) -> int:
        return int(self.parameters.get("loading", 0))


class TooManySessions(AdorchError):
    error = "TooManySessions"

    @property
    def budget(self) -> str:
        return str(self.parameters.get("budget", ""))

    @property
    def limit(self) -> int:
        return int(self.parameters.get("limit", 0))

    @property
    def live(self) -> int:
        return int(self.parameters.get("live", 0))


class PermissionDenied(AdorchError):
    error = "PermissionDenied"

    @property
    def method(self) -> str:
        return str(self.parameters.get("method", ""))

    @property
    def uid(self) -> int:
        return int(self.parameters.get("uid", -1))


class NoRewardKey(AdorchError):
    error = "NoRewardKey"


class ReloadFailed(AdorchError):
    error = "ReloadFailed"


# Connection-level errors of the daemon (the connection is closed after them).

class TooManyConnections(AdorchError):
    error = "TooManyConnections"


class TooManyPendingBytes(AdorchError):
    error = "TooManyPendingBytes"


class ReaderTooSlow(AdorchError):
    error = "ReaderTooSlow"


class IncompleteMessage(AdorchError):
    error = "IncompleteMessage"


# org.varlink.service errors, which every Varlink service speaks.

class InterfaceNotFound(AdorchError):
    error = "InterfaceNotFound"


class MethodNotFound(AdorchError):
    error = "MethodNotFound"


class MethodNotImplemented(AdorchError):
    error = "MethodNotImplemented"


class VarlinkInvalidParameter(InvalidParameter):
    """org.varlink.service.InvalidParameter: a parameter the method does not have, or of a wrong type."""


class ExpectedMore(AdorchError):
    error = "ExpectedMore"


class VarlinkPermissionDenied(PermissionDenied):
    """org.varlink.service.PermissionDenied."""


_ADS = "io.adorch.Ads."
_MANAGER = "io.adorch.Manager."
_CONNECTION = "io.adorch."
_VARLINK = "org.varlink.service."

#: The daemon's refusals of a whole connection: it closes the connection after them.
CONNECTION_REFUSALS: frozenset[str] = frozenset(
    _CONNECTION + c.error for c in (TooManyConnections, TooManyPendingBytes, ReaderTooSlow, IncompleteMessage))

#: Every qualified error name the daemon may answer with, and its class.
ERRORS: dict[str, type[AdorchError]] = {
    **{_ADS + c.error: c for c in (NoAdReady, SlotNotFound, AdNotValid, SessionNotFound, LoadFailed,
                                    InvalidParameter, RewardNotFound, LedgerFailed, ShuttingDown,
                                    RateLimited, TooManyOpenAds, TooManySessions, PermissionDenied)},
    **{_MANAGER + c.error: c for c in (NoRewardKey, LedgerFailed, ReloadFailed, PermissionDenied)},
    **{_CONNECTION + c.error: c for c in (TooManyConnections, TooManyPendingBytes, ReaderTooSlow, IncompleteMessage)},
    **{_VARLINK + c.error: c for c in (InterfaceNotFound, MethodNotFound, MethodNotImplemented,
                                        VarlinkInvalidParameter, ExpectedMore, VarlinkPermissionDenied)},
}


def error_from_reply(name: str, parameters: dict[str, Any] | None) -> AdorchError:
    """The typed exception for an error reply; a name not known gives the base class (a newer daemon)."""
    return ERRORS.get(name, AdorchError)(name, parameters)
