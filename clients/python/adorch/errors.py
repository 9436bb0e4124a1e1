"""Exceptions: one per error of the IDLs (io.adorch.Ads, io.adorch.Manager), the connection-level
and org.varlink.service errors the daemon answers with, and the client's own connection errors."""
from __future__ import annotations

from typing import Any, ClassVar, Generic, TypeVar, overload


V = TypeVar("V")


class Field(Generic[V]):
    """An IDL field of an error, read from the reply's parameters (`default` when it has none).
    The error classes declare their fields with it, so str() and the checks of a reply's field
    types know them."""

    def __init__(self, kind: type[V], default: V) -> None:
        self.kind = kind
        self.default = default
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, error: None, owner: type) -> Field[V]: ...
    @overload
    def __get__(self, error: AdorchError, owner: type) -> V: ...
    def __get__(self, error: AdorchError | None, owner: type) -> Field[V] | V:
        if error is None:
            return self
        value: V = error.parameters.get(self.name, self.default)
        return value

    def conforms(self, value: Any) -> bool:
        return isinstance(value, self.kind) and not (isinstance(value, bool) and self.kind is int)


def fields_of(cls: type[AdorchError]) -> dict[str, Field[Any]]:
    """The IDL fields a class declares, by name (message, which every error has, aside)."""
    return {name: value for klass in reversed(cls.__mro__) for name, value in vars(klass).items()
            if isinstance(value, Field)}


class AdorchError(Exception):
    """An error reply of the daemon: `name` is its qualified name (io.adorch.Ads.NoAdReady),
    `message` its message (empty if it has none), `parameters` the reply's parameters; the
    IDL's fields are attributes (RateLimited.retry_after_ms, LoadFailed.error, ...)."""

    #: The unqualified IDL name this class stands for; the base class stands for any other name.
    idl_error: ClassVar[str] = ""

    def __init__(self, name: str, parameters: dict[str, Any] | None = None) -> None:
        self.name = name
        self.parameters: dict[str, Any] = dict(parameters or {})
        message = self.parameters.get("message", "")
        self.message: str = message if isinstance(message, str) else str(message)
        given = ", ".join(f"{field}={self.parameters[field]!r}" for field in fields_of(type(self))
                          if field in self.parameters and field != "attempts")
        super().__init__(f"{name}: {self.message}" if self.message else f"{name} ({given})" if given else name)


class ConnectionFailure(AdorchError):
    """Base of the client's own errors (no error reply of the daemon behind them)."""

    def __init__(self, message: str) -> None:
        super().__init__(f"adorch.{type(self).__name__}", {"message": message})


class CannotConnect(ConnectionFailure):
    """The socket could not be connected to (within the reconnect time, when reconnecting)."""


class ConnectionLost(ConnectionFailure):
    """The connection broke after a call that may have taken effect (Show, Load, Report,
    AckReward, session calls) was sent: it is not retried, since it might run twice."""


class Timeout(ConnectionFailure):
    """No reply (or event) within the timeout."""


class ProtocolError(ConnectionFailure):
    """The daemon sent something that is not what the IDL says (not JSON, a field missing or
    of the wrong type, a reply while no call was out): the connection is dropped."""


class Closed(ConnectionFailure):
    """The app closed the client or the event stream (maybe from another thread) before or
    during this call; a closed one stays closed."""


# io.adorch.Ads and io.adorch.Manager errors. SlotNotFound, LedgerFailed and PermissionDenied
# are in both interfaces with the same fields, so one class stands for both qualified names.

class NoAdReady(AdorchError):
    idl_error = "NoAdReady"
    slot = Field(str, "")


class SlotNotFound(AdorchError):
    idl_error = "SlotNotFound"
    slot = Field(str, "")


class AdNotValid(AdorchError):
    idl_error = "AdNotValid"
    ad_id = Field(str, "")


class SessionNotFound(AdorchError):
    idl_error = "SessionNotFound"
    session_id = Field(str, "")


class LoadFailed(AdorchError):
    """A Load ended without ads; `attempts` are the waterfall's tries (network, ad_unit_id, error)."""
    idl_error = "LoadFailed"
    slot = Field(str, "")
    #: The host error code of the last attempt (no_fill, timeout, ...).
    error = Field(str, "")
    #: The waterfall's tries: each {network, ad_unit_id, error}.
    attempts: Field[list[Any]] = Field(list, [])


class InvalidParameter(AdorchError):
    """io.adorch.Ads.InvalidParameter (and org.varlink.service.InvalidParameter: see VarlinkInvalidParameter)."""
    idl_error = "InvalidParameter"
    parameter = Field(str, "")


class RewardNotFound(AdorchError):
    idl_error = "RewardNotFound"
    trans_id = Field(str, "")


class LedgerFailed(AdorchError):
    idl_error = "LedgerFailed"


class ShuttingDown(AdorchError):
    idl_error = "ShuttingDown"


