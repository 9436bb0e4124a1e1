"""What the clients do when a connection breaks under a call: a read is sent again on a new
connection (logged), a call that may have taken effect raises ConnectionLost and is sent once.
The peer is a scripted socket here, since no real daemon drops a call half-way on demand."""
import json
import socket
import tempfile
import threading
import unittest
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


if __name__ == "__main__":
    unittest.main()
