#!/usr/bin/env python3
"""A loopback OpenRTB 2.6 exchange for adorch's integration tests.

Every BidRequest POSTed is validated against IAB's OpenRTB 2.6 JSON Schema (read from
--schema, never copied) and recorded with its violations; it is answered from the fixtures
of --root, files of BidResponse JSON in which {ID} becomes the request's id, {IMP} its first
imp's id, {IMP2}... the next ones', and {BASE} this exchange's own address (so nurl, burl,
lurl and markup URLs point back here). Every GET is recorded: the notices, with their
substituted macros, are what the tests count.

  POST /bid                   what the first imp's tagid (the slot's ad_unit_id) names:
    NAME                      the fixture NAME
    slow-MS-NAME              the fixture after MS milliseconds
    nobid                     204, no body
    status-CODE               CODE, no body
    big-BYTES                 200 with BYTES of a JSON string (a response too large to take)
    garbage                   200 with text that is not JSON
    endless                   200 with a body that does not end (until 1 GiB)
    redirect                  302 to itself, for ever
  POST /bid/KIND              the same, KIND in place of the tagid
  GET  /markup/NAME           the file NAME of --root, {BASE} replaced (markup served on win)
  GET  /gone/...              404, recorded: a notice the exchange refuses for good
  GET  /endless/...           as the bid kind endless, recorded
  GET  anything else          204: a notice or a tracker (503 while down, recorded apart)
  GET  /_down?on=1            notices and trackers answer 503 from now (on=0: 204 again)
  GET  /_refused              every GET answered 503 while down, in order
  GET  /_log                  every recorded GET (path and query) as a JSON list, in order
  GET  /_requests             every BidRequest: [{"path", "request", "errors"}], in order
  GET  /_wait?prefix=P&count=N&timeout=S
                              answers once N recorded GETs (or, with kind=bid, POSTs) start
                              with P, or after S seconds: {"ok": bool, "count": n}

It prints "listening on PORT" once it accepts connections, then serves until killed.
"""
import argparse
import json
import os
import sys
import time
import urllib.parse

here = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [here, os.path.join(here, "..")]
from loopback_http import QuietHandler, changed, serve  # noqa: E402
from openrtb_schema import Validator  # noqa: E402

notices = []
refused = []
bids = []
down = False


class Handler(QuietHandler):

    def fixture(self, name, request):
        path = os.path.join(self.server.root, os.path.basename(name))
        if not os.path.isfile(path):
            return self.send(404)
        with open(path, "rb") as f:
            text = f.read().decode()
        imps = [imp.get("id", "") for imp in request.get("imp", [])] if isinstance(request, dict) else []
        text = text.replace("{BASE}", self.server.base).replace("{ID}", str(request.get("id", "")) if isinstance(request, dict) else "")
        for index, imp in reversed(list(enumerate(imps))):
            text = text.replace("{IMP%s}" % ("" if index == 0 else index + 1), imp)
        self.send(200, text.encode())

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            request = json.loads(raw)
            errors = []
        except ValueError as error:
            request, errors = None, ["not JSON: %s" % error]
        if self.headers.get("x-openrtb-version") != "2.6":
            errors.append("header x-openrtb-version is %r, not 2.6" % self.headers.get("x-openrtb-version"))
        # Answered first, validated after: the schema check takes longer than a short tmax.
        record = {"path": self.path, "request": request, "errors": None}
        with changed:
            bids.append(record)
            changed.notify_all()
        try:
            self.answer(request)
        finally:
            if request is not None:
                errors += self.server.validator.errors(request, "BidRequest")
            with changed:
                record["errors"] = errors
                changed.notify_all()

    def answer(self, request):
        parts = urllib.parse.urlsplit(self.path).path.split("/")
        if parts[1:2] != ["bid"]:
            return self.send(404)
        tagid = ""
        if isinstance(request, dict) and request.get("imp"):
            tagid = request["imp"][0].get("tagid", "")
        words = (parts[2] if len(parts) > 2 and parts[2] else tagid).split("-", 2)
        kind = words[0]
        if kind == "nobid":
            return self.send(204)
        if kind == "status":
            return self.send(int(words[1]))
        if kind == "big":
            return self.send(200, b'"' + b"a" * int(words[1]) + b'"')
        if kind == "garbage":
            return self.send(200, b"{this is not json")
        if kind == "endless":
            return self.endless()
        if kind == "redirect":
            return self.send(302, extra={"Location": self.path})
        if kind == "slow":
            time.sleep(int(words[1]) / 1000)
            return self.fixture(words[2], request or {})
        return self.fixture("-".join(words), request or {})

    def endless(self):
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        chunk = b" " * 65536
        try:
            for _ in range(16384):
                self.wfile.write(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.close_connection = True

    def do_GET(self):
        global down
        url = urllib.parse.urlsplit(self.path)
        if url.path == "/_down":
            down = urllib.parse.parse_qs(url.query).get("on", ["1"])[0] == "1"
            return self.send(204)
        if url.path == "/_refused":
            with changed:
                return self.send(200, json.dumps(refused).encode())
        if url.path == "/_log":
            with changed:
                return self.send(200, json.dumps(notices).encode())
        if url.path == "/_requests":
            # Once every request received so far is validated.
            with changed:
                changed.wait_for(lambda: all(b["errors"] is not None for b in bids), timeout=30)
                return self.send(200, json.dumps(bids).encode())
        if url.path == "/_wait":
            kinds = {"bid": lambda: [b["path"] for b in bids], "refused": lambda: refused}
            return self.answer_wait(url.query, lambda q: kinds.get(q.get("kind", [""])[0], lambda: notices)())
        if down and not url.path.startswith("/markup/"):
            with changed:
                refused.append(self.path)
                changed.notify_all()
            return self.send(503)
        with changed:
            notices.append(self.path)
            changed.notify_all()
        if url.path.startswith("/gone/"):
            return self.send(404)
        if url.path.startswith("/endless/"):
            return self.endless()
        if url.path.startswith("/markup/"):
            path = os.path.join(self.server.root, os.path.basename(url.path))
            if not os.path.isfile(path):
                return self.send(404)
            with open(path, "rb") as f:
                return self.send(200, f.read().replace(b"{BASE}", self.server.base.encode()), "text/html")
        self.send(204)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, help="the folder of BidResponse fixtures and markup")
    parser.add_argument("--schema", required=True, help="the OpenRTB 2.6 JSON Schema folder")
    parser.add_argument("--port", type=int, default=0, help="0: any free port")
    args = parser.parse_args()
    serve(Handler, args.port, root=args.root, validator=Validator(args.schema))


if __name__ == "__main__":
    main()
