"""The IDL's types as dataclasses. Fields a newer daemon adds are ignored, so an older
library keeps working against it."""
from __future__ import annotations

import dataclasses
import functools
import types
import typing
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .errors import ProtocolError

T = TypeVar("T")


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _conforms(value: Any, hint: Any) -> bool:
    """Whether a JSON value is of a field's declared type (int is not bool; a float may be integral)."""
    origin, arguments = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return True
    if origin in (types.UnionType, typing.Union):
        return any(_conforms(value, option) for option in arguments)
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if origin is list:
        return isinstance(value, list) and all(_conforms(item, arguments[0]) for item in value)
    return isinstance(value, origin or hint)


def _nested(hint: Any) -> type | None:
    """The dataclass a field holds (Slot.demand), if it holds one."""
    options = typing.get_args(hint) if typing.get_origin(hint) in (types.UnionType, typing.Union) else (hint,)
    return next((option for option in options if isinstance(option, type) and dataclasses.is_dataclass(option)), None)


def _build(cls: type[T], data: Any) -> T:
    """An IDL type from its JSON, fields a newer daemon adds left out; ProtocolError if it is
    not an object, lacks a field the IDL requires or has one of another type."""
    if not isinstance(data, dict):
        raise ProtocolError(f"a {cls.__name__} is a JSON object, not {data!r:.80}")
    values: dict[str, Any] = {}
    hints = _hints(typing.cast(type, cls))
    for declared in dataclasses.fields(cls):  # type: ignore[arg-type]
        if declared.name not in data:
            if declared.default is dataclasses.MISSING and declared.default_factory is dataclasses.MISSING:
                raise ProtocolError(f"a {cls.__name__} without its {declared.name}: {data!r:.200}")
            continue
        value, hint = data[declared.name], hints[declared.name]
        nested = _nested(hint)
        if nested is not None and isinstance(value, dict):
            value = _build(nested, value)
        elif not _conforms(value, hint):
            raise ProtocolError(f"a {cls.__name__}'s {declared.name} is {value!r:.80}, not of type {hint}")
        values[declared.name] = value
    return cls(**values)


@dataclass(frozen=True)
class Demand:
    per_minute: float = 0.0
    long_per_minute: float = 0.0
    short_per_minute: float = 0.0
    refill_s: float = 0.0
    ad_lifetime_s: float = 0.0
    reason: str = ""

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Demand:
        return _build(cls, data)


@dataclass(frozen=True)
class CapHold:
    """A frequency rule that holds a slot for a user (Slot.capped, docs/caps.md)."""
    #: Its name, e.g. "pacing 30s per user", "sim: 1 per 1d per user".
    rule: str
    #: cap or pacing
    kind: str
    retry_after_ms: int
    #: RFC 3339: when a Show is let in, if no other ad is shown before.
    until: str
    #: For a network's rule: its plugin.
    network: str | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CapHold:
        return _build(cls, data)


@dataclass(frozen=True)
class Slot:
    id: str
    format: str
    buffer: int = 0
    buffer_min: int = 0
    buffer_max: int = 0
    ready: int = 0
    loading: int = 0
    demand: Demand | None = None
    unservable: str | None = None
    #: The rule that would answer a Show for list_slots' user_id Capped, and until when; None
    #: when the Show is let in.
    capped: CapHold | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Slot:
        return _build(cls, data)


@dataclass(frozen=True)
class Ad:
    """An ad handed to the app: pass `id` to Report."""
    id: str
    slot: str
    network: str
    format: str
    payload: dict[str, Any] = field(default_factory=dict)
    expires_at: str = ""
    price: float = 0.0

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Ad:
        return _build(cls, data)


@dataclass(frozen=True)
class Reward:
    """A reward in the ledger. Apps dedupe by trans_id: an unacknowledged reward is delivered
    again (on every new subscription) until someone acks it."""
    trans_id: str
    ad_id: str
    user_id: str
    slot: str
    network: str
    reward_name: str
    reward_amount: int
    extra: str = ""
    granted_at: str = ""
    acknowledged: bool = False

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Reward:
        return _build(cls, data)


