"""The blocking client: one connection for calls, one more per event subscription."""
from __future__ import annotations

import collections
import select
import socket as _socket
import threading
import time
from collections.abc import Iterator
from types import TracebackType
from typing import Any, TypeVar

from . import _api as api
from .errors import CONNECTION_REFUSALS, AdorchError, CannotConnect, ConnectionLost, Timeout
from .types import Ad, Event, RewardModel, Rewards, Slot, Status

T = TypeVar("T")


class _Broken(Exception):
    """The connection ended or was reset."""


class _Connection:
    def __init__(self, path: str) -> None:
        self.sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            self.sock.connect(path)
        except OSError:
            self.sock.close()
            raise
        self.pending = bytearray()

    def close(self) -> None:
        self.sock.close()

    def send(self, data: bytes) -> None:
        try:
            self.sock.settimeout(None)
            self.sock.sendall(data)
        except OSError as error:
            raise _Broken(str(error)) from error

    def receive(self, timeout: float | None) -> dict[str, Any]:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (end := self.pending.find(b"\0")) < 0:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise Timeout(f"no reply within {timeout} s")
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(1 << 16)
            except _socket.timeout:
                raise Timeout(f"no reply within {timeout} s") from None
            except OSError as error:
                raise _Broken(str(error)) from error
            if not chunk:
                raise _Broken("the daemon closed the connection")
            self.pending += chunk
        frame = bytes(self.pending[:end])
        del self.pending[:end + 1]
        return api.decode(frame)

    def hung_up(self) -> bool:
        """Readable while no call is out: the daemon closed it (idle, restart) or said why it will."""
        readable, _, _ = select.select([self.sock], [], [], 0)
        return bool(readable)


def _connect(path: str, reconnect_timeout: float | None) -> _Connection:
    """Connects; with reconnect_timeout, retries with a bounded backoff (a daemon restarting)."""
    backoff = api.Backoff(f"connecting to {path}", reconnect_timeout or 0)
    while True:
        try:
            return _Connection(path)
        except OSError as error:
            delay = backoff.next_delay(error) if reconnect_timeout else None
            if delay is None:
                raise CannotConnect(f"cannot connect to {path}: {error.strerror or error}") from error
            time.sleep(delay)


