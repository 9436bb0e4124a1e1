"""Hostile clients (docs/rules.md, "Fair serving"), one subcommand per attack, each run as its own uid.

Every attack prints JSON lines; its last is {"result": {...}}, what the daemon did to it, for
the test (or the soak) to judge. Attacks that hold something (hog, owner) say so with a line
of their own and keep it until stdin closes.
"""
import argparse
import json
import select
import socket
import sys
import threading
import time

import varlink

# An option without a default: the caller must give it.
REQUIRED = object()

HEAD = b'{"method":"io.adorch.Ads.ListSlots","parameters":{"pad":"'


def say(**fields):
    print(json.dumps(fields), flush=True)


def ms_since(moment):
    return round((time.monotonic() - moment) * 1000, 1)


def await_stdin_close(limit_s=None):
    ready, _, _ = select.select([sys.stdin], [], [], limit_s)
    if ready:
        sys.stdin.read()


def ending(connection, timeout):
    """How the daemon ended a connection: its error name, "closed" without one, None if open."""
    try:
        reply = connection.receive(timeout)
    except varlink.Closed:
        return "closed"
    except varlink.TimedOut:
        return None
    return varlink.error_of(reply) or "reply without error"


def drip(args):
    """~900 KB of a message without its NUL, then one byte a millisecond."""
    connection = varlink.Connection(args.socket)
    started = time.monotonic()
    sent = 0
    answer, closed_after = None, None
    try:
        connection.send_raw(HEAD + b"a" * (args.bytes - len(HEAD)))
        sent = args.bytes
        tick = time.monotonic()
        while time.monotonic() - started < args.give_up_s:
            readable, _, _ = select.select([connection], [], [], max(0, tick - time.monotonic()))
            if readable:
                break
            connection.send_raw(b"a")
            sent += 1
            tick += args.rate_ms / 1000
    except (BrokenPipeError, ConnectionResetError):
        pass
    answer = ending(connection, 2)
    if answer is not None:
        closed_after = ms_since(started)
    say(result={"attack": "drip", "error": answer, "closed_after_ms": closed_after, "sent": sent})


def partials(args):
    """Many connections, each sending a large message without its NUL and then nothing."""
    body = HEAD + b"a" * (args.bytes - len(HEAD))
    opened = []
    for _ in range(args.connections):
        connection = varlink.Connection(args.socket, timeout=args.give_up_s)
        started = time.monotonic()
        try:
            connection.send_raw(body)
        except (BrokenPipeError, ConnectionResetError, socket.timeout):
            pass
        opened.append((connection, started))
    say(sent=len(opened) * args.bytes)
    endings, slowest = {}, 0.0
    waiting = dict(opened)
    deadline = time.monotonic() + args.give_up_s
    while waiting and time.monotonic() < deadline:
        readable, _, _ = select.select(list(waiting), [], [], max(0, deadline - time.monotonic()))
        for connection in readable:
            name = ending(connection, 1) or "no whole reply"
            endings[name] = endings.get(name, 0) + 1
            slowest = max(slowest, ms_since(waiting.pop(connection)))
            connection.close()
    say(result={"attack": "partials", "connections": len(opened), "errors": endings, "still_open": len(waiting),
                "slowest_close_ms": slowest})


def hog(args):
    """Opens idle connections, never calling; reports which were refused at once, then holds them."""
    held, refused = [], {}
    for index in range(args.connections):
        held.append((varlink.Connection(args.socket), time.monotonic(), index))
    deadline = time.monotonic() + args.window_s
    waiting = {connection: (started, index) for connection, started, index in held}
    answer_ms = []
    while waiting and len(refused) < args.expect_refused and time.monotonic() < deadline:
        readable, _, _ = select.select(list(waiting), [], [], max(0, deadline - time.monotonic()))
        for connection in readable:
            started, index = waiting.pop(connection)
            refused[index] = ending(connection, 1) or "no whole reply"
            answer_ms.append(ms_since(started))
    errors = {}
    for name in refused.values():
        errors[name] = errors.get(name, 0) + 1
    say(result={"attack": "hog", "opened": len(held), "refused": len(refused), "errors": errors,
                "first_refused": min(refused) if refused else None, "slowest_refusal_ms": max(answer_ms, default=None)})
    await_stdin_close(args.hold_s)


