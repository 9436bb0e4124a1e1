"""What the sync and asyncio clients share: the wire format, the socket path rule, the reconnect
policy and each IDL method as a call description (name, parameters, how to read its reply,
whether it may be retried on a fresh connection)."""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import socket as _socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from .errors import (CONNECTION_REFUSALS, AdorchError, ConnectionFailure, ProtocolError, ShuttingDown,
                     error_from_reply)
from .types import Ad, AppliedPrivacy, CapRule, Event, Privacy, Reward, RewardModel, Rewards, Slot, Status

log = logging.getLogger("adorch")

T = TypeVar("T")

ADS = "io.adorch.Ads"
MANAGER = "io.adorch.Manager"
SYSTEM_SOCKET = "/run/adorch/adorchd.sock"

#: How long a broken connection is retried by default before CannotConnect (seconds).
DEFAULT_RECONNECT_TIMEOUT = 30.0
#: The first retry's wait; each next one doubles, up to the most.
FIRST_RETRY_DELAY = 0.05
MOST_RETRY_DELAY = 2.0
#: How long a plain call waits for its reply by default (seconds); Load waits its own timeout_ms more.
DEFAULT_CALL_TIMEOUT = 30.0
#: The longest a Load may take in the daemon (LoadBounds.timeoutMilliseconds in
#: Sources/AdorchEngine/LoadBounds.swift): a Load without timeout_ms runs to its slot's
#: load_timeout_ms, which the client does not know, so it waits this much more.
MOST_LOAD_SECONDS = 60.0
#: How much one read from the socket takes at most.
READ_SIZE = 1 << 16


def socket_path(explicit: str | None = None) -> str:
    """The daemon's socket, by the rule of SocketPath.client (Sources/AdorchPaths/SocketPath.swift),
    line for line: the argument, then $ADORCH_SOCKET, then this user's daemon if it is there, then
    the system service's if that is there, else this user's. SocketPathRuleTests holds them equal."""
    if explicit:
        return explicit
    env = os.environ.get("ADORCH_SOCKET")
    if env:
        return env
    if os.geteuid() == 0:
        return SYSTEM_SOCKET
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    own = f"{runtime}/adorch/adorchd.sock" if runtime else f"/tmp/adorch-{os.getuid()}/adorchd.sock"
    if not os.path.exists(own) and os.path.exists(SYSTEM_SOCKET):
        return SYSTEM_SOCKET
    return own


def encode(method: str, parameters: dict[str, Any], more: bool = False) -> bytes:
    message: dict[str, Any] = {"method": method, "parameters": parameters}
    if more:
        message["more"] = True
    return json.dumps(message, separators=(",", ":"), allow_nan=False).encode() + b"\0"


def decode(frame: bytes) -> dict[str, Any]:
    try:
        message = json.loads(frame)
    except (ValueError, RecursionError) as error:
        raise ProtocolError(f"the daemon sent a message that is not JSON ({error}): {frame[:80]!r}") from None
    if not isinstance(message, dict):
        raise ProtocolError(f"a Varlink message is a JSON object, not {message!r:.80}")
    return message


def reply_parameters(reply: dict[str, Any]) -> dict[str, Any]:
    """The reply's parameters, or its error raised as the typed exception."""
    parameters = reply.get("parameters")
    if parameters is not None and not isinstance(parameters, dict):
        raise ProtocolError(f"a reply's parameters are an object, not {parameters!r:.80}")
    if "error" in reply:
        if not isinstance(reply["error"], str):
            raise ProtocolError(f"an error's name is a string, not {reply['error']!r:.80}")
        raise error_from_reply(reply["error"], parameters)
    return dict(parameters or {})


def continues(reply: dict[str, Any]) -> bool:
    """Whether more replies of the call follow (Subscribe's)."""
    more = reply.get("continues", False)
    if not isinstance(more, bool):
        raise ProtocolError(f"a reply's continues is a bool, not {more!r:.80}")
    return more


def event_of(parameters: dict[str, Any]) -> Event:
    """A Subscribe reply's event."""
    return Event.from_json(_required(parameters, "event"))


def keeps_connection(error: BaseException) -> bool:
    """Whether a call's connection serves the next call after this ended the call: only after a
    daemon's error reply. An interrupt (KeyboardInterrupt, an exception from a signal handler,
    a cancellation) or a timeout leaves the reply unread, to be taken for the next call's."""
    return (isinstance(error, AdorchError) and not isinstance(error, ConnectionFailure)
            and error.name not in CONNECTION_REFUSALS)


