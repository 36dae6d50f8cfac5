"""Every waiter of one event loop on one Redis subscriber connection (`RedisStorage.subscribe`).

A waiter (`wait`, an async unit's reader) subscribes first, then reads the record, then waits
with a coarse re-check. Waiting must cost no connection of the command pool, however many
waiters there are, so one `Multiplexer` per event loop holds one pub/sub connection of its own
(outside the pool) and multiplexes every channel over it:

1. `subscription(channel)`: the first waiter of a channel sends SUBSCRIBE; every waiter of the
   channel waits until Redis confirms it (one confirmation serves them all), then its body runs.
   The last waiter to leave sends UNSUBSCRIBE.
2. Reading without a task of its own (structured concurrency: no background task outlives a
   call): a waiter that needs something from the connection (its notification, or the
   confirmation of its channel) becomes the *reader* if there is none. The reader reads
   messages and hands each to the waiters of its channel until its own condition holds or its
   time is up; then it passes the turn to one parked waiter, which becomes the next reader.
   Other waiters park on an event of their own, woken by a message for them or by the turn.
3. A notification that arrives while its waiter is not waiting is kept (`pending`): its next
   `wait` returns at once. Several coalesce into one wake-up carrying the last payload.

If a reader is cancelled mid-read, redis-py drops the connection; the next read reconnects and
re-subscribes every channel. Notifications published in that gap are lost, which the waiters'
re-check covers (notifications are an optimisation; the record is the truth).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractContextManager, asynccontextmanager
from typing import Any

import anyio
from redis.asyncio import Redis
from redis.asyncio.client import PubSub
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from reactorflow.storage.contract.values import Subscription

Errors = Callable[[], AbstractContextManager[None]]


class _Channel:
    __slots__ = ("confirmed", "name", "waiters")

    def __init__(self, name: str) -> None:
        self.name = name
        self.waiters: set[_Waiter] = set()
        self.confirmed = False


class _Waiter(Subscription):
    """One waiter's view of its channel."""

    def __init__(self, mux: Multiplexer, channel: _Channel) -> None:
        self._mux = mux
        self.channel = channel
        self.pending = False  # a notification arrived that no `wait` returned for yet
        self.wake = anyio.Event()

    def notify(self, data: Any) -> None:
        self.pending = True
        self.message = data if isinstance(data, bytes) else None
        self.wake.set()

    async def wait(self, timeout: float) -> bool:
        notified = await self._mux.until(self, lambda: self.pending, timeout)
        self.pending = False
        return notified


