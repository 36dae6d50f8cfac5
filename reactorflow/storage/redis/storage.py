"""`RedisStorage`: the storage contract on Redis (redis.asyncio + hiredis).

* Every write to a run is one Lua script over that run's keys, which share the `{<run id>}` hash
  tag (Redis Cluster ready). Scripts live one per file in `scripts/`, each with a header listing
  KEYS, ARGV and the reply, and each has exactly one typed method here. Checkpointing a step is
  one EVALSHA that writes one hash field, whatever the number of steps stored.
* Index writes: on one node the run's script makes them itself, atomically with the run (when
  this process knows the run's reactor). Otherwise (a Redis Cluster, where they live in other
  slots) they follow the script, and the script leaves a pending-index record in the run's own
  slot (field `ix`, the write's token), cleared (`index_done`) once they landed: a write cut
  off between the two leaves the record, which the sweeper's record pass (`reindex.py`)
  finds. An async unit's dispatch (`save_step(unit=True)`) and its unit index entry follow
  the same rule (pending unit record `ux`, cleared by `unit_indexed`). A refused write sends no
  index write. Index entries are hints: readers verify them against the run record and drop
  stale ones.
* Every write carries a fresh token that the script records, so a call that redis-py retries
  after a lost reply is recognised and not applied twice (no duplicated events, no double
  count, no `False` from a create that did succeed).
* Connection handling (a client per event loop, retries, error translation, pub/sub) lives in
  `connections.py`; key names in `keys.py` (documented in docs/reference/redis-keys.md).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

from redis.asyncio.client import Pipeline
from redis.exceptions import ResponseError
from redis.typing import EncodableT

from reactorflow import clock
from reactorflow.errors import LockLost, RunRecordGone
from reactorflow.status import ENDED
from reactorflow.storage.contract.decoding import number, wrong_type
from reactorflow.storage.contract.method_marks import foldable
from reactorflow.storage.contract.storage import Storage
from reactorflow.storage.contract.values import (
    DEFAULT_HISTORY_LIMIT,
    DEFAULT_RETENTION,
    ClaimResult,
    ResumeCheck,
    Resumption,
    RunHead,
    StoredRun,
    Subscription,
)
from reactorflow.storage.redis.connections import SOURCES, Args, LoopClient, RedisConnector
from reactorflow.storage.redis.gates import RedisGates
from reactorflow.storage.redis.keys import HEAD_FIELDS, RedisKeys
from reactorflow.storage.redis.maps import RedisMaps
from reactorflow.storage.redis.reindex import RecordWalk, RedisReindex
from reactorflow.storage.redis.resealing import RedisResealing
from reactorflow.storage.redis.retry_tokens import token as _token
from reactorflow.storage.redis.scans import RedisScans, unit_member
from reactorflow.storage.redis.schedules import RedisSchedules
from reactorflow.storage.redis.subjects import RedisSubjects
from reactorflow.storage.redis.timers import RedisTimers
from reactorflow.storage.redis.workers import RedisWorkers

FACTS_CACHE_SIZE = 4096
"""Runs whose (reactor, created_at) this process remembers, so that `save_state` can send its
index writes in the same round trip as its script."""

FOLLOW_ATTEMPTS = 3
"""Times a cluster's `follow_idempotency` sets a claim's expiry while the run keeps changing
(then the sweeper's record pass finishes it)."""

LOAD_BATCH = 500
"""Runs `load_runs` reads a round trip."""

HEADS_CACHE_SIZE = 1024
"""Runs whose packed save_step head (`_save_step_head`) this process keeps (all are dropped
when it is full)."""


def _nothing(pipe: Pipeline) -> None:
    """No commands after a script (`script_pipeline`'s `extra` when the script does it all)."""


def _ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))


def _now() -> str:
    """Now, for a script's ARGV: as text (hiredis formats a float more slowly than `repr`)."""
    return repr(clock.now())


def _text(value: Any) -> str:
    return value.decode(errors="surrogatepass") if isinstance(value, bytes) else str(value)


def _pairs(flat: Sequence[Any]) -> dict[Any, Any]:
    """A hash from the flat field/value list a script returns for HGETALL."""
    return dict(zip(flat[::2], flat[1::2], strict=True))


def _bytes(value: Any) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


def _hash(flat: Sequence[bytes]) -> dict[str, bytes]:
    """A hash of text fields and byte values from the flat field/value list a script returns
    for HGETALL (bulk strings: bytes, as every element of an LRANGE a script returns)."""
    pairs = iter(flat)
    return {k.decode(errors="surrogatepass"): v for k, v in zip(pairs, pairs, strict=True)}


