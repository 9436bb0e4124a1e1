"""What the clients do on the wire when the daemon misbehaves or the app does: a connection
that breaks under a call (a read is sent again on a new connection, logged; a call that may
have taken effect raises ConnectionLost and is sent once), an interrupted call, a socket fd
above select()'s limit, a daemon gone for good under a subscription, close() from another
thread, bad arguments and malformed replies. The peer is a scripted socket here, since no real
daemon does these on demand."""
import asyncio
import json
import math
import os
import resource
import signal
import socket
import tempfile
import threading
import time
import unittest
from collections.abc import Callable
from pathlib import Path
from typing import Any

import adorch


class DroppingPeer:
    """Accepts connections; drops the first one after reading its call, answers the later ones
    with `reply`. `calls` are the methods it read, in order."""

    def __init__(self, reply: dict[str, Any]) -> None:
        self.dir = tempfile.TemporaryDirectory(prefix="adorch-peer-")
        self.path = str(Path(self.dir.name) / "peer.sock")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.path)
        self.listener.listen()
        self.reply = reply
        self.calls: list[str] = []
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def close(self) -> None:
        # shutdown wakes the accept() the thread waits in; close alone would not.
        self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        self.thread.join(5)
        self.dir.cleanup()

    def serve(self) -> None:
        connections = 0
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            connections += 1
            with connection:
                pending = b""
                while b"\0" not in pending:
                    chunk = connection.recv(4096)
                    if not chunk:
                        break
                    pending += chunk
                else:
                    self.calls.append(json.loads(pending.split(b"\0")[0])["method"])
                    if connections > 1:
                        connection.sendall(json.dumps(self.reply).encode() + b"\0")
                        connection.recv(4096)  # until the client hangs up


SLOTS = {"parameters": {"slots": [{"id": "s", "format": "banner"}]}}
SUBSCRIBED = {"parameters": {"event": {"kind": "subscribed", "time": "t"}}, "continues": True}


def ad(ad_id: str) -> dict[str, Any]:
    return {"id": ad_id, "slot": "s", "network": "n", "format": "banner", "payload": {}, "expires_at": "", "price": 0.0}


def event(**fields: Any) -> dict[str, Any]:
    return {"parameters": {"event": {"kind": "ad_loaded", "time": "t", **fields}}, "continues": True}


class Wire:
    """One accepted connection of a ScriptedPeer."""

    def __init__(self, connection: socket.socket) -> None:
        self.connection = connection

    def send(self, message: dict[str, Any]) -> None:
        self.send_raw(json.dumps(message).encode() + b"\0")

    def send_raw(self, data: bytes) -> None:
        self.connection.sendall(data)


