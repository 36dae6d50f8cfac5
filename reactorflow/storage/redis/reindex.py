"""`RedisStorage`'s record pass: the runs the indexes missed, found from the run records
themselves, and their index entries written again (`Storage.scan_records`,
`Storage.repair_index`).

Index entries live in other slots than the run (on a Redis Cluster, on other masters), so a
write whose index writes follow its script can be cut off between the two (a failover, a lost
connection). Such a script leaves a pending-index record in the run hash (field `ix`: the
write's token; see `index_done.lua`), and the record pass reads the run hashes by walking the
keyspace (`SCAN` over `<ns>:run:{*}` on every master), a bounded stretch per call, resumed
where the last call of this storage object stopped (`RecordWalk`). For each run that is live
(running, rolling back, paused) or carries a pending-index record, it writes the entries again
(`ZADD NX`: idempotent, and its reply says whether the entry was missing), then clears the
record. An async unit's dispatch leaves a pending unit record of its own (field `ux`: step
key -> dispatch time; see `save_step.lua`) until its unit index entry landed; the pass writes
those entries again too, so the sweeper's unit scan finds the unit. A run of any status whose
idempotency follow-up record is left (field `iq`: a status write's caller was cut off before its
claim took the run's expiry) has its claim follow. A write racing with the pass leaves at most a
stale entry, a hint that readers verify and drop as they do every other.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import msgspec

from reactorflow.status import Status
from reactorflow.storage.contract.values import Liveness
from reactorflow.storage.redis.connections import LoopClient, RedisConnector, own_errors
from reactorflow.storage.redis.keys import RedisKeys
from reactorflow.storage.redis.scans import unit_member

LIVE = frozenset({Status.RUNNING.value, Status.ROLLING_BACK.value, Status.PAUSED.value})
"""The statuses whose runs the sweeper looks after: the record pass writes their entries
again whether or not they carry a pending-index record."""
_STATUSES = frozenset(s.value for s in Status)
SCAN_COUNT_CAP = 1000
"""The most keys one `SCAN` command is asked to visit (its COUNT)."""
SCANS_PER_CALL = 16
"""The most `SCAN` commands one `scan_records` call sends (a keyspace with few run keys among
many others ends a call early; the next goes on from there)."""
_RECORD_FIELDS = ("reactor", "status", "created", "touched", "ix", "ux", "iq", "ik")
_PENDING_UNITS = msgspec.json.Decoder(dict[str, str])


def _text(value: Any) -> str:
    return value.decode(errors="surrogatepass") if isinstance(value, bytes) else str(value)


def _glob_escaped(text: str) -> str:
    """`text` matched literally by a `SCAN MATCH` pattern."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


