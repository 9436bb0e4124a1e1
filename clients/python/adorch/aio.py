"""The asyncio client: the same calls as adorch.Client, awaited, and events as an async iterator."""
from __future__ import annotations

import asyncio
import collections
import socket as _socket
import time
import weakref
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any, TypeVar

from . import _api as api
from .errors import AdorchError, CannotConnect, Closed, ConnectionLost, Timeout
from .types import Ad, AppliedPrivacy, CapRule, Event, Privacy, RewardModel, Rewards, Slot, Status

T = TypeVar("T")

class _Broken(Exception):
    """The connection ended or was reset."""


class _Connection(api.Connection):
    """Waits on its socket with the loop's add_reader and reads it itself, so that a wait cut
    short (timeout, cancellation) never loses bytes read; closing is done when close() returns."""

    def __init__(self, sock: _socket.socket) -> None:
        super().__init__(sock)
        self._waiter: asyncio.Future[None] | None = None

    @classmethod
    async def open(cls, path: str) -> _Connection:
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            await asyncio.get_running_loop().sock_connect(sock, path)
        except BaseException:
            sock.close()
            raise
        return cls(sock)

    def close(self) -> None:
        """Closes now; a task waiting in receive() wakes and finds it closed."""
        waiter = self._waiter
        if waiter is not None and self.sock.fileno() >= 0:
            waiter.get_loop().remove_reader(self.sock.fileno())
            _wake(waiter)
        super().close()

    async def send(self, data: bytes) -> None:
        """Sends a call; a daemon's refusal if it closed the connection saying why."""
        try:
            await asyncio.get_running_loop().sock_sendall(self.sock, data)
        except OSError as error:
            refusal = self.refusal()
            if refusal is not None:
                raise refusal from None
            raise _Broken(str(error)) from error

    async def receive(self, timeout: float | None) -> dict[str, Any]:
        """The next message; with timeout 0, only if it has come."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while (message := self.take()) is None:
            try:
                chunk = self.sock.recv(api.READ_SIZE)
            except BlockingIOError:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise Timeout(f"nothing from the daemon within {timeout} s") from None
                await self._readable(left, timeout)
                continue
            except OSError as error:
                raise _Broken(str(error)) from error
            if not chunk:
                raise _Broken("the daemon closed the connection")
            self.pending += chunk
        return message

    async def _readable(self, left: float | None, timeout: float | None) -> None:
        loop = asyncio.get_running_loop()
        fd = self.sock.fileno()
        if fd < 0:
            raise _Broken("closed")
        waiter = self._waiter = loop.create_future()
        loop.add_reader(fd, _wake, waiter)
        try:
            await asyncio.wait_for(waiter, left)
        except asyncio.TimeoutError:
            raise Timeout(f"nothing from the daemon within {timeout} s") from None
        finally:
            self._waiter = None
            # Not if close() took the fd: its number may be another connection's by now.
            if self.sock.fileno() == fd:
                loop.remove_reader(fd)


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


async def _connect(path: str, reconnect_timeout: float | None) -> _Connection:
    backoff = api.Backoff(f"connecting to {path}", reconnect_timeout or 0)
    while True:
        try:
            return await _Connection.open(path)
        except OSError as error:
            delay = backoff.next_delay(error) if reconnect_timeout else None
            if delay is None:
                raise CannotConnect(f"cannot connect to {path}: {error.strerror or error}") from error
            await asyncio.sleep(delay)


class AsyncClient:
    """adorch.Client for asyncio: `client = await AsyncClient.connect()`, then the same methods, awaited.
    Reconnects, retries, ConnectionLost and close() as adorch.Client."""

    def __init__(self, path: str, connection: _Connection, timeout: float, reconnect_timeout: float) -> None:
        self.path = path
        self.timeout = timeout
        self.reconnect_timeout = reconnect_timeout
        self._connection: _Connection | None = connection
        self._lock = asyncio.Lock()
        self._closed = False
        self._streams: weakref.WeakSet[AsyncEventStream] = weakref.WeakSet()

    @classmethod
    async def connect(cls, socket: str | None = None, *, timeout: float = api.DEFAULT_CALL_TIMEOUT,
                      reconnect_timeout: float = api.DEFAULT_RECONNECT_TIMEOUT) -> AsyncClient:
        path = api.socket_path(socket)
        return cls(path, await _connect(path, None), timeout, reconnect_timeout)

    async def close(self) -> None:
        """Final, and done when it returns, for the client and every event stream it opened:
        later calls and subscribe() raise Closed, a call in flight in another task ends with Closed."""
        self._closed = True
        self._drop()
        for stream in list(self._streams):
            stream.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()

    def _drop(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    async def _ready(self) -> _Connection:
        if self._closed:
            raise Closed("the client is closed")
        if self._connection is not None and self._connection.idle(self.path):
            self._drop()
        if self._connection is None:
            connection = await _connect(self.path, self.reconnect_timeout)
            if self._closed:
                connection.close()
                raise Closed("the client was closed")
            self._connection = connection
        return self._connection

    async def _run(self, call: api.Call[T]) -> T:
        async with self._lock:
            retried = False
            while True:
                try:
                    connection = await self._ready()
                except BaseException:
                    self._drop()
                    raise
                sent = False
                try:
                    await connection.send(api.encode(call.method, call.parameters))
                    sent = True
                    return api.result(call, await connection.receive(self.timeout + call.extra_wait))
                except _Broken as error:
                    self._drop()
                    if self._closed:
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

    async def list_slots(self, user_id: str | None = None) -> list[Slot]:
        """As Client.list_slots."""
        return await self._run(api.list_slots(user_id))

    async def show(self, slot: str, user_id: str | None = None, reward: RewardModel | None = None,
             privacy: Privacy | None = None) -> Ad:
        """privacy: for this Show only, over what set_privacy set."""
        return await self._run(api.show(slot, user_id, reward, privacy))

    async def report(self, ad_id: str, event: str) -> None:
        await self._run(api.report(ad_id, event))

    async def load(self, slot: str, count: int | None = None, width: int | None = None, height: int | None = None,
                    timeout_ms: int | None = None, targeting: dict[str, Any] | None = None,
                    privacy: Privacy | None = None) -> list[Ad]:
        """privacy: for this Load only, over what set_privacy set for the app."""
        return await self._run(api.load(slot, count, width, height, timeout_ms, targeting, privacy))

    async def list_rewards(self, user_id: str | None = None, since: str | None = None, after: str | None = None,
                           limit: int | None = None) -> Rewards:
        return await self._run(api.list_rewards(user_id, since, after, limit))

    async def set_privacy(self, privacy: Privacy | None, user_id: str | None = None) -> None:
        """Sets what the app's viewers said about their privacy (docs/privacy.md, "Setting a
        viewer's state"): for user_id, or with None for the app as a whole; privacy None clears
        it. Returns once the daemon has it on disk; a string that does not decode raises
        InvalidParameter naming it (privacy.tc_string), and nothing changes."""
        await self._run(api.set_privacy(privacy, user_id))

    async def get_privacy(self, user_id: str | None = None) -> AppliedPrivacy:
        """What applies to the app's calls for user_id (None: calls without one), and whence."""
        return await self._run(api.get_privacy(user_id))

    async def ack_reward(self, trans_id: str) -> None:
        await self._run(api.ack_reward(trans_id))

    async def init_interactive(self, slot: str, creative_url: str, ad_parameters: dict[str, Any], slot_type: str) -> str:
        return await self._run(api.init_interactive(slot, creative_url, ad_parameters, slot_type))

    async def start(self, session_id: str) -> None:
        await self._run(api.session_call("Start", session_id))

    async def pause(self, session_id: str) -> None:
        await self._run(api.session_call("Pause", session_id))

    async def resume(self, session_id: str) -> None:
        await self._run(api.session_call("Resume", session_id))

    async def stop(self, session_id: str) -> None:
        await self._run(api.session_call("Stop", session_id))

    async def list_events(self, slots: list[str] | None = None, limit: int | None = None) -> list[Event]:
        return await self._run(api.list_events(slots, limit))

    async def get_status(self) -> Status:
        return await self._run(api.get_status())

    async def get_caps(self, slot: str, user_id: str | None = None) -> list[CapRule]:
        """As Client.get_caps."""
        return await self._run(api.get_caps(slot, user_id))

    async def interface_description(self, interface: str) -> str:
        return await self._run(api.interface_description(interface))

    async def subscribe(self, slots: list[str] | None = None) -> AsyncEventStream:
        """Events of the named slots (or all), on a connection of their own; the first is `subscribed`.
        Closing the client closes it too."""
        if self._closed:
            raise Closed("closed")
        stream = AsyncEventStream(self.path, slots, self.timeout, self.reconnect_timeout)
        self._streams.add(stream)
        await stream._open()
        if self._closed:
            stream.close()
            raise Closed("closed")
        return stream