class ScriptedPeer:
    """A Varlink peer whose answers the test scripts: answer(call, wire) runs for each call read
    (call: the decoded message), in the thread serving its connection. `calls` are the methods
    read, in order; `accepted` the connections; `hung_up` is set when a client ends one."""

    def __init__(self, answer: Callable[[dict[str, Any], Wire], None]) -> None:
        self.dir = tempfile.TemporaryDirectory(prefix="adorch-peer-")
        self.path = str(Path(self.dir.name) / "peer.sock")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.path)
        self.listener.listen()
        self.answer = answer
        self.calls: list[str] = []
        self.accepted = 0
        self.hung_up = threading.Event()
        self.called = threading.Condition()
        self.open: list[socket.socket] = []
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def close(self) -> None:
        """The daemon gone: no socket to connect to, every connection ended."""
        self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        self.thread.join(5)
        for connection in self.open:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.dir.cleanup()

    def wait_for_call(self, method: str, count: int = 1) -> None:
        with self.called:
            self.called.wait_for(lambda: self.calls.count(method) >= count, 10)

    def serve(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            self.accepted += 1
            self.open.append(connection)
            threading.Thread(target=self.handle, args=(connection,), daemon=True).start()

    def handle(self, connection: socket.socket) -> None:
        pending = b""
        with connection:
            while True:
                try:
                    chunk = connection.recv(4096)
                except OSError:
                    return
                if not chunk:
                    self.hung_up.set()
                    return
                pending += chunk
                while b"\0" in pending:
                    frame, pending = pending.split(b"\0", 1)
                    call = json.loads(frame)
                    with self.called:
                        self.calls.append(call["method"])
                        self.called.notify_all()
                    try:
                        self.answer(call, Wire(connection))
                    except OSError:
                        return


def answering(call: dict[str, Any], wire: Wire) -> None:
    """Slots for ListSlots, an ad of the slot named for Show, subscribed for Subscribe."""
    method, parameters = call["method"].split(".")[-1], call.get("parameters", {})
    if method == "Subscribe":
        wire.send(SUBSCRIBED)
    elif method == "Show":
        wire.send({"parameters": {"ad": ad(f"ad-{parameters['slot']}")}})
    else:
        wire.send(SLOTS)


class SyncBrokenCallTests(unittest.TestCase):
    def setUp(self) -> None:
        self.peer = DroppingPeer({"parameters": {"slots": [{"id": "s", "format": "banner"}]}})
        self.addCleanup(self.peer.close)

    def test_a_read_is_sent_again_on_a_new_connection(self) -> None:
        with adorch.Client(self.peer.path) as client, self.assertLogs("adorch", "WARNING") as logged:
            self.assertEqual([slot.id for slot in client.list_slots()], ["s"])
        self.assertEqual(self.peer.calls, ["io.adorch.Ads.ListSlots"] * 2)
        self.assertIn("sending it again on a new connection", "\n".join(logged.output))

    def test_a_show_is_not_sent_again(self) -> None:
        with adorch.Client(self.peer.path) as client, self.assertRaises(adorch.ConnectionLost):
            client.show("s", "u")
        self.assertEqual(self.peer.calls, ["io.adorch.Ads.Show"])


class AsyncBrokenCallTests(unittest.IsolatedAsyncioTestCase):
    def setUp(self) -> None:
        self.peer = DroppingPeer({"parameters": {"slots": [{"id": "s", "format": "banner"}]}})
        self.addCleanup(self.peer.close)

    async def test_a_read_is_sent_again(self) -> None:
        client = await adorch.AsyncClient.connect(self.peer.path)
        with self.assertLogs("adorch", "WARNING"):
            self.assertEqual([slot.id for slot in await client.list_slots()], ["s"])
        await client.close()
        self.assertEqual(self.peer.calls, ["io.adorch.Ads.ListSlots"] * 2)

    async def test_a_report_is_not_sent_again(self) -> None:
        client = await adorch.AsyncClient.connect(self.peer.path)
        with self.assertRaises(adorch.ConnectionLost):
            await client.report("ad", "click")
        await client.close()
        self.assertEqual(self.peer.calls, ["io.adorch.Ads.Report"])


class SyncWireTests(unittest.TestCase):
    def peer(self, answer: Callable[[dict[str, Any], Wire], None] = answering) -> ScriptedPeer:
        peer = ScriptedPeer(answer)
        self.addCleanup(peer.close)
        return peer

    def test_an_interrupted_call_leaves_no_reply_for_the_next_one(self) -> None:
        # The Load's reply comes only once the next call is on the same connection, before its own.
        held: list[Wire] = []

        def answer(call: dict[str, Any], wire: Wire) -> None:
            if call["method"].endswith(".Load"):
                held.append(wire)
                return
            if held:
                held.pop().send({"parameters": {"ads": [ad("late")]}})
            wire.send(SLOTS)

        peer = self.peer(answer)

        class Interrupted(Exception):
            pass

        def interrupt(signum: int, frame: Any) -> None:
            raise Interrupted()

        previous = signal.signal(signal.SIGALRM, interrupt)
        self.addCleanup(signal.signal, signal.SIGALRM, previous)
        with adorch.Client(peer.path) as client:
            peer_saw_load = threading.Thread(target=lambda: (peer.wait_for_call("io.adorch.Ads.Load"),
                                                             signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGALRM)))
            peer_saw_load.start()
            with self.assertRaises(Interrupted):
                client.load("s")
            peer_saw_load.join()
            self.assertEqual([slot.id for slot in client.list_slots()], ["s"])

    def test_a_socket_fd_above_select_limit_works(self) -> None:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft < 1100:
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 2048), hard))
            self.addCleanup(resource.setrlimit, resource.RLIMIT_NOFILE, (soft, hard))
        peer = self.peer()
        fillers: list[int] = []
        self.addCleanup(lambda: [os.close(fd) for fd in fillers])
        while (fd := os.open("/dev/null", os.O_RDONLY)) < 1030:
            fillers.append(fd)
        os.close(fd)
        with adorch.Client(peer.path) as client:
            for _ in range(2):
                self.assertEqual([slot.id for slot in client.list_slots()], ["s"])
            with client.subscribe() as events:
                self.assertEqual(events.next(5).kind, "subscribed")

    def test_resubscribing_gives_up_at_the_reconnect_timeout(self) -> None:
        peer = ScriptedPeer(answering)
        with adorch.Client(peer.path, reconnect_timeout=1) as client, client.subscribe() as events:
            self.assertEqual(events.next(5).kind, "subscribed")
            peer.close()
            started = time.monotonic()
            with self.assertLogs("adorch", "WARNING"), self.assertRaises(adorch.CannotConnect):
                events.next()
            self.assertLess(time.monotonic() - started, 1.8, "about reconnect_timeout, connecting and subscribing both")

    def test_close_from_another_thread_ends_a_for_loop_over_events(self) -> None:
        peer = self.peer()
        with adorch.Client(peer.path) as client:
            events = client.subscribe()
            seen: list[str] = []
            first = threading.Event()

            def iterate() -> None:
                for each in events:
                    seen.append(each.kind)
                    first.set()
                seen.append("ended")

            reader = threading.Thread(target=iterate, daemon=True)
            reader.start()
            self.assertTrue(first.wait(5))
            events.close()
            reader.join(5)
            self.assertFalse(reader.is_alive(), "close() woke the reader")
            self.assertEqual(seen, ["subscribed", "ended"])
            with self.assertRaises(adorch.Closed):
                events.next(1)
            self.assertEqual(peer.calls.count("io.adorch.Ads.Subscribe"), 1, "a closed stream never subscribes again")

    def test_close_from_another_thread_ends_the_call_in_flight_and_is_final(self) -> None:
        peer = self.peer(lambda call, wire: None if call["method"].endswith(".Load") else answering(call, wire))
        client = adorch.Client(peer.path, timeout=5)
        outcome: list[BaseException] = []

        def load() -> None:
            try:
                client.load("s", timeout_ms=1000)
            except BaseException as error:
                outcome.append(error)

        caller = threading.Thread(target=load, daemon=True)
        caller.start()
        peer.wait_for_call("io.adorch.Ads.Load")
        started = time.monotonic()
        client.close()
        self.assertLess(time.monotonic() - started, 1.0, "close() does not wait for the call in flight")
        caller.join(5)
        self.assertEqual([type(error) for error in outcome], [adorch.Closed])
        with self.assertRaises(adorch.Closed):
            client.list_slots()
        self.assertEqual(peer.accepted, 1, "a closed client does not reconnect")

    def test_bad_arguments_are_named_and_nothing_is_sent(self) -> None:
        peer = self.peer()
        with adorch.Client(peer.path) as client:
            bad: list[tuple[type[Exception], str, Callable[[], object]]] = [
                (TypeError, "timeout_ms", lambda: client.load("s", timeout_ms="500")),  # type: ignore[arg-type]
                (TypeError, "count", lambda: client.load("s", count=True)),
                (TypeError, "reward", lambda: client.show("s", "u", reward={"name": "x"})),  # type: ignore[arg-type]
                (TypeError, "reward.amount", lambda: client.show("s", "u", reward=adorch.RewardModel(amount="1"))),  # type: ignore[arg-type]
                (ValueError, "targeting", lambda: client.load("s", targeting={"age": math.nan})),
                (TypeError, "targeting", lambda: client.load("s", targeting={"when": object()})),
                (TypeError, "slot_type", lambda: client.init_interactive("s", "https://x.invalid/", {}, adorch.SlotType)),  # type: ignore[arg-type]
                (TypeError, "slots", lambda: client.subscribe(slots="s")),  # type: ignore[arg-type]
                (TypeError, "slot", lambda: client.show(None)),  # type: ignore[arg-type]
                (TypeError, "user_id", lambda: client.list_slots(user_id=7)),  # type: ignore[arg-type]
                (TypeError, "slot", lambda: client.get_caps(["s"])),  # type: ignore[arg-type]
            ]
            for kind, parameter, call in bad:
                with self.subTest(parameter), self.assertRaises(kind) as raised:
                    call()
                self.assertIn(parameter, str(raised.exception))
            self.assertEqual(peer.calls, [])
            self.assertEqual([slot.id for slot in client.list_slots()], ["s"])

    def test_malformed_replies_are_protocol_errors(self) -> None:
        def answer(call: dict[str, Any], wire: Wire) -> None:
            slot = call.get("parameters", {}).get("slot")
            if slot == "not-json":
                wire.send_raw(b"{not json\0")
            elif slot == "no-ad":
                wire.send({"parameters": {}})
            elif slot == "ad-without-id":
                wire.send({"parameters": {"ad": {"slot": "s"}}})
            elif slot == "error-parameters-a-list":
                wire.send({"error": "io.adorch.Ads.NoAdReady", "parameters": ["a"]})
            elif slot == "error-field-a-string":
                wire.send({"error": "io.adorch.Ads.RateLimited", "parameters": {"retry_after_ms": "soon"}})
            elif call.get("parameters", {}).get("user_id") == "capped-without-retry":
                hold = {"rule": "pacing 1s per user", "kind": "pacing", "until": "t"}
                wire.send({"parameters": {"slots": [{"id": "s", "format": "interstitial", "capped": hold}]}})
            elif slot == "two-replies":
                wire.send_raw((json.dumps({"parameters": {"ad": ad("first")}}) + "\0"
                               + json.dumps({"parameters": {"ad": ad("second")}}) + "\0").encode())
            elif call["method"].endswith(".Subscribe"):
                wire.send(SUBSCRIBED)
                wire.send(event(detail=[1, 2]))
                wire.send(event(network_code="not an int"))
                wire.send({"parameters": {"event": {"time": "no kind"}}, "continues": True})
                wire.send_raw(b"\x00")
                wire.send(event(slot="after"))
            else:
                answering(call, wire)

        peer = self.peer(answer)
        with adorch.Client(peer.path) as client:
            for slot in ("not-json", "no-ad", "ad-without-id", "error-parameters-a-list", "error-field-a-string"):
                with self.subTest(slot), self.assertRaises(adorch.ProtocolError):
                    client.show(slot)
                self.assertEqual(client.show("fine").id, "ad-fine", f"after {slot}")
            self.assertEqual(client.show("two-replies").id, "first")
            with self.assertRaises(adorch.ProtocolError):
                client.show("next")  # never handed the second reply as its own
            self.assertEqual(client.show("next").id, "ad-next")
            with self.assertRaises(adorch.ProtocolError) as hold:
                client.list_slots("capped-without-retry")  # a slot's capped is checked as the slot is
            self.assertIn("retry_after_ms", str(hold.exception))
            with client.subscribe() as events:
                self.assertEqual(events.next(5).kind, "subscribed")
                for _ in range(4):
                    with self.assertRaises(adorch.ProtocolError):
                        events.next(5)
                self.assertEqual(events.next(5).slot, "after", "the stream goes on after a bad event")


