"""The wire path of `RedisStorage`'s run scripts on one Redis node: one pipelined connection per
event loop, spoken through an `asyncio.Protocol` with hiredis's RESP reader and packer.

Why: a run script's round trip through redis-py's asyncio client costs 70-100 µs of Python per
call (its pool, retry wrapper, stream reader, observability hooks and command dispatch), about
three times the round trip itself on a local Redis; this path costs about 20 µs. It is used for
the scripts (`EVALSHA`) only; every other command, pipeline and pub/sub stays on redis-py, and a
Redis Cluster stays on redis-py entirely. (Evaluated first: coredis 6.9 and valkey-glide 2.6
took 2-3x and 1.2x redis-py's client time per command here; see docs/performance.md.)

What it keeps equal to redis-py's path:

* The connection settings come from redis-py's own parse of the URL and options (host and port,
  or a unix socket; username and password; database; client name; connect and socket
  timeouts). Settings it does not handle (TLS, RESP3, a credential provider, keepalive options,
  health checks, a custom connect function ...) make `wire_for` return None: redis-py serves.
* Errors are redis-py's: replies are parsed into its exception classes (`NoScriptError`,
  `ResponseError`, ...); a refused or lost connection raises its `ConnectionError`, a reply
  later than `socket_timeout` its `TimeoutError` ("Timeout reading from ..."), so
  `RedisConnector.errors` translates them as before.
* Retries: a call that failed with one of the `retry_on_error` errors is sent again under the
  same `Retry` policy (attempts and backoff) on a fresh connection. Every script that writes a
  run carries a token that makes a repeated call a no-op (`scripts/lib/run_write.lua`), as for
  redis-py's retries.
* NOSCRIPT (a restarted or failed-over server): the script is loaded and sent again.

Algorithm of a call: pack the command (hiredis; anything it refuses is encoded by redis-py's
encoder first, which raises redis-py's usual error for a bad value), write it on the loop's
connection (opened and authenticated first if there is none), append a future to the
connection's FIFO and await it; replies resolve the FIFO in order, and each caller resumes as
its reply is read (`_Reply`: no event-loop turn between the reply and the caller's next
step, which is usually its next command). One timer per connection
watches the oldest pending call: when it is older than `socket_timeout` the connection is
aborted and every pending call fails with `TimeoutError`. A caller cancelled while waiting
leaves its future in the FIFO, so the connection stays in step with the server (its reply is
read and dropped).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

import hiredis
from redis._parsers.base import BaseParser
from redis._parsers.encoders import Encoder
from redis.asyncio.connection import Connection, SSLConnection, UnixDomainSocketConnection
from redis.asyncio.retry import Retry
from redis.exceptions import (
    AuthenticationError,
    AuthenticationWrongNumberOfArgsError,
    InvalidResponse,
    NoScriptError,
    ResponseError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.typing import EncodableT

CLOSED = "Connection closed by server."
"""redis-py's message when the server closes a connection."""

HANDLED = frozenset({"host", "port", "path", "db", "username", "password", "client_name",
                     "socket_timeout", "socket_connect_timeout", "retry", "retry_on_error",
                     "encoding", "encoding_errors", "decode_responses"})
"""Connection settings this path applies as redis-py does."""
INERT = frozenset({"himport_registry", "maint_notifications_pool_handler",
                   "maint_notifications_config", "orig_host_address", "orig_socket_timeout",
                   "orig_socket_connect_timeout", "lib_name", "lib_version", "driver_info",
                   "event_dispatcher", "socket_read_size", "retry_on_timeout"})
"""Settings that change nothing on this path (redis-py's bookkeeping, RESP3 push handling,
the library name it reports, a read buffer size; `retry_on_timeout` is folded into
`retry_on_error` by redis-py)."""
OFF: dict[str, tuple[Any, ...]] = {
    "health_check_interval": (0, None), "socket_keepalive": (None, False),
    "socket_keepalive_options": (None, {}), "protocol": (None, 2, "2"),
    "credential_provider": (None,), "redis_connect_func": (None,), "socket_type": (0,)}
