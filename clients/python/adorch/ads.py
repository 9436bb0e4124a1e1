"""The SDK-like layer over adorch.Client: RewardedAd (and InterstitialAd, FullscreenAd), ShownAd,
BannerAd, SplashAd, NativeAdLoader and InteractiveSession.

Listeners run on the thread that waits (wait_reward, wait_for, pump), as the events are read."""
from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Any

from . import _api as api
from .client import Client, EventStream
from .errors import Timeout
from .types import Ad, Event, Reward, RewardModel


def _left(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise Timeout("the wait timed out")
    return left


class PreloadedAd:
    """An ad format the daemon keeps preloaded in a slot (rewarded, interstitial, fullscreen)."""

    def __init__(self, client: Client, slot: str) -> None:
        self.client = client
        self.slot = slot

    def is_ready(self) -> bool:
        """The slot has a valid ad ready now (SlotNotFound if there is no such slot)."""
        return api.is_ready(self.client.list_slots(), self.slot)

    def load(self, timeout: float = 30.0) -> None:
        """Returns once the slot has a valid ad ready (at once if it has); Timeout otherwise,
        SlotNotFound if there is no such slot."""
        deadline = time.monotonic() + timeout
        # Subscribed before looking, so an ad loaded in between is heard.
        with self.client.subscribe([self.slot]) as events:
            if self.is_ready():
                return
            try:
                while True:
                    event = events.next(_left(deadline))
                    if event.kind == "ad_loaded" and event.slot == self.slot:
                        return
            except Timeout:
                raise Timeout(f"no ad ready in slot {self.slot} within {timeout} s") from None

    def show(self, user_id: str | None = None, reward: RewardModel | None = None) -> ShownAd:
        """Takes the slot's best ad and has it presented (a rewarded slot needs a user_id)."""
        # Subscribed before the Show, so none of the ad's events is missed.
        events = self.client.subscribe([self.slot])
        try:
            ad = self.client.show(self.slot, user_id, reward)
        except BaseException:
            events.close()
            raise
        return ShownAd(self.client, ad, events, user_id)


class RewardedAd(PreloadedAd):
    pass


class InterstitialAd(PreloadedAd):
    pass


class FullscreenAd(PreloadedAd):
    pass


Listener = Callable[[Event], None]


class ShownAd:
    """An ad handed to this app: its fields, reports, listeners and its reward.

    Rewards are ledger first: this never acknowledges one; call reward.ack (or
    client.ack_reward) once the user has been credited."""

    def __init__(self, client: Client, ad: Ad, events: EventStream | None = None, user_id: str | None = None) -> None:
        self.client = client
        self.ad = ad
        self.id, self.slot, self.network, self.format = ad.id, ad.slot, ad.network, ad.format
        self.payload, self.expires_at, self.price = ad.payload, ad.expires_at, ad.price
        self.user_id = user_id
        self._events = events
        self._listeners: dict[str, list[Listener]] = {}
        self._heard: set[str] = set()
        self.reward: BoundReward | None = None

    def close_events(self) -> None:
        """Stops listening (the ad's subscription); reports go on working."""
        if self._events is not None:
            self._events.close()
            self._events = None

    def __enter__(self) -> ShownAd:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.close_events()

    def report(self, event: str) -> None:
        self.client.report(self.id, event)

    def impression(self) -> None:
        self.report("impression")

    def click(self) -> None:
        self.report("click")

    def close(self) -> None:
        """Reports close: the ad ends."""
        self.report("close")

    def complete(self) -> None:
        self.report("complete")

    def skip(self) -> None:
        self.report("skip")

    def on(self, listener: str, callback: Listener) -> None:
        """Calls callback(event) for each impression, click, close, reward or failed_to_display of this ad."""
        if listener not in api.LISTENERS.values():
            raise ValueError(f"no listener {listener!r}; there are {sorted(api.LISTENERS.values())}")
        self._listeners.setdefault(listener, []).append(callback)

    def on_impression(self, callback: Listener) -> None:
        self.on("impression", callback)

    def on_click(self, callback: Listener) -> None:
        self.on("click", callback)

    def on_close(self, callback: Listener) -> None:
        self.on("close", callback)

    def on_reward(self, callback: Listener) -> None:
        self.on("reward", callback)

    def on_failed_to_display(self, callback: Listener) -> None:
        self.on("failed_to_display", callback)

    def _stream(self) -> EventStream:
        if self._events is None:
            self._events = self.client.subscribe([self.slot])
        return self._events

    def _dispatch(self, event: Event) -> str | None:
        listener = api.listener_of(event, self.id)
        if listener is None:
            return None
        if listener == "reward":
            # Once: a new subscription (or the ledger, in wait_reward) delivers it again.
            if self.reward is not None or (reward := event.reward) is None:
                return None
            self.reward = BoundReward(self.client, reward)
        self._heard.add(listener)
        for callback in self._listeners.get(listener, []):
            callback(event)
        return listener

    def pump(self, timeout: float) -> None:
        """Reads this ad's events for timeout seconds, calling the listeners."""
        deadline = time.monotonic() + timeout
        try:
            while True:
                self._dispatch(self._stream().next(_left(deadline)))
        except Timeout:
            return

    def wait_for(self, listener: str, timeout: float = 30.0) -> None:
        """Reads events, calling the listeners, until one for `listener` was heard (maybe before)."""
        deadline = time.monotonic() + timeout
        while listener not in self._heard:
            self._dispatch(self._stream().next(_left(deadline)))

    def wait_reward(self, timeout: float = 30.0) -> BoundReward:
        """This ad's reward: from its reward_granted event, or from the ledger if it was granted
        before this listened (or before this read its event). Its reward listeners run here,
        once, either way."""
        if self.reward is None and (granted := next(self._ledger(), None)) is not None:
            # The events that came before it first, so the listeners hear them in order.
            try:
                while self.reward is None:
                    self._dispatch(self._stream().next(0))
            except Timeout:
                self._dispatch(api.reward_event(granted))
        self.wait_for("reward", timeout)
        assert self.reward is not None
        return self.reward

    def _ledger(self) -> Iterator[Reward]:
        after: str | None = None
        while True:
            page = self.client.list_rewards(user_id=self.user_id, after=after)
            yield from (r for r in page.rewards if r.ad_id == self.id)
            if not page.more or not page.rewards:
                return
            after = page.rewards[-1].trans_id


class BoundReward:
    """A Reward with ack(): call it once the app has credited the user."""

    def __init__(self, client: Client, reward: Reward) -> None:
        self.client = client
        self.reward = reward

    def __getattr__(self, name: str) -> Any:
        return getattr(self.reward, name)

    def __repr__(self) -> str:
        return f"BoundReward({self.reward!r})"

    def ack(self) -> None:
        self.client.ack_reward(self.reward.trans_id)


class BannerAd:
    def __init__(self, client: Client, slot: str) -> None:
        self.client = client
        self.slot = slot

    def load(self, width: int | None = None, height: int | None = None, timeout_ms: int | None = None,
             targeting: dict[str, Any] | None = None) -> ShownAd:
        ad = self.client.load(self.slot, width=width, height=height, timeout_ms=timeout_ms, targeting=targeting)[0]
        return ShownAd(self.client, ad)


class SplashAd:
    def __init__(self, client: Client, slot: str) -> None:
        self.client = client
        self.slot = slot

    def load(self, timeout_ms: int | None = None, targeting: dict[str, Any] | None = None) -> ShownAd:
        return ShownAd(self.client, self.client.load(self.slot, timeout_ms=timeout_ms, targeting=targeting)[0])


class NativeAdLoader:
    def __init__(self, client: Client, slot: str) -> None:
        self.client = client
        self.slot = slot

    def load(self, count: int | None = None, timeout_ms: int | None = None,
             targeting: dict[str, Any] | None = None) -> list[ShownAd]:
        """1 to 10 native ads (count: default the slot's; 3 recommended)."""
        ads = self.client.load(self.slot, count=count, timeout_ms=timeout_ms, targeting=targeting)
        return [ShownAd(self.client, ad) for ad in ads]


class InteractiveSession:
    """A session of an interactive slot: created (InitInteractive) at once, so it fetches
    before the break; start() at the break; events() until its terminal one."""

    def __init__(self, client: Client, slot: str, creative_url: str, ad_parameters: dict[str, Any],
                 slot_type: str = "midroll") -> None:
        self.client = client
        self.slot = slot
        # Subscribed first: the session's events start as soon as it exists.
        self._events: EventStream | None = client.subscribe([slot])
        try:
            self.id = client.init_interactive(slot, creative_url, ad_parameters, slot_type)
        except BaseException:
            self.close_events()
            raise
        self.ended: Event | None = None

    def close_events(self) -> None:
        if self._events is not None:
            self._events.close()
            self._events = None

    def __enter__(self) -> InteractiveSession:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.close_events()

    def start(self) -> None:
        self.client.start(self.id)

    def pause(self) -> None:
        self.client.pause(self.id)

    def resume(self) -> None:
        self.client.resume(self.id)

    def stop(self) -> None:
        self.client.stop(self.id)

    def events(self, timeout: float = 60.0) -> Iterator[Event]:
        """The session's events, through its terminal one (completed, no_ads_available, error, stopped)."""
        deadline = time.monotonic() + timeout
        while self.ended is None and self._events is not None:
            event = self._events.next(_left(deadline))
            terminal = api.ended_session(event, self.id)
            if terminal is None:
                continue
            if terminal:
                self.ended = event
                self.close_events()
            yield event
