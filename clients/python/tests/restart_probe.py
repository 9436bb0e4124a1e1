"""The client side of PythonClientTests.swift's restart test, which owns the daemon.

    restart_probe.py sync|async SLOT

Subscribes to SLOT and prints SUBSCRIBED; the test then restarts the daemon on the same socket.
Prints each event as `EVENT kind ad_id` and each line of the "adorch" logger as `LOG ...`. At the
first ad_shown after the library logged that it subscribed again, prints `RESUMED ad_id`, then
makes a call on the client it connected before the restart (`CALLED n slots`) and exits 0; it
exits non-zero if the stream ever gives a second subscribed event, or anything fails.
"""
import asyncio
import logging
import os
import sys

import adorch


class Probe(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.resubscribed = False

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        self.resubscribed = self.resubscribed or "subscribed again on" in message
        say(f"LOG {message}")

    def seen(self, event: adorch.Event, subscribed: list[adorch.Event]) -> bool:
        """Prints the event; True once the stream resumed after the restart."""
        say(f"EVENT {event.kind} {event.ad_id}")
        if event.kind == "subscribed":
            subscribed.append(event)
            if len(subscribed) > 1:
                raise SystemExit("a second subscribed event reached the app")
        if self.resubscribed and event.kind == "ad_shown":
            say(f"RESUMED {event.ad_id}")
            return True
        return False


def say(line: str) -> None:
    print(line, flush=True)


def run_sync(probe: Probe, slot: str) -> None:
    subscribed: list[adorch.Event] = []
    client = adorch.Client(os.environ["ADORCH_SOCKET"])
    with client.subscribe([slot]) as events:
        say("SUBSCRIBED")
        for event in events:
            if probe.seen(event, subscribed):
                break
    say(f"CALLED {len(client.list_slots())} slots")


async def run_async(probe: Probe, slot: str) -> None:
    subscribed: list[adorch.Event] = []
    client = await adorch.AsyncClient.connect(os.environ["ADORCH_SOCKET"])
    async with await client.subscribe([slot]) as events:
        say("SUBSCRIBED")
        async for event in events:
            if probe.seen(event, subscribed):
                break
    say(f"CALLED {len(await client.list_slots())} slots")


def main() -> None:
    mode, slot = sys.argv[1], sys.argv[2]
    probe = Probe()
    log = logging.getLogger("adorch")
    log.addHandler(probe)
    log.setLevel(logging.INFO)
    if mode == "sync":
        run_sync(probe, slot)
    else:
        asyncio.run(run_async(probe, slot))


if __name__ == "__main__":
    main()