"""Settings this path handles only at these values (anything else: redis-py serves)."""


def wire_for(connection_class: type[Any], kwargs: dict[str, Any]) -> WireLink | None:
    """The wire path for a redis-py pool's connection class and settings, or None where it
    does not apply them all (then redis-py serves the scripts as every other command)."""
    if issubclass(connection_class, SSLConnection) or kwargs.get("decode_responses"):
        return None
    if not issubclass(connection_class, (Connection, UnixDomainSocketConnection)):
        return None
    for name, value in kwargs.items():
        if name in HANDLED or name in INERT:
            continue
        if name not in OFF or value not in OFF[name]:
            return None
    unix = issubclass(connection_class, UnixDomainSocketConnection)
    retry = kwargs.get("retry")
    return WireLink(
        host=str(kwargs.get("host", "localhost")), port=int(kwargs.get("port", 6379)),
        path=str(kwargs["path"]) if unix else None, db=int(kwargs.get("db") or 0),
        username=kwargs.get("username"), password=kwargs.get("password"),
        client_name=kwargs.get("client_name"), timeout=kwargs.get("socket_timeout"),
        connect_timeout=kwargs.get("socket_connect_timeout"),
        retry=retry if isinstance(retry, Retry) else None,
        retry_on=tuple(kwargs.get("retry_on_error") or ()),
        encoder=cast(Any, Encoder)(kwargs.get("encoding", "utf-8"),
                                   kwargs.get("encoding_errors", "strict"), False))


class _Reply(asyncio.Future[Any]):
    """The future of one reply, whose awaiting task resumes as the reply is read.

    A plain future's waiters are woken through `call_soon`: the task that awaits a reply
    would resume only at the event loop's next turn (one more `epoll_wait` and loop pass
    per round trip, a tenth of a checkpoint's client time). The first done-callback added
    while the reply is pending (the awaiting task's wake-up) is kept aside instead and called
    by `wake`, from `_Wire.data_received`, in the task's context: the task then runs its next
    step at once, as the loop would have run it at its next turn. A task resumes only when no
    task is running (a protocol callback runs outside every task); otherwise, and for a
    cancellation or an error, the waiter is scheduled as usual."""

    _waiter: tuple[Callable[[Any], object], contextvars.Context | None] | None = None

    def add_done_callback(self, fn: Callable[[Any], object], *,
                          context: contextvars.Context | None = None) -> None:
        if self._waiter is None and not self.done():
            self._waiter = (fn, context)
        else:
            super().add_done_callback(fn, context=context)

    def remove_done_callback(self, fn: Callable[[Any], object]) -> int:
        removed = super().remove_done_callback(fn)
        if self._waiter is not None and self._waiter[0] == fn:
            self._waiter = None
            removed += 1
        return removed

    def wake(self) -> None:
        """Call the waiter of a reply just set: now, when no task is running, else soon."""
        waiter = self._waiter
        if waiter is None:
            return
        loop = self.get_loop()
        if asyncio.current_task(loop) is not None:
            self._wake_soon()
            return
        self._waiter = None
        fn, context = waiter
        if context is None:
            fn(self)
        else:
            context.run(fn, self)

    def _wake_soon(self) -> None:
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            self.get_loop().call_soon(waiter[0], self, context=waiter[1])

    def cancel(self, msg: Any | None = None) -> bool:
        if not super().cancel(msg=msg):
            return False
        self._wake_soon()
        return True

    def set_exception(self, exception: type | BaseException) -> None:
        super().set_exception(exception)
        self._wake_soon()


