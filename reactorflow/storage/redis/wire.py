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
  `BusyLoadingError`, `ResponseError`, ...); a refused or lost connection raises its
  `ConnectionError`, a reply later than `socket_timeout` its `TimeoutError` ("Timeout reading
  from ..."), so `RedisConnector.errors` translates them as before.
* **Every error reply raises**, whatever its class, and never reaches a caller as data: an
  error reply anywhere in a reply (an array that holds one) counts as the reply's error (the
  reader's error hook sees each one it parses). The raised error carries notes naming the
  reply as sent (code first) and the command or script (`reply_text`, `command_of`).
* Retries: a call that failed with one of the `retry_on_error` errors (a lost connection, a
  timeout, and replies of those classes: `LOADING`, a full client table), or whose reply says
  the server will not run it for now (`NOT_READY`: `LOADING`, `BUSY`, `TRYAGAIN`,
  `MASTERDOWN`, `CLUSTERDOWN`; the command did not run), is sent again under the same `Retry`
  policy (attempts and backoff) on a fresh connection. When the attempts are spent, the last
  error is raised. Every script that writes a run carries a token that makes a repeated call a
  no-op (`scripts/lib/run_write.lua`), as for redis-py's retries. `MOVED` and `ASK` are never
  followed here (a single node: the URL names a cluster node without `+cluster`): they raise.
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
    AskError,
    AuthenticationError,
    AuthenticationWrongNumberOfArgsError,
    BusyLoadingError,
    ClusterCrossSlotError,
    ClusterDownError,
    ExecAbortError,
    InvalidResponse,
    MasterDownError,
    MovedError,
    NoPermissionError,
    NoScriptError,
    OutOfMemoryError,
    ReadOnlyError,
    RedisError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.typing import EncodableT

CLOSED = "Connection closed by server."
"""redis-py's message when the server closes a connection."""
NOT_READY = frozenset({"LOADING", "BUSY", "TRYAGAIN", "MASTERDOWN", "CLUSTERDOWN"})
"""Codes of the error replies of a server that will not run a command for now (loading its data
after a restart, running a long script, failing over): the command did not run, and is sent
again under the retry policy."""
CODES: dict[type[RedisError], str] = {
    BusyLoadingError: "LOADING", NoScriptError: "NOSCRIPT", ReadOnlyError: "READONLY",
    OutOfMemoryError: "OOM", ExecAbortError: "EXECABORT", NoPermissionError: "NOPERM",
    AskError: "ASK", MovedError: "MOVED", TryAgainError: "TRYAGAIN",
    ClusterDownError: "CLUSTERDOWN", MasterDownError: "MASTERDOWN",
    ClusterCrossSlotError: "CROSSSLOT"}
"""The code redis-py's parse drops from the replies it maps to a class of its own."""
REPLY_NOTE = "redis reply: "
"""The note on an error parsed from a reply on this path: the reply as the server sent it."""
COMMAND_NOTE = "redis command: "
"""The note on an error reply raised by this path: the command or script it answered."""

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


def reply_text(error: BaseException) -> str:
    """The error reply `error` was parsed from, as the server sent it (code first): from its
    note on this path, else rebuilt from redis-py's class (whose parse drops some codes)."""
    for note in _notes(error):
        if note.startswith(REPLY_NOTE):
            return note[len(REPLY_NOTE):]
    text = str(error)
    code = CODES.get(cast(type[RedisError], type(error)))
    if code is not None:
        return f"{code} {text}"
    first = text.split(" ", 1)[0]
    return text if first.isupper() and first.isalpha() else f"ERR {text}"


def reply_code(error: BaseException) -> str:
    """The code of the error reply `error` was parsed from (`LOADING`, `ERR`, ...)."""
    return reply_text(error).split(" ", 1)[0]


def command_of(error: BaseException) -> str | None:
    """The command or script an error reply raised by this path answered, if named."""
    for note in _notes(error):
        if note.startswith(COMMAND_NOTE):
            return note[len(COMMAND_NOTE):]
    return None


def _notes(error: BaseException) -> list[str]:
    notes: list[str] = getattr(error, "__notes__", [])
    return notes


def not_ready(error: BaseException) -> bool:
    """Whether `error` is the reply of a server that will not run a command for now."""
    return isinstance(error, RedisError) and reply_code(error) in NOT_READY


def refused(reply: Any, command: str) -> Any:
    """`reply`, unless it is an error reply (or held one): then that error is raised, with a
    note naming `command`."""
    if isinstance(reply, RedisError):
        raise named(reply, command)
    return reply


def named(error: BaseException, command: str) -> BaseException:
    """`error`, noted with the `command` it answered (unless one is named already)."""
    if command_of(error) is None:
        error.add_note(COMMAND_NOTE + command)
    return error


class _NotReady(RedisConnectionError):
    """Raised inside the retry policy for a reply of `NOT_READY` (a connection error there, so
    the policy sends the command again); `error` is the reply's own error, raised in the end."""

    def __init__(self, error: RedisError) -> None:
        super().__init__(str(error))
        self.error = error


def _unwrapped(error: Exception) -> Exception:
    return error.error if isinstance(error, _NotReady) else error


class _Wire(asyncio.Protocol):
    """One connection: commands written in order, replies matched to a FIFO of futures."""

    def __init__(self, where: str, timeout: float | None) -> None:
        self.where = where
        self.timeout = timeout
        self.reader = hiredis.Reader(protocolError=InvalidResponse,
                                     replyError=self._error_reply)
        self.errors: list[RedisError] = []  # the error replies of the reply being read
        self.pending: deque[tuple[_Reply | _Batch, float]] = deque()
        self.transport: asyncio.Transport | None = None
        self.lost: BaseException | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.loop = asyncio.get_running_loop()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def _error_reply(self, text: str) -> RedisError:
        """The reader's hook for each error reply it parses (also one inside an array): the
        error, noted with the reply as sent and kept for the reply it belongs to."""
        error: RedisError = cast(Any, BaseParser).parse_error(text)
        error.add_note(REPLY_NOTE + text)
        self.errors.append(error)
        return error

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
                if self.errors:  # an error reply, or an array that holds one: that error
                    reply = self.errors[0]
                    self.errors.clear()
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
        self.retried_on: tuple[type[Exception], ...] = (*retry_on, _NotReady)
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
        name = " ".join(a.decode(errors="replace") if isinstance(a, bytes) else str(a)
                        for a in args[:2])
        try:
            return refused(await self.request(self.pack(args)), name)
        except RedisError as exc:
            raise named(exc, name) from None

    def head(self, parts: Sequence[EncodableT]) -> tuple[int, bytes]:
        """The first arguments of a command packed once, for `evalsha_packed` to reuse (e.g.
        EVALSHA, a script's sha, its key count and one run's keys): their number and bytes."""
        packed = self.pack(parts)
        return len(parts), packed[packed.index(b"\r\n") + 2:]

    def evalsha(self, sha: str, source: str, keys: Sequence[str],
                args: Sequence[EncodableT], name: str = "EVALSHA") -> Awaitable[Any]:
        """EVALSHA `sha` (on NOSCRIPT: load `source` and send it again); an error reply is
        raised naming `name` (the script's)."""
        return self.evalsha_packed(self.pack(("EVALSHA", sha, len(keys), *keys, *args)), source,
                                   name)

    def evalsha_after(self, head: tuple[int, bytes], source: str,
                      args: Sequence[EncodableT], name: str = "EVALSHA") -> Awaitable[Any]:
        """`evalsha` whose first arguments (EVALSHA, sha, key count, keys) are `head`, packed
        once by `head()`: only `args` are packed here."""
        body = self.pack(args)
        count, first = head
        packed = b"*%d\r\n%b%b" % (count + len(args), first, body[body.index(b"\r\n") + 2:])
        return self.evalsha_packed(packed, source, name)

    async def evalsha_packed(self, packed: bytes, source: str, name: str = "EVALSHA") -> Any:
        """Send a packed EVALSHA (on NOSCRIPT: load `source` and send it again); its reply, or
        its error reply raised naming `name`."""
        wire = self._wire
        try:
            if wire is not None and wire.lost is None:  # `request` inline: one frame less
                try:
                    reply = await wire.send(packed)
                    if isinstance(reply, RedisError):
                        self._ready(reply)
                except self.retried_on as exc:
                    reply = await self._retried(packed, None, exc)
            else:
                reply = await self.request(packed)
            if isinstance(reply, NoScriptError):
                await self.command("SCRIPT", "LOAD", source)
                reply = await self.request(packed)
            return refused(reply, name)
        except RedisError as exc:
            raise named(exc, name) from None

    async def evalsha_many(self, calls: Sequence[tuple[str, str, str, Sequence[str],
                                                      Sequence[EncodableT]]]) -> list[Any]:
        """EVALSHA each `(name, sha, source, keys, args)` of `calls`, pipelined: one write, one
        round trip, run by the server in this order; every reply. On NOSCRIPT the scripts
        missing are loaded and the whole batch is sent again (each script of a batch must be
        safe to run twice: a run write's token, a gate release). An error reply is raised (the
        first, naming its script's `name`), after every reply arrived."""
        packed = b"".join(self.pack(("EVALSHA", sha, len(keys), *keys, *args))
                          for _, sha, _, keys, args in calls)
        names = ", ".join(dict.fromkeys(name for name, *_ in calls))
        try:
            replies: list[Any] = await self.request(packed, len(calls))
            missing = {source for (_, _, source, _, _), reply in zip(calls, replies,
                                                                     strict=True)
                       if isinstance(reply, NoScriptError)}
            if missing:
                for source in missing:
                    await self.command("SCRIPT", "LOAD", source)
                replies = await self.request(packed, len(calls))
            for (name, *_), reply in zip(calls, replies, strict=True):
                refused(reply, name)
        except RedisError as exc:
            raise named(exc, names) from None
        return replies

    async def request(self, packed: bytes, count: int | None = None) -> Any:
        """Send one packed command (or `count` packed together), retried as redis-py retries
        and while the server is not ready (`_ready`); its reply (the list of their replies),
        other error replies returned as exception objects (`refused` raises them)."""
        wire = self._wire
        try:
            if wire is None or wire.lost is not None:
                wire = await self._open()
            return self._ready(await wire.send(packed, count))
        except self.retried_on as exc:
            return await self._retried(packed, count, exc)

    def _ready(self, reply: Any) -> Any:
        """`reply` (or a batch's list of replies), unless an error reply in it is to be sent
        again: a reply of `NOT_READY` (raised as `_NotReady`) or one of a `retry_on` class."""
        for found in reply if isinstance(reply, list) else (reply,):
            if isinstance(found, RedisError):
                if not_ready(found):
                    raise _NotReady(found)
                if isinstance(found, self.retry_on) and _retryable(found):
                    raise found
        return reply

    async def _retried(self, packed: bytes, count: int | None, exc: Exception) -> Any:
        """`request` after its first attempt failed with `exc` (one of `retried_on`): sent
        again under the retry policy, or `exc` raised where there is none (or for credentials).
        When the attempts are spent, the last failure is raised (a reply's own error)."""
        if self.retry is None or not _retryable(exc):
            raise _unwrapped(exc)
        failed: list[Exception] = [exc]  # the first attempt counts as the first failure

        async def attempt() -> Any:
            if failed:
                raise failed.pop()
            found = self._wire
            if found is None or found.lost is not None:
                found = await self._open()
            return self._ready(await found.send(packed, count))

        try:
            return await self.retry.call_with_retry(attempt, self._failed, _retryable)
        except _NotReady as last:
            raise last.error from None

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
            _check(reply, "AUTH", "Invalid Username or Password")
        if self.client_name:
            _check(await wire.send(self.pack(("CLIENT", "SETNAME", self.client_name))),
                   "CLIENT SETNAME", "Error setting client name")
        if self.db:
            _check(await wire.send(self.pack(("SELECT", self.db))), "SELECT", "Invalid Database")

    def close(self) -> None:
        """Close the connection (pending calls fail with `ConnectionError`)."""
        if self._wire is not None:
            self._wire.close(RedisConnectionError("Connection closed by the client."))
            self._wire = None


def _retryable(error: Exception) -> bool:
    """Retried: a lost connection, a timeout, a server not ready; not refused credentials (as
    redis-py, which authenticates outside its retries)."""
    return not isinstance(error, AuthenticationError)


def _check(reply: Any, command: str, message: str) -> None:
    """A handshake `command`'s reply: OK, else its error reply raised (any class: refused
    credentials stay `AuthenticationError`, never retried), else `message`."""
    refused(reply, command)
    if reply != b"OK":
        raise RedisConnectionError(message)

