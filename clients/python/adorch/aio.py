"""The asyncio client: the same calls as adorch.Client, awaited, and events as an async iterator."""
from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any, TypeVar

from . import _api as api
from .errors import CONNECTION_REFUSALS, AdorchError, CannotConnect, ConnectionLost, Timeout
from .types import Ad, Event, RewardModel, Rewards, Slot, Status

T = TypeVar("T")

#: The daemon's replies are bounded by its max_message_bytes; the stream's buffer must hold one.
_READ_LIMIT = 64 << 20


class _Broken(Exception):
    """The connection ended or was reset."""


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, path: str) -> _Connection:
        reader, writer = await asyncio.open_unix_connection(path, limit=_READ_LIMIT)
        return cls(reader, writer)

    def close(self) -> None:
        self.writer.close()

    async def send(self, data: bytes) -> None:
        try:
            self.writer.write(data)
            await self.writer.drain()
        except OSError as error:
            raise _Broken(str(error)) from error

    async def receive(self, timeout: float | None) -> dict[str, Any]:
        try:
            frame = await asyncio.wait_for(self.reader.readuntil(b"\0"), timeout)
        except asyncio.TimeoutError:
            raise Timeout(f"no reply within {timeout} s") from None
        except asyncio.IncompleteReadError:
            raise _Broken("the daemon closed the connection") from None
        except OSError as error:
            raise _Broken(str(error)) from error
        return api.decode(frame[:-1])

    def hung_up(self) -> bool:
        """Something to read while no call is out: the daemon closed it (idle, restart) or said why it will."""
        return self.reader.at_eof() or len(self.reader._buffer) > 0  # type: ignore[attr-defined]


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
    Reconnects, retries and ConnectionLost as adorch.Client."""

    def __init__(self, path: str, connection: _Connection, timeout: float, reconnect_timeout: float) -> None:
        self.path = path
        self.timeout = timeout
        self.reconnect_timeout = reconnect_timeout
        self._connection: _Connection | None = connection
        self._lock = asyncio.Lock()

    @classmethod
    async def connect(cls, socket: str | None = None, *, timeout: float = api.DEFAULT_CALL_TIMEOUT,
                      reconnect_timeout: float = api.DEFAULT_RECONNECT_TIMEOUT) -> AsyncClient:
        path = api.socket_path(socket)
        return cls(path, await _connect(path, None), timeout, reconnect_timeout)

    async def close(self) -> None:
        self._drop()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()

    def _drop(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    async def _ready(self) -> _Connection:
        if self._connection is not None and self._connection.hung_up():
            api.log.warning("adorch: the daemon closed the connection to %s; reconnecting", self.path)
            self._drop()
        if self._connection is None:
            self._connection = await _connect(self.path, self.reconnect_timeout)
        return self._connection

    async def _run(self, call: api.Call[T]) -> T:
        async with self._lock:
            retried = False
            while True:
                connection = await self._ready()
                sent = False
                try:
                    await connection.send(api.encode(call.method, call.parameters))
                    sent = True
                    reply = await connection.receive(self.timeout + call.extra_wait)
                except _Broken as error:
                    self._drop()
                    # A send that failed reached no one; a reply that never came may follow a call that ran.
                    if retried or (sent and not call.idempotent):
                        raise ConnectionLost(f"{call.method}: the connection broke ({error})") from None
                    api.log.warning("adorch: %s: connection lost (%s); sending it again on a new connection", call.method, error)
                    retried = True
                    continue
                except (Timeout, asyncio.CancelledError):
                    # A late reply would be taken for the next call's.
                    self._drop()
                    raise
                if reply.get("error") in CONNECTION_REFUSALS:
                    self._drop()
                return call.parse(api.reply_parameters(reply))

    async def list_slots(self) -> list[Slot]:
        return await self._run(api.list_slots())

    async def show(self, slot: str, user_id: str | None = None, reward: RewardModel | None = None) -> Ad:
        return await self._run(api.show(slot, user_id, reward))

    async def report(self, ad_id: str, event: str) -> None:
        await self._run(api.report(ad_id, event))

    async def load(self, slot: str, count: int | None = None, width: int | None = None, height: int | None = None,
                   timeout_ms: int | None = None, targeting: dict[str, Any] | None = None) -> list[Ad]:
        return await self._run(api.load(slot, count, width, height, timeout_ms, targeting))

    async def list_rewards(self, user_id: str | None = None, since: str | None = None, after: str | None = None,
                           limit: int | None = None) -> Rewards:
        return await self._run(api.list_rewards(user_id, since, after, limit))

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

    async def interface_description(self, interface: str) -> str:
        return await self._run(api.interface_description(interface))

    async def subscribe(self, slots: list[str] | None = None) -> AsyncEventStream:
        """Events of the named slots (or all), on a connection of their own; the first is `subscribed`."""
        stream = AsyncEventStream(self.path, slots, self.timeout, self.reconnect_timeout)
        await stream._open()
        return stream


class AsyncEventStream:
    """An async iterator of Event; resubscribes after a daemon restart as adorch.EventStream does."""

    def __init__(self, path: str, slots: list[str] | None, timeout: float, reconnect_timeout: float) -> None:
        self.path = path
        self.slots = slots
        self.timeout = timeout
        self.reconnect_timeout = reconnect_timeout
        self._buffer: collections.deque[Event] = collections.deque()
        self._connection: _Connection | None = None

    async def _open(self) -> None:
        self._connection = await _connect(self.path, None)
        try:
            self._buffer.append(await self._subscribe(self._connection))
        except _Broken as error:
            self.close()
            raise ConnectionLost(f"Subscribe: {error}") from None

    async def _subscribe(self, connection: _Connection) -> Event:
        method, parameters = api.subscribe(self.slots)
        await connection.send(api.encode(method, parameters, more=True))
        return Event.from_json(api.reply_parameters(await connection.receive(self.timeout))["event"])

    def close(self) -> None:
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
        return await self.next()

    async def next(self, timeout: float | None = None) -> Event:
        """The next event; Timeout if none came within timeout seconds (None: wait for ever).
        Subscribing again after a restart takes up to reconnect_timeout, whatever timeout says."""
        if self._buffer:
            return self._buffer.popleft()
        while True:
            if self._connection is None:
                await self._resubscribe("closed")
            assert self._connection is not None
            try:
                reply = await self._connection.receive(timeout)
                parameters = api.reply_parameters(reply)
            except _Broken as error:
                await self._resubscribe(str(error))
                continue
            except AdorchError as error:
                if not api.is_broken_subscription(error):
                    raise
                await self._resubscribe(error.name)
                continue
            if not reply.get("continues", False):
                await self._resubscribe("the subscription ended")
            return Event.from_json(parameters["event"])

    async def _resubscribe(self, why: str) -> None:
        api.log.warning("adorch: subscription on %s lost (%s); subscribing again", self.path, why)
        self.close()
        backoff = api.Backoff(f"subscribing again on {self.path}", self.reconnect_timeout)
        while True:
            connection: _Connection | None = None
            try:
                connection = await _connect(self.path, self.reconnect_timeout)
                subscribed = await self._subscribe(connection)
            except (_Broken, AdorchError) as error:
                if connection is not None:
                    connection.close()
                if isinstance(error, AdorchError) and not isinstance(error, CannotConnect) and not api.is_broken_subscription(error):
                    raise
                delay = backoff.next_delay(error)
                if delay is None:
                    raise CannotConnect(f"could not subscribe again on {self.path}: {error}") from None
                await asyncio.sleep(delay)
                continue
            self._connection = connection
            api.log.warning("adorch: subscribed again on %s (its subscribed event not passed on; rewards_waiting=%s)",
                            self.path, subscribed.rewards_waiting)
            return
