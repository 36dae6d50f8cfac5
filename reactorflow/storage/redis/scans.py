"""`RedisStorage`'s cross-run reads: listing runs through the indexes, the sweeper's scans of
status indexes and of dispatched units. Index entries are hints: each is verified against the
run record, and stale or expired ones are dropped on the way (bounded per call)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, cast

from reactorflow import clock
from reactorflow.errors import CorruptRecord
from reactorflow.status import Status
from reactorflow.storage.contract.cursors import decode_cursor, encode_cursor
from reactorflow.storage.contract.decoding import wrong_type
from reactorflow.storage.contract.rotation import ring_segments
from reactorflow.storage.contract.values import (
    Liveness,
    RunHead,
    RunKey,
    RunPageData,
    UnitLiveness,
)
from reactorflow.storage.redis.connections import LoopClient, RedisConnector, own_errors
from reactorflow.storage.redis.keys import HEAD_FIELDS, RedisKeys
from reactorflow.storage.redis.paging import IndexReader, Taken, newest_first

log = logging.getLogger("reactorflow.storage")

_STATUSES = frozenset(s.value for s in Status)
PRUNE_BATCH = 100
"""Index members per index that `scan_status` checks for runs that expired (`_prune`)."""

_Stale = list[tuple[str, str]]  # (index key, run id) to drop


def _text(value: Any) -> str:
    return value.decode(errors="surrogatepass") if isinstance(value, bytes) else str(value)


def unit_member(run_id: str, key: str) -> str:
    """The member of the unit index for one dispatched unit."""
    return f"{run_id}|{key}"


def _liveness_problem(recorded: str, indexed: str, touched: Any) -> str | None:
    """What is wrong with a run found in the `indexed` status index: "stale" (it moved to
    another status: a hint to drop), a reason it cannot be read, or None."""
    if recorded != indexed:
        if recorded in _STATUSES:
            return "stale"
        return f"its status {recorded[:40]!r} is not one this version of reactorflow knows"
    try:
        float(touched)
    except (TypeError, ValueError):
        return f"its touched time {_text(touched)[:40]!r} is not a number"
    return None



class RedisScans:
    """`list_runs`, `scan_status`, `scan_units` on Redis."""

    _redis: RedisConnector
    _keys: RedisKeys
    _errors: Callable[[], AbstractContextManager[None]]
    retention: float
    _prune_from: dict[str, str]  # index key -> the score (exclusive) `_prune` goes on after
    _head: Callable[[str, Sequence[Any]], RunHead | None]

    # -- listing and sweeping ------------------------------------------------------------------

    async def list_runs(self, reactor: str | None, status: str | None, limit: int,
                        cursor: str | None, *, since: float | None = None,
                        until: float | None = None) -> RunPageData:
        after = decode_cursor(cursor)
        conn = await self._redis.get()
        stale: _Stale = []
        unreadable: list[str] = []
        with self._errors():
            reactors = ([reactor] if reactor is not None else
                        sorted(_text(r) for r in await conn.client.smembers(self._keys.reactors())))
            readers = [IndexReader(self._keys.by_reactor(name) if status is None
                                   else self._keys.by_status(name, status), name, after,
                                   since, until)
                       for name in reactors]

            async def verify(taken: list[Taken]) -> list[RunHead]:
                return await self._verified(conn, taken, status, stale, unreadable)

            heads = await newest_first(conn.client, readers, limit + 1, verify)
            await self._drop(conn, stale)
        more = len(heads) > limit
        heads = heads[:limit]
        next_cursor = encode_cursor(heads[-1].created_at, heads[-1].run_id) if more else None
        return RunPageData(heads, next_cursor, tuple(unreadable))

    async def find_by_key(self, kind: RunKey, key: str, reactor: str | None) -> dict[str, str]:
        match kind:
            case RunKey.CORRELATION_ID:
                mapping: Callable[[str, str], str] = self._keys.correlation
            case RunKey.IDEMPOTENCY_KEY:
                mapping = self._keys.idempotency
        conn = await self._redis.get()
        with self._errors():
            reactors = ([reactor] if reactor is not None else
                        sorted(_text(r) for r in await conn.client.smembers(self._keys.reactors())))
            past = kind is RunKey.CORRELATION_ID  # an ended run's, after the live mapping
            pipe = conn.client.pipeline(transaction=False)
            for name in reactors:
                pipe.get(mapping(name, key))
                if past:
                    pipe.get(self._keys.past_correlation(name, key))
            replies = await pipe.execute() if reactors else []
        per = 2 if past else 1
        found = {name: next((r for r in replies[i * per:(i + 1) * per] if r is not None), None)
                 for i, name in enumerate(reactors)}
        return {name: _text(run_id) for name, run_id in found.items() if run_id is not None}

    async def count_runs(self) -> dict[tuple[str, str], int]:
        conn = await self._redis.get()
        with self._errors():
            reactors = sorted(_text(r) for r in await conn.client.smembers(self._keys.reactors()))
            pairs = [(reactor, status) for reactor in reactors for status in sorted(_STATUSES)]
            pipe = conn.client.pipeline(transaction=False)
            for reactor, status in pairs:
                pipe.zcard(self._keys.by_status(reactor, status))
            replies = await pipe.execute() if pairs else []
        return {pair: int(count) for pair, count in zip(pairs, replies, strict=True) if count}

    async def _verified(self, conn: LoopClient, taken: list[Taken], status: str | None,
                        stale: _Stale, unreadable: list[str]) -> list[RunHead]:
        """The heads of the taken index members whose record matches the index; the others go
        to `stale`, and those whose record cannot be read (`CorruptRecord`) to `unreadable`."""
        pipe = conn.client.pipeline(transaction=False)
        for _, _, run_id in taken:
            pipe.hmget(self._keys.run(run_id), HEAD_FIELDS)
        heads: list[RunHead] = []
        replies = await pipe.execute(raise_on_error=False)  # one bad record fails only itself
        for (index, reactor, run_id), values in zip(taken, replies, strict=True):
            try:
                if isinstance(values, Exception):
                    raise wrong_type(run_id, self._keys.run(run_id), values) or values
                head = self._head(run_id, values)
            except CorruptRecord as exc:
                log.warning("reactorflow.run.unreadable run_id=%s reason=%s", run_id, exc.message)
                unreadable.append(run_id)
                continue
            if head is None or head.reactor != reactor or (status and head.status != status):
                stale.append((index, run_id))
            else:
                heads.append(head)
        return heads

    async def _drop(self, conn: LoopClient, stale: _Stale) -> None:
        if stale:
            pipe = conn.client.pipeline(transaction=False)
            for index, run_id in stale:
                pipe.zrem(index, run_id)
            await pipe.execute()

    async def scan_status(self, statuses: Sequence[str], limit: int) -> list[Liveness]:
        # the status indexes of every reactor, read as one ring (status by status), from a
        # random point when they hold more than `limit` runs (see `rotation`)
        conn = await self._redis.get()
        found: list[Liveness] = []
        stale: _Stale = []
        batch = min(max(limit, 32), 1000)
        with self._errors():
            reactors = sorted(_text(r) for r in await conn.client.smembers(self._keys.reactors()))
            indexes = [(reactor, status, self._keys.by_status(reactor, status))
                       for status in dict.fromkeys(statuses) for reactor in reactors]
            pipe = conn.client.pipeline(transaction=False)
            for _, _, index in indexes:
                pipe.zcard(index)
            sizes = [int(size) for size in await pipe.execute()] if indexes else []
            for which, first, last in ring_segments(sizes, limit):
                reactor, status, index = indexes[which]
                start = first
                while start <= last and len(found) < limit:
                    rows = await conn.client.zrange(index, start, min(last, start + batch - 1))
                    if not rows:
                        break
                    start += batch
                    found += await self._liveness(conn, index, [_text(r) for r in rows],
                                                  reactor, status, stale)
                if len(found) >= limit:
                    break
            await self._drop(conn, stale)
            await self._prune(conn, reactors)
        return found[:limit]

    async def _prune(self, conn: LoopClient, reactors: list[str]) -> None:
        """Drop index members whose run expired. Bounded: per index, the next PRUNE_BATCH
        members, in order of creation, of those created more than `retention` ago (the only
        ones that can have expired: an ended run expires `retention` after it ended), after
        where this storage's last call stopped (`_prune_from`; round from the start again once
        it reaches the end). A run that has not ended never expires however old it is (api.md
        §13): the oldest members may all be live, and a call that always started at the oldest
        would never reach the expired ones behind them."""
        horizon = clock.now() - self.retention
        indexes = [self._keys.by_reactor(r) for r in reactors]
        indexes += [self._keys.by_status(r, s) for r in reactors for s in Status]
        pipe = conn.client.pipeline(transaction=False)
        for index in indexes:
            pipe.zrangebyscore(index, self._prune_from.get(index, "-inf"), horizon, start=0,
                               num=PRUNE_BATCH, withscores=True)
        candidates: _Stale = []
        for index, rows in zip(indexes, await pipe.execute(), strict=True):
            if len(rows) < PRUNE_BATCH:
                self._prune_from.pop(index, None)  # the end: from the start next time
            else:
                self._prune_from[index] = f"({float(rows[-1][1])!r}"
            candidates += [(index, _text(member)) for member, _ in rows]
        if candidates:
            pipe = conn.client.pipeline(transaction=False)
            for _, run_id in candidates:
                pipe.exists(self._keys.run(run_id))
            exists = await pipe.execute()
            await self._drop(conn, [c for c, e in zip(candidates, exists, strict=True) if not e])

    async def _liveness(self, conn: LoopClient, index: str, run_ids: list[str], reactor: str,
                        status: str, stale: _Stale) -> list[Liveness]:
        pipe = conn.client.pipeline(transaction=False)
        for run_id in run_ids:
            pipe.hmget(self._keys.run(run_id), ("reactor", "status", "touched", "hl"))
            pipe.hget(self._keys.lock(run_id), "owner")
        # one bad record fails only itself (a server not ready fails the call)
        replies = own_errors(await pipe.execute(raise_on_error=False))
        live: list[Liveness] = []
        for i, run_id in enumerate(run_ids):
            fields, owner = replies[2 * i], replies[2 * i + 1]
            if isinstance(fields, Exception) or isinstance(owner, Exception):
                which = "record" if isinstance(fields, Exception) else "lock"
                live.append(Liveness(run_id, reactor, status, 0.0, None, problem=(
                    f"its {which} cannot be read: {fields if which == 'record' else owner}")))
                continue
            rec_reactor, rec_status, touched, held = fields
            if rec_reactor is None or _text(rec_reactor) != reactor:
                stale.append((index, run_id))
                continue
            problem = _liveness_problem(_text(rec_status), status, touched)
            if problem == "stale":
                stale.append((index, run_id))
            elif problem is not None:
                live.append(Liveness(run_id, reactor, status, 0.0, None, problem=problem))
            else:
                live.append(Liveness(run_id, reactor, status, float(touched),
                                     None if owner is None else _text(owner),
                                     lapsed=owner is None and held is not None))
        return live

    async def scan_units(self, limit: int) -> list[UnitLiveness]:
        conn = await self._redis.get()
        with self._errors():
            entries = await conn.client.zrange(self._keys.units(), 0, limit - 1,
                                               withscores=True)
            if not entries:
                return []
            units: list[tuple[str, str, float]] = []
            for entry in entries:
                member, score = cast(tuple[Any, Any], entry)
                run_part, _, key_part = _text(member).partition("|")
                units.append((run_part, key_part, float(score)))
            pipe = conn.client.pipeline(transaction=False)
            for run_id, key, _ in units:
                pipe.exists(self._keys.run(run_id))
                pipe.hget(self._keys.lock(f"{run_id}:{key}"), "owner")
            # a bad lock fails only itself (a server not ready fails the call)
            replies = own_errors(await pipe.execute(raise_on_error=False))
            found: list[UnitLiveness] = []
            gone: list[str] = []
            for i, (run_id, key, since) in enumerate(units):
                exists, owner = replies[2 * i], replies[2 * i + 1]
                if isinstance(owner, Exception):
                    found.append(UnitLiveness(run_id, key, since, None,
                                              problem=f"its lock cannot be read: {owner}"))
                    continue
                if not exists:
                    gone.append(unit_member(run_id, key))
                    continue
                found.append(UnitLiveness(run_id, key, since,
                                          None if owner is None else _text(owner)))
            if gone:
                await conn.client.zrem(self._keys.units(), *gone)
        return found