class Client:
    """A connection to adorchd. Calls are 1:1 with io.adorch.Ads and Manager.GetStatus.

    If the daemon restarts, the next call reconnects (retries logged on the "adorch" logger).
    Reads (list_*, get_status) are sent again if the connection broke under them; a call that
    may have taken effect (show, load, report, ack_reward, session calls) raises ConnectionLost.
    Safe to share between threads (one call at a time).
    """

    def __init__(self, socket: str | None = None, *, timeout: float = api.DEFAULT_CALL_TIMEOUT,
                 reconnect_timeout: float = api.DEFAULT_RECONNECT_TIMEOUT) -> None:
        self.path = api.socket_path(socket)
        self.timeout = timeout
        self.reconnect_timeout = reconnect_timeout
        self._lock = threading.Lock()
        self._connection: _Connection | None = _connect(self.path, None)

    def close(self) -> None:
        with self._lock:
            self._drop()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def _drop(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _ready(self) -> _Connection:
        if self._connection is not None and self._connection.hung_up():
            api.log.warning("adorch: the daemon closed the connection to %s; reconnecting", self.path)
            self._drop()
        if self._connection is None:
            self._connection = _connect(self.path, self.reconnect_timeout)
        return self._connection

    def _run(self, call: api.Call[T]) -> T:
        with self._lock:
            retried = False
            while True:
                connection = self._ready()
                sent = False
                try:
                    connection.send(api.encode(call.method, call.parameters))
                    sent = True
                    reply = connection.receive(self.timeout + call.extra_wait)
                except _Broken as error:
                    self._drop()
                    # A send that failed reached no one; a reply that never came may follow a call that ran.
                    if retried or (sent and not call.idempotent):
                        raise ConnectionLost(f"{call.method}: the connection broke ({error})") from None
                    api.log.warning("adorch: %s: connection lost (%s); sending it again on a new connection", call.method, error)
                    retried = True
                    continue
                except Timeout:
                    # A late reply would be taken for the next call's.
                    self._drop()
                    raise
                if reply.get("error") in CONNECTION_REFUSALS:
                    # The daemon closes a connection it refused (TooManyConnections, ...).
                    self._drop()
                return call.parse(api.reply_parameters(reply))

    def list_slots(self) -> list[Slot]:
        return self._run(api.list_slots())

    def show(self, slot: str, user_id: str | None = None, reward: RewardModel | None = None) -> Ad:
        return self._run(api.show(slot, user_id, reward))

    def report(self, ad_id: str, event: str) -> None:
        self._run(api.report(ad_id, event))

    def load(self, slot: str, count: int | None = None, width: int | None = None, height: int | None = None,
             timeout_ms: int | None = None, targeting: dict[str, Any] | None = None) -> list[Ad]:
        return self._run(api.load(slot, count, width, height, timeout_ms, targeting))

    def list_rewards(self, user_id: str | None = None, since: str | None = None, after: str | None = None,
                     limit: int | None = None) -> Rewards:
        return self._run(api.list_rewards(user_id, since, after, limit))

    def ack_reward(self, trans_id: str) -> None:
        self._run(api.ack_reward(trans_id))

    def init_interactive(self, slot: str, creative_url: str, ad_parameters: dict[str, Any], slot_type: str) -> str:
        return self._run(api.init_interactive(slot, creative_url, ad_parameters, slot_type))

    def start(self, session_id: str) -> None:
        self._run(api.session_call("Start", session_id))

    def pause(self, session_id: str) -> None:
        self._run(api.session_call("Pause", session_id))

    def resume(self, session_id: str) -> None:
        self._run(api.session_call("Resume", session_id))

    def stop(self, session_id: str) -> None:
        self._run(api.session_call("Stop", session_id))

    def list_events(self, slots: list[str] | None = None, limit: int | None = None) -> list[Event]:
        return self._run(api.list_events(slots, limit))

    def get_status(self) -> Status:
        return self._run(api.get_status())

    def interface_description(self, interface: str) -> str:
        """The IDL text of an interface (org.varlink.service.GetInterfaceDescription)."""
        return self._run(api.interface_description(interface))

    def subscribe(self, slots: list[str] | None = None) -> EventStream:
        """Events of the named slots (or all), on a connection of their own; the first is `subscribed`."""
        return EventStream(self.path, slots, self.timeout, self.reconnect_timeout)


class EventStream:
    """An iterator of Event. When the daemon restarts, it subscribes again on a new connection
    and goes on; the new subscription's `subscribed` event is logged, not passed on. Unacknowledged
    rewards are delivered again then: dedupe them by trans_id."""

    def __init__(self, path: str, slots: list[str] | None, timeout: float, reconnect_timeout: float) -> None:
        self.path = path
        self.slots = slots
        self.timeout = timeout
        self.reconnect_timeout = reconnect_timeout
        self._buffer: collections.deque[Event] = collections.deque()
        self._connection: _Connection | None = _connect(path, None)
        try:
            self._buffer.append(self._subscribe(self._connection))
        except _Broken as error:
            self.close()
            raise ConnectionLost(f"Subscribe: {error}") from None

    def _subscribe(self, connection: _Connection) -> Event:
        method, parameters = api.subscribe(self.slots)
        connection.send(api.encode(method, parameters, more=True))
        return Event.from_json(api.reply_parameters(connection.receive(self.timeout))["event"])

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def __enter__(self) -> EventStream:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def __iter__(self) -> Iterator[Event]:
        return self

    def __next__(self) -> Event:
        return self.next()

    def next(self, timeout: float | None = None) -> Event:
        """The next event; Timeout if none came within timeout seconds (None: wait for ever).
        Subscribing again after a restart takes up to reconnect_timeout, whatever timeout says."""
        if self._buffer:
            return self._buffer.popleft()
        while True:
            if self._connection is None:
                self._resubscribe("closed")
            assert self._connection is not None
            try:
                reply = self._connection.receive(timeout)
                parameters = api.reply_parameters(reply)
            except _Broken as error:
                self._resubscribe(str(error))
                continue
            except AdorchError as error:
                if not api.is_broken_subscription(error):
                    raise
                self._resubscribe(error.name)
                continue
            if not reply.get("continues", False):
                self._resubscribe("the subscription ended")
            return Event.from_json(parameters["event"])

    def _resubscribe(self, why: str) -> None:
        api.log.warning("adorch: subscription on %s lost (%s); subscribing again", self.path, why)
        self.close()
        backoff = api.Backoff(f"subscribing again on {self.path}", self.reconnect_timeout)
        while True:
            connection: _Connection | None = None
            try:
                connection = _connect(self.path, self.reconnect_timeout)
                subscribed = self._subscribe(connection)
            except (_Broken, AdorchError) as error:
                if connection is not None:
                    connection.close()
                if isinstance(error, AdorchError) and not isinstance(error, CannotConnect) and not api.is_broken_subscription(error):
                    raise
                delay = backoff.next_delay(error)
                if delay is None:
                    raise CannotConnect(f"could not subscribe again on {self.path}: {error}") from None
                time.sleep(delay)
                continue
            self._connection = connection
            api.log.warning("adorch: subscribed again on %s (its subscribed event not passed on; rewards_waiting=%s)",
                            self.path, subscribed.rewards_waiting)
            return