class RecordWalk:
    """Where the walk over a namespace's run records stands: the cursor of each master still
    to finish in this round, in order. A round over, the next starts with every master (as the
    cluster has them then) at cursor 0. Shared by the event loops of one storage object: each
    call reads the position and leaves its own (calls that overlap read a stretch twice)."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._left: list[tuple[str, int]] = []  # (master's name, its cursor)

    def take(self, masters: Sequence[str]) -> list[tuple[str, int]]:
        """The masters left in this round with their cursors (those that are still masters);
        a new round over `masters` when none is left."""
        with self._mutex:
            left = [(name, cursor) for name, cursor in self._left if name in masters]
        return left or [(name, 0) for name in masters]

    def keep(self, left: list[tuple[str, int]]) -> None:
        with self._mutex:
            self._left = list(left)


@dataclass(frozen=True, slots=True)
class _Record:
    """What the pass reads of one run: its index facts and its pending-index record."""

    run_id: str
    reactor: str
    status: str
    created_at: float
    touched: Any
    mark: str | None
    units: dict[str, str]  # pending unit records: step key -> dispatch time
    claim: str | None  # its idempotency claim's key, when a follow-up of it is due


class RedisReindex:
    """`scan_records` and `repair_index` on Redis."""

    _redis: RedisConnector
    _keys: RedisKeys
    _errors: Callable[[], AbstractContextManager[None]]
    _walk: RecordWalk

    async def follow_idempotency(self, run_id: str, claim: str) -> None:
        raise NotImplementedError  # RedisStorage's

    async def scan_records(self, limit: int) -> list[Liveness]:
        conn = await self._redis.get()
        with self._errors():
            run_ids = await self._next_run_ids(conn, limit)
            if not run_ids:
                return []
            pipe = conn.client.pipeline(transaction=False)
            for run_id in run_ids:
                pipe.hmget(self._keys.run(run_id), _RECORD_FIELDS)
                pipe.hget(self._keys.lock(run_id), "owner")
            # one bad record fails itself (a server not ready fails the call)
            replies = own_errors(await pipe.execute(raise_on_error=False))
            found: list[Liveness] = []
            records: list[tuple[_Record, Any]] = []
            for i, run_id in enumerate(run_ids):
                fields, owner = replies[2 * i], replies[2 * i + 1]
                record, problem = _read(run_id, fields, owner)
                if problem is not None:
                    found.append(Liveness(run_id, "", "", 0.0, None, problem=problem))
                    continue
                if record is not None and record.claim is not None:
                    await self.follow_idempotency(run_id, record.claim)  # cut off after a write
                if record is not None and (record.status in LIVE or record.mark is not None
                                           or record.units):
                    records.append((record, owner))
            missing = await self._reassert(conn, [record for record, _ in records])
            found += [Liveness(r.run_id, r.reactor, r.status, float(r.touched),
                               None if owner is None else _text(owner))
                      for r, owner in records if r.run_id in missing and r.status in LIVE]
        return found

    async def repair_index(self, run_id: str) -> bool:
        conn = await self._redis.get()
        with self._errors():
            fields = await conn.client.hmget(self._keys.run(run_id), _RECORD_FIELDS)
            record, problem = _read(run_id, fields, None)
            if record is None or problem is not None:
                return False
            return run_id in await self._reassert(conn, [record])

    async def _next_run_ids(self, conn: LoopClient, limit: int) -> list[str]:
        """The run ids of the next stretch of the walk: about `limit` (a SCAN's batch is taken
        whole), fewer when the round ends in it (the next call starts a new one)."""
        client = conn.client
        masters = [node.name for node in client.get_primaries()] if conn.cluster else [""]
        left = self._walk.take(masters)
        prefix = f"{self._keys.ns}:run:{{"
        pattern = _glob_escaped(prefix) + "*}"
        run_ids: list[str] = []
        scans = 0
        while left and len(run_ids) < limit and scans < SCANS_PER_CALL:
            name, cursor = left[0]
            count = min(max(limit - len(run_ids), 10), SCAN_COUNT_CAP)
            if conn.cluster:
                node = client.get_node(node_name=name)
                if node is None:  # no longer in the cluster: its slots are scanned elsewhere
                    left.pop(0)
                    continue
                cursors, keys = await client.scan(cursor=cursor, match=pattern, count=count,
                                                  target_nodes=node)
                cursor = int(cursors[name])
            else:
                cursor, keys = await client.scan(cursor=cursor, match=pattern, count=count)
                cursor = int(cursor)
            scans += 1
            run_ids += [_text(key)[len(prefix):-1] for key in keys]
            if cursor == 0:
                left.pop(0)
            else:
                left[0] = (name, cursor)
        self._walk.keep(left)
        return list(dict.fromkeys(run_ids))  # (a SCAN may return a key twice)

    async def _reassert(self, conn: LoopClient, records: Sequence[_Record]) -> set[str]:
        """Write the index entries of `records` again (`ZADD NX`), then clear the pending-index
        record of those that carry one; the run ids whose status entry was missing."""
        if not records:
            return set()
        keys = self._keys
        pipe = conn.client.pipeline(transaction=False)
        for r in records:
            pipe.zadd(keys.by_status(r.reactor, r.status), {r.run_id: r.created_at}, nx=True)
            pipe.zadd(keys.by_reactor(r.reactor), {r.run_id: r.created_at}, nx=True)
        for reactor in sorted({r.reactor for r in records}):
            pipe.sadd(keys.reactors(), reactor)
        for r in records:
            for key, since in sorted(r.units.items()):
                pipe.zadd(keys.units(), {unit_member(r.run_id, key): float(since)}, nx=True)
        added = await pipe.execute()
        for r in records:  # they landed: the records go (each in its run's slot)
            if r.mark is not None:
                await conn.script("index_done", [keys.run(r.run_id)], [r.mark])
            for key, since in sorted(r.units.items()):
                await conn.script("unit_indexed", [keys.run(r.run_id)], [key, since])
        return {r.run_id for i, r in enumerate(records) if added[2 * i] or added[2 * i + 1]}


def _read(run_id: str, fields: Any, owner: Any) -> tuple[_Record | None, str | None]:
    """The record of one run as the pass read it (None: the run is gone), or why it cannot be
    read."""
    if isinstance(fields, Exception) or isinstance(owner, Exception):
        which, error = ("record", fields) if isinstance(fields, Exception) else ("lock", owner)
        return None, f"its {which} cannot be read: {error}"
    reactor, status, created, touched, mark, pending, due, claim = fields
    if reactor is None:
        return None, None  # expired (or deleted) since the SCAN saw it
    status_text = _text(status)
    if status_text not in _STATUSES:
        return None, (f"its status {status_text[:40]!r} is not one this version of reactorflow "
                      "knows")
    try:
        created_at = float(created)
        if status_text in LIVE:
            float(touched)
    except (TypeError, ValueError):
        return None, "its created or touched time is not a number"
    try:
        units = {} if pending is None else _PENDING_UNITS.decode(pending)
        for since in units.values():
            float(since)
    except (msgspec.DecodeError, ValueError):
        return None, f"its pending unit record {_text(pending)[:60]!r} cannot be read"
    return _Record(run_id, _text(reactor), status_text, created_at, touched,
                   None if mark is None else _text(mark), units,
                   None if due is None or claim is None else _text(claim)), None
