"""What the loopback HTTP servers of the tests share (Tests/vast/adserver.py,
Tests/openrtb/exchange.py): a quiet handler, waiting on recorded requests, serving."""
import json
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

changed = threading.Condition()


class QuietHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send(self, status, body=b"", content_type="application/json", extra=None):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (extra or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if body:
            try:
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass

    def answer_wait(self, query, records):
        """/_wait?prefix=P&count=N&timeout=S: once N of records() start with P, or after S
        seconds, {"ok": bool, "count": n}. Tests wait on this instead of sleeping."""
        q = urllib.parse.parse_qs(query)
        prefix, count = q.get("prefix", [""])[0], int(q.get("count", ["1"])[0])
        deadline = time.monotonic() + float(q.get("timeout", ["10"])[0])
        with changed:
            while True:
                n = sum(1 for p in records(q) if p.startswith(prefix))
                left = deadline - time.monotonic()
                if n >= count or left <= 0:
                    break
                changed.wait(left)
        self.send(200, json.dumps({"ok": n >= count, "count": n}).encode(), "application/json")


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        # A client that gave up (a load cut at its deadline) resets its connection: not an error here.
        if not isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            super().handle_error(request, client_address)


def serve(handler, port, **attributes):
    """Serves on 127.0.0.1:port (0: any), with `base` and `attributes` set on the server;
    prints "listening on PORT" once it accepts connections."""
    server = Server(("127.0.0.1", port), handler)
    server.base = "http://127.0.0.1:%d" % server.server_address[1]
    for key, value in attributes.items():
        setattr(server, key, value)
    print("listening on %d" % server.server_address[1], flush=True)
    server.serve_forever()