class RateLimited(AdorchError):
    idl_error = "RateLimited"
    retry_after_ms = Field(int, 0)


class Capped(AdorchError):
    """A frequency rule of the slot holds this Show (docs/caps.md); nothing changed. A Show
    after retry_after_ms is let in, if no other ad is shown to the user meanwhile."""
    idl_error = "Capped"
    slot = Field(str, "")
    #: The rule's name, e.g. "pacing 30s per user".
    rule = Field(str, "")
    retry_after_ms = Field(int, 0)


class TooManyOpenAds(AdorchError):
    idl_error = "TooManyOpenAds"
    budget = Field(str, "")
    limit = Field(int, 0)
    open = Field(int, 0)
    loading = Field(int, 0)


class TooManySessions(AdorchError):
    idl_error = "TooManySessions"
    budget = Field(str, "")
    limit = Field(int, 0)
    live = Field(int, 0)


class TooManyPrivacyRecords(AdorchError):
    """The app keeps `limit` privacy records ([limits] max_privacy_records_per_uid): clear one first."""
    idl_error = "TooManyPrivacyRecords"
    limit = Field(int, 0)


class PrivacyNotStored(AdorchError):
    """The daemon could not write the privacy record (a full disk): nothing changed."""
    idl_error = "PrivacyNotStored"


class PermissionDenied(AdorchError):
    idl_error = "PermissionDenied"
    method = Field(str, "")
    uid = Field(int, -1)


class NoRewardKey(AdorchError):
    idl_error = "NoRewardKey"


class ReloadFailed(AdorchError):
    idl_error = "ReloadFailed"


# Connection-level errors of the daemon (the connection is closed after them).

class TooManyConnections(AdorchError):
    idl_error = "TooManyConnections"


class TooManyPendingBytes(AdorchError):
    idl_error = "TooManyPendingBytes"


class ReaderTooSlow(AdorchError):
    idl_error = "ReaderTooSlow"


class IncompleteMessage(AdorchError):
    idl_error = "IncompleteMessage"


# org.varlink.service errors, which every Varlink service speaks.

class InterfaceNotFound(AdorchError):
    idl_error = "InterfaceNotFound"
    interface = Field(str, "")


class MethodNotFound(AdorchError):
    idl_error = "MethodNotFound"
    method = Field(str, "")


class MethodNotImplemented(AdorchError):
    idl_error = "MethodNotImplemented"
    method = Field(str, "")


class VarlinkInvalidParameter(InvalidParameter):
    """org.varlink.service.InvalidParameter: a parameter the method does not have, or of a wrong type."""


class ExpectedMore(AdorchError):
    idl_error = "ExpectedMore"


class VarlinkPermissionDenied(AdorchError):
    """org.varlink.service.PermissionDenied, which has no fields (unlike io.adorch.Ads's)."""
    idl_error = "PermissionDenied"


_ADS = "io.adorch.Ads."
_MANAGER = "io.adorch.Manager."
_CONNECTION = "io.adorch."
_VARLINK = "org.varlink.service."

#: The daemon's refusals of a whole connection: it closes the connection after them.
CONNECTION_REFUSALS: frozenset[str] = frozenset(
    _CONNECTION + c.idl_error for c in (TooManyConnections, TooManyPendingBytes, ReaderTooSlow, IncompleteMessage))

#: Every qualified error name the daemon may answer with, and its class.
ERRORS: dict[str, type[AdorchError]] = {
    **{_ADS + c.idl_error: c for c in (NoAdReady, SlotNotFound, AdNotValid, SessionNotFound, LoadFailed,
                                    InvalidParameter, RewardNotFound, LedgerFailed, ShuttingDown,
                                    RateLimited, Capped, TooManyOpenAds, TooManySessions, PermissionDenied,
                                    TooManyPrivacyRecords, PrivacyNotStored)},
    **{_MANAGER + c.idl_error: c for c in (SlotNotFound, NoRewardKey, LedgerFailed, ReloadFailed, PermissionDenied)},
    **{_CONNECTION + c.idl_error: c for c in (TooManyConnections, TooManyPendingBytes, ReaderTooSlow, IncompleteMessage)},
    **{_VARLINK + c.idl_error: c for c in (InterfaceNotFound, MethodNotFound, MethodNotImplemented,
                                        VarlinkInvalidParameter, ExpectedMore, VarlinkPermissionDenied)},
}


def error_from_reply(name: str, parameters: dict[str, Any] | None) -> AdorchError:
    """The typed exception for an error reply; a name not known gives the base class (a newer
    daemon). ProtocolError if a field the IDL gives it is of another type."""
    cls = ERRORS.get(name, AdorchError)
    given = parameters or {}
    for field, declared in fields_of(cls).items():
        if field in given and not declared.conforms(given[field]):
            return ProtocolError(f"{name}: its {field} is {given[field]!r:.80}, not of type {declared.kind.__name__}")
    return cls(name, parameters)