class _Batch:
    """The replies of commands written together, gathered into one future (a list): it
    stands in the FIFO for each of them, as their futures would."""

    __slots__ = ("count", "future", "replies")

    def __init__(self, future: _Reply, count: int) -> None:
        self.future = future
        self.count = count
        self.replies: list[Any] = []

    def done(self) -> bool:
        return self.future.done()

    def wake(self) -> None:
        self.future.wake()

    def set_result(self, reply: Any) -> None:
        self.replies.append(reply)
        if len(self.replies) == self.count:
            self.future.set_result(self.replies)

    def set_exception(self, error: BaseException) -> None:
        self.future.set_exception(error)


class _Wire(asyncio.Protocol):
    """One connection: commands written in order, replies matched to a FIFO of futures."""

    def __init__(self, where: str, timeout: float | None) -> None:
        self.where = where
        self.timeout = timeout
        self.reader = hiredis.Reader(protocolError=InvalidResponse,
                                     replyError=BaseParser.parse_error)
        self.pending: deque[tuple[_Reply | _Batch, float]] = deque()
        self.transport: asyncio.Transport | None = None
        self.lost: BaseException | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.loop = asyncio.get_running_loop()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def send(self, command: bytes, count: int | None = None) -> asyncio.Future[Any]:
        """Write `command` (or `count` commands packed together: one write); the future of its
        reply (an error reply as an exception object), or of the list of their replies."""
        if self.lost is not None or self.transport is None:
            raise RedisConnectionError(CLOSED)
        future = _Reply(loop=self.loop)
        self.transport.write(command)
        deadline = 0.0 if self.timeout is None else self.loop.time() + self.timeout
        if count is None:
            self.pending.append((future, deadline))
        else:
            batch = _Batch(future, count)
            self.pending.extend((batch, deadline) for _ in range(count))
        if self.timeout is not None and self.timer is None:
            self.timer = self.loop.call_at(deadline, self._expire)
        return future

    def data_received(self, data: bytes) -> None:
        """Every complete reply resolves its future, in order; then their tasks resume, in
        the same order (`_Reply.wake`: one whose wake-up fails leaves the others scheduled)."""
        reader = self.reader
        pending = self.pending
        reader.feed(data)
        answered: list[_Reply | _Batch] = []
        try:
            reply = reader.gets()
            while reply is not False:
                future = pending.popleft()[0]
                if not future.done():
                    future.set_result(reply)
                    if future.done():
                        answered.append(future)
                reply = reader.gets()
        except (InvalidResponse, IndexError) as exc:  # garbled, or a reply nobody asked for
            self.close(RedisConnectionError(f"Protocol error from {self.where}: {exc}"))
        if len(answered) == 1:  # (the usual case: one reply)
            answered[0].wake()
            return
        for index, future in enumerate(answered):
            try:
                future.wake()
            except BaseException:
                for rest in answered[index + 1:]:
                    (rest.future if isinstance(rest, _Batch) else rest)._wake_soon()
                raise

    def connection_lost(self, exc: Exception | None) -> None:
        self.close(RedisConnectionError(CLOSED if exc is None else
                                        f"Error while reading from {self.where} : {exc}"))

    def _expire(self) -> None:
        self.timer = None
        if not self.pending:
            return
        deadline = self.pending[0][1]
        if deadline > self.loop.time():
            self.timer = self.loop.call_at(deadline, self._expire)
            return
        self.close(RedisTimeoutError(f"Timeout reading from {self.where}"))

    def close(self, error: BaseException) -> None:
        """Fail every pending call with (a copy of) `error`; the connection is done."""
        if self.lost is None:
            self.lost = error
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        while self.pending:
            future = self.pending.popleft()[0]
            if not future.done():
                future.set_exception(type(error)(*error.args))
        if self.transport is not None:
            self.transport.abort()