@dataclass(frozen=True)
class RewardModel:
    """What the viewer earns, overriding the slot's for one Show."""
    name: str | None = None
    amount: int | None = None
    extra: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}


@dataclass(frozen=True)
class Privacy:
    """A viewer's privacy signals, as the app says them (docs/privacy.md, "Setting a viewer's
    state"); None leaves a field out. The daemon decodes each string and refuses one that does
    not decode (InvalidParameter naming it, e.g. privacy.tc_string)."""
    #: Whether the GDPR applies to the viewer; None: unknown.
    gdpr_applies: bool | None = None
    #: A TCF v2 TC string.
    tc_string: str | None = None
    #: A GPP string, and the ids of its sections that apply (OpenRTB's gpp_sid; only with gpp).
    gpp: str | None = None
    gpp_sid: list[int] | None = None
    #: A US Privacy string, e.g. "1YNN".
    us_privacy: str | None = None
    #: The app is directed to children (COPPA), or says this viewer is a child.
    child_directed: bool | None = None
    under_age_of_consent: bool | None = None
    #: Limited ad tracking, or the app's own choice of non-personalised ads.
    non_personalized: bool | None = None
    #: G, PG, T or MA: the highest content rating of ads for the viewer.
    max_content_rating: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Privacy:
        return _build(cls, data)


@dataclass(frozen=True)
class AppliedPrivacy:
    """GetPrivacy's answer: what applies to the app's calls for a user id, and whence: "user"
    (the record for that user id), "app" (the app's own) or "none" (the daemon's default)."""
    privacy: Privacy | None
    source: str


@dataclass(frozen=True)
class Event:
    kind: str
    time: str = ""
    slot: str | None = None
    ad_id: str | None = None
    network: str | None = None
    error: str | None = None
    network_code: int | None = None
    message: str | None = None
    viewer_event: str | None = None
    user_id: str | None = None
    name: str | None = None
    detail: dict[str, Any] | None = None
    session_id: str | None = None
    terminal: bool | None = None
    ad_free_pod: bool | None = None
    rewards_waiting: int | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Event:
        return _build(cls, data)

    @property
    def reward(self) -> Reward | None:
        """For reward_granted: the ledger's row, which the event carries as its detail."""
        if self.kind != "reward_granted" or not self.detail:
            return None
        return Reward.from_json(self.detail)


@dataclass(frozen=True)
class Rewards:
    """A page of ListRewards: `more` says others follow (call again with after=rewards[-1].trans_id)."""
    rewards: list[Reward]
    more: bool


@dataclass(frozen=True)
class CapRule:
    """Manager.GetCaps: one frequency rule of a slot or of one of its networks, and what it
    counts now for the user asked about."""
    #: As Capped names it, e.g. "3 per 1h per user", "sim: pacing 30s per slot".
    rule: str
    #: cap or pacing
    kind: str
    #: user or slot
    scope: str
    #: At most `impressions` ads in any window of `window_ms`.
    impressions: int
    window_ms: int
    #: Impressions the rule counts for the user (or the slot) now.
    counted: int
    #: For a network's rule: its plugin and ad unit.
    network: str | None = None
    ad_unit_id: str | None = None
    #: Set when the rule holds a Show now: one after this many milliseconds is let in.
    retry_after_ms: int | None = None
    #: RFC 3339: the same moment.
    until: str | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CapRule:
        return _build(cls, data)


@dataclass(frozen=True)
class Status:
    """Manager.GetStatus: the top-level fields typed, everything else in `raw`."""
    version: str
    pid: int
    uptime_s: float
    socket: str
    config: str
    subscribers: int
    raw: dict[str, Any]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Status:
        return _build(cls, {**data, "raw": data} if isinstance(data, dict) else data)


class SlotType:
    """InitInteractive's slot_type values."""
    PREROLL = "preroll"
    MIDROLL = "midroll"