def _refusal(code: int, run_id: str, owner: str) -> LockLost:
    """The error of a fenced write's refusal: reply -1, the run's record is gone (expired or
    deleted); else `owner` does not hold its lock."""
    return RunRecordGone(run_id, owner) if code == -1 else LockLost(run_id, owner)


_CLAIMED = {member.value.encode(): member for member in ClaimResult}
"""`ClaimResult` by its reply (a look-up, not the enum's call)."""


class RedisStorage(RedisScans, RedisReindex, RedisMaps, RedisGates, RedisSchedules, RedisTimers,
                   RedisWorkers, RedisSubjects, RedisResealing, Storage):
    """Runs in Redis: durable across processes, shared by every worker of the namespace.

    Selected automatically when `REACTORFLOW_REDIS_URL` is set and no storage is configured. Key
    layout: [Redis key layout](reference/redis-keys.md).
    """

    def __init__(self, url: str = "redis://localhost:6379/0", *, namespace: str = "rf",
                 retention: float = DEFAULT_RETENTION,
                 history_limit: int = DEFAULT_HISTORY_LIMIT, **redis_options: Any) -> None:
        """A storage on the Redis at `url` (the same as `RedisStorage.from_url`).

        Args:
            url: Where Redis is (`redis://`, `rediss://` or `unix://`); credentials in it never
                appear in messages.
            namespace: The prefix of every key (no braces).
            retention: Seconds an ended run is kept after the write that ended it (a run that
                has not ended never expires).
            history_limit: Events kept per run, the newest.
            **redis_options: Passed to `redis.asyncio.Redis`, e.g. `max_connections` (64),
                `socket_connect_timeout` (5 s), `socket_timeout` (5 s: a server that never
                answers fails the call with `rf.StorageConnectionError` after the retries
                instead of blocking it), `retry`.

        Raises:
            ConfigurationError: An option out of range, or a URL redis-py cannot use.
        """
        super().__init__(retention=retention, history_limit=history_limit)
        self._retention_ms = _ms(self.retention)
        self._keys = RedisKeys(namespace)
        self._redis = RedisConnector(url, redis_options)
        self._errors = self._redis.errors
        self._mutex = threading.Lock()
        self._facts: OrderedDict[str, tuple[str, float]] = OrderedDict()
        self._heads: dict[str, tuple[int, bytes]] = {}  # run id -> `_save_step_head`
        self._claim_heads: dict[tuple[str, ...], tuple[bytes, bytes]] = {}  # `_claim_head`
        self._walk = RecordWalk()  # the record pass's position (`scan_records`)
        self._prune_from: dict[str, str] = {}  # see `RedisScans._prune`

    @classmethod
    def from_url(cls, url: str, *, namespace: str = "rf", retention: float = DEFAULT_RETENTION,
                 history_limit: int = DEFAULT_HISTORY_LIMIT, **redis_options: Any) -> RedisStorage:
        """A storage on the Redis at `url` (`redis://`, `rediss://` or `unix://`), or on the
        Redis Cluster that node belongs to (`redis+cluster://`, `rediss+cluster://`: see
        docs/scaling.md).

        Args:
            url: where Redis is; credentials in it never appear in messages.
            namespace: prefix of every key (no braces).
            retention: seconds an ended run is kept after the write that ended it (a run that
                has not ended never expires).
            history_limit: events kept per run, the newest.
            redis_options: passed to `redis.asyncio.Redis` (`RedisCluster` on a cluster),
                e.g. `max_connections` (64; on a cluster 1024 per node, a hard cap),
                `socket_connect_timeout` (5 s), `socket_timeout` (5 s: the longest a command
                waits for an answer before it is retried, then fails), `retry`.

        Raises:
            ConfigurationError: an option out of range, or a URL redis-py cannot use.
        """
        return cls(url, namespace=namespace, retention=retention, history_limit=history_limit,
                   **redis_options)

    async def aclose(self) -> None:
        await self._redis.aclose()

    def describe(self) -> str:
        return f"RedisStorage at {self._redis.safe_url} (namespace {self._keys.ns!r})"

    # -- run facts (immutable: reactor and creation time) --------------------------------------

    def _remember(self, run_id: str, reactor: str, created_at: float) -> None:
        with self._mutex:
            self._facts[run_id] = (reactor, created_at)
            self._facts.move_to_end(run_id)
            while len(self._facts) > FACTS_CACHE_SIZE:
                self._facts.popitem(last=False)

    def _recall(self, run_id: str) -> tuple[str, float] | None:
        with self._mutex:
            return self._facts.get(run_id)

    def _head(self, run_id: str, values: Sequence[Any]) -> RunHead | None:
        reactor, status, meta, state, created, touched = values
        if reactor is None:
            return None
        try:  # (the common case without `number`'s error context: a bulk read reads many)
            created_at, touched_at = float(created), float(touched)
        except (TypeError, ValueError):
            key = self._keys.run(run_id)
            created_at = number(run_id, "created", created, key)
            touched_at = number(run_id, "touched", touched, key)
        head = RunHead(run_id, _text(reactor), _text(status), _bytes(meta or b""),
                       _bytes(state or b""), created_at, touched_at)
        self._remember(run_id, head.reactor, head.created_at)
        return head

    # -- runs ----------------------------------------------------------------------------------

    async def create_run(self, run_id: str, *, reactor: str, status: str, meta: bytes,
                         state: bytes, created_at: float, owner: str, lock_ttl: float,
                         events: Sequence[bytes] = (), idempotency_key: str | None = None
                         ) -> bool:
        conn = self._redis.current() or await self._redis.get()
        keys = self._keys
        indexes = [keys.by_reactor(reactor), keys.by_status(reactor, status), keys.reactors()]
        token = _token()
        claim = "" if idempotency_key is None else keys.idempotency(reactor, idempotency_key)
        args: Args = [token, reactor, status, meta, state, repr(created_at), _now(), owner,
                      _ms(lock_ttl), self._retention_ms, self.history_limit, run_id, claim,
                      *events]
        with self._errors():
            if conn.cluster:  # the indexes live in other slots: written apart
                def index(pipe: Pipeline) -> None:
                    pipe.zadd(indexes[0], {run_id: created_at}, nx=True)
                    pipe.zadd(indexes[1], {run_id: created_at}, nx=True)
                    pipe.sadd(indexes[2], reactor)

                created = await conn.script_pipeline("create_run", keys.run_keys(run_id), args,
                                                     index)
                if created == 1:  # they landed: the pending-index record goes
                    await conn.script("index_done", [keys.run(run_id)], [token])
            else:  # one node: the script writes them too
                created = await conn.script("create_run", keys.run_keys(run_id) + indexes, args)
        if created == 1:
            self._remember(run_id, reactor, created_at)
            if claim and status in ENDED:  # its retention starts now
                await self.follow_idempotency(run_id, claim)
        return bool(created == 1)

    async def load_run(self, run_id: str, *, history: bool = False,
                       claims: bool = False) -> StoredRun | None:
        conn = await self._redis.get()
        replies: Sequence[Any]
        with self._errors():
            if conn.cluster:  # a cluster client pipelines no MULTI/EXEC: one read script
                replies = await self._load_run_script(conn, run_id, history, claims)
            else:
                pipe = conn.client.pipeline(transaction=True)  # one slot: a MULTI/EXEC snapshot
                self._queue_load(pipe, run_id, history, claims)
                replies = self._load_replies(run_id, await pipe.execute(raise_on_error=False),
                                             history, claims)
        return self._stored_run(run_id, replies, history, claims)

    async def load_runs(self, run_ids: Sequence[str], *, history: bool = False,
                        claims: bool = False) -> list[StoredRun | None]:
        # LOAD_BATCH runs a round trip, each read by the `load_run` script (atomic per run):
        # on one node EVALSHA pipelined (`script_batch`: the wire path where it serves, one
        # reply per run parsed by hiredis); on a cluster EVAL in a pipeline (a cluster pipeline
        # takes no EVALSHA), split per node by the client
        conn = await self._redis.get()
        found: list[StoredRun | None] = []
        flags = ["1" if history else "0", "1" if claims else "0"]
        with self._errors():
            for start in range(0, len(run_ids), LOAD_BATCH):
                batch = run_ids[start:start + LOAD_BATCH]
                try:
                    replies = await self._load_batch(conn, batch, flags)
                except ResponseError:  # (a key of the wrong type, in some run of the batch)
                    found += [await self.load_run(run_id, history=history, claims=claims)
                              for run_id in batch]  # (raises naming that run)
                    continue
                found += [self._stored_run(run_id, self._script_replies(reply, history, claims),
                                           history, claims)
                          for run_id, reply in zip(batch, replies, strict=True)]
        return found

    async def _load_batch(self, conn: LoopClient, run_ids: Sequence[str],
                          flags: list[str]) -> list[Any]:
        """The `load_run` script's reply for each run, in one round trip (per node); an error
        reply raised."""
        if not conn.cluster:
            return await conn.script_batch([("load_run", self._load_keys(run_id), flags)
                                            for run_id in run_ids])
        pipe = conn.client.pipeline(transaction=False)
        for run_id in run_ids:
            pipe.eval(SOURCES["load_run"], 4, *self._load_keys(run_id), *flags)
        replies: list[Any] = await pipe.execute(raise_on_error=False)
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        return replies

    def _load_keys(self, run_id: str) -> list[str]:
        """The keys `load_run` reads, in the order its script takes them."""
        keys = self._keys
        return [keys.run(run_id), keys.steps(run_id), keys.hist(run_id), keys.claims(run_id)]

    def _queue_load(self, pipe: Pipeline, run_id: str, history: bool, claims: bool) -> None:
        """Queue the commands of one `load_run` read (head, steps[, history][, claims])."""
        pipe.hmget(self._keys.run(run_id), HEAD_FIELDS)
        pipe.hgetall(self._keys.steps(run_id))
        if history:
            pipe.lrange(self._keys.hist(run_id), 0, -1)
        if claims:
            pipe.hgetall(self._keys.claims(run_id))

    def _load_replies(self, run_id: str, replies: Sequence[Any], history: bool,
                      claims: bool) -> Sequence[Any]:
        """The replies of `_queue_load`'s commands, an error reply raised naming its key (one
        bad key fails its run only)."""
        read = [self._keys.run(run_id), self._keys.steps(run_id)]
        read += [self._keys.hist(run_id)] * history + [self._keys.claims(run_id)] * claims
        for key, reply in zip(read, replies, strict=True):
            if isinstance(reply, Exception):
                raise wrong_type(run_id, key, reply) or reply
        return replies

    def _stored_run(self, run_id: str, replies: Sequence[Any], history: bool,
                    claims: bool) -> StoredRun | None:
        """The run from a `load_run` read's replies (head, steps[, history][, claims])."""
        head = self._head(run_id, replies[0])
        if head is None:
            return None
        rest = iter(replies[2:])
        events = [_bytes(e) for e in next(rest)] if history else None
        found = {_text(k): _bytes(v) for k, v in next(rest).items()} if claims else None
        return StoredRun(head, {_text(k): _bytes(v) for k, v in replies[1].items()}, events,
                         found)

    async def _load_run_script(self, conn: LoopClient, run_id: str, history: bool,
                               claims: bool) -> list[Any]:
        """`load_run`'s replies (head, steps[, history][, claims]) read by one script."""
        try:
            reply = await conn.script("load_run", self._load_keys(run_id),
                                      ["1" if history else "0", "1" if claims else "0"])
        except ResponseError as exc:  # (the script's reply names no key: the run's is named)
            raise wrong_type(run_id, self._keys.run(run_id), exc) or exc from exc
        return self._script_replies(reply, history, claims)

    @staticmethod
    def _script_replies(reply: Sequence[Any], history: bool, claims: bool) -> list[Any]:
        """The `load_run` script's reply as the pipelined read's replies."""
        head, steps, events, found = reply
        replies: list[Any] = [head, _pairs(steps)]
        if history:
            replies.append(events)
        if claims:
            replies.append(_pairs(found))
        return replies

    async def load_head(self, run_id: str) -> RunHead | None:
        conn = await self._redis.get()
        with self._errors():
            try:
                values = await conn.client.hmget(self._keys.run(run_id), HEAD_FIELDS)
            except ResponseError as exc:
                raise wrong_type(run_id, self._keys.run(run_id), exc) or exc from exc
        return self._head(run_id, values)

    @foldable
    async def save_step(self, run_id: str, owner: str, key: str, record: bytes,
                        events: Sequence[bytes] = (), *, unit: bool = False) -> bytes | None:
        conn = self._redis.current() or await self._redis.get()
        member, since = (unit_member(run_id, key), repr(clock.now())) if unit else ("", "")
        args: Args = [_token(), owner, key, record, _now(), self.history_limit, member, since,
                      *events]
        with self._errors():
            if unit:
                reply = await self._dispatch_unit(conn, run_id, key, args, member, since)
            elif conn.wire is not None:  # the command's head (sha, the run's keys) packed once
                head = self._heads.get(run_id)
                if head is None:
                    head = self._save_step_head(conn, run_id)
                reply = await conn.wire.evalsha_after(head, SOURCES["save_step"], args,
                                                      "save_step")
            else:
                reply = await conn.script("save_step", self._keys.run_keys(run_id), args)
        if reply[0] != 1:
            raise _refusal(reply[0], run_id, owner)
        return None if reply[1] is None else _bytes(reply[1])

    async def _dispatch_unit(self, conn: LoopClient, run_id: str, key: str, args: Args,
                             member: str, since: str) -> Any:
        """`save_step`'s write of an async unit's dispatch, whose unit enters the unit index:
        on one node in the script; on a cluster (another slot) after it, once it was written,
        then the pending unit record the script left is cleared (`unit_indexed`). A failure
        between the two leaves that record for the sweeper's record pass."""
        keys = self._keys.run_keys(run_id)
        if not conn.cluster:
            return await conn.script("save_step", [*keys, self._keys.units()], args)
        reply = await conn.script("save_step", keys, args)
        if reply[0] == 1:
            await conn.client.zadd(self._keys.units(), {member: float(since)}, nx=True)
            await conn.script("unit_indexed", [keys[0]], [key, since])
        return reply

    def _save_step_head(self, conn: LoopClient, run_id: str) -> tuple[int, bytes]:
        """EVALSHA, save_step's sha, the key count and the run's keys, packed for the wire
        path (kept for the runs this process checkpoints lately: their steps reuse it)."""
        assert conn.wire is not None
        keys = self._keys.run_keys(run_id)
        head = conn.wire.head(("EVALSHA", conn.scripts["save_step"].sha, len(keys), *keys))
        if len(self._heads) >= HEADS_CACHE_SIZE:
            self._heads.clear()
        self._heads[run_id] = head
        return head

    async def load_step(self, run_id: str, key: str) -> bytes | None:
        conn = await self._redis.get()
        with self._errors():
            value = await conn.client.hget(self._keys.steps(run_id), key)
        return None if value is None else _bytes(value)

    async def migrate_run(self, run_id: str, owner: str, *, expected_meta: bytes, meta: bytes,
                          state: bytes, steps: Mapping[str, bytes], removed: Sequence[str],
                          events: Sequence[bytes] = ()) -> bool:
        gone = [key for key in removed if key not in steps]
        pairs = [part for key, record in steps.items() for part in (key, record)]
        args: Args = [_token(), owner, expected_meta, meta, state, _now(), self.history_limit,
                      len(steps), len(gone), *pairs, *gone, *events]
        conn = await self._redis.get()
        with self._errors():
            reply = await conn.script("migrate_run", self._keys.run_keys(run_id), args)
        if reply[0] == 2:
            return False
        if reply[0] != 1:
            raise _refusal(reply[0], run_id, owner)
        return True

    async def save_state(self, run_id: str, owner: str, *, status: str, previous_status: str,
                         state: bytes, steps: Mapping[str, bytes] | None = None,
                         events: Sequence[bytes] = (), clear_control: bool = False,
                         publish: bool = False, release: bool = False,
                         gates: Sequence[tuple[str, str]] = (),
                         unless_control: bool = False) -> bytes | None:
        conn = self._redis.current() or await self._redis.get()
        pairs = [part for item in (steps or {}).items() for part in item]
        flags = (("c" if clear_control else "") + ("r" if release else "")
                 + ("u" if unless_control else ""))
        token = _token()
        args: Args = [token, owner, status, state, _now(), self._retention_ms,
                      self.history_limit, flags,
                      self._keys.channel(run_id) if publish else "", run_id, len(pairs) // 2,
                      *pairs, *events]
        keys = self._keys.run_keys(run_id)
        facts = self._recall(run_id)
        # with `unless_control` the gates are dropped only once the write landed (on one node
        # the save and the releases are one script: always so, atomically)
        early, late = ((), gates) if unless_control else (gates, ())
        with self._errors():
            if facts is not None and not conn.cluster:  # the script moves the indexes itself
                reactor = facts[0]
                keys += [self._keys.by_status(reactor, status), self._keys.by_reactor(reactor),
                         self._keys.by_status(reactor, previous_status)]
                if gates:  # the final save hands the places over: save before release
                    gate_keys, gate_args = self._release_parts(gates)
                    reply = await conn.script("save_release", [*keys, *gate_keys],
                                              [len(gates), *gate_args, *args])
                else:
                    reply = await conn.script("save_state", keys, args)
                early = late = ()
                if reply[0] in (0, -1):  # refused: nothing written, no index touched
                    raise _refusal(reply[0], run_id, owner)
            elif facts is None:  # unknown to this process: the script tells, index writes follow
                for key, holder in early:  # before the write: its state shows them free
                    await self.gate_release(key, holder)
                reply = await conn.script("save_state", keys, args)
            else:  # a cluster: the gates before the write, the index moves once it landed
                def before(pipe: Pipeline) -> None:
                    self._queue_gate_releases(pipe, early)

                reply = await conn.script_pipeline("save_state", keys, args, _nothing,
                                                   before=before)
            if reply[0] != 1:  # refused: nothing written, no index touched
                if reply[0] == 2:  # a pending control request refused it (`unless_control`)
                    return _bytes(reply[1])
                raise _refusal(reply[0], run_id, owner)
            for key, holder in late:  # the write landed (a cluster, or a run not seen here)
                await self.gate_release(key, holder)
            actual = (_text(reply[1]), float(reply[2]))
            if len(keys) == 8:  # the indexes apart: the script left a pending-index record
                if actual != facts:
                    self._remember(run_id, *actual)
                await self._index_apart(conn, run_id, actual, status, previous_status, token)
        if len(reply) > 4 and reply[4] is not None:  # its claim follows (lib/expiry.lua)
            await self.follow_idempotency(run_id, _text(reply[4]))
        return None if reply[3] is None else _bytes(reply[3])

    async def _index_apart(self, conn: LoopClient, run_id: str, facts: tuple[str, float],
                           status: str, previous_status: str, token: str) -> None:
        """The index writes of a status change whose script did not make them, then the
        clearing of the pending-index record that script left (`index_done`): on one node both
        in one script (atomic: a pipeline would run the clearing after a refused write too);
        on a cluster the writes in a pipeline, then, once every one landed, the clearing (a
        cluster pipeline runs its nodes' parts concurrently). A failure on the way leaves the
        record for the sweeper's record pass."""
        run_key = self._keys.run(run_id)
        if not conn.cluster:
            reactor, created_at = facts
            await conn.script("index_done", [
                run_key, self._keys.by_status(reactor, status), self._keys.by_reactor(reactor),
                self._keys.by_status(reactor, previous_status)], [token, run_id, repr(created_at)])
            return
        pipe = conn.client.pipeline(transaction=False)
        self._queue_index(pipe, run_id, facts, status, previous_status)
        await pipe.execute()
        await conn.script("index_done", [run_key], [token])

    def _queue_index(self, pipe: Pipeline, run_id: str, facts: tuple[str, float], status: str,
                     previous_status: str) -> None:
        """Index writes of a status change (re-asserted on every save, which heals lost ones)."""
        reactor, created_at = facts
        pipe.zadd(self._keys.by_status(reactor, status), {run_id: created_at}, nx=True)
        pipe.zadd(self._keys.by_reactor(reactor), {run_id: created_at}, nx=True)
        if previous_status != status:
            pipe.zrem(self._keys.by_status(reactor, previous_status), run_id)

    async def history(self, run_id: str) -> list[bytes]:
        conn = await self._redis.get()
        with self._errors():
            events = await conn.client.lrange(self._keys.hist(run_id), 0, -1)
        return [_bytes(e) for e in events]

    # -- liveness lock -------------------------------------------------------------------------

    async def acquire_lock(self, run_id: str, owner: str, ttl: float) -> bool:
        conn = await self._redis.get()
        with self._errors():
            held = await conn.script("acquire_lock",
                                     [self._keys.lock(run_id), self._keys.run(run_id)],
                                     [owner, _ms(ttl), _token()])
        return bool(held == 1)

    async def lock_and_load(self, run_id: str, owner: str, ttl: float
                            ) -> tuple[bool, StoredRun | None]:
        conn = await self._redis.get()
        keys = [self._keys.lock(run_id), *self._load_keys(run_id)]
        with self._errors():
            try:
                reply = await conn.script("lock_load_run", keys, [owner, _ms(ttl), _token()])
            except ResponseError as exc:  # (the script's reply names no key: the run's is named)
                raise wrong_type(run_id, self._keys.run(run_id), exc) or exc from exc
        if reply == 0:
            return False, None
        return True, self._stored_run(run_id, self._script_replies(reply, True, True), True, True)

    async def extend_lock(self, run_id: str, owner: str, ttl: float) -> bool:
        conn = await self._redis.get()
        with self._errors():
            held = await conn.script("extend_lock", [self._keys.lock(run_id)], [owner, _ms(ttl)])
        return bool(held == 1)

    async def release_lock(self, run_id: str, owner: str) -> int:
        conn = await self._redis.get()
        with self._errors():
            left = await conn.script("release_lock",
                                     [self._keys.lock(run_id), self._keys.run(run_id)],
                                     [owner, _token()])
        return int(left)

    async def lock_owner(self, run_id: str) -> str | None:
        conn = await self._redis.get()
        with self._errors():
            owner = await conn.client.hget(self._keys.lock(run_id), "owner")
        return None if owner is None else _text(owner)

    # -- control, claims, counters -------------------------------------------------------------

    async def request_control(self, run_id: str, control: bytes) -> bool:
        conn = await self._redis.get()
        with self._errors():
            stored = await conn.script("request_control", self._keys.run_keys(run_id),
                                       [_token(), control])
        return bool(stored == 1)

    async def claim(self, run_id: str, name: str, payload: bytes) -> ClaimResult:
        conn = await self._redis.get()
        with self._errors():
            verdict = await conn.script("claim", self._keys.run_keys(run_id),
                                        [_token(), name, payload])
        return ClaimResult(_text(verdict))

    async def claim_and_lock(self, run_id: str, name: str, payload: bytes, *, owner: str,
                             lock_ttl: float, then: Resumption | None = None,
                             check: ResumeCheck | None = None, events: Sequence[bytes] = (),
                             ) -> tuple[ClaimResult, StoredRun | None]:
        conn = self._redis.current() or await self._redis.get()
        now = _now() if check is None else repr(check.now)  # (one text for both: the same)
        token = _token()
        args: list[EncodableT] = [token, name, payload, self._retention_ms, owner,
                                  _ms(lock_ttl), now, self.history_limit, run_id]
        facts = self._recall(run_id)
        reactor = None if facts is None else facts[0]
        change = ("", "")  # the status write's new and previous status
        if check is not None:
            args += ["check", check.reactor, check.marker, now,
                     "1" if check.resume else "0",
                     "" if check.refuse_ext is None else check.refuse_ext,
                     len(check.events), *check.events]
            reactor, change = check.reactor, ("running", "paused")  # (checked by the script)
        elif then is not None:
            args += ["then", then.status, then.previous_status, then.expected_state, then.state,
                     len(then.unclaimed), *then.unclaimed, len(then.events), *then.events]
            change = (then.status, then.previous_status)
        else:
            args.append("")
        args += events  # (the rest: written with the claim when no status write is made)
        indexes: tuple[str, ...] = ()
        if change[0] and reactor is not None and not conn.cluster:  # the script moves them
            indexes = (self._keys.by_status(reactor, change[0]), self._keys.by_reactor(reactor),
                       self._keys.by_status(reactor, change[1]))
        with self._errors():
            if conn.wire is not None:
                reply = await conn.wire.evalsha_after(self._claim_head(conn, run_id, indexes),
                                                      SOURCES["claim_lock_load"], args,
                                                      "claim_lock_load")
            else:
                reply = await conn.script("claim_lock_load",
                                          [*self._keys.run_keys(run_id), *indexes], args)
            outcome = _CLAIMED.get(reply[0]) or ClaimResult(_text(reply[0]))
            if outcome is ClaimResult.REFUSED:
                head = self._head(run_id, reply[1]) if len(reply) > 1 else None
                return outcome, None if head is None else StoredRun(head, {})
            if len(reply) < 3:
                return outcome, None
            head = self._head(run_id, reply[2])
            if reply[6] == 1 and not indexes and head is not None:  # apart (other slots)
                await self._index_apart(conn, run_id, (head.reactor, head.created_at), *change,
                                        token)
        if head is None:  # unreachable: the script saw the run
            return outcome, None
        return outcome, StoredRun(head, _hash(reply[3]), reply[4], _hash(reply[5]))

    def _claim_head(self, conn: LoopClient, run_id: str,
                    indexes: tuple[str, ...]) -> tuple[int, bytes]:
        """EVALSHA, claim_lock_load's sha, the key count and the keys (the run's, then
        `indexes`), packed for the wire path's `evalsha_after`: all but the run's keys packed
        once per set of index keys, the run's keys in one formatting (`packed_run_keys`)."""
        assert conn.wire is not None
        packed = self._claim_heads.get(indexes)
        if packed is None:
            if len(self._claim_heads) >= HEADS_CACHE_SIZE:
                self._claim_heads.clear()
            start = ("EVALSHA", conn.scripts["claim_lock_load"].sha, 8 + len(indexes))
            packed = self._claim_heads[indexes] = (
                conn.wire.head(start)[1], conn.wire.head(indexes)[1] if indexes else b"")
        first, last = packed
        return 11 + len(indexes), first + self._keys.packed_run_keys(run_id) + last

    async def claims(self, run_id: str) -> dict[str, bytes]:
        conn = await self._redis.get()
        with self._errors():
            found = await conn.client.hgetall(self._keys.claims(run_id))
        return {_text(k): _bytes(v) for k, v in found.items()}

    async def forget_claims(self, run_id: str, owner: str, names: Sequence[str]) -> None:
        if not names:
            return
        conn = await self._redis.get()
        with self._errors():
            reply = await conn.script("forget_claims", self._keys.run_keys(run_id),
                                      [owner, *names])
        if reply != 1:
            raise _refusal(int(reply), run_id, owner)

    async def incr_counter(self, run_id: str, name: str) -> int:
        conn = await self._redis.get()
        with self._errors():
            value = await conn.script("incr_counter", self._keys.run_keys(run_id),
                                      [_token(), name])
        return int(value)

    async def _first_wins(self, key: str, run_id: str, ttl_ms: int, refresh: bool) -> str:
        """`first_wins` of `key` for `run_id`; `ttl_ms` 0: the mapping never expires."""
        conn = await self._redis.get()
        with self._errors():
            winner = await conn.script("first_wins", [key],
                                       [run_id, ttl_ms, "1" if refresh else "0"])
        return _text(winner)

    async def _release_mapping(self, key: str, run_id: str) -> bool:
        conn = await self._redis.get()
        with self._errors():
            released = await conn.script("release_mapping", [key], [run_id])
        return bool(released == 1)

    async def map_correlation(self, reactor: str, correlation_id: str, run_id: str) -> str:
        # no TTL: the mapping lives as long as its run waits (api.md §13); the run releases it
        return await self._first_wins(self._keys.correlation(reactor, correlation_id), run_id,
                                      0, True)

    async def resolve_correlation(self, reactor: str, correlation_id: str) -> str | None:
        conn = await self._redis.get()
        with self._errors():
            found = await conn.client.get(self._keys.correlation(reactor, correlation_id))
        return None if found is None else _text(found)

    async def release_correlation(self, reactor: str, correlation_id: str, run_id: str) -> bool:
        return await self._release_mapping(self._keys.correlation(reactor, correlation_id),
                                           run_id)

    async def remember_correlation(self, reactor: str, correlation_id: str, run_id: str) -> None:
        # the record takes the run's expiry, read first (the run's keys are in another slot
        # on a Redis Cluster): a run that has not ended (no expiry) or is gone gets none
        conn = await self._redis.get()
        with self._errors():
            left = await conn.client.pttl(self._keys.run(run_id))
            if isinstance(left, int) and left > 0:
                await conn.client.set(self._keys.past_correlation(reactor, correlation_id),
                                      run_id, px=left)

    async def claim_idempotency(self, reactor: str, key: str, run_id: str) -> str:
        # no TTL: the claim takes its run's expiry once the run records it (`create_run`)
        return await self._first_wins(self._keys.idempotency(reactor, key), run_id, 0, False)

    async def follow_idempotency(self, run_id: str, claim: str) -> None:
        """Give the idempotency claim `claim` (its key) of run `run_id` the run's expiry and
        clear the follow-up record the run's last status write left (see lib/expiry.lua): on
        one node in one script; on a cluster (the claim in another slot) by reading the run's
        PTTL, setting the claim's, then clearing the record if the run did not change since
        (else again, a few times; what is left, the sweeper's record pass finishes).

        Args:
            run_id: The run's id.
            claim: The key of the claim (the run hash's field `ik`).

        Raises:
            StorageError: The backend failed (the record stays for the record pass).
        """
        conn = await self._redis.get()
        run_key = self._keys.run(run_id)
        with self._errors():
            if not conn.cluster:
                await conn.script("idem_follow", [claim, run_key], [run_id, -1])
                return
            for _ in range(FOLLOW_ATTEMPTS):
                left = int(await conn.client.pttl(run_key))
                await conn.script("idem_follow", [claim], [run_id, left])
                if await conn.script("idem_done", [run_key], [left]) == 1:
                    return

    async def release_idempotency(self, reactor: str, key: str, run_id: str) -> bool:
        return await self._release_mapping(self._keys.idempotency(reactor, key), run_id)

    async def save_unit(self, run_id: str, key: str, record: bytes,
                        events: Sequence[bytes] = (), *, settled: bool = True) -> bool:
        conn = await self._redis.get()
        args: Args = [_token(), key, record, _now(), self.history_limit,
                      self._keys.channel(run_id, key) if settled else "", *events]
        with self._errors():
            if not settled:  # the unit stays indexed: only the record and its events
                written = await conn.script("save_unit", self._keys.run_keys(run_id), args)
                return bool(written == 1)
            member = unit_member(run_id, key)
            index = self._keys.units()

            def untrack(pipe: Pipeline) -> None:
                pipe.zrem(index, member)

            written = await conn.script_pipeline("save_unit", self._keys.run_keys(run_id), args,
                                                 untrack)
        return bool(written == 1)

    # -- notification --------------------------------------------------------------------------

    def subscribe(self, run_id: str, topic: str = "") -> AbstractAsyncContextManager[Subscription]:
        return self._redis.subscription(self._keys.channel(run_id, topic))

    async def publish(self, run_id: str, topic: str = "", message: bytes = b"1") -> None:
        conn = await self._redis.get()
        with self._errors():
            await conn.client.publish(self._keys.channel(run_id, topic), message)