class WireLink:
    """The loop's one wire connection to the node, reopened after a failure (see the module)."""

    def __init__(self, *, host: str, port: int, path: str | None, db: int, username: str | None,
                 password: str | None, client_name: str | None, timeout: float | None,
                 connect_timeout: float | None, retry: Retry | None,
                 retry_on: tuple[type[Exception], ...], encoder: Encoder) -> None:
        self.host, self.port, self.path = host, port, path
        self.where = path or f"{host}:{port}"
        self.db = db
        self.username, self.password, self.client_name = username, password, client_name
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.retry = retry
        self.retry_on = retry_on
        self.encoder = encoder
        self._wire: _Wire | None = None
        self._opening: asyncio.Lock | None = None

    # -- calls ---------------------------------------------------------------------------------

    def pack(self, args: Sequence[EncodableT]) -> bytes:
        """One RESP command (hiredis; redis-py's encoder first for what hiredis refuses)."""
        try:
            packed: bytes = hiredis.pack_command(cast(Any, tuple(args)))
        except (TypeError, ValueError, UnicodeError):
            encode = cast(Callable[[EncodableT], bytes], self.encoder.encode)
            packed = hiredis.pack_command(cast(Any, tuple(encode(a) for a in args)))
        return packed

    async def command(self, *args: EncodableT) -> Any:
        """One command and its reply (an error reply raised as redis-py's exception)."""
        reply = await self.request(self.pack(args))
        if isinstance(reply, ResponseError):
            raise reply
        return reply

    def head(self, parts: Sequence[EncodableT]) -> tuple[int, bytes]:
        """The first arguments of a command packed once, for `evalsha_packed` to reuse (e.g.
        EVALSHA, a script's sha, its key count and one run's keys): their number and bytes."""
        packed = self.pack(parts)
        return len(parts), packed[packed.index(b"\r\n") + 2:]

    def evalsha(self, sha: str, source: str, keys: Sequence[str],
                args: Sequence[EncodableT]) -> Awaitable[Any]:
        """EVALSHA `sha` (on NOSCRIPT: load `source` and send it again)."""
        return self.evalsha_packed(self.pack(("EVALSHA", sha, len(keys), *keys, *args)), source)

    def evalsha_after(self, head: tuple[int, bytes], source: str,
                      args: Sequence[EncodableT]) -> Awaitable[Any]:
        """`evalsha` whose first arguments (EVALSHA, sha, key count, keys) are `head`, packed
        once by `head()`: only `args` are packed here."""
        body = self.pack(args)
        count, first = head
        packed = b"*%d\r\n%b%b" % (count + len(args), first, body[body.index(b"\r\n") + 2:])
        return self.evalsha_packed(packed, source)

    async def evalsha_packed(self, packed: bytes, source: str) -> Any:
        """Send a packed EVALSHA (on NOSCRIPT: load `source` and send it again)."""
        wire = self._wire
        if wire is not None and wire.lost is None:  # `request` inline: one frame less
            try:
                reply = await wire.send(packed)
            except self.retry_on as exc:
                reply = await self._retried(packed, None, exc)
        else:
            reply = await self.request(packed)
        if isinstance(reply, NoScriptError):
            await self.command("SCRIPT", "LOAD", source)
            reply = await self.request(packed)
        if isinstance(reply, ResponseError):
            raise reply
        return reply

    async def evalsha_many(self, calls: Sequence[tuple[str, str, Sequence[str],
                                                      Sequence[EncodableT]]]) -> list[Any]:
        """EVALSHA each `(sha, source, keys, args)` of `calls`, pipelined: one write, one round
        trip, run by the server in this order; every reply. On NOSCRIPT the scripts missing
        are loaded and the whole batch is sent again (each script of a batch must be safe to
        run twice: a run write's token, a gate release). An error reply is raised (the first),
        after every reply arrived."""
        packed = b"".join(self.pack(("EVALSHA", sha, len(keys), *keys, *args))
                          for sha, _, keys, args in calls)
        replies: list[Any] = await self.request(packed, len(calls))
        missing = {source for (_, source, _, _), reply in zip(calls, replies, strict=True)
                   if isinstance(reply, NoScriptError)}
        if missing:
            for source in missing:
                await self.command("SCRIPT", "LOAD", source)
            replies = await self.request(packed, len(calls))
        for reply in replies:
            if isinstance(reply, ResponseError):
                raise reply
        return replies

    async def request(self, packed: bytes, count: int | None = None) -> Any:
        """Send one packed command (or `count` packed together), retried as redis-py retries;
        its reply (the list of their replies), error replies returned as exception objects."""
        wire = self._wire
        try:
            if wire is None or wire.lost is not None:
                wire = await self._open()
            return await wire.send(packed, count)
        except self.retry_on as exc:
            return await self._retried(packed, count, exc)

    async def _retried(self, packed: bytes, count: int | None, exc: Exception) -> Any:
        """`request` after its first attempt failed with `exc` (one of `retry_on`): sent again
        under the retry policy, or `exc` raised where there is none (or for credentials)."""
        if self.retry is None or isinstance(exc, AuthenticationError):
            raise exc
        failed: list[Exception] = [exc]  # the first attempt counts as the first failure

        async def attempt() -> Any:
            if failed:
                raise failed.pop()
            found = self._wire
            if found is None or found.lost is not None:
                found = await self._open()
            return await found.send(packed, count)

        return await self.retry.call_with_retry(attempt, self._failed, _retryable)

    async def _failed(self, error: Exception) -> None:
        """After a failed attempt: the connection it used is not used again."""
        if self._wire is not None and self._wire.lost is None:
            self._wire.close(RedisConnectionError(f"closed after an error: {error}"))

    # -- connection ----------------------------------------------------------------------------

    async def _open(self) -> _Wire:
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            wire = self._wire
            if wire is None or wire.lost is not None:
                wire = self._wire = await self._connect()
            return wire

    async def _connect(self) -> _Wire:
        loop = asyncio.get_running_loop()

        def made() -> _Wire:
            return _Wire(self.where, self.timeout)

        wire: _Wire | None = None
        try:
            async with asyncio.timeout(self.connect_timeout):
                if self.path is not None:
                    _, wire = await loop.create_unix_connection(made, self.path)
                else:
                    _, wire = await loop.create_connection(made, self.host, self.port)
                await self._handshake(wire)
        except TimeoutError:
            if wire is not None:
                wire.close(RedisTimeoutError("Timeout connecting to server"))
            raise RedisTimeoutError("Timeout connecting to server") from None
        except OSError as exc:
            raise RedisConnectionError(
                f"Error {exc.errno} connecting to {self.where}. {exc.strerror}.") from exc
        except BaseException as exc:
            if wire is not None:
                wire.close(RedisConnectionError(f"handshake failed: {exc}"))
            raise
        return wire

    async def _handshake(self, wire: _Wire) -> None:
        """AUTH, CLIENT SETNAME and SELECT, as redis-py sends them on a new connection."""
        if self.username or self.password:
            auth = [a for a in (self.username, self.password) if a is not None]
            reply = await wire.send(self.pack(("AUTH", *auth)))
            if isinstance(reply, AuthenticationWrongNumberOfArgsError):  # Redis < 6
                reply = await wire.send(self.pack(("AUTH", auth[-1])))
            _check(reply, "Invalid Username or Password")
        if self.client_name:
            _check(await wire.send(self.pack(("CLIENT", "SETNAME", self.client_name))),
                   "Error setting client name")
        if self.db:
            _check(await wire.send(self.pack(("SELECT", self.db))), "Invalid Database")

    def close(self) -> None:
        """Close the connection (pending calls fail with `ConnectionError`)."""
        if self._wire is not None:
            self._wire.close(RedisConnectionError("Connection closed by the client."))
            self._wire = None


def _retryable(error: Exception) -> bool:
    """Retried: a lost connection or a timeout, not refused credentials (as redis-py, which
    authenticates outside its retries)."""
    return not isinstance(error, AuthenticationError)


def _check(reply: Any, message: str) -> None:
    if isinstance(reply, ResponseError):
        raise reply
    if reply != b"OK":
        raise RedisConnectionError(message)