def idle(args):
    """Opens connections that never call and waits for the daemon to close them."""
    started = time.monotonic()
    waiting = [varlink.Connection(args.socket) for _ in range(args.connections)]
    endings, closed_after = {}, []
    deadline = started + args.give_up_s
    while waiting and time.monotonic() < deadline:
        readable, _, _ = select.select(waiting, [], [], max(0, deadline - time.monotonic()))
        for connection in readable:
            name = ending(connection, 1) or "no whole reply"
            endings[name] = endings.get(name, 0) + 1
            closed_after.append(ms_since(started))
            waiting.remove(connection)
    say(result={"attack": "idle", "connections": args.connections, "closed": len(closed_after), "endings": endings,
                "slowest_close_ms": max(closed_after, default=None)})


def huge_user_id(args):
    """Show and ListRewards with a user_id of --bytes bytes."""
    user = "u" * args.bytes
    connection = varlink.Connection(args.socket, timeout=10)
    replies = []
    for _ in range(args.repeat):
        for method, parameters in [("io.adorch.Ads.Show", {"slot": args.slot, "user_id": user}),
                                   ("io.adorch.Ads.ListRewards", {"user_id": user})]:
            try:
                reply = connection.call(method, parameters)
            except (OSError, varlink.Closed, varlink.TimedOut) as error:
                replies.append({"method": method, "error": "no reply: %r" % error})
                connection = varlink.Connection(args.socket, timeout=10)
                continue
            shown = reply.get("parameters", {}).get("ad", {}).get("id")
            if shown:
                connection.call("io.adorch.Ads.Report", {"ad_id": shown, "event": "close"})
            replies.append({"method": method, "error": varlink.error_of(reply),
                            "parameter": reply.get("parameters", {}).get("parameter"),
                            "message": str(reply.get("parameters", {}).get("message", ""))[:200]})
    say(result={"attack": "huge_user_id", "replies": replies})


def dropped(readers):
    """How many of these connections the daemon has closed, seen without reading them (POLLRDHUP)."""
    poller = select.poll()
    for reader in readers:
        poller.register(reader, select.POLLRDHUP)
    return len(poller.poll(0))


def never_read(args):
    """Subscribers that never read, while this uid Shows with user_ids as big as the daemon accepts.

    It shows until the daemon drops a subscriber (or --shows, or --give-up-s): the kernel takes
    a few hundred KB for each connection before the daemon has to hold any of it.
    """
    readers = []
    for _ in range(args.subscribers):
        reader = varlink.Connection(args.socket, rcvbuf=args.rcvbuf)
        reader.send("io.adorch.Ads.Subscribe", more=True)
        readers.append(reader)
    shower = varlink.Connection(args.socket, timeout=10)
    size, shown, refusals = args.user_id_bytes, 0, {}
    deadline = time.monotonic() + args.give_up_s
    while shown < args.shows and time.monotonic() < deadline and not (shown % 20 == 0 and dropped(readers)):
        reply = shower.call("io.adorch.Ads.Show", {"slot": args.slot, "user_id": "u" * size})
        name = varlink.error_of(reply)
        parameters = reply.get("parameters", {})
        if name is not None and name.endswith(".InvalidParameter") and parameters.get("parameter") == "user_id" and size > 16:
            size //= 2  # bigger than the daemon's bound: the biggest it takes is what hurts most
        elif name == "io.adorch.Ads.RateLimited":
            time.sleep(parameters.get("retry_after_ms", 100) / 1000)
        elif name is not None:
            refusals[name] = refusals.get(name, 0) + 1
            time.sleep(0.01)  # NoAdReady: the slot refills
        else:
            shown += 1
            shower.call("io.adorch.Ads.Report", {"ad_id": parameters["ad"]["id"], "event": "close"})
    say(shown=shown, user_id_bytes=size)
    # Now read what each got: a dropped reader's stream ends with its error. One still open
    # goes on receiving other apps' events, so it is read for --read-s at most.
    endings = {}
    for reader in readers:
        outcome, until = None, time.monotonic() + args.read_s
        while outcome is None:
            try:
                reply = reader.receive(args.quiet_s)
            except varlink.Closed:
                outcome = "closed"
            except varlink.TimedOut:
                outcome = "still open"
            else:
                outcome = varlink.error_of(reply)
                if outcome is None and time.monotonic() > until:
                    outcome = "still open"
        endings[outcome] = endings.get(outcome, 0) + 1
        reader.close()
    say(result={"attack": "never_read", "subscribers": len(readers), "shown": shown, "user_id_bytes": size,
                "endings": endings, "show_refusals": refusals})


