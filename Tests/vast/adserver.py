#!/usr/bin/env python3
"""A VAST ad server on loopback for adorch's integration tests.

Serves the files of --root: GET /vast/NAME returns NAME with every {BASE} replaced by this
server's own address (so wrapper chains and tracking URLs point back here). Every request,
whatever its path, is recorded, so tests can check exactly which tracking and error URLs
were hit and how often.

  /vast/NAME            the document
  /slow/MS/NAME         the document after MS milliseconds
  /dead                 never answers (the connection stays open)
  /empty                204, no body
  anything else         204: tracking, impressions, error pings
  /_log                 every recorded request (path and query) as a JSON list, in order
  /_wait?prefix=P&count=N&timeout=S
                        answers once N recorded requests start with P (or after S seconds):
                        {"ok": bool, "count": n}; tests wait on this instead of sleeping

It prints "listening on PORT" once it accepts connections, then serves until killed.
"""
import argparse
import json
import os
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from loopback_http import QuietHandler, changed, serve  # noqa: E402

log = []


class Handler(QuietHandler):
    def send(self, status, body=b"", content_type="application/xml"):
        super().send(status, body, content_type)

    def document(self, name):
        path = os.path.join(self.server.root, os.path.basename(name))
        if not os.path.isfile(path):
            return self.send(404)
        with open(path, "rb") as f:
            body = f.read().replace(b"{BASE}", self.server.base.encode())
        self.send(200, body)

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        if url.path == "/_log":
            with changed:
                return self.send(200, json.dumps(log).encode(), "application/json")
        if url.path == "/_wait":
            return self.answer_wait(url.query, lambda q: log)
        with changed:
            log.append(self.path)
            changed.notify_all()
        parts = url.path.split("/")
        if url.path.startswith("/vast/"):
            return self.document(parts[2])
        if url.path.startswith("/slow/"):
            time.sleep(int(parts[2]) / 1000)
            return self.document(parts[3])
        if url.path == "/dead":
            time.sleep(3600)
            return
        self.send(204)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, help="the folder of VAST documents")
    parser.add_argument("--port", type=int, default=0, help="0: any free port")
    args = parser.parse_args()
    serve(Handler, args.port, root=args.root)


if __name__ == "__main__":
    main()
