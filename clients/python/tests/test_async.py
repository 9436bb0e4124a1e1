"""adorch.AsyncClient and the asyncio SDK layer against the real daemon."""
import unittest

import adorch

from .common import (BANNER, CREATIVE_URL, EMPTY, INTERACTIVE, NATIVE, PACED, PACING_MS, PACING_RULE, REWARD_AMOUNT,
                     REWARDED, SHORT_CALL_TIMEOUT, SLOW_BANNER, SOCKET, SPLASH, WAIT, idl_errors, NO_DAEMON)


@unittest.skipIf(not SOCKET, NO_DAEMON)
class AsyncClientTests(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self) -> None:
        self.client = await adorch.AsyncClient.connect(SOCKET)
        self.addAsyncCleanup(self.client.close)

    async def test_rewarded_ad_shows_reports_and_its_reward_is_awaited_and_acked(self) -> None:
        rewarded = adorch.AsyncRewardedAd(self.client, REWARDED)
        await rewarded.load(WAIT)
        self.assertTrue(await rewarded.is_ready())
        heard: list[str] = []

        async def on_reward(event: adorch.Event) -> None:
            heard.append(f"reward {event.ad_id}")

        async with await rewarded.show(user_id="u-async") as shown:
            shown.on_impression(lambda event: heard.append("impression"))
            shown.on_reward(on_reward)
            shown.on_close(lambda event: heard.append("close"))
            await shown.impression()
            await shown.complete()
            reward = await shown.wait_reward(WAIT)
            self.assertEqual((reward.ad_id, reward.user_id, reward.reward_amount), (shown.id, "u-async", REWARD_AMOUNT))
            await shown.close()
            await shown.wait_for("close", WAIT)
            self.assertEqual(heard, ["impression", f"reward {shown.id}", "close"])
        await reward.ack()
        self.assertNotIn(reward.trans_id, [r.trans_id for r in (await self.client.list_rewards(user_id="u-async")).rewards])

    async def test_banner_splash_and_three_native_ads_load(self) -> None:
        banner = await adorch.AsyncBannerAd(self.client, BANNER).load(width=300, height=250)
        self.assertEqual((banner.format, banner.payload.get("height")), ("banner", 250))
        splash = await adorch.AsyncSplashAd(self.client, SPLASH).load()
        self.assertEqual(splash.format, "splash")
        natives = await adorch.AsyncNativeAdLoader(self.client, NATIVE).load(count=3)
        self.assertEqual(len({ad.id for ad in natives}), 3)
        for ad in [banner, splash, *natives]:
            await ad.close()

    async def test_interactive_session_runs_to_its_terminal_event(self) -> None:
        session = await adorch.AsyncInteractiveSession.create(self.client, INTERACTIVE, CREATIVE_URL, {"k": 1})
        async with session:
            await session.start()
            names = [event.name async for event in session.events(WAIT)]
            self.assertEqual(names[0], "fetch_complete", names)
            self.assertEqual(names[-1], "completed", names)

    async def test_daemon_errors_are_typed_with_their_fields(self) -> None:
        with self.assertRaises(adorch.SlotNotFound):
            await self.client.show("no-such-slot", "u")
        with self.assertRaises(adorch.NoAdReady) as empty:
            await self.client.show(EMPTY, "u")
        self.assertEqual(empty.exception.slot, EMPTY)
        with self.assertRaises(adorch.InvalidParameter) as count:
            await self.client.load(NATIVE, count=0)
        self.assertEqual(count.exception.parameter, "count")
        with self.assertRaises(adorch.AdNotValid):
            await self.client.report("no-such-ad", "click")
        with self.assertRaises(adorch.SessionNotFound):
            await self.client.pause("no-such-session")
        self.assertTrue(await self.client.list_slots())

    async def test_every_idl_error_maps_to_its_own_typed_error(self) -> None:
        for interface in ("io.adorch.Ads", "io.adorch.Manager"):
            for name in idl_errors(await self.client.interface_description(interface)):
                error = adorch.error_from_reply(f"{interface}.{name}", {})
                self.assertIsNot(type(error), adorch.AdorchError, f"{interface}.{name}")
                self.assertEqual(type(error).__name__, name)

    async def test_a_show_within_the_pacing_is_capped_and_list_slots_and_get_caps_say_so_for_that_user(self) -> None:
        paced = adorch.AsyncInterstitialAd(self.client, PACED)
        await paced.load(WAIT)
        async with await paced.show(user_id="u-paced-async") as shown:
            await shown.impression()
            with self.assertRaises(adorch.Capped) as capped:
                await paced.show(user_id="u-paced-async")
            self.assertEqual((capped.exception.slot, capped.exception.rule), (PACED, PACING_RULE))
            self.assertTrue(0 < capped.exception.retry_after_ms <= PACING_MS, capped.exception)
            await shown.close()
        holds = {slot.id: slot.capped for slot in await self.client.list_slots(user_id="u-paced-async")}
        hold = holds[PACED]
        assert hold is not None, "ListSlots tells the user's hold"
        self.assertEqual((hold.rule, hold.kind, hold.network), (PACING_RULE, "pacing", None))
        self.assertTrue(0 < hold.retry_after_ms <= PACING_MS, hold)
        others = {slot.id: slot.capped for slot in await self.client.list_slots(user_id="u-paced-async-other")}
        self.assertIsNone(others[PACED], "the pacing is per user")
        [rule] = await self.client.get_caps(PACED, user_id="u-paced-async")
        self.assertEqual((rule.rule, rule.counted, rule.retry_after_ms is not None), (PACING_RULE, 1, True))
        with self.assertRaises(adorch.SlotNotFound):
            await self.client.get_caps("no-such-slot")

    async def test_reward_listeners_run_in_wait_reward_when_the_ledger_has_the_reward(self) -> None:
        rewarded = adorch.AsyncRewardedAd(self.client, REWARDED)
        await rewarded.load(WAIT)
        heard: list[str] = []
        async with await self.client.subscribe([REWARDED]) as watch, await rewarded.show(user_id="u-ledger-async") as shown:
            shown.on_reward(lambda event: heard.append(event.ad_id or "?"))
            await shown.impression()
            await shown.complete()
            # Seen on a stream of its own, so it is in the ledger before wait_reward looks.
            while not ((event := await watch.next(WAIT)).kind == "reward_granted" and event.ad_id == shown.id):
                pass
            reward = await shown.wait_reward(WAIT)
            self.assertEqual(heard, [shown.id], "the listener ran in wait_reward")
            await shown.close()
            await shown.wait_for("close", WAIT)
            self.assertEqual(heard, [shown.id], "once, though its event came too")
        await reward.ack()

    async def test_a_slot_that_does_not_exist_is_slot_not_found_at_once(self) -> None:
        with self.assertRaises(adorch.SlotNotFound):
            await adorch.AsyncRewardedAd(self.client, "no-such-slot").load(WAIT)

    async def test_a_load_waits_its_slot_deadline_not_the_call_timeout(self) -> None:
        short = await adorch.AsyncClient.connect(SOCKET, timeout=SHORT_CALL_TIMEOUT)
        self.addAsyncCleanup(short.close)
        banner = await adorch.AsyncBannerAd(short, SLOW_BANNER).load()
        self.assertEqual(banner.slot, SLOW_BANNER)
        await banner.close()

    async def test_a_connection_over_the_limit_is_too_many_connections(self) -> None:
        limit = (await self.client.get_status()).raw["limits"]["max_connections"]
        clients: list[adorch.AsyncClient] = []
        try:
            with self.assertRaises(adorch.TooManyConnections):
                for _ in range(limit):
                    clients.append(await adorch.AsyncClient.connect(SOCKET))
                    await clients[-1].list_slots()
            with self.assertRaises(adorch.TooManyConnections):
                await self.client.subscribe()
        finally:
            for client in clients:
                await client.close()

    async def test_events_are_an_async_iterator(self) -> None:
        async with await self.client.subscribe([REWARDED]) as events:
            self.assertEqual((await events.next(WAIT)).kind, "subscribed")
            ad = await self.client.show(REWARDED, "u-events")
            async for event in events:
                if event.kind == "ad_shown":
                    self.assertEqual((event.ad_id, event.user_id), (ad.id, "u-events"))
                    break
            await self.client.report(ad.id, "close")


    async def test_a_call_over_the_daemons_message_limit_gets_its_refusal_and_is_not_sent_again(self) -> None:
        with self.assertNoLogs("adorch", "WARNING"):
            with self.assertRaises(adorch.VarlinkInvalidParameter) as raised:
                await self.client.load(BANNER, targeting={"keywords": "k" * 3_000_000})
        self.assertIn("larger than", str(raised.exception))
        self.assertTrue(await self.client.list_slots(), "the next call makes a new connection")

    async def test_closing_the_client_closes_its_event_streams(self) -> None:
        client = await adorch.AsyncClient.connect(SOCKET)
        events = await client.subscribe([BANNER])
        self.assertEqual((await events.next(WAIT)).kind, "subscribed")
        await client.close()
        with self.assertRaises(adorch.Closed):
            await events.next(WAIT)
        with self.assertRaises(adorch.Closed):
            await client.subscribe([BANNER])


if __name__ == "__main__":
    unittest.main()
