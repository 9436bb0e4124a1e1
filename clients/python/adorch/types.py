"""The IDL's types as dataclasses. Fields a newer daemon adds are ignored, so an older
library keeps working against it."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")


def _build(cls: type[T], data: dict[str, Any]) -> T:
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    return cls(**{k: v for k, v in data.items() if k in names})


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

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Slot:
        demand = data.get("demand")
        return _build(cls, {**data, "demand": Demand.from_json(demand) if demand else None})


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
        return _build(cls, {**data, "raw": data})


class SlotType:
    """InitInteractive's slot_type values."""
    PREROLL = "preroll"
    MIDROLL = "midroll"