def steal(args):
    """Start, Pause, Resume and Stop on a session that is another uid's."""
    connection = varlink.Connection(args.socket)
    replies = {}
    for method in ["Start", "Pause", "Resume", "Stop"]:
        reply = connection.call("io.adorch.Ads." + method, {"session_id": args.session})
        replies[method] = varlink.error_of(reply)
    say(result={"attack": "steal", "replies": replies})


def owner(args):
    """An app with one interactive session: prints its id, starts it on "start" from stdin, reports its events."""
    events = varlink.Connection(args.socket)
    events.call("io.adorch.Ads.Subscribe", more=True)
    connection = varlink.Connection(args.socket)
    reply = connection.call("io.adorch.Ads.InitInteractive", {"slot": args.slot, "creative_url": "https://creative.invalid/u.js",
                                                              "ad_parameters": {}, "slot_type": "preroll"})
    session = reply.get("parameters", {}).get("session_id")
    say(session_id=session, error=varlink.error_of(reply))
    if sys.stdin.readline().strip() != "start" or session is None:
        return
    start_error = varlink.error_of(connection.call("io.adorch.Ads.Start", {"session_id": session}))
    names, terminal = [], None
    deadline = time.monotonic() + args.give_up_s
    while terminal is None and time.monotonic() < deadline:
        try:
            event = events.receive(max(0.01, deadline - time.monotonic())).get("parameters", {}).get("event", {})
        except varlink.TimedOut:
            break
        if event.get("session_id") != session:
            continue
        names.append(event.get("name"))
        if event.get("terminal"):
            terminal = event.get("name")
    say(result={"attack": "owner", "start_error": start_error, "events": names, "terminal": terminal})


def hoard(args):
    """InitInteractive again and again, never starting or stopping."""
    connection = varlink.Connection(args.socket)
    replies = []
    for _ in range(args.sessions):
        reply = connection.call("io.adorch.Ads.InitInteractive", {"slot": args.slot, "creative_url": "https://creative.invalid/u.js",
                                                                  "ad_parameters": {}, "slot_type": "preroll"})
        replies.append(varlink.error_of(reply))
    say(result={"attack": "hoard", "replies": replies})


def load_flood(args):
    """Load in a tight loop until rate limited, then at the allowed pace, never closing an ad."""
    connection = varlink.Connection(args.socket, timeout=10)
    ok, errors, retry_after = 0, {}, None
    deadline = time.monotonic() + args.give_up_s
    while time.monotonic() < deadline and "io.adorch.Ads.TooManyOpenAds" not in errors:
        reply = connection.call("io.adorch.Ads.Load", {"slot": args.slot})
        name = varlink.error_of(reply)
        if name is None:
            ok += len(reply.get("parameters", {}).get("ads", []))
            continue
        errors[name] = errors.get(name, 0) + 1
        if name == "io.adorch.Ads.RateLimited":
            retry_after = reply.get("parameters", {}).get("retry_after_ms")
            # Past the first refusal, the flood keeps to the pace it was given: now it hoards.
            if isinstance(retry_after, int) and errors[name] > args.ignore_retries:
                time.sleep(retry_after / 1000)
    say(result={"attack": "load_flood", "ads": ok, "errors": errors, "retry_after_ms": retry_after})


