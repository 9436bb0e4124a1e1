"""The polite client: an ordinary app of its own uid, measuring how long its calls take.

A call every --interval-ms (ListSlots, then Show and Report close of the ad it got, in turn);
with --subscribe also a subscriber that reads every event. Prints {"ready": true} once its
first call was answered, and when stdin closes (or on SIGTERM) one JSON summary line:
count, p50_ms, p99_ms, max_ms, errors (by name), lost (calls without a reply), no_ad (Show's
NoAdReady, the daemon's normal answer for an empty slot) and the subscriber's outcome.
"""
import argparse
import json
import signal
import sys
import threading
import time

import varlink

NO_AD = "io.adorch.Ads.NoAdReady"


def percentile(sorted_values, fraction):
    if not sorted_values:
        return 0.0
    index = min(len(sorted_values) - 1, int(round(fraction * (len(sorted_values) - 1))))
    return sorted_values[index]


class Polite:
    def __init__(self, args):
        self.args = args
        self.stop = threading.Event()
        self.ready = threading.Event()
        self.latencies = []
        self.errors = {}
        self.lost = 0
        self.no_ad = 0
        self.first_lost = []
        self.subscriber = {"events": 0, "ended": None}
        self.connection = None

    def timed_call(self, method, parameters=None):
        """One call on the polite connection; None when no reply came (counted as lost)."""
        started = time.monotonic()
        try:
            if self.connection is None:
                self.connection = varlink.Connection(self.args.socket, timeout=self.args.call_timeout_s)
            reply = self.connection.call(method, parameters)
        except (OSError, varlink.Closed, varlink.TimedOut) as error:
            self.lost += 1
            if len(self.first_lost) < 3:
                self.first_lost.append("%s: %r" % (method, error))
            if self.connection is not None:
                self.connection.close()
            self.connection = None
            return None
        self.latencies.append((time.monotonic() - started) * 1000)
        name = varlink.error_of(reply)
        if name == NO_AD:
            self.no_ad += 1
        elif name is not None:
            self.errors[name] = self.errors.get(name, 0) + 1
        self.ready.set()
        return reply

    def calls(self):
        period = self.args.interval_ms / 1000
        tick = time.monotonic()
        turn = 0
        while not self.stop.is_set():
            if turn % 2 == 0:
                self.timed_call("io.adorch.Ads.ListSlots")
            else:
                shown = self.timed_call("io.adorch.Ads.Show", {"slot": self.args.slot})
                ad = (shown or {}).get("parameters", {}).get("ad", {}).get("id")
                if ad:
                    self.timed_call("io.adorch.Ads.Report", {"ad_id": ad, "event": "close"})
            turn += 1
            tick += period
            self.stop.wait(max(0, tick - time.monotonic()))

    def subscribe(self):
        try:
            events = varlink.Connection(self.args.socket, timeout=self.args.call_timeout_s)
            events.send("io.adorch.Ads.Subscribe", more=True)
            while not self.stop.is_set():
                try:
                    reply = events.receive(timeout=0.25)
                except varlink.TimedOut:
                    continue
                if varlink.error_of(reply):
                    self.subscriber["ended"] = varlink.error_of(reply)
                    return
                self.subscriber["events"] += 1
        except (OSError, varlink.Closed) as error:
            self.subscriber["ended"] = "closed: %r" % error

    def summary(self):
        ordered = sorted(self.latencies)
        return {
            "count": len(ordered) + self.lost,
            "p50_ms": round(percentile(ordered, 0.50), 2),
            "p99_ms": round(percentile(ordered, 0.99), 2),
            "max_ms": round(ordered[-1], 2) if ordered else 0.0,
            "errors": self.errors,
            "lost": self.lost,
            "first_lost": self.first_lost,
            "no_ad": self.no_ad,
            "subscriber": self.subscriber if self.args.subscribe else None,
        }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--socket", required=True)
    parser.add_argument("--slot", required=True, help="a preloaded slot to Show from")
    parser.add_argument("--interval-ms", type=float, default=20)
    parser.add_argument("--call-timeout-s", type=float, default=5)
    parser.add_argument("--subscribe", action="store_true")
    args = parser.parse_args()

    polite = Polite(args)
    signal.signal(signal.SIGTERM, lambda *_: polite.stop.set())
    workers = [threading.Thread(target=polite.calls, daemon=True)]
    if args.subscribe:
        workers.append(threading.Thread(target=polite.subscribe, daemon=True))
    for worker in workers:
        worker.start()
    if polite.ready.wait(10):
        print(json.dumps({"ready": True}), flush=True)

    # Stdin closing is the test's "stop"; a reader thread, so SIGTERM also ends the wait.
    threading.Thread(target=lambda: (sys.stdin.read(), polite.stop.set()), daemon=True).start()
    polite.stop.wait()
    for worker in workers:
        worker.join(args.call_timeout_s + 1)
    print(json.dumps(polite.summary()), flush=True)


if __name__ == "__main__":
    main()
