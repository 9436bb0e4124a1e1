"""One app of the chaos run (ChaosTests, `make chaos`), run as a uid of its own: shows rewarded
ads to its users in a loop, reports impression, complete and close, and writes down, one JSON
line each, what the daemon told it, while the daemon is killed and its disk filled under it.

argv: socket, journal path, seconds, the uid (for user names). Stdlib only.
"""
import json
import random
import sys
import threading
import time

import varlink

SLOT = "chaos"


class Journal:
    def __init__(self, path):
        self.file = open(path, "a", buffering=1)
        self.lock = threading.Lock()

    def write(self, **fields):
        with self.lock:
            self.file.write(json.dumps(fields) + "\n")


def connect(path, deadline):
    """A connection once the daemon serves again, or None at the deadline."""
    while time.time() < deadline:
        try:
            return varlink.Connection(path, timeout=10)
        except OSError:
            time.sleep(0.05)
    return None


def listen(path, journal, deadline):
    """Every reward event this app is told of, across the daemon's restarts."""
    while time.time() < deadline:
        conn = connect(path, deadline)
        if conn is None:
            return
        try:
            conn.send("io.adorch.Ads.Subscribe", {"slots": [SLOT]}, more=True)
            while time.time() < deadline:
                try:
                    reply = conn.receive(timeout=1)
                except varlink.TimedOut:
                    continue
                event = reply.get("parameters", {}).get("event", {})
                if event.get("name") == "reward":
                    journal.write(e="reward", trans=event["detail"]["trans_id"], ad=event.get("ad_id"))
        except (varlink.Closed, OSError):
            pass
        finally:
            conn.close()


def complete(conn, ad, journal):
    """True once the outcome is final: told granted, or refused for good."""
    reply = conn.call("io.adorch.Ads.Report", {"ad_id": ad, "event": "complete"})
    error = varlink.error_of(reply)
    if error is None:
        journal.write(e="completed", ad=ad)
        return True
    message = reply.get("parameters", {}).get("message", "")
    if error.endswith("LedgerFailed") or "already reported complete" in message:
        # Not on disk yet: the daemon writes it again every second, and after a restart the
        # ad's promise takes a complete again.
        journal.write(e="not_yet", ad=ad, error=error)
        return False
    journal.write(e="complete_refused", ad=ad, error=error, message=message)
    return True


def main(path, out, seconds, uid):
    deadline = time.time() + float(seconds)
    journal = Journal(out)
    threading.Thread(target=listen, args=(path, journal, deadline), daemon=True).start()
    users = [f"u{uid}-{n}" for n in range(3)]
    unsure = []  # ads whose complete has no final answer yet
    conn = None
    while time.time() < deadline:
        try:
            if conn is None:
                conn = connect(path, deadline)
                if conn is None:
                    break
            for ad in list(unsure):
                if complete(conn, ad, journal):
                    unsure.remove(ad)
                    conn.call("io.adorch.Ads.Report", {"ad_id": ad, "event": "close"})
            user = random.choice(users)
            asked = time.time()
            reply = conn.call("io.adorch.Ads.Show", {"slot": SLOT, "user_id": user})
            error = varlink.error_of(reply)
            if error is not None:
                journal.write(e="refused", error=error, user=user)
                time.sleep(0.05)
                continue
            ad = reply["parameters"]["ad"]["id"]
            # The daemon took the ad between the two: what the cap check may rely on.
            journal.write(e="shown", ad=ad, user=user, asked=asked, t=time.time())
            conn.call("io.adorch.Ads.Report", {"ad_id": ad, "event": "impression"})
            unsure.append(ad)
            if complete(conn, ad, journal):
                unsure.remove(ad)
                conn.call("io.adorch.Ads.Report", {"ad_id": ad, "event": "close"})
        except (varlink.Closed, varlink.TimedOut, OSError):
            if conn is not None:
                conn.close()
            conn = None
    journal.write(e="end", unsure=unsure)


if __name__ == "__main__":
    main(*sys.argv[1:5])
