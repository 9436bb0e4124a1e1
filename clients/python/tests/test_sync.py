"""adorch.Client and the SDK layer against the real daemon."""
import unittest

import adorch

from .common import (BANNER, CREATIVE_URL, EMPTY, INTERACTIVE, INTERSTITIAL, NATIVE, NO_FILL_BANNER, PACED, PACING_MS,
                     PACING_RULE, REWARD_AMOUNT, REWARD_NAME, REWARDED, SHORT_CALL_TIMEOUT, SLOW_BANNER, SOCKET, SPLASH,
                     WAIT, idl_error_fields, idl_errors, wait_until, NO_DAEMON)

#: A value of each IDL type an error field has, to build an error reply with.
SAMPLES = {"string": "a-value", "int": 7, "[]Attempt": [{"network": "sim", "ad_unit_id": "u", "error": "no_fill"}]}


@unittest.skipIf(not SOCKET, NO_DAEMON)
class SyncClientTests(unittest.TestCase):
    def setUp(self) -> None:
        self.client = adorch.Client(SOCKET)
        self.addCleanup(self.client.close)

    def test_rewarded_ad_shows_reports_and_its_reward_is_awaited_and_acked(self) -> None:
        rewarded = adorch.RewardedAd(self.client, REWARDED)
        rewarded.load(WAIT)
        self.assertTrue(rewarded.is_ready())
        heard: list[str] = []
        with rewarded.show(user_id="u-sync") as shown:
            self.assertEqual((shown.slot, shown.format, shown.network), (REWARDED, "rewarded", "sim"))
            def hearing(listener: str) -> adorch.ads.Listener:
                return lambda event: heard.append(listener)
            for listener in ("impression", "close", "reward"):
                shown.on(listener, hearing(listener))
            shown.impression()
            shown.complete()
            reward = shown.wait_reward(WAIT)
            self.assertEqual((reward.ad_id, reward.user_id, reward.reward_name, reward.reward_amount),
                             (shown.id, "u-sync", REWARD_NAME, REWARD_AMOUNT))
            self.assertFalse(reward.acknowledged)
            shown.close()
            shown.wait_for("close", WAIT)
            self.assertEqual(heard, ["impression", "reward", "close"])
            with self.assertRaises(adorch.AdNotValid) as raised:
                shown.close()
            self.assertEqual(raised.exception.ad_id, shown.id)
        waiting = [r.trans_id for r in self.client.list_rewards(user_id="u-sync").rewards]
        self.assertIn(reward.trans_id, waiting, "never acked by the library itself")
        reward.ack()
        waiting = [r.trans_id for r in self.client.list_rewards(user_id="u-sync").rewards]
        self.assertNotIn(reward.trans_id, waiting)

    def test_interstitial_shows_without_a_user(self) -> None:
        interstitial = adorch.InterstitialAd(self.client, INTERSTITIAL)
        interstitial.load(WAIT)
        with interstitial.show() as shown:
            self.assertEqual(shown.format, "interstitial")
            shown.close()

    def test_banner_splash_and_three_native_ads_load(self) -> None:
        banner = adorch.BannerAd(self.client, BANNER).load(width=728, height=90)
        self.assertEqual((banner.format, banner.payload.get("width")), ("banner", 728))
        splash = adorch.SplashAd(self.client, SPLASH).load()
        self.assertEqual(splash.format, "splash")
        natives = adorch.NativeAdLoader(self.client, NATIVE).load(count=3)
        self.assertEqual(len({ad.id for ad in natives}), 3)
        self.assertTrue(all(ad.format == "native" and ad.payload.get("headline") for ad in natives))
        for ad in [banner, splash, *natives]:
            ad.impression()
            ad.close()

    def test_interactive_session_runs_to_its_terminal_event(self) -> None:
        with adorch.InteractiveSession(self.client, INTERACTIVE, CREATIVE_URL, {"user": {"id": 7}},
                                       adorch.SlotType.PREROLL) as session:
            session.start()
            names = [event.name for event in session.events(WAIT)]
            self.assertEqual(names[-1], "completed", names)
            self.assertIn("opt_in", names)
            self.assertTrue(session.ended is not None and session.ended.terminal and session.ended.ad_free_pod)
            with self.assertRaises(adorch.SessionNotFound) as raised:
                session.stop()
            self.assertEqual(raised.exception.session_id, session.id)

    def test_daemon_errors_are_typed_with_their_fields(self) -> None:
        with self.assertRaises(adorch.SlotNotFound) as slot:
            self.client.show("no-such-slot", "u")
        self.assertEqual((slot.exception.name, slot.exception.slot), ("io.adorch.Ads.SlotNotFound", "no-such-slot"))
        self.assertTrue(slot.exception.message)
        with self.assertRaises(adorch.NoAdReady) as empty:
            self.client.show(EMPTY, "u")
        self.assertEqual(empty.exception.slot, EMPTY)
        with self.assertRaises(adorch.InvalidParameter) as count:
            self.client.load(NATIVE, count=11)
        self.assertEqual((type(count.exception), count.exception.parameter), (adorch.InvalidParameter, "count"))
        with self.assertRaises(adorch.InvalidParameter):
            self.client.show(REWARDED)  # a rewarded slot needs a user_id
        with self.assertRaises(adorch.AdNotValid):
            self.client.report("no-such-ad", "impression")
        with self.assertRaises(adorch.SessionNotFound):
            self.client.start("no-such-session")
        with self.assertRaises(adorch.RewardNotFound) as reward:
            self.client.ack_reward("no-such-trans")
        self.assertEqual(reward.exception.trans_id, "no-such-trans")
        with self.assertRaises(adorch.InterfaceNotFound) as interface:
            self.client.interface_description("io.adorch.Nope")
        self.assertEqual(interface.exception.interface, "io.adorch.Nope")
        with self.assertRaises(adorch.LoadFailed) as failed:
            self.client.load(NO_FILL_BANNER)
        self.assertEqual((failed.exception.slot, failed.exception.error), (NO_FILL_BANNER, "no_fill"))
        # The connection is still good after each error.
        self.assertIn(REWARDED, [slot.id for slot in self.client.list_slots()])
        self.assertEqual(self.client.get_status().socket, SOCKET)

    def test_privacy_is_set_read_refused_by_field_and_cleared(self) -> None:
        # The daemon is shared by the tests: this one keeps to a user of its own and clears it.
        user = "privacy-test-user"
        self.addCleanup(self.client.set_privacy, None, user)
        self.client.set_privacy(adorch.Privacy(us_privacy="1YNN", non_personalized=True, max_content_rating="T"), user)
        applied = self.client.get_privacy(user)
        self.assertEqual(applied.source, "user")
        assert applied.privacy is not None
        self.assertEqual((applied.privacy.us_privacy, applied.privacy.non_personalized, applied.privacy.max_content_rating),
                         ("1YNN", True, "T"))
        with self.assertRaises(adorch.InvalidParameter) as bad:
            self.client.set_privacy(adorch.Privacy(us_privacy="2---"), user)
        self.assertEqual(bad.exception.parameter, "privacy.us_privacy")
        self.assertEqual(self.client.get_privacy(user), applied, "a refused call changes nothing")
        with self.assertRaises(TypeError):
            self.client.set_privacy(adorch.Privacy(gpp_sid=["2"]), user)  # type: ignore[list-item]
        # One call's own privacy: outside the GDPR, non-personalised, which sim serves (no children).
        self.client.load(BANNER, privacy=adorch.Privacy(gdpr_applies=False, non_personalized=True))
        self.client.set_privacy(None, user)
        self.assertNotEqual(self.client.get_privacy(user).source, "user")

    def test_every_idl_error_maps_to_its_own_typed_error(self) -> None:
        for interface in ("io.adorch.Ads", "io.adorch.Manager"):
            names = idl_errors(self.client.interface_description(interface))
            self.assertGreater(len(names), 3, interface)
            for name in names:
                qualified = f"{interface}.{name}"
                error = adorch.error_from_reply(qualified, {"message": "m"})
                self.assertIsNot(type(error), adorch.AdorchError, f"{qualified} maps to the base error")
                self.assertEqual((type(error).__name__, error.name, error.message), (name, qualified, "m"))
                self.assertIsInstance(error, adorch.AdorchError)
        unknown = adorch.error_from_reply("io.adorch.Ads.SomethingNew", {"message": "later"})
        self.assertIs(type(unknown), adorch.AdorchError, "a name not known maps to the base error")
        limited = adorch.error_from_reply("io.adorch.Ads.RateLimited", {"retry_after_ms": 250, "message": "m"})
        assert isinstance(limited, adorch.RateLimited)
        self.assertEqual(limited.retry_after_ms, 250)
        capped = adorch.error_from_reply("io.adorch.Ads.Capped", {"slot": "s", "rule": PACING_RULE, "retry_after_ms": 9})
        assert isinstance(capped, adorch.Capped)
        self.assertEqual((capped.slot, capped.rule, capped.retry_after_ms), ("s", PACING_RULE, 9))
        self.assertIs(type(adorch.error_from_reply("io.adorch.Manager.SlotNotFound", {"slot": "s"})), adorch.SlotNotFound)

    def test_every_idl_error_has_its_fields_and_no_others(self) -> None:
        for interface in ("io.adorch.Ads", "io.adorch.Manager", "org.varlink.service"):
            errors = idl_error_fields(self.client.interface_description(interface))
            self.assertGreater(len(errors), 3, interface)
            for name, fields in errors.items():
                qualified = f"{interface}.{name}"
                with self.subTest(qualified):
                    given = {field: SAMPLES[kind] for field, kind in fields.items() if field != "message"}
                    error = adorch.error_from_reply(qualified, given)
                    self.assertIs(type(error), adorch.ERRORS[qualified])
                    self.assertEqual(set(adorch.errors.fields_of(type(error))), set(given), "the IDL's fields, no others")
                    for field, value in given.items():
                        self.assertEqual(getattr(error, field), value, field)
                        if field != "attempts":
                            self.assertIn(repr(value), str(error), "without a message, str() names the fields")

    def test_a_show_within_the_pacing_is_capped_and_list_slots_and_get_caps_say_so_for_that_user(self) -> None:
        paced = adorch.InterstitialAd(self.client, PACED)
        paced.load(WAIT)
        self.assertIsNone(self.by_id(self.client.list_slots("u-paced-sync"))[PACED].capped, "no ad shown yet")
        with paced.show(user_id="u-paced-sync") as shown:
            shown.impression()
            with self.assertRaises(adorch.Capped) as capped:
                paced.show(user_id="u-paced-sync")
            self.assertEqual((capped.exception.name, capped.exception.slot, capped.exception.rule),
                             ("io.adorch.Ads.Capped", PACED, PACING_RULE))
            self.assertTrue(0 < capped.exception.retry_after_ms <= PACING_MS, capped.exception)
            shown.close()
        hold = self.by_id(self.client.list_slots(user_id="u-paced-sync"))[PACED].capped
        assert hold is not None, "ListSlots tells the user's hold"
        self.assertEqual((hold.rule, hold.kind, hold.network), (PACING_RULE, "pacing", None))
        self.assertTrue(0 < hold.retry_after_ms <= PACING_MS and hold.until, hold)
        self.assertIsNone(self.by_id(self.client.list_slots("u-paced-other"))[PACED].capped, "the pacing is per user")
        self.assertIsNone(self.by_id(self.client.list_slots())[PACED].capped, "nothing holds Shows without a user id")
        [rule] = self.client.get_caps(PACED, "u-paced-sync")
        self.assertEqual((rule.rule, rule.kind, rule.scope, rule.impressions, rule.window_ms, rule.counted),
                         (PACING_RULE, "pacing", "user", 1, PACING_MS, 1))
        self.assertTrue(rule.retry_after_ms is not None and 0 < rule.retry_after_ms <= PACING_MS and rule.until, rule)
        with self.assertRaises(adorch.SlotNotFound) as missing:
            self.client.get_caps("no-such-slot")
        self.assertEqual((missing.exception.name, missing.exception.slot), ("io.adorch.Manager.SlotNotFound", "no-such-slot"))

    @staticmethod
    def by_id(slots: list[adorch.Slot]) -> dict[str, adorch.Slot]:
        return {slot.id: slot for slot in slots}

    def test_a_connection_over_the_limit_is_too_many_connections(self) -> None:
        status = self.client.get_status().raw
        limit, baseline = status["limits"]["max_connections"], status["connections"]["open"]
        clients: list[adorch.Client] = []
        try:
            with self.assertRaises(adorch.TooManyConnections) as refused:
                for _ in range(limit):
                    clients.append(adorch.Client(SOCKET))
                    clients[-1].list_slots()
            self.assertIn("connections", refused.exception.message)
            # Refused before its first call: the refusal waits unread on the idle connection.
            refusals = self.client.get_status().raw["connections"]["refused"]
            clients.append(adorch.Client(SOCKET))
            wait_until(lambda: self.client.get_status().raw["connections"]["refused"] > refusals, "the daemon refused it")
            with self.assertRaises(adorch.TooManyConnections):
                clients[-1].list_slots()
            with self.assertRaises(adorch.TooManyConnections):
                self.client.subscribe()
        finally:
            for client in clients:
                client.close()
        wait_until(lambda: self.client.get_status().raw["connections"]["open"] <= baseline, "the connections closed")

    def test_reward_listeners_run_in_wait_reward_when_the_ledger_has_the_reward(self) -> None:
        rewarded = adorch.RewardedAd(self.client, REWARDED)
        rewarded.load(WAIT)
        heard: list[str] = []
        with self.client.subscribe([REWARDED]) as watch, rewarded.show(user_id="u-ledger") as shown:
            shown.on_reward(lambda event: heard.append(event.reward.trans_id if event.reward else "?"))
            shown.impression()
            shown.complete()
            # Seen on a stream of its own, so it is in the ledger before wait_reward looks.
            while not ((event := watch.next(WAIT)).kind == "reward_granted" and event.ad_id == shown.id):
                pass
            reward = shown.wait_reward(WAIT)
            self.assertEqual(heard, [reward.trans_id], "the listener ran in wait_reward")
            shown.close()
            shown.wait_for("close", WAIT)
            self.assertEqual(heard, [reward.trans_id], "once, though its event came too")
        reward.ack()

    def test_a_slot_that_does_not_exist_is_slot_not_found_at_once(self) -> None:
        missing = adorch.RewardedAd(self.client, "no-such-slot")
        with self.assertRaises(adorch.SlotNotFound) as raised:
            missing.load(WAIT)
        self.assertEqual(raised.exception.slot, "no-such-slot")
        with self.assertRaises(adorch.SlotNotFound):
            missing.is_ready()

    def test_a_load_waits_its_slot_deadline_not_the_call_timeout(self) -> None:
        with adorch.Client(SOCKET, timeout=SHORT_CALL_TIMEOUT) as short:
            banner = adorch.BannerAd(short, SLOW_BANNER).load()
            self.assertEqual(banner.slot, SLOW_BANNER)
            banner.close()

    def test_events_iterate_from_the_subscribed_one(self) -> None:
        with self.client.subscribe([INTERSTITIAL]) as events:
            self.assertEqual(next(events).kind, "subscribed")
            ad = self.client.show(INTERSTITIAL)
            shown = next(e for e in events if e.kind == "ad_shown")
            self.assertEqual(shown.ad_id, ad.id)
            self.client.report(ad.id, "close")
        with self.client.subscribe([BANNER]) as quiet:
            self.assertEqual(quiet.next(WAIT).kind, "subscribed")
            with self.assertRaises(adorch.Timeout):
                quiet.next(0.2)

    def test_a_call_over_the_daemons_message_limit_gets_its_refusal_and_is_not_sent_again(self) -> None:
        with self.assertNoLogs("adorch", "WARNING"):
            with self.assertRaises(adorch.VarlinkInvalidParameter) as raised:
                self.client.load(BANNER, targeting={"keywords": "k" * 3_000_000})
        self.assertIn("larger than", str(raised.exception))
        self.assertTrue(self.client.list_slots(), "the next call makes a new connection")

    def test_closing_the_client_closes_its_event_streams(self) -> None:
        client = adorch.Client(SOCKET)
        events = client.subscribe([BANNER])
        self.assertEqual(events.next(WAIT).kind, "subscribed")
        client.close()
        with self.assertRaises(adorch.Closed):
            events.next(WAIT)
        with self.assertRaises(adorch.Closed):
            client.subscribe([BANNER])

    def test_a_missing_socket_is_cannot_connect(self) -> None:
        with self.assertRaises(adorch.CannotConnect):
            adorch.Client(SOCKET + ".missing")


if __name__ == "__main__":
    unittest.main()
