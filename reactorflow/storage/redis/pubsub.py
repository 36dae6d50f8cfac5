"""Every waiter of one event loop on one Redis subscriber connection (`RedisStorage.subscribe`).

A waiter (`wait`, an async unit's reader) subscribes first, then reads the record, then waits
with a coarse re-check. Waiting must cost no connection of the command pool, however many
waiters there are, so one `Multiplexer` per event loop holds one pub/sub connection of its own
(outside the pool) and multiplexes every channel over it:

1. `subscription(channel)`: the first waiter of a channel sends SUBSCRIBE; every waiter of the
   channel waits until Redis confirms it (one confirmation serves them all), then its body runs.
   The last waiter to leave has the channel UNSUBSCRIBEd, off its own way: the command is
   written when the loop next runs its callbacks (where that cannot write it, before the next
   SUBSCRIBE), so a waiter handed a gate goes on to its run's first step at once.
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
        # SUBSCRIBE/UNSUBSCRIBE, one at a time (`_send`); uncontended it costs no event-loop
        # turn
        self._sending = anyio.Lock(fast_acquire=True)
        self._leaving: dict[str, None] = {}  # channels left, their UNSUBSCRIBE not yet written
        self._leave_soon = False  # a callback is scheduled to write them
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
                    async with self._send():
                        await self._flush_leaves()  # first: the server drops them in order
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
                self._leave(name)
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
                async with self._send():
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

    @asynccontextmanager
    async def _send(self) -> AsyncIterator[None]:
        """Holding the send lock; on leaving it, the UNSUBSCRIBEs of channels left meanwhile
        are written."""
        try:
            async with self._sending:
                yield
        finally:
            if self._leaving:
                self._write_leaves()

    def _leave(self, name: str) -> None:
        """Have channel `name` (no waiter left) UNSUBSCRIBEd when the loop next runs its
        callbacks (`_write_leaves`): not on the way of the waiter leaving it."""
        self._leaving[name] = None
        if not self._leave_soon:
            self._leave_soon = True
            asyncio.get_running_loop().call_soon(self._write_leaves)

    def _write_leaves(self) -> None:
        """The scheduled write of the channels left (`_leave`): none while a SUBSCRIBE or a
        connect is being sent (then on its end: `_send`)."""
        self._leave_soon = False
        if not self._sending.locked():
            self._write_unsubscribe()

    def _write_unsubscribe(self) -> list[str]:
        """Write UNSUBSCRIBE for the channels left (those still without a waiter) straight on
        the live subscriber connection, no reply awaited: redis-py's own path costs a connect
        check, an event dispatch and retry bookkeeping. redis-py's record of the pending
        unsubscriptions is kept, so their confirmation drops them from what a reconnect
        re-subscribes. Returns the channels it could not write (no live connection: they
        stay left, for `_flush_leaves`)."""
        names = [name for name in self._leaving if name not in self._channels]
        self._leaving.clear()
        if not names:
            return []
        pubsub = self._pubsub
        conn = pubsub.connection
        writer = getattr(conn, "_writer", None) if conn is not None and conn.is_connected \
            else None
        if conn is None or writer is None:
            self._leaving.update(dict.fromkeys(names))
            return names
        encoder = pubsub.encoder
        for name in names:  # keyed as redis-py keys its channels
            pubsub.pending_unsubscribe_channels.add(encoder.decode(encoder.encode(name)))
        try:
            writer.writelines(conn.pack_command("UNSUBSCRIBE", *names))
        except (RedisError, OSError, RuntimeError):  # the connection broke
            self._leaving.update(dict.fromkeys(names))
            return names
        return []

    async def _flush_leaves(self) -> None:
        """The channels left, UNSUBSCRIBEd before the send lock's holder sends anything: on
        the live connection, else through redis-py's path, which reconnects (re-subscribing
        the channels still subscribed) and sends it."""
        for name in self._write_unsubscribe():
            self._leaving.pop(name, None)
            with contextlib.suppress(RedisError, OSError):
                await self._pubsub.unsubscribe(name)

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
