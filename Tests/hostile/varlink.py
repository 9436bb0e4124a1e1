"""A minimal Varlink client over a Unix socket, for the hostile tests' scripts (stdlib only).

The scripts run as other uids (setpriv), so they cannot use the Swift client; this is just
enough of the protocol to call, stream (more) and misbehave on purpose.
"""
import json
import socket
import time


class Closed(Exception):
    """The daemon closed the connection (or reset it)."""


class TimedOut(Exception):
    """No whole message within the timeout."""


class Connection:
    def __init__(self, path, timeout=5.0, rcvbuf=None):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if rcvbuf is not None:
            # Before connect: a never-reading client's kernel buffer stays small, so the
            # daemon (not the kernel) is where unread replies pile up.
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.timeout = timeout
        self.pending = b""

    def close(self):
        self.sock.close()

    def fileno(self):
        return self.sock.fileno()

    def send_raw(self, data):
        self.sock.sendall(data)

    def send(self, method, parameters=None, more=False):
        message = {"method": method}
        if parameters:
            message["parameters"] = parameters
        if more:
            message["more"] = True
        self.send_raw(json.dumps(message, separators=(",", ":")).encode() + b"\0")

    def receive(self, timeout=None):
        """The next whole message as a dict; Closed at end of stream, TimedOut if none came."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while b"\0" not in self.pending:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimedOut()
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(1 << 16)
            except socket.timeout:
                raise TimedOut()
            except (ConnectionResetError, BrokenPipeError):
                raise Closed()
            if not chunk:
                raise Closed()
            self.pending += chunk
        message, _, self.pending = self.pending.partition(b"\0")
        return json.loads(message)

    def call(self, method, parameters=None, more=False, timeout=None):
        self.send(method, parameters, more)
        return self.receive(timeout)


def error_of(reply):
    """The reply's error name, or None for a result."""
    return reply.get("error")
