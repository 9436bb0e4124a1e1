"""The SDK-like layer over adorch.AsyncClient: adorch.ads's classes, prefixed Async, with the same
methods awaited. Listeners (functions or coroutine functions) run in the task that awaits
wait_reward, wait_for or pump, as the events are read."""
from __future__ import annotations

import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from types import TracebackType
from typing import Any

from . import _api as api
from .aio import AsyncClient, AsyncEventStream
from .errors import Timeout
from .types import Ad, Event, Reward, RewardModel


def _left(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise Timeout("the wait timed out")
    return left


class AsyncPreloadedAd:
    """An ad format the daemon keeps preloaded in a slot (rewarded, interstitial, fullscreen)."""

    def __init__(self, client: AsyncClient, slot: str) -> None:
        self.client = client
        self.slot = slot

    async def is_ready(self) -> bool:
        """The slot has a valid ad ready now (SlotNotFound if there is no such slot)."""
        return api.is_ready(await self.client.list_slots(), self.slot)

    async def load(self, timeout: float = 30.0) -> None:
        """Returns once the slot has a valid ad ready (at once if it has); Timeout otherwise,
        SlotNotFound if there is no such slot."""
        deadline = time.monotonic() + timeout
        # Subscribed before looking, so an ad loaded in between is heard.
        async with await self.client.subscribe([self.slot]) as events:
            if await self.is_ready():
                return
            try:
                while True:
                    event = await events.next(_left(deadline))
                    if event.kind == "ad_loaded" and event.slot == self.slot:
                        return
            except Timeout:
                raise Timeout(f"no ad ready in slot {self.slot} within {timeout} s") from None

    async def show(self, user_id: str | None = None, reward: RewardModel | None = None) -> AsyncShownAd:
        # Subscribed before the Show, so none of the ad's events is missed.
        events = await self.client.subscribe([self.slot])
        try:
            ad = await self.client.show(self.slot, user_id, reward)
        except BaseException:
            events.close()
            raise
        return AsyncShownAd(self.client, ad, events, user_id)


class AsyncRewardedAd(AsyncPreloadedAd):
    pass


class AsyncInterstitialAd(AsyncPreloadedAd):
    pass


class AsyncFullscreenAd(AsyncPreloadedAd):
    pass


AsyncListener = Callable[[Event], "Awaitable[None] | None"]


class AsyncShownAd:
    """adorch.ShownAd for asyncio. Never acknowledges a reward: await reward.ack() once credited."""

    def __init__(self, client: AsyncClient, ad: Ad, events: AsyncEventStream | None = None,
                 user_id: str | None = None) -> None:
        self.client = client
        self.ad = ad
        self.id, self.slot, self.network, self.format = ad.id, ad.slot, ad.network, ad.format
        self.payload, self.expires_at, self.price = ad.payload, ad.expires_at, ad.price
        self.user_id = user_id
        self._events = events
        self._listeners: dict[str, list[AsyncListener]] = {}
        self._heard: set[str] = set()
        self.reward: AsyncBoundReward | None = None

    def close_events(self) -> None:
        if self._events is not None:
            self._events.close()
            self._events = None

    async def __aenter__(self) -> AsyncShownAd:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.close_events()

    async def report(self, event: str) -> None:
        await self.client.report(self.id, event)

    async def impression(self) -> None:
        await self.report("impression")

    async def click(self) -> None:
        await self.report("click")

    async def close(self) -> None:
        """Reports close: the ad ends."""
        await self.report("close")

    async def complete(self) -> None:
        await self.report("complete")

    async def skip(self) -> None:
        await self.report("skip")

    def on(self, listener: str, callback: AsyncListener) -> None:
        if listener not in api.LISTENERS.values():
            raise ValueError(f"no listener {listener!r}; there are {sorted(api.LISTENERS.values())}")
        self._listeners.setdefault(listener, []).append(callback)

    def on_impression(self, callback: AsyncListener) -> None:
        self.on("impression", callback)

    def on_click(self, callback: AsyncListener) -> None:
        self.on("click", callback)

    def on_close(self, callback: AsyncListener) -> None:
        self.on("close", callback)

    def on_reward(self, callback: AsyncListener) -> None:
        self.on("reward", callback)

    def on_failed_to_display(self, callback: AsyncListener) -> None:
        self.on("failed_to_display", callback)

    async def _stream(self) -> AsyncEventStream:
        if self._events is None:
            self._events = await self.client.subscribe([self.slot])
        return self._events

    async def _dispatch(self, event: Event) -> None:
        listener = api.listener_of(event, self.id)
        if listener is None:
            return
        if listener == "reward":
            # Once: a new subscription (or the ledger, in wait_reward) delivers it again.
            if self.reward is not None or (reward := event.reward) is None:
                return
            self.reward = AsyncBoundReward(self.client, reward)
        self._heard.add(listener)
        for callback in self._listeners.get(listener, []):
            result = callback(event)
            if inspect.isawaitable(result):
                await result

    async def pump(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        try:
            while True:
                await self._dispatch(await (await self._stream()).next(_left(deadline)))
        except Timeout:
            return

    async def wait_for(self, listener: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while listener not in self._heard:
            await self._dispatch(await (await self._stream()).next(_left(deadline)))

    async def wait_reward(self, timeout: float = 30.0) -> AsyncBoundReward:
        """As ShownAd.wait_reward: its reward listeners run here, once, event or ledger."""
        if self.reward is None and (granted := await self._ledger()) is not None:
            # The events that came before it first, so the listeners hear them in order.
            try:
                while self.reward is None:
                    await self._dispatch(await (await self._stream()).next(0))
            except Timeout:
                await self._dispatch(api.reward_event(granted))
        await self.wait_for("reward", timeout)
        assert self.reward is not None
        return self.reward

    async def _ledger(self) -> Reward | None:
        after: str | None = None
        while True:
            page = await self.client.list_rewards(user_id=self.user_id, after=after)
            for reward in page.rewards:
                if reward.ad_id == self.id:
                    return reward
            if not page.more or not page.rewards:
                return None
            after = page.rewards[-1].trans_id


class AsyncBoundReward:
    """A Reward with ack(): await it once the app has credited the user."""

    def __init__(self, client: AsyncClient, reward: Reward) -> None:
        self.client = client
        self.reward = reward

    def __getattr__(self, name: str) -> Any:
        return getattr(self.reward, name)

    def __repr__(self) -> str:
        return f"AsyncBoundReward({self.reward!r})"

    async def ack(self) -> None:
        await self.client.ack_reward(self.reward.trans_id)


class AsyncBannerAd:
    def __init__(self, client: AsyncClient, slot: str) -> None:
        self.client = client
        self.slot = slot

    async def load(self, width: int | None = None, height: int | None = None, timeout_ms: int | None = None,
                   targeting: dict[str, Any] | None = None) -> AsyncShownAd:
        ads = await self.client.load(self.slot, width=width, height=height, timeout_ms=timeout_ms, targeting=targeting)
        return AsyncShownAd(self.client, ads[0])


class AsyncSplashAd:
    def __init__(self, client: AsyncClient, slot: str) -> None:
        self.client = client
        self.slot = slot

    async def load(self, timeout_ms: int | None = None, targeting: dict[str, Any] | None = None) -> AsyncShownAd:
        ads = await self.client.load(self.slot, timeout_ms=timeout_ms, targeting=targeting)
        return AsyncShownAd(self.client, ads[0])


class AsyncNativeAdLoader:
    def __init__(self, client: AsyncClient, slot: str) -> None:
        self.client = client
        self.slot = slot

    async def load(self, count: int | None = None, timeout_ms: int | None = None,
                   targeting: dict[str, Any] | None = None) -> list[AsyncShownAd]:
        ads = await self.client.load(self.slot, count=count, timeout_ms=timeout_ms, targeting=targeting)
        return [AsyncShownAd(self.client, ad) for ad in ads]


class AsyncInteractiveSession:
    """adorch.InteractiveSession for asyncio: `session = await AsyncInteractiveSession.create(...)`."""

    def __init__(self, client: AsyncClient, slot: str, session_id: str, events: AsyncEventStream) -> None:
        self.client = client
        self.slot = slot
        self.id = session_id
        self._events: AsyncEventStream | None = events
        self.ended: Event | None = None

    @classmethod
    async def create(cls, client: AsyncClient, slot: str, creative_url: str, ad_parameters: dict[str, Any],
                     slot_type: str = "midroll") -> AsyncInteractiveSession:
        # Subscribed first: the session's events start as soon as it exists.
        events = await client.subscribe([slot])
        try:
            session_id = await client.init_interactive(slot, creative_url, ad_parameters, slot_type)
        except BaseException:
            events.close()
            raise
        return cls(client, slot, session_id, events)

    def close_events(self) -> None:
        if self._events is not None:
            self._events.close()
            self._events = None

    async def __aenter__(self) -> AsyncInteractiveSession:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.close_events()

    async def start(self) -> None:
        await self.client.start(self.id)

    async def pause(self) -> None:
        await self.client.pause(self.id)

    async def resume(self) -> None:
        await self.client.resume(self.id)

    async def stop(self) -> None:
        await self.client.stop(self.id)

    async def events(self, timeout: float = 60.0) -> AsyncIterator[Event]:
        """The session's events, through its terminal one (completed, no_ads_available, error, stopped)."""
        deadline = time.monotonic() + timeout
        while self.ended is None and self._events is not None:
            event = await self._events.next(_left(deadline))
            terminal = api.ended_session(event, self.id)
            if terminal is None:
                continue
            if terminal:
                self.ended = event
                self.close_events()
            yield event
