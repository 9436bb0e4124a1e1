"""The blocking client: one connection for calls, one more per event subscription."""
from __future__ import annotations

import collections
import socket as _socket
import threading
import time
import weakref
from collections.abc import Iterator
from types import TracebackType
from typing import Any, TypeVar

from . import _api as api
from .errors import AdorchError, CannotConnect, Closed, ConnectionLost, Timeout
from .types import Ad, AppliedPrivacy, CapRule, Event, Privacy, RewardModel, Rewards, Slot, Status

T = TypeVar("T")


class _Broken(Exception):
    """The connection ended or was reset."""


class _Connection(api.Connection):
    def __init__(self, path: str) -> None:
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            sock.connect(path)
        except BaseException:
            sock.close()
            raise
        super().__init__(sock)

    def send(self, data: bytes) -> None:
        """Sends a call; a daemon's refusal if it closed the connection saying why."""
        try:
            self.sock.settimeout(None)
            self.sock.sendall(data)
        except OSError as error:
            refusal = self.refusal()
            if refusal is not None:
                raise refusal from None
            raise _Broken(str(error)) from error

    def receive(self, timeout: float | None) -> dict[str, Any]:
        """The next message; with timeout 0, only if it has come."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while (message := self.take()) is None:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                # 0 makes the socket non-blocking: a last read of what is there.
                self.sock.settimeout(left)
                chunk = self.sock.recv(api.READ_SIZE)
            except (_socket.timeout, BlockingIOError):
                raise Timeout(f"nothing from the daemon within {timeout} s") from None
            except OSError as error:
                raise _Broken(str(error)) from error
            if not chunk:
                raise _Broken("the daemon closed the connection")
            self.pending += chunk
        return message


def _connect(path: str, reconnect_timeout: float | None, closed: threading.Event) -> _Connection:
    """Connects; with reconnect_timeout, retries with a bounded backoff (a daemon restarting)
    that close() cuts short."""
    backoff = api.Backoff(f"connecting to {path}", reconnect_timeout or 0)
    while True:
        if closed.is_set():
            raise Closed(f"closed while connecting to {path}")
        try:
            return _Connection(path)
        except OSError as error:
            delay = backoff.next_delay(error) if reconnect_timeout else None
            if delay is None:
                raise CannotConnect(f"cannot connect to {path}: {error.strerror or error}") from error
            closed.wait(delay)


class _Closable:
    """One connection that one thread at a time uses (holding `_lock`) and that close() ends
    from any thread at once: it shuts the socket down, which wakes a thread waiting on it, and
    whoever holds the lock once it is set closes the socket (never under a thread using it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._connection: _Connection | None = None

    def close(self) -> None:
        """Final: later calls raise Closed, a call (or a wait for an event) in another thread
        ends at once with Closed."""
        self._closed.set()
        connection = self._connection
        if connection is not None:
            connection.shutdown()
        self._drop_if_closed()

    def _drop_if_closed(self) -> None:
        if self._closed.is_set() and self._lock.acquire(blocking=False):
            try:
                self._drop()
            finally:
                self._lock.release()

    def _drop(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _adopt(self, connection: _Connection) -> _Connection:
        """Takes a new connection; Closed if close() came meanwhile (it could not end this one)."""
        self._connection = connection
        if self._closed.is_set():
            self._drop()
            raise Closed("closed")
        return connection


class Client(_Closable):
    """A connection to adorchd. Calls are 1:1 with io.adorch.Ads and Manager.GetStatus and GetCaps.

    If the daemon restarts, the next call reconnects (retries logged on the "adorch" logger).
    Reads (list_*, get_status, get_caps) are sent again if the connection broke under them; a call that
    may have taken effect (show, load, report, ack_reward, session calls) raises ConnectionLost.
    Safe to share between threads (one call at a time); close() from any thread ends a call in
    flight with Closed.
    """

    def __init__(self, socket: str | None = None, *, timeout: float = api.DEFAULT_CALL_TIMEOUT,
                 reconnect_timeout: float = api.DEFAULT_RECONNECT_TIMEOUT) -> None:
        super().__init__()
        self.path = api.socket_path(socket)
        self.timeout = timeout
        self.reconnect_timeout = reconnect_timeout
        self._connection = _connect(self.path, None, self._closed)
        self._streams: weakref.WeakSet[EventStream] = weakref.WeakSet()

    def close(self) -> None:
        """Final, for the client and every event stream it opened: later calls and subscribe()
        raise Closed, a call or a wait for an event in another thread ends at once with Closed."""
        super().close()
        for stream in list(self._streams):
            stream.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def _ready(self) -> _Connection:
        if self._closed.is_set():
            raise Closed("the client is closed")
        if self._connection is not None and self._connection.idle(self.path):
            self._drop()
        if self._connection is None:
            self._adopt(_connect(self.path, self.reconnect_timeout, self._closed))
        assert self._connection is not None
        return self._connection

    def _run(self, call: api.Call[T]) -> T:
        try:
            with self._lock:
                return self._call(call)
        finally:
            self._drop_if_closed()

    def _call(self, call: api.Call[T]) -> T:
        retried = False
        while True:
            try:
                connection = self._ready()
            except BaseException:
                self._drop()
                raise
            sent = False
            try:
                connection.send(api.encode(call.method, call.parameters))
                sent = True
                return api.result(call, connection.receive(self.timeout + call.extra_wait))
            except _Broken as error:
                self._drop()
                if self._closed.is_set():
                    raise Closed(f"{call.method}: the client was closed") from None
                # A send that failed reached no one; a reply that never came may follow a call that ran.
                if retried or (sent and not call.idempotent):
                    raise ConnectionLost(f"{call.method}: the connection broke ({error})") from None
                api.log.warning("adorch: %s: connection lost (%s); sending it again on a new connection", call.method, error)
                retried = True
            except BaseException as error:
                if not api.keeps_connection(error):
                    self._drop()
                raise

    def list_slots(self, user_id: str | None = None) -> list[Slot]:
        """The slots; each one's `capped` says whether a frequency rule holds a Show for user_id
        (None: for a Show without one), and until when."""
        return self._run(api.list_slots(user_id))

    def show(self, slot: str, user_id: str | None = None, reward: RewardModel | None = None,
             privacy: Privacy | None = None) -> Ad:
        """privacy: for this Show only, over what set_privacy set."""
        return self._run(api.show(slot, user_id, reward, privacy))

    def report(self, ad_id: str, event: str) -> None:
        self._run(api.report(ad_id, event))

    def load(self, slot: str, count: int | None = None, width: int | None = None, height: int | None = None,
              timeout_ms: int | None = None, targeting: dict[str, Any] | None = None,
              privacy: Privacy | None = None) -> list[Ad]:
        """privacy: for this Load only, over what set_privacy set for the app."""
        return self._run(api.load(slot, count, width, height, timeout_ms, targeting, privacy))

    def list_rewards(self, user_id: str | None = None, since: str | None = None, after: str | None = None,
                     limit: int | None = None) -> Rewards:
        return self._run(api.list_rewards(user_id, since, after, limit))

    def set_privacy(self, privacy: Privacy | None, user_id: str | None = None) -> None:
        """Sets what the app's viewers said about their privacy (docs/privacy.md, "Setting a
        viewer's state"): for user_id, or with None for the app as a whole; privacy None clears
        it. Returns once the daemon has it on disk; a string that does not decode raises
        InvalidParameter naming it (privacy.tc_string), and nothing changes."""
        self._run(api.set_privacy(privacy, user_id))

    def get_privacy(self, user_id: str | None = None) -> AppliedPrivacy:
        """What applies to the app's calls for user_id (None: calls without one), and whence."""
        return self._run(api.get_privacy(user_id))

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

    def get_caps(self, slot: str, user_id: str | None = None) -> list[CapRule]:
        """Every frequency rule of the slot and its networks, with what each counts for user_id
        (None: for Shows without one) now (Manager.GetCaps; SlotNotFound for no such slot)."""
        return self._run(api.get_caps(slot, user_id))

    def interface_description(self, interface: str) -> str:
        """The IDL text of an interface (org.varlink.service.GetInterfaceDescription)."""
        return self._run(api.interface_description(interface))

    def subscribe(self, slots: list[str] | None = None) -> EventStream:
        """Events of the named slots (or all), on a connection of their own; the first is `subscribed`.
        Closing the client closes it too."""
        if self._closed.is_set():
            raise Closed("closed")
        stream = EventStream(self.path, slots, self.timeout, self.reconnect_timeout)
        self._streams.add(stream)
        if self._closed.is_set():
            stream.close()
            raise Closed("closed")
        return stream


class EventStream(_Closable):
    """An iterator of Event. When the daemon restarts, it subscribes again on a new connection
    and goes on; the new subscription's `subscribed` event is logged, not passed on. Unacknowledged
    rewards are delivered again then: dedupe them by trans_id. close() (from any thread) ends it:
    a `for` loop over it stops, next() raises Closed."""

    def __init__(self, path: str, slots: list[str] | None, timeout: float, reconnect_timeout: float) -> None:
        super().__init__()
        self.path = path
        self.slots = slots
        self.timeout = timeout
        self.reconnect_timeout = reconnect_timeout
        self._buffer: collections.deque[Event] = collections.deque()
        connection = _connect(path, None, self._closed)
        try:
            self._buffer.append(self._subscribe(connection))
        except _Broken as error:
            connection.close()
            raise ConnectionLost(f"Subscribe: {error}") from None
        except BaseException:
            connection.close()
            raise
        self._connection = connection

    def _subscribe(self, connection: _Connection) -> Event:
        method, parameters = api.subscribe(self.slots)
        connection.send(api.encode(method, parameters, more=True))
        return api.event_of(api.reply_parameters(connection.receive(self.timeout)))

    def __enter__(self) -> EventStream:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def __iter__(self) -> Iterator[Event]:
        return self

    def __next__(self) -> Event:
        try:
            return self.next()
        except Closed:
            raise StopIteration from None

    def next(self, timeout: float | None = None) -> Event:
        """The next event; Timeout if none came within timeout seconds (None: wait for ever).
        Subscribing again after a restart takes up to reconnect_timeout, whatever timeout says.
        A ProtocolError (an event not as the IDL says) leaves the stream usable."""
        try:
            with self._lock:
                return self._next(timeout)
        finally:
            self._drop_if_closed()

    def _next(self, timeout: float | None) -> Event:
        if self._closed.is_set():
            raise Closed("the event stream is closed")
        if self._buffer:
            return self._buffer.popleft()
        while True:
            if self._connection is None:
                self._resubscribe("the connection was dropped")
            assert self._connection is not None
            try:
                reply = self._connection.receive(timeout)
                parameters = api.reply_parameters(reply)
            except _Broken as error:
                if self._closed.is_set():
                    raise Closed("the event stream was closed") from None
                self._resubscribe(str(error))
                continue
            except AdorchError as error:
                if not api.is_broken_subscription(error):
                    raise
                self._resubscribe(error.name)
                continue
            event = api.event_of(parameters)
            if not api.continues(reply):
                self._resubscribe("the subscription ended")
            return event

    def _resubscribe(self, why: str) -> None:
        api.log.warning("adorch: subscription on %s lost (%s); subscribing again", self.path, why)
        self._drop()
        # One bound for connecting and subscribing both: the daemon is gone or back within it.
        backoff = api.Backoff(f"subscribing again on {self.path}", self.reconnect_timeout)
        while True:
            if self._closed.is_set():
                raise Closed("the event stream was closed")
            failure: BaseException
            try:
                connection = _Connection(self.path)
            except OSError as error:
                failure = error
            else:
                try:
                    subscribed = self._subscribe(connection)
                except _Broken as error:
                    failure = error
                except AdorchError as error:
                    if not api.is_broken_subscription(error):
                        connection.close()
                        raise
                    failure = error
                except BaseException:
                    connection.close()
                    raise
                else:
                    self._adopt(connection)
                    api.log.warning("adorch: subscribed again on %s (its subscribed event not passed on; rewards_waiting=%s)",
                                    self.path, subscribed.rewards_waiting)
                    return
                connection.close()
            delay = backoff.next_delay(failure)
            if delay is None:
                raise CannotConnect(f"could not subscribe again on {self.path} within {self.reconnect_timeout} s: {failure}")
            self._closed.wait(delay)