class AsyncEventStream:
    """An async iterator of Event; resubscribes after a daemon restart and ends at close() as
    adorch.EventStream does."""

    def __init__(self, path: str, slots: list[str] | None, timeout: float, reconnect_timeout: float) -> None:
        self.path = path
        self.slots = slots
        self.timeout = timeout
        self.reconnect_timeout = reconnect_timeout
        self._buffer: collections.deque[Event] = collections.deque()
        self._connection: _Connection | None = None
        self._closed = False

    async def _open(self) -> None:
        connection = await _connect(self.path, None)
        try:
            self._buffer.append(await self._subscribe(connection))
        except _Broken as error:
            connection.close()
            raise ConnectionLost(f"Subscribe: {error}") from None
        except BaseException:
            connection.close()
            raise
        self._connection = connection

    async def _subscribe(self, connection: _Connection) -> Event:
        method, parameters = api.subscribe(self.slots)
        await connection.send(api.encode(method, parameters, more=True))
        return api.event_of(api.reply_parameters(await connection.receive(self.timeout)))

    def close(self) -> None:
        """Final: an `async for` over it stops, next() raises Closed, also in a task waiting in it."""
        self._closed = True
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    async def __aenter__(self) -> AsyncEventStream:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def __aiter__(self) -> AsyncIterator[Event]:
        return self

    async def __anext__(self) -> Event:
        try:
            return await self.next()
        except Closed:
            raise StopAsyncIteration from None

    async def next(self, timeout: float | None = None) -> Event:
        """The next event; Timeout if none came within timeout seconds (None: wait for ever).
        Subscribing again after a restart takes up to reconnect_timeout, whatever timeout says.
        A ProtocolError (an event not as the IDL says) leaves the stream usable."""
        if self._closed:
            raise Closed("the event stream is closed")
        if self._buffer:
            return self._buffer.popleft()
        while True:
            if self._connection is None:
                await self._resubscribe("the connection was dropped")
            assert self._connection is not None
            try:
                reply = await self._connection.receive(timeout)
                parameters = api.reply_parameters(reply)
            except _Broken as error:
                if self._closed:
                    raise Closed("the event stream was closed") from None
                await self._resubscribe(str(error))
                continue
            except AdorchError as error:
                if not api.is_broken_subscription(error):
                    raise
                await self._resubscribe(error.name)
                continue
            event = api.event_of(parameters)
            if not api.continues(reply):
                await self._resubscribe("the subscription ended")
            return event

    async def _resubscribe(self, why: str) -> None:
        api.log.warning("adorch: subscription on %s lost (%s); subscribing again", self.path, why)
        if self._connection is not None:
            self._connection.close()
            self._connection = None
        # One bound for connecting and subscribing both: the daemon is gone or back within it.
        backoff = api.Backoff(f"subscribing again on {self.path}", self.reconnect_timeout)
        while True:
            if self._closed:
                raise Closed("the event stream was closed")
            failure: BaseException
            try:
                connection = await _Connection.open(self.path)
            except OSError as error:
                failure = error
            else:
                try:
                    subscribed = await self._subscribe(connection)
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
                    if self._closed:
                        connection.close()
                        raise Closed("the event stream was closed")
                    self._connection = connection
                    api.log.warning("adorch: subscribed again on %s (its subscribed event not passed on; rewards_waiting=%s)",
                                    self.path, subscribed.rewards_waiting)
                    return
                connection.close()
            delay = backoff.next_delay(failure)
            if delay is None:
                raise CannotConnect(f"could not subscribe again on {self.path} within {self.reconnect_timeout} s: {failure}")
            await asyncio.sleep(delay)
