"""What the sync and asyncio clients share: the wire format, the socket path rule, the reconnect
policy and each IDL method as a call description (name, parameters, how to read its reply,
whether it may be retried on a fresh connection)."""
from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from .errors import AdorchError, error_from_reply
from .types import Ad, Event, Reward, RewardModel, Rewards, Slot, Status

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


def socket_path(explicit: str | None = None) -> str:
    """The daemon's socket, by adorchctl's rule (DefaultPaths.clientSocket): the argument, then
    $ADORCH_SOCKET, then this user's daemon if it is there, then the system service's."""
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
    return json.dumps(message, separators=(",", ":")).encode() + b"\0"


def decode(frame: bytes) -> dict[str, Any]:
    message = json.loads(frame)
    if not isinstance(message, dict):
        raise ValueError("a Varlink message is a JSON object")
    return message


def reply_parameters(reply: dict[str, Any]) -> dict[str, Any]:
    """The reply's parameters, or its error raised as the typed exception."""
    if "error" in reply:
        raise error_from_reply(str(reply["error"]), reply.get("parameters"))
    return dict(reply.get("parameters") or {})


class Backoff:
    """Delays between reconnect attempts, bounded by a total time; one log line per retry."""

    def __init__(self, what: str, total: float) -> None:
        self.what = what
        self.total = total
        self.spent = 0.0
        self.delay = FIRST_RETRY_DELAY
        self.attempt = 0

    def next_delay(self, error: BaseException) -> float | None:
        """How long to wait before the next attempt, or None when the time is up."""
        if self.spent + self.delay > self.total:
            return None
        self.attempt += 1
        delay = self.delay
        log.warning("adorch: %s failed (%s); retry %d in %.2f s", self.what, error, self.attempt, delay)
        self.spent += delay
        self.delay = min(self.delay * 2, MOST_RETRY_DELAY)
        return delay


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


def list_slots() -> Call[list[Slot]]:
    return Call(f"{ADS}.ListSlots", {}, lambda p: [Slot.from_json(s) for s in p.get("slots", [])], True)


def show(slot: str, user_id: str | None, reward: RewardModel | None) -> Call[Ad]:
    return Call(f"{ADS}.Show", _given(slot=slot, user_id=user_id, reward=reward.to_json() if reward else None),
                lambda p: Ad.from_json(p["ad"]), False)


def report(ad_id: str, event: str) -> Call[None]:
    return Call(f"{ADS}.Report", {"ad_id": ad_id, "event": event}, _nothing, False)


def load(slot: str, count: int | None, width: int | None, height: int | None,
         timeout_ms: int | None, targeting: dict[str, Any] | None) -> Call[list[Ad]]:
    return Call(f"{ADS}.Load", _given(slot=slot, count=count, width=width, height=height,
                                      timeout_ms=timeout_ms, targeting=targeting),
                lambda p: [Ad.from_json(a) for a in p.get("ads", [])], False,
                extra_wait=(timeout_ms or 0) / 1000)


def list_rewards(user_id: str | None, since: str | None, after: str | None, limit: int | None) -> Call[Rewards]:
    return Call(f"{ADS}.ListRewards", _given(user_id=user_id, since=since, after=after, limit=limit),
                lambda p: Rewards([Reward.from_json(r) for r in p.get("rewards", [])], bool(p.get("more", False))), True)


def ack_reward(trans_id: str) -> Call[None]:
    return Call(f"{ADS}.AckReward", {"trans_id": trans_id}, _nothing, False)


def init_interactive(slot: str, creative_url: str, ad_parameters: dict[str, Any], slot_type: str) -> Call[str]:
    return Call(f"{ADS}.InitInteractive", {"slot": slot, "creative_url": creative_url,
                                           "ad_parameters": ad_parameters, "slot_type": slot_type},
                lambda p: str(p["session_id"]), False)


def session_call(method: str, session_id: str) -> Call[None]:
    """Start, Pause, Resume or Stop."""
    return Call(f"{ADS}.{method}", {"session_id": session_id}, _nothing, False)


def list_events(slots: list[str] | None, limit: int | None) -> Call[list[Event]]:
    return Call(f"{ADS}.ListEvents", _given(slots=slots, limit=limit),
                lambda p: [Event.from_json(e) for e in p.get("events", [])], True)


def get_status() -> Call[Status]:
    return Call(f"{MANAGER}.GetStatus", {}, Status.from_json, True)


def interface_description(interface: str) -> Call[str]:
    return Call("org.varlink.service.GetInterfaceDescription", {"interface": interface},
                lambda p: str(p["description"]), True)


def subscribe(slots: list[str] | None) -> tuple[str, dict[str, Any]]:
    return f"{ADS}.Subscribe", _given(slots=slots)


def is_broken_subscription(error: AdorchError) -> bool:
    """A subscription ended by the daemon going away, to be made again on a fresh connection."""
    return error.name == f"{ADS}.ShuttingDown"


#: ShownAd's listeners, by the event name (Event.name) that calls each.
LISTENERS: dict[str, str] = {
    "impression": "impression",
    "click": "click",
    "closed": "close",
    "reward": "reward",
    "failed_to_display": "failed_to_display",
}


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