class Multiplexer:
    """The channels and the one subscriber connection of one event loop."""

    def __init__(self, client: Redis, errors: Errors, subscribe_timeout: float) -> None:
        self._client = client  # its own pool: the subscriber connection is never a pooled one
        self._pubsub: PubSub = client.pubsub()
        # SUBSCRIBE/UNSUBSCRIBE, one at a time; uncontended it costs no event-loop turn (a
        # waiter handed a gate leaves its channel before anything else of the loop runs)
        self._sending = anyio.Lock(fast_acquire=True)
        self._errors = errors
        self._subscribe_timeout = subscribe_timeout
        self._channels: dict[str, _Channel] = {}
        self._parked: dict[_Waiter, None] = {}  # waiting for a message or for the turn
        self._reading = False

    @property
    def channels(self) -> int:
        """How many channels are subscribed (or being subscribed) now."""
        return len(self._channels)

    @asynccontextmanager
    async def subscription(self, name: str) -> AsyncIterator[Subscription]:
        """Subscribed to channel `name` (confirmed by Redis) for the body."""
        channel = self._channels.get(name)
        fresh = channel is None
        if channel is None:
            channel = self._channels[name] = _Channel(name)
        waiter = _Waiter(self, channel)
        channel.waiters.add(waiter)
        try:
            if fresh:
                with self._errors():
                    async with self._sending:
                        await self._pubsub.subscribe(name)
            if not await self.until(waiter, lambda: channel.confirmed, self._subscribe_timeout):
                with self._errors():
                    raise RedisTimeoutError(
                        f"SUBSCRIBE not confirmed within {self._subscribe_timeout:g}s")
            yield waiter
        finally:
            channel.waiters.discard(waiter)
            self._parked.pop(waiter, None)
            if not channel.waiters and self._channels.get(name) is channel:
                del self._channels[name]
                with anyio.move_on_after(2.0, shield=True), \
                        contextlib.suppress(RedisError, OSError):
                    async with self._sending:
                        await self._unsubscribe(name)
            self._pass_turn()  # it may have been handed the turn while leaving

    async def until(self, waiter: _Waiter, done: Callable[[], bool], timeout: float) -> bool:
        """Wait up to `timeout` seconds until `done()` (read as the reader, or parked)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, timeout)
        try:
            while not done():
                remaining = deadline - loop.time()
                if remaining <= 0:
                    return False
                if not self._reading:
                    self._reading = True
                    try:
                        await self._read(done, deadline)
                    finally:
                        self._reading = False
                    continue
                waiter.wake = anyio.Event()
                self._parked[waiter] = None
                try:
                    with anyio.move_on_after(remaining):
                        await waiter.wake.wait()
                finally:
                    self._parked.pop(waiter, None)
            return True
        finally:
            self._pass_turn()  # whoever stops reading or waiting makes sure someone reads

    async def _read(self, done: Callable[[], bool], deadline: float) -> None:
        loop = asyncio.get_running_loop()
        with self._errors():
            if self._pubsub.connection is None:  # the first SUBSCRIBE is still being sent
                async with self._sending:
                    await self._pubsub.connect()  # type: ignore[no-untyped-call]
            while not done() and (remaining := deadline - loop.time()) > 0:
                message = await self._pubsub.get_message(timeout=remaining)
                if message is not None:
                    self._dispatch(message)
            # what already arrived goes out now: notifications coalesce into one wake-up (only
            # what is buffered: a read that finds nothing would cost an event-loop turn)
            while done() and await self._buffered() and (
                    message := await self._pubsub.get_message(timeout=0.0)):
                self._dispatch(message)

    async def _buffered(self) -> bool:
        """Whether the connection holds bytes read and not yet parsed (checked without a
        read: no event-loop turn)."""
        conn = self._pubsub.connection
        if conn is None or not conn.is_connected:
            return False
        can_read = getattr(conn, "can_read", None)  # redis-py >= 8; before it, only a read tells
        return True if can_read is None else bool(await can_read())

    async def _unsubscribe(self, name: str) -> None:
        """UNSUBSCRIBE `name`, no reply awaited. On a live connection it is written straight
        on it (redis-py's bookkeeping of the pending unsubscription kept): its own path costs
        a connect check, an event dispatch and retry bookkeeping per call, on the way of a
        waiter handed a gate. Otherwise, or if that write fails, redis-py's path, which
        reconnects (re-subscribing the channels still subscribed) and sends it."""
        pubsub = self._pubsub
        conn = pubsub.connection
        if conn is not None and conn.is_connected:
            encoder = pubsub.encoder
            pending = encoder.decode(encoder.encode(name))  # as redis-py keys its channels
            pubsub.pending_unsubscribe_channels.add(pending)
            try:
                await conn.send_command("UNSUBSCRIBE", name, check_health=False)
            except (RedisError, OSError):
                pass  # the connection broke: redis-py's path below reconnects
            else:
                return
        await pubsub.unsubscribe(name)

    def _dispatch(self, message: dict[str, Any]) -> None:
        raw = message.get("channel")
        # as the connection encoded it: any str names a channel (a lone surrogate included)
        name = raw.decode("utf-8", "surrogatepass") if isinstance(raw, bytes) else str(raw)
        channel = self._channels.get(name)
        if channel is None:
            return
        kind = message.get("type")
        if kind == "message":
            for waiter in channel.waiters:
                waiter.notify(message.get("data"))
        elif kind == "subscribe" and not channel.confirmed:
            channel.confirmed = True
            for waiter in channel.waiters:
                waiter.wake.set()

    def _pass_turn(self) -> None:
        """No reader: wake one parked waiter, which reads next (or passes the turn on)."""
        if not self._reading and self._parked:
            waiter = next(iter(self._parked))
            del self._parked[waiter]
            waiter.wake.set()

    async def aclose(self) -> None:
        """Close the subscriber connection (the waiters of this loop have left)."""
        with anyio.CancelScope(shield=True), contextlib.suppress(RedisError, OSError):
            try:
                await self._pubsub.aclose()  # type: ignore[no-untyped-call]
            finally:
                await self._client.aclose()