class AsyncWireTests(unittest.IsolatedAsyncioTestCase):
    def peer(self, answer: Callable[[dict[str, Any], Wire], None] = answering) -> ScriptedPeer:
        peer = ScriptedPeer(answer)
        self.addCleanup(peer.close)
        return peer

    async def test_close_is_done_when_it_returns(self) -> None:
        peer = self.peer()
        client = await adorch.AsyncClient.connect(peer.path)
        self.assertEqual([slot.id for slot in await client.list_slots()], ["s"])
        await client.close()
        # The loop does not run while this waits: the socket is closed by then, or never.
        self.assertTrue(peer.hung_up.wait(5), "the peer saw the connection end")
        with self.assertRaises(adorch.Closed):
            await client.list_slots()
        self.assertEqual(peer.accepted, 1)

    async def test_resubscribing_gives_up_at_the_reconnect_timeout(self) -> None:
        peer = ScriptedPeer(answering)
        client = await adorch.AsyncClient.connect(peer.path, reconnect_timeout=1)
        async with await client.subscribe() as events:
            self.assertEqual((await events.next(5)).kind, "subscribed")
            peer.close()
            started = time.monotonic()
            with self.assertLogs("adorch", "WARNING"), self.assertRaises(adorch.CannotConnect):
                await events.next()
            self.assertLess(time.monotonic() - started, 1.8)
        await client.close()

    async def test_close_ends_an_async_for_in_another_task_and_the_call_in_flight(self) -> None:
        peer = self.peer(lambda call, wire: None if call["method"].endswith(".Load") else answering(call, wire))
        client = await adorch.AsyncClient.connect(peer.path, timeout=5)
        events = await client.subscribe()

        async def iterate() -> list[str]:
            return [each.kind async for each in events]

        reader = asyncio.create_task(iterate())
        load = asyncio.create_task(client.load("s", timeout_ms=1000))
        await asyncio.to_thread(peer.wait_for_call, "io.adorch.Ads.Load")
        events.close()
        await client.close()
        self.assertEqual(await asyncio.wait_for(reader, 1), ["subscribed"])
        with self.assertRaises(adorch.Closed):
            await asyncio.wait_for(load, 1)
        with self.assertRaises(adorch.Closed):
            await events.next(1)
        self.assertEqual(peer.calls.count("io.adorch.Ads.Subscribe"), 1)

    async def test_malformed_replies_are_protocol_errors(self) -> None:
        peer = self.peer(lambda call, wire: wire.send_raw(b"[1]\0") if call["method"].endswith(".Show") else answering(call, wire))
        client = await adorch.AsyncClient.connect(peer.path)
        with self.assertRaises(adorch.ProtocolError):
            await client.show("s")
        with self.assertRaises(TypeError):
            await client.load("s", width="wide")  # type: ignore[arg-type]
        self.assertEqual([slot.id for slot in await client.list_slots()], ["s"])
        await client.close()


if __name__ == "__main__":
    unittest.main()