def show_flood(args):
    """Show in a tight loop until stdin closes, closing each ad it gets (so no budget stops it);
    past a RateLimited, at the pace it was given. Says {"flooding": true} once it got an ad."""
    connection = varlink.Connection(args.socket, timeout=10)
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    ads, errors, no_ad_messages = 0, {}, set()
    while not stop.is_set():
        reply = connection.call("io.adorch.Ads.Show", {"slot": args.slot})
        name = varlink.error_of(reply)
        if name is None:
            ads += 1
            if ads == 1:
                say(flooding=True)
            connection.call("io.adorch.Ads.Report", {"ad_id": reply["parameters"]["ad"]["id"], "event": "close"})
            continue
        errors[name] = errors.get(name, 0) + 1
        if name == "io.adorch.Ads.NoAdReady":
            no_ad_messages.add(reply.get("parameters", {}).get("message"))
        if name == "io.adorch.Ads.RateLimited":
            stop.wait(reply.get("parameters", {}).get("retry_after_ms", 10) / 1000)
    say(result={"attack": "show_flood", "ads": ads, "errors": errors, "no_ad_messages": sorted(no_ad_messages)})


def list_flood(args):
    """Connections that each ask for the most events ListEvents gives, again and again, reading
    every reply: reading is cheap for the client, building each reply is the daemon's time."""
    def flood(results, index):
        connection = varlink.Connection(args.socket, timeout=10)
        listed, errors = 0, {}
        deadline = time.monotonic() + args.seconds
        while time.monotonic() < deadline:
            reply = connection.call("io.adorch.Ads.ListEvents", {"limit": args.limit})
            name = varlink.error_of(reply)
            if name is None:
                listed += 1
            else:
                errors[name] = errors.get(name, 0) + 1
        results[index] = (listed, errors)

    results = [None] * args.connections
    threads = [threading.Thread(target=flood, args=(results, i)) for i in range(args.connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    errors = {}
    for _, errs in results:
        for name, count in errs.items():
            errors[name] = errors.get(name, 0) + count
    say(result={"attack": "list_flood", "listed": sum(listed for listed, _ in results), "errors": errors})


def call(args):
    """One ordinary call, for "another uid can still ..."."""
    reply = varlink.Connection(args.socket, timeout=10).call(args.method, json.loads(args.parameters))
    say(result={"attack": "call", "error": varlink.error_of(reply), "parameters": reply.get("parameters", {})})


def main():
    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers(dest="attack", required=True)

    def command(function, **options):
        sub = commands.add_parser(function.__name__.replace("_", "-"))
        sub.add_argument("--socket", required=True)
        for name, (kind, default) in options.items():
            sub.add_argument("--" + name.replace("_", "-"), type=kind, default=default, required=default is REQUIRED)
        sub.set_defaults(run=function)

    command(drip, bytes=(int, 900_000), rate_ms=(float, 1), give_up_s=(float, 20))
    command(partials, connections=(int, 200), bytes=(int, 1_000_000), give_up_s=(float, 30))
    command(hog, connections=(int, REQUIRED), expect_refused=(int, REQUIRED), window_s=(float, 3), hold_s=(float, None))
    command(idle, connections=(int, 5), give_up_s=(float, 20))
    command(huge_user_id, slot=(str, REQUIRED), bytes=(int, 1_000_000), repeat=(int, 5))
    command(never_read, slot=(str, REQUIRED), subscribers=(int, 300), rcvbuf=(int, 4096), shows=(int, 1000),
            user_id_bytes=(int, 65536), quiet_s=(float, 0.2), read_s=(float, 2), give_up_s=(float, 30))
    command(steal, session=(str, REQUIRED))
    command(owner, slot=(str, REQUIRED), give_up_s=(float, 10))
    command(hoard, slot=(str, REQUIRED), sessions=(int, REQUIRED))
    command(list_flood, connections=(int, 8), limit=(int, 512), seconds=(float, 5))
    command(load_flood, slot=(str, REQUIRED), ignore_retries=(int, 3), give_up_s=(float, 20))
    command(show_flood, slot=(str, REQUIRED))
    command(call, method=(str, REQUIRED), parameters=(str, "{}"))
    args = parser.parse_args()
    args.run(args)


if __name__ == "__main__":
    main()