class Backoff:
    """Delays between reconnect attempts, bounded by a total time from its creation (the
    attempts' own time included); one log line per retry."""

    def __init__(self, what: str, total: float) -> None:
        self.what = what
        self.deadline = time.monotonic() + total
        self.delay = FIRST_RETRY_DELAY
        self.attempt = 0

    def next_delay(self, error: BaseException) -> float | None:
        """How long to wait before the next attempt, or None when the time is up."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            return None
        self.attempt += 1
        delay = min(self.delay, left)
        log.warning("adorch: %s failed (%s); retry %d in %.2f s", self.what, error, self.attempt, delay)
        self.delay = min(self.delay * 2, MOST_RETRY_DELAY)
        return delay


class Connection:
    """A Unix socket to the daemon and what was read from it but not yet taken as messages.
    The sync and asyncio clients add how they wait; what they read, both read here."""

    def __init__(self, sock: _socket.socket) -> None:
        self.sock = sock
        self.pending = bytearray()

    def take(self) -> dict[str, Any] | None:
        """The next whole message read, if there is one."""
        end = self.pending.find(b"\0")
        if end < 0:
            return None
        frame = bytes(self.pending[:end])
        del self.pending[:end + 1]
        return decode(frame)

    def drain(self) -> bool:
        """Reads what the socket holds, without waiting; True if the daemon closed it."""
        self.sock.setblocking(False)
        while True:
            try:
                chunk = self.sock.recv(READ_SIZE)
            except BlockingIOError:
                return False
            except OSError:
                return True
            if not chunk:
                return True
            self.pending += chunk

    def idle(self, path: str) -> bool:
        """Before a call, what the daemon said while none was out: raises the refusal it closed
        the connection with (TooManyConnections, ...), or ProtocolError for anything else (a
        stray reply); True if it closed the connection (idle, restart), to be made again."""
        closed = self.drain()
        while (message := self.take()) is not None:
            name = message.get("error")
            if name in CONNECTION_REFUSALS:
                raise error_from_reply(str(name), message.get("parameters"))
            if name == f"{ADS}.{ShuttingDown.idl_error}":
                closed = True
                continue
            raise ProtocolError(f"the daemon sent a message while no call was out: {message!r:.200}")
        if closed:
            log.warning("adorch: the daemon closed the connection to %s; reconnecting", path)
        return closed

    def refusal(self) -> AdorchError | None:
        """Why the daemon closed a connection a send found closed, if it said: TooManyConnections
        is sent at once after accepting one over a limit, before any call; a call over the
        daemon's max_message_bytes is answered org.varlink.service.InvalidParameter before the
        rest of it arrives. Either way the call had no effect, and sending it again cannot help."""
        try:
            self.drain()
            message = self.take()
        except (OSError, ProtocolError):
            return None
        if message is None or "error" not in message:
            return None
        return error_from_reply(str(message["error"]), message.get("parameters"))

    def shutdown(self) -> None:
        """Ends the connection both ways: a read waiting on it (in another thread) returns."""
        try:
            self.sock.shutdown(_socket.SHUT_RDWR)
        except OSError:
            pass

    def close(self) -> None:
        self.sock.close()


@dataclass(frozen=True)
class Call(Generic[T]):
    method: str
    parameters: dict[str, Any]
    parse: Callable[[dict[str, Any]], T]
    #: Only reads: safe to send again on a fresh connection if the first one broke.
    idempotent: bool
    #: Extra seconds to wait for the reply beyond the client's call timeout (Load's own deadline).
    extra_wait: float = 0.0


def _given(**parameters: Any) -> dict[str, Any]:
    return {k: v for k, v in parameters.items() if v is not None}


def _nothing(_: dict[str, Any]) -> None:
    return None


def _required(parameters: dict[str, Any], name: str) -> Any:
    if name not in parameters:
        raise ProtocolError(f"a reply without its {name}: {parameters!r:.200}")
    return parameters[name]


def _items(parameters: dict[str, Any], name: str) -> list[Any]:
    items = parameters.get(name, [])
    if not isinstance(items, list):
        raise ProtocolError(f"a reply's {name} is a list, not {items!r:.80}")
    return items


_KINDS = {str: "a str", int: "an int", bool: "a bool", dict: "a dict", list: "a list", RewardModel: "an adorch.RewardModel",
          Privacy: "an adorch.Privacy"}


def _check(name: str, value: Any, kind: type, *, optional: bool = True) -> None:
    """TypeError naming the parameter if value is not of kind (None: not given, if optional)."""
    if value is None and optional:
        return
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise TypeError(f"{name} must be {_KINDS[kind]}{' or None' if optional else ''}, not {type(value).__name__}")


def _check_object(name: str, value: Any, *, optional: bool = True) -> None:
    """A parameter the IDL types `object`: a dict JSON can carry (no NaN or infinity)."""
    _check(name, value, dict, optional=optional)
    try:
        json.dumps(value, allow_nan=False)
    except ValueError as error:
        raise ValueError(f"{name}: {error}") from None
    except (TypeError, RecursionError) as error:
        raise TypeError(f"{name}: {error}") from None


def _check_strings(name: str, value: Any) -> None:
    _check(name, value, list)
    for item in value or []:
        _check(f"each of {name}", item, str, optional=False)


def list_slots(user_id: str | None) -> Call[list[Slot]]:
    _check("user_id", user_id, str)
    return Call(f"{ADS}.ListSlots", _given(user_id=user_id), lambda p: [Slot.from_json(s) for s in _items(p, "slots")], True)


def _check_privacy(privacy: Privacy | None) -> dict[str, Any] | None:
    """The Privacy as the IDL's object, its fields' types checked (None: not given)."""
    _check("privacy", privacy, Privacy)
    if privacy is None:
        return None
    for name, kind in (("gdpr_applies", bool), ("tc_string", str), ("gpp", str), ("us_privacy", str), ("child_directed", bool),
                       ("under_age_of_consent", bool), ("non_personalized", bool), ("max_content_rating", str)):
        _check(f"privacy.{name}", getattr(privacy, name), kind)
    _check("privacy.gpp_sid", privacy.gpp_sid, list)
    for item in privacy.gpp_sid or []:
        _check("each of privacy.gpp_sid", item, int, optional=False)
    return privacy.to_json()


def show(slot: str, user_id: str | None, reward: RewardModel | None, privacy: Privacy | None = None) -> Call[Ad]:
    _check("slot", slot, str, optional=False)
    _check("user_id", user_id, str)
    _check("reward", reward, RewardModel)
    if reward is not None:
        for name, kind in (("name", str), ("amount", int), ("extra", str)):
            _check(f"reward.{name}", getattr(reward, name), kind)
    return Call(f"{ADS}.Show", _given(slot=slot, user_id=user_id, reward=reward.to_json() if reward else None,
                                      privacy=_check_privacy(privacy)),
                lambda p: Ad.from_json(_required(p, "ad")), False)


def report(ad_id: str, event: str) -> Call[None]:
    _check("ad_id", ad_id, str, optional=False)
    _check("event", event, str, optional=False)
    return Call(f"{ADS}.Report", {"ad_id": ad_id, "event": event}, _nothing, False)


def load(slot: str, count: int | None, width: int | None, height: int | None,
         timeout_ms: int | None, targeting: dict[str, Any] | None, privacy: Privacy | None = None) -> Call[list[Ad]]:
    _check("slot", slot, str, optional=False)
    for name, value in (("count", count), ("width", width), ("height", height), ("timeout_ms", timeout_ms)):
        _check(name, value, int)
    _check_object("targeting", targeting)
    return Call(f"{ADS}.Load", _given(slot=slot, count=count, width=width, height=height,
                                      timeout_ms=timeout_ms, targeting=targeting, privacy=_check_privacy(privacy)),
                lambda p: [Ad.from_json(a) for a in _items(p, "ads")], False,
                extra_wait=MOST_LOAD_SECONDS if timeout_ms is None else timeout_ms / 1000)


def list_rewards(user_id: str | None, since: str | None, after: str | None, limit: int | None) -> Call[Rewards]:
    for name, value in (("user_id", user_id), ("since", since), ("after", after)):
        _check(name, value, str)
    _check("limit", limit, int)

    def parse(p: dict[str, Any]) -> Rewards:
        more = p.get("more", False)
        if not isinstance(more, bool):
            raise ProtocolError(f"ListRewards' more is a bool, not {more!r:.80}")
        return Rewards([Reward.from_json(r) for r in _items(p, "rewards")], more)
    return Call(f"{ADS}.ListRewards", _given(user_id=user_id, since=since, after=after, limit=limit), parse, True)


def set_privacy(privacy: Privacy | None, user_id: str | None) -> Call[None]:
    """SetPrivacy: setting the same twice is setting it once, so it may be sent again."""
    _check("user_id", user_id, str)
    return Call(f"{ADS}.SetPrivacy", _given(user_id=user_id, privacy=_check_privacy(privacy)), _nothing, True)


def get_privacy(user_id: str | None) -> Call[AppliedPrivacy]:
    _check("user_id", user_id, str)

    def parse(p: dict[str, Any]) -> AppliedPrivacy:
        source = _required(p, "source")
        if source not in ("user", "app", "none"):
            raise ProtocolError(f"GetPrivacy's source is user, app or none, not {source!r:.80}")
        privacy = p.get("privacy")
        return AppliedPrivacy(None if privacy is None else Privacy.from_json(privacy), source)
    return Call(f"{ADS}.GetPrivacy", _given(user_id=user_id), parse, True)


def ack_reward(trans_id: str) -> Call[None]:
    _check("trans_id", trans_id, str, optional=False)
    return Call(f"{ADS}.AckReward", {"trans_id": trans_id}, _nothing, False)


def _session_id(p: dict[str, Any]) -> str:
    session_id = _required(p, "session_id")
    if not isinstance(session_id, str):
        raise ProtocolError(f"InitInteractive's session_id is a string, not {session_id!r:.80}")
    return session_id


def init_interactive(slot: str, creative_url: str, ad_parameters: dict[str, Any], slot_type: str) -> Call[str]:
    for name, value in (("slot", slot), ("creative_url", creative_url), ("slot_type", slot_type)):
        _check(name, value, str, optional=False)
    _check_object("ad_parameters", ad_parameters, optional=False)
    return Call(f"{ADS}.InitInteractive", {"slot": slot, "creative_url": creative_url,
                                           "ad_parameters": ad_parameters, "slot_type": slot_type},
                _session_id, False)


def session_call(method: str, session_id: str) -> Call[None]:
    """Start, Pause, Resume or Stop."""
    _check("session_id", session_id, str, optional=False)
    return Call(f"{ADS}.{method}", {"session_id": session_id}, _nothing, False)


def list_events(slots: list[str] | None, limit: int | None) -> Call[list[Event]]:
    _check_strings("slots", slots)
    _check("limit", limit, int)
    return Call(f"{ADS}.ListEvents", _given(slots=slots, limit=limit),
                lambda p: [Event.from_json(e) for e in _items(p, "events")], True)


def get_status() -> Call[Status]:
    return Call(f"{MANAGER}.GetStatus", {}, Status.from_json, True)


def get_caps(slot: str, user_id: str | None) -> Call[list[CapRule]]:
    _check("slot", slot, str, optional=False)
    _check("user_id", user_id, str)
    return Call(f"{MANAGER}.GetCaps", _given(slot=slot, user_id=user_id),
                lambda p: [CapRule.from_json(r) for r in _items(p, "rules")], True)


def _description(p: dict[str, Any]) -> str:
    description = _required(p, "description")
    if not isinstance(description, str):
        raise ProtocolError(f"an interface description is a string, not {description!r:.80}")
    return description


def interface_description(interface: str) -> Call[str]:
    _check("interface", interface, str, optional=False)
    return Call("org.varlink.service.GetInterfaceDescription", {"interface": interface}, _description, True)


def result(call: Call[T], reply: dict[str, Any]) -> T:
    """A call's typed result from its reply, or the reply's error raised."""
    return call.parse(reply_parameters(reply))


def subscribe(slots: list[str] | None) -> tuple[str, dict[str, Any]]:
    _check_strings("slots", slots)
    return f"{ADS}.Subscribe", _given(slots=slots)


def is_broken_subscription(error: AdorchError) -> bool:
    """A subscription ended by the daemon going away, to be made again on a fresh connection."""
    return isinstance(error, ShuttingDown)


#: ShownAd's listeners, by the event name (Event.name) that calls each.
LISTENERS: dict[str, str] = {
    "impression": "impression",
    "click": "click",
    "closed": "close",
    "reward": "reward",
    "failed_to_display": "failed_to_display",
}


def is_ready(slots: list[Slot], slot: str) -> bool:
    """Whether the slot has a valid ad ready; SlotNotFound if there is no such slot."""
    for each in slots:
        if each.id == slot:
            return each.ready > 0
    raise error_from_reply(f"{ADS}.SlotNotFound", {"slot": slot, "message": f"ListSlots has no slot {slot!r}"})


def reward_event(reward: Reward) -> Event:
    """A reward found in the ledger as the reward_granted event the daemon sends for it (as it
    redelivers one to a new subscriber), so ShownAd's reward listeners hear it either way."""
    return Event(kind="reward_granted", name="reward", time=reward.granted_at, slot=reward.slot, ad_id=reward.ad_id,
                 network=reward.network, user_id=reward.user_id, detail=dataclasses.asdict(reward),
                 message="found in the ledger")


def listener_of(event: Event, ad_id: str) -> str | None:
    """Which ShownAd listener (impression, click, close, reward, failed_to_display) an event calls."""
    if event.ad_id != ad_id or event.name is None:
        return None
    return LISTENERS.get(event.name)


def ended_session(event: Event, session_id: str) -> bool | None:
    """None: not an event of the session; else whether it is the session's terminal one."""
    if event.kind != "session_event" or event.session_id != session_id:
        return None
    return bool(event.terminal)
