"""Connections of `RedisStorage`: one redis.asyncio client per running event loop, the Lua
scripts, error translation and pub/sub subscriptions.

A URL whose scheme ends in `+cluster` (`redis+cluster://`, `rediss+cluster://`) selects a Redis
Cluster: the client is a `redis.asyncio.cluster.RedisCluster` seeded from that node (it discovers
the others), which routes each command and each run script to the node of its keys' slot and
splits non-transactional pipelines per node. Every run script touches the keys of one run only
(one `{<run id>}` hash tag, one slot); cross-run indexes are written and read with single-key
commands. Pub/sub goes over a plain connection to the seed node: a cluster forwards every
PUBLISH to every node.

A storage object may be used from several threads and event loops (a worker thread, a fresh
loop per `anyio.run`). redis.asyncio connections belong to the loop that opened them, so each
loop gets its own client (connection pool) and scripts; nothing loop-bound is shared. A client is
closed by `aclose()` on its loop, or when its loop shuts down: an async generator registered with
the loop guards it, and `asyncio.run` / `anyio.run` finalise pending async generators before
closing the loop.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from importlib.resources import files
from types import TracebackType
from typing import Any, Literal, cast

import anyio
import hiredis
from redis.asyncio import ConnectionPool, Redis
from redis.asyncio.client import Pipeline
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.connection import AbstractConnection
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.commands.core import AsyncScript
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import (
    MaxConnectionsError,
    NoScriptError,
    RedisClusterException,
    RedisError,
    ResponseError,
)
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.typing import EncodableT

from reactorflow.errors import (
    ConfigurationError,
    StorageConnectionError,
    StorageError,
    StorageNotReady,
    StoragePoolExhausted,
    StorageReplyError,
)
from reactorflow.storage.contract.values import Subscription
from reactorflow.storage.redis.keys import safe_url, scheme_problem, url_secrets
from reactorflow.storage.redis.pubsub import Multiplexer
from reactorflow.storage.redis.wire import (
    COMMAND_NOTE,
    WireLink,
    command_of,
    not_ready,
    refused,
    reply_text,
    wire_for,
)

RETRY_ATTEMPTS = 3
"""Retries of a command that failed on a connection error or timeout (redis-py's `Retry`)."""
RETRY_BACKOFF_BASE = 0.05
"""Delay before the first retry, in seconds; doubles on each further retry..."""
RETRY_BACKOFF_CAP = 1.0
"""...up to this many seconds."""
MAX_CONNECTIONS = 64
"""Connections per event loop; further concurrent commands wait for a free one."""
POOL_TIMEOUT = 20.0
"""Seconds a command waits for a free connection before failing."""
CONNECT_TIMEOUT = 5.0
"""Seconds to wait for a connection to Redis, TLS handshake included (unless
`socket_connect_timeout` is given)."""
SOCKET_TIMEOUT = 5.0
"""Seconds to wait for Redis to answer a command (unless `socket_timeout` is given): a server
that accepts connections but never answers fails the call, after the retries, with
`StorageConnectionError` instead of blocking it forever. Pub/sub waits pass their own timeout
and are not cut short by it."""
POOL_EXHAUSTED = "No connection available."
"""The message of redis-py's error when no pool connection freed up within the pool timeout."""
SUBSCRIBE_TIMEOUT = 5.0
"""Seconds to wait for Redis to confirm a SUBSCRIBE before the subscription's body runs."""
CLUSTER_MAX_CONNECTIONS = 1024
"""Connections per event loop and cluster node (unless `max_connections` is given): redis-py's
cluster pools do not wait for a free connection, so this is a hard cap, set high."""
CLUSTER_UNREACHABLE = "Redis Cluster cannot be connected"
"""How redis-py's cluster client says that none of its startup nodes answered."""
CLUSTER_SUFFIX = "+cluster"
"""Ending of a URL scheme that selects a Redis Cluster (`redis+cluster://host:port`)."""

SCRIPTS = ("create_run", "save_step", "save_state", "save_release", "save_unit", "acquire_lock",
           "extend_lock", "release_lock", "claim", "request_control", "incr_counter", "first_wins",
           "release_mapping", "save_elements", "gate_acquire", "gate_release", "gate_extend",
           "gate_withdraw", "settle_element", "refresh_elements", "rate_charge", "ordered_enter",
           "ordered_turn", "ordered_stamp", "ordered_leave", "ordered_pass", "ordered_peek",
           "ordered_reset",
           "load_run", "schedule_load", "schedule_advance", "schedule_record", "schedule_relet",
           "schedule_pause", "claim_lock_load", "lock_load_elements", "index_done", "start_element",
           "unit_indexed", "idem_follow", "idem_done", "migrate_run", "forget_claims",
           "clear_elements", "timer_arm", "timer_disarm", "timer_claim", "worker_beat",
           "worker_list", "worker_drop", "lock_load_run", "subject_enter", "subject_run_key",
           "subject_replace", "subject_destroy", "erasure_record", "reseal_run")
RUN_WRITES = frozenset({"create_run", "save_step", "save_state", "save_release", "save_unit",
                        "claim", "request_control", "incr_counter", "claim_lock_load",
                        "unit_indexed", "migrate_run"})
"""The scripts that write a run: `scripts/lib/run_write.lua` (retry tokens) and
`scripts/lib/expiry.lua` (the retention rule) are prepended to each."""
LOCK_TAKERS = frozenset({"acquire_lock", "lock_load_elements", "start_element",
                         "lock_load_run"})
"""The scripts that take a liveness lock: `scripts/lib/take_lock.lua` is prepended to each."""
RUN_CREATORS = frozenset({"create_run", "gate_release", "save_release"})
"""The scripts that create a run: `scripts/lib/create_run.lua` is prepended to each (after
`run_write.lua` and `expiry.lua`): `gate_release` (and `save_release`, which releases gates)
creates the run a waiter queued with when it hands it the place."""
STATE_SAVES = frozenset({"save_state", "save_release"})
"""The scripts that save a run's state: `scripts/lib/save_state.lua` is prepended to each."""
GATE_RELEASES = frozenset({"gate_release", "save_release"})
"""The scripts that release gate places: `scripts/lib/gate_release.lua` is prepended to each
(after `create_run.lua`)."""
SLOT_WRITES = frozenset({"save_elements", "settle_element", "refresh_elements",
                         "start_element"})
"""The scripts that write a run's map element slots: `scripts/lib/expiry.lua` is prepended to
each (the slots take the run's expiry)."""
ORDERED_PLACES = frozenset({"ordered_enter", "ordered_turn", "ordered_stamp", "ordered_peek",
                            "ordered_pass"})
"""The scripts that read a ticket's place or the turn in an ordered lock's line:
`scripts/lib/ordered_place.lua` (a passed-over ticket's place is lost; whose turn it is) is
prepended to each."""
_SCRIPTS_DIR = files("reactorflow.storage.redis") / "scripts"
_RUN_WRITE = (_SCRIPTS_DIR / "lib" / "run_write.lua").read_text("utf-8")
_TAKE_LOCK = (_SCRIPTS_DIR / "lib" / "take_lock.lua").read_text("utf-8")
_CREATE = (_SCRIPTS_DIR / "lib" / "create_run.lua").read_text("utf-8")
_EXPIRY = (_SCRIPTS_DIR / "lib" / "expiry.lua").read_text("utf-8")
_ORDERED_PLACE = (_SCRIPTS_DIR / "lib" / "ordered_place.lua").read_text("utf-8")
_SAVE_STATE = (_SCRIPTS_DIR / "lib" / "save_state.lua").read_text("utf-8")
_GATE_RELEASE = (_SCRIPTS_DIR / "lib" / "gate_release.lua").read_text("utf-8")
SOURCES = {name: (_RUN_WRITE if name in RUN_WRITES | RUN_CREATORS else "")
           + (_EXPIRY if name in RUN_WRITES | RUN_CREATORS | SLOT_WRITES else "")
           + (_CREATE if name in RUN_CREATORS else "")
           + (_TAKE_LOCK if name in LOCK_TAKERS else "")
           + (_ORDERED_PLACE if name in ORDERED_PLACES else "")
           + (_SAVE_STATE if name in STATE_SAVES else "")
           + (_GATE_RELEASE if name in GATE_RELEASES else "")
           + (_SCRIPTS_DIR / f"{name}.lua").read_text("utf-8") for name in SCRIPTS}

Args = Sequence[EncodableT]
Client = Redis | RedisCluster


class WaitingPool(ConnectionPool):
    """A connection pool whose callers wait, up to `timeout` seconds, for a free connection
    (then fail with redis-py's "No connection available."), like redis-py's
    `BlockingConnectionPool`, but taking a free connection costs no condition, lock or timer:
    a semaphore counts the connections handed out, and only a caller that finds none free
    waits."""

    def __init__(self, *, timeout: float = POOL_TIMEOUT, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.timeout = timeout
        self._slots = asyncio.Semaphore(self.max_connections)
        self._handed: set[int] = set()  # id() of the connections handed out

    async def get_connection(self, *args: Any, **kwargs: Any) -> AbstractConnection:
        if self._slots.locked():
            try:
                await asyncio.wait_for(self._slots.acquire(), self.timeout)
            except TimeoutError:
                raise RedisConnectionError(POOL_EXHAUSTED) from None
        else:
            await self._slots.acquire()  # free: no suspension
        try:
            connection: AbstractConnection = await super().get_connection(  # type: ignore[no-untyped-call]
                *args, **kwargs)
        except BaseException:
            self._slots.release()
            raise
        self._handed.add(id(connection))
        return connection

    async def release(self, connection: AbstractConnection) -> None:
        await super().release(connection)
        if id(connection) in self._handed:
            self._handed.discard(id(connection))
            self._slots.release()


class LeanConnection:
    """Mixed into a redis.asyncio connection class, two savings on every command:

    * packed by hiredis (C) instead of redis-py's Python packer (a run script's twenty
      arguments cost microseconds each there). Anything hiredis refuses (None, bools, a str
      with a lone surrogate) takes redis-py's path, which encodes it as before or raises its
      usual error;
    * sent without a timer task when the socket takes every byte at once: redis-py wraps each
      send in `asyncio.wait_for(..., socket_timeout)`, a task and an event-loop turn per
      command. Only when bytes stay buffered (a full socket) is the drain waited for, bounded
      by `socket_timeout`, on redis-py's own path (its errors and disconnects unchanged).
    """

    is_connected: bool  # (of the connection class it is mixed into)
    health_check_interval: float

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        writer = getattr(self, "_writer", None)
        if (writer is None or not isinstance(command, list) or not self.is_connected
                or self.health_check_interval or writer.transport.is_closing()):
            await super().send_packed_command(command, check_health)  # type: ignore[misc]
            return
        writer.writelines(command)
        if writer.transport.get_write_buffer_size():  # not all sent: drain, bounded
            await super().send_packed_command([], False)  # type: ignore[misc]

    def pack_command(self, *args: EncodableT) -> list[bytes]:
        try:
            head = args[0]
            parts = (*head.encode().split(), *args[1:]) if isinstance(head, str) else args
            return [hiredis.pack_command(cast(Any, parts))]
        except (TypeError, ValueError, UnicodeError):
            return super().pack_command(*args)  # type: ignore[misc, no-any-return]


_LEAN: dict[type[Any], type[Any]] = {}


def lean(connection_class: type[Any]) -> type[Any]:
    """`connection_class` with `LeanConnection` mixed in (one subclass per class)."""
    if connection_class not in _LEAN:
        _LEAN[connection_class] = type(f"Lean{connection_class.__name__}",
                                       (LeanConnection, connection_class), {})
    return _LEAN[connection_class]


def cluster_url(url: str) -> str | None:
    """The plain URL of the seed node if `url` selects a Redis Cluster (`redis+cluster://`,
    `rediss+cluster://`), else None."""
    scheme, sep, rest = url.partition("://")
    if sep and scheme.lower().endswith(CLUSTER_SUFFIX):
        return f"{scheme[:-len(CLUSTER_SUFFIX)]}://{rest}"
    return None


@dataclass(eq=False, slots=True)
class LoopClient:
    """The client and scripts of one event loop (never used from another loop)."""

    client: Any  # Redis, or RedisCluster (the same command API; typed loosely for both)
    scripts: dict[str, AsyncScript]
    guard: AsyncGenerator[None, None] | None = None
    mux: Multiplexer | None = None  # every waiter of the loop, on one subscriber connection
    cluster: bool = False  # a RedisCluster: no scripts in pipelines
    wire: WireLink | None = None  # the scripts' lean path on one node (see wire.py)

    async def aclose(self) -> None:
        if self.wire is not None:
            self.wire.close()
        if self.mux is not None:
            await self.mux.aclose()
        await self.client.aclose()

    def script(self, name: str, keys: Sequence[str], args: Args) -> Awaitable[Any]:
        """EVALSHA: one round trip (on NOSCRIPT, load the script and send it again); on the
        wire path where the connection settings allow it (`wire.py`: its call is returned
        as it is, no coroutine of its own around it)."""
        if self.wire is not None:
            return self.wire.evalsha(self.scripts[name].sha, SOURCES[name], keys, args, name)
        return self._evalsha(name, keys, args)

    async def _evalsha(self, name: str, keys: Sequence[str], args: Args) -> Any:
        """`script` through redis-py (an error reply raised naming the script)."""
        try:
            try:
                return await self.client.evalsha(self.scripts[name].sha, len(keys), *keys, *args)
            except NoScriptError:
                await self.client.script_load(SOURCES[name])
                return await self.client.evalsha(self.scripts[name].sha, len(keys), *keys, *args)
        except RedisError as exc:
            exc.add_note(COMMAND_NOTE + name)
            raise

    async def script_batch(self, calls: Sequence[tuple[str, Sequence[str], Args]]) -> list[Any]:
        """Each `(name, keys, args)` of `calls` (EVALSHA), in order, in one round trip on one
        node (never a cluster); every reply. On the wire path where the connection settings
        allow it. On NOSCRIPT the missing scripts are loaded and the batch sent again (each
        script in a batch must be safe to run twice). An error reply is raised."""
        if self.wire is not None:
            return await self.wire.evalsha_many(
                [(name, self.scripts[name].sha, SOURCES[name], keys, args)
                 for name, keys, args in calls])
        for attempt in (1, 2):
            pipe = self.client.pipeline(transaction=False)
            for name, keys, args in calls:
                pipe.evalsha(self.scripts[name].sha, len(keys), *keys, *args)
            results: list[Any] = await pipe.execute(raise_on_error=False)
            missing = {name for (name, _, _), result in zip(calls, results, strict=True)
                       if isinstance(result, NoScriptError)}
            if missing and attempt == 1:
                for name in missing:
                    await self.client.script_load(SOURCES[name])
                continue
            for (name, _, _), result in zip(calls, results, strict=True):
                refused(result, name)
            return results
        raise AssertionError("unreachable")

    async def _pipelined(self, queue: Callable[[Pipeline], None]) -> None:
        """The commands `queue` puts on a non-transactional pipeline, in one round trip (per
        node on a cluster)."""
        pipe = self.client.pipeline(transaction=False)
        queue(pipe)
        await pipe.execute()

    async def script_pipeline(self, name: str, keys: Sequence[str], args: Args,
                              extra: Callable[[Pipeline], None], *,
                              before: Callable[[Pipeline], None] | None = None) -> Any:
        """One round trip: the commands `before` queues, EVALSHA `name`, then the commands
        `extra` queues (other slots); returns the script's reply.

        Not through `AsyncScript` in the pipeline: redis-py would send SCRIPT EXISTS first on
        every call. On NOSCRIPT (a restarted or failed-over server) the script is loaded and the
        pipeline sent again; every part is idempotent (the script's token, ZADD NX, a gate
        release).

        On a cluster (where redis-py pipelines no EVALSHA) three round trips, in the same
        order: the `before` commands in a pipeline, the script, then the `extra` commands in a
        pipeline of their own (sent even if the script failed)."""
        if self.cluster:
            if before is not None:
                await self._pipelined(before)
            try:
                return await self.script(name, keys, args)
            finally:
                await self._pipelined(extra)
        results, first = await self.script_replies(name, keys, args, extra, before=before)
        return results[first]

    async def script_replies(self, name: str, keys: Sequence[str], args: Args,
                             extra: Callable[[Pipeline], None], *,
                             before: Callable[[Pipeline], None] | None = None
                             ) -> tuple[list[Any], int]:
        """`script_pipeline` on one server (never a cluster): every reply, and the index of the
        script's among them."""
        for attempt in (1, 2):
            pipe = self.client.pipeline(transaction=False)
            if before is not None:
                before(pipe)
            first = len(pipe)
            pipe.evalsha(self.scripts[name].sha, len(keys), *keys, *args)
            extra(pipe)
            results: list[Any] = await pipe.execute(raise_on_error=False)
            if isinstance(results[first], NoScriptError) and attempt == 1:
                await self.client.script_load(SOURCES[name])
                continue
            for index, result in enumerate(results):
                refused(result, name if index == first else "a command of its pipeline")
            return results, first
        raise AssertionError("unreachable")


def own_errors(replies: Sequence[Any]) -> Sequence[Any]:
    """The replies of a pipeline run with `raise_on_error=False`, whose error replies each
    belong to their own command (a record of the wrong type fails only itself): a reply of a
    server not ready is raised instead, being no record's."""
    for reply in replies:
        if isinstance(reply, RedisError) and not_ready(reply):
            raise reply
    return replies


class Translation:
    """`RedisConnector.errors()`: raises the reactorflow error for a Redis failure that
    leaves the block (`RedisConnector.translate`), chained to it; anything else passes."""

    __slots__ = ("_translate",)

    def __init__(self, translate: Callable[[BaseException], BaseException | None]) -> None:
        self._translate = translate

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> Literal[False]:
        if exc is None:
            return False
        error = self._translate(exc)
        if error is None:
            return False
        raise error from exc


class RedisConnector:
    """Per-loop clients for one URL, and the translation of Redis failures."""

    def __init__(self, url: str, redis_options: dict[str, Any]) -> None:
        self.safe_url = safe_url(url)
        seed = cluster_url(url)
        self.cluster = seed is not None
        self._url = url if seed is None else seed
        self._secrets = url_secrets(url)
        options: dict[str, Any] = {
            "retry": Retry(ExponentialBackoff(cap=RETRY_BACKOFF_CAP, base=RETRY_BACKOFF_BASE),
                           RETRY_ATTEMPTS),
            "retry_on_error": [RedisConnectionError, RedisTimeoutError],
            "socket_connect_timeout": CONNECT_TIMEOUT,
            "socket_timeout": SOCKET_TIMEOUT,
        }
        options.update(redis_options)
        options["decode_responses"] = False  # records are bytes
        # Any Python str names a key, as in MemoryStorage: an id with a lone surrogate simply
        # names no run (instead of failing to encode).
        options["encoding_errors"] = "surrogatepass"
        self._options = options
        self._pool_size = int(options.get("max_connections", CLUSTER_MAX_CONNECTIONS
                                          if self.cluster else MAX_CONNECTIONS))
        self._pool_timeout = float(options.get("pool_timeout", POOL_TIMEOUT))
        problem = scheme_problem(url)
        if problem is not None:
            raise ConfigurationError(f"not a usable Redis URL ({self.safe_url!r}): {problem}",
                                     option="url")
        try:  # validate the URL now (no I/O), not at the first command
            Redis.from_url(self._url, **options)
            if self.cluster:
                self._check_cluster_url()
        except (ValueError, RedisClusterException) as exc:
            raise ConfigurationError(f"not a usable Redis URL ({self.safe_url}): "
                                     f"{self.scrub(str(exc))}", option="url") from None
        self._translation = Translation(self.translate)
        self._mutex = threading.Lock()
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopClient] = (
            weakref.WeakKeyDictionary())
        self._last: tuple[weakref.ref[asyncio.AbstractEventLoop], LoopClient] | None = None

    async def get(self) -> LoopClient:
        """The current loop's client, created on first use (on a cluster: initialised before
        any command is sent on it, see `_ready`)."""
        loop = asyncio.get_running_loop()
        with self._mutex:  # never held across an await (other coroutines of the loop need it)
            found = self._clients.get(loop)
            created = found is None
            if found is None:
                for old in [lp for lp in self._clients if lp.is_closed()]:
                    del self._clients[old]  # its loop closed without finalising: nothing to await
                client = self._new_client()
                pool = None if self.cluster else cast(Redis, client).connection_pool
                found = LoopClient(client,
                                   {n: client.register_script(s) for n, s in SOURCES.items()},
                                   cluster=self.cluster,
                                   wire=None if pool is None else wire_for(
                                       pool.connection_class, pool.connection_kwargs))
                self._clients[loop] = found
        if created:
            found.guard = self._guard(loop, found)
            await found.guard.asend(None)  # registered with the loop: finalised at its shutdown
        if found.cluster:
            return await self._ready(found)
        self._last = (weakref.ref(loop), found)
        return found

    def current(self) -> LoopClient | None:
        """The running loop's client without an await, when `get` handed it out last (one
        node; the hot paths' shortcut); else None: ask `get`."""
        last = self._last
        if last is not None and last[0]() is asyncio.get_running_loop():
            return last[1]
        return None

    def _forget(self, conn: LoopClient) -> None:
        last = self._last
        if last is not None and last[1] is conn:
            self._last = None

    async def _ready(self, conn: LoopClient) -> LoopClient:
        """`conn` once its cluster client has loaded the slot map. Commands sent while it is
        still loading (concurrent first calls) can fail inside redis-py on connections it
        resets; after the first call, `initialize()` only checks a flag."""
        with self.errors():
            await conn.client.initialize()
        return conn

    def _check_cluster_url(self) -> None:
        """A cluster has database 0 only, and no unix sockets."""
        if self._url.lower().startswith("unix"):
            raise ValueError("a Redis Cluster is reached over TCP: use redis+cluster://host:port")
        database = Redis.from_url(self._url).connection_pool.connection_kwargs.get("db", 0)
        if int(database or 0) != 0:
            raise ValueError(f"a Redis Cluster has database 0 only, not {database}")

    def _new_client(self) -> Client:
        """A client whose pool makes callers wait for a free connection (up to
        `POOL_TIMEOUT`) instead of failing when `MAX_CONNECTIONS` are busy (`WaitingPool`),
        and whose connections pack commands with hiredis and send them without a timer task
        (`LeanConnection`).

        On a cluster: a `RedisCluster` with up to `max_connections` per node (1024 unless
        given; redis-py's cluster pools do not wait: a command beyond that fails at once with
        `StoragePoolExhausted`)."""
        options = dict(self._options)
        options.pop("max_connections", None)
        options.pop("pool_timeout", None)
        if self.cluster:
            return RedisCluster.from_url(self._url, max_connections=self._pool_size, **options)
        pool = WaitingPool.from_url(self._url, max_connections=self._pool_size,
                                    timeout=self._pool_timeout, **options)
        pool.connection_class = lean(pool.connection_class)
        client = Redis(connection_pool=pool)
        client.auto_close_connection_pool = True
        return client

    async def _guard(self, loop: asyncio.AbstractEventLoop,
                     conn: LoopClient) -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            with self._mutex:
                if self._clients.get(loop) is conn:
                    del self._clients[loop]
            self._forget(conn)
            with anyio.CancelScope(shield=True):
                await conn.aclose()

    async def aclose(self) -> None:
        """Close the current loop's client (other loops keep theirs)."""
        with self._mutex:
            conn = self._clients.pop(asyncio.get_running_loop(), None)
        if conn is not None:
            self._forget(conn)
            if conn.guard is not None:
                await conn.guard.aclose()
            else:
                await conn.aclose()

    def scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def errors(self) -> Translation:
        """Redis failures as reactorflow errors that name the URL, never its credentials
        (a context manager; one stateless object, reused: entering it costs no allocation)."""
        return self._translation

    def translate(self, exc: BaseException) -> BaseException | None:
        """The reactorflow error for a Redis failure `exc`, or None for anything else. An
        error reply is named (its text, code first, and the command or script it answered):
        `StorageNotReady` for a server that will not serve yet (still after the retries),
        `StorageReplyError` for any other reply that is not about the connection."""
        if not_ready(exc):
            return StorageNotReady(self.safe_url, self.scrub(reply_text(exc)), command_of(exc),
                                   cause=exc)
        if isinstance(exc, ResponseError):
            return StorageReplyError(self.safe_url, self.scrub(reply_text(exc)),
                                     command_of(exc), cause=exc)
        if isinstance(exc, RedisConnectionError):
            if str(exc) != POOL_EXHAUSTED and not isinstance(exc, MaxConnectionsError):
                return self._unreachable(exc)
            return StoragePoolExhausted(self.safe_url, self._pool_size, self._pool_timeout,
                                        cause=exc)
        if isinstance(exc, (RedisTimeoutError, OSError)):
            return self._unreachable(exc)
        if isinstance(exc, RedisClusterException):
            if CLUSTER_UNREACHABLE in str(exc):
                return self._unreachable(exc)
            return StorageError(f"Redis at {self.safe_url} failed: {self.scrub(str(exc))}",
                                cause=exc)
        if isinstance(exc, RedisError):
            return StorageError(f"Redis at {self.safe_url} failed: {self.scrub(str(exc))}",
                                cause=exc)
        return None

    def _unreachable(self, exc: BaseException) -> StorageConnectionError:
        reason = self.scrub(str(exc) or type(exc).__name__)
        return StorageConnectionError(self.safe_url, reason, cause=exc)

    @asynccontextmanager
    async def subscription(self, channel: str) -> AsyncIterator[Subscription]:
        """Subscribed to `channel` (confirmed) for the body, through the loop's one subscriber
        connection (see `pubsub.py`): waiting costs no connection of the command pool."""
        conn = await self.get()
        if conn.mux is None:
            conn.mux = Multiplexer(self._subscriber_client(), self.errors, SUBSCRIBE_TIMEOUT)
        async with conn.mux.subscription(channel) as subscription:
            yield subscription

    def _subscriber_client(self) -> Redis:
        """A client with a pool of its own for the loop's one pub/sub connection (on a cluster:
        to the seed node, which hears every node's PUBLISH)."""
        options = dict(self._options)
        options.pop("max_connections", None)
        options.pop("pool_timeout", None)
        pool = ConnectionPool.from_url(self._url, **options)
        # lean: a SUBSCRIBE/UNSUBSCRIBE is written at once, with no timer task and no event
        # loop turn (a waiter handed a gate leaves its channel on the way to its run)
        pool.connection_class = lean(pool.connection_class)
        client = Redis(connection_pool=pool)
        client.auto_close_connection_pool = True
        return client
