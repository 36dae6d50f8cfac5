"""The data subjects of `RedisStorage` (the contract: `storage/contract/subjects.py`).

Per subject two keys in its own slot (`{<digest>}`): `<ns>:subject:{<digest>}:key` (its wrapped
data key, a string) and `<ns>:subject:{<digest>}:runs` (its run index, a set of run ids), so
each script on them is atomic on a cluster too. The audit list of erasures is one global key,
`<ns>:{subjects}:erased`. A rotation lists the subjects with a key by `SCAN` of the data keys on
every master (`subject_digests`): no global set is written as a run enters, so a subject's run
costs one round trip more than a run without a subject, at its creation. The run index lives in
another slot than the runs, so retention cannot drop an entry with its run: `subject_runs`
checks each run's record and removes the entries of runs that are gone, and a new run entering
an index of more than `PRUNE_AT` entries checks a random sample of `PRUNE_SAMPLE` of them the
same way (an index holds the subject's live runs and not many more).
"""

from __future__ import annotations

from typing import Any

from reactorflow.storage.contract.subjects import ERASURES_KEPT
from reactorflow.storage.redis.connections import RedisConnector
from reactorflow.storage.redis.reindex import SCAN_COUNT_CAP, SCANS_PER_CALL, _glob_escaped

PRUNE_AT = 1000
"""Runs in a subject's index past which each new run's entry also prunes a sample of it."""
PRUNE_SAMPLE = 100
"""Entries of a subject's index checked (and removed when their run is gone) per prune."""


class RedisSubjects:
    """Data keys, run indexes and erasure records, in Redis."""

    _redis: RedisConnector
    _keys: Any  # RedisKeys

    def _subject_keys(self, subject: str) -> list[str]:
        base = f"{self._keys.ns}:subject:{{{subject}}}"
        return [f"{base}:key", f"{base}:runs"]

    def _subjects_key(self, part: str) -> str:
        return f"{self._keys.ns}:{{subjects}}:{part}"

    async def enter_subject_run(self, subject: str, run_id: str, wrapped: bytes) -> bytes:
        conn = await self._redis.get()
        with self._redis.errors():
            key, size = await conn.script("subject_enter", self._subject_keys(subject),
                                          [run_id, wrapped])
            if int(size) > PRUNE_AT:
                await self._drop_gone_runs(conn, self._subject_keys(subject)[1],
                                  await conn.client.srandmember(self._subject_keys(subject)[1],
                                                                PRUNE_SAMPLE))
        return bytes(key)

    async def run_subject_key(self, subject: str, run_id: str) -> bytes | None:
        conn = await self._redis.get()
        with self._redis.errors():
            found = await conn.script("subject_run_key", self._subject_keys(subject), [run_id])
        return None if found is None else bytes(found)

    async def subject_key(self, subject: str) -> bytes | None:
        conn = await self._redis.get()
        with self._redis.errors():
            found = await conn.client.get(self._subject_keys(subject)[0])
        return None if found is None else bytes(found)

    async def replace_subject_key(self, subject: str, expected: bytes, wrapped: bytes) -> bool:
        conn = await self._redis.get()
        with self._redis.errors():
            return bool(await conn.script("subject_replace", self._subject_keys(subject)[:1],
                                          [expected, wrapped]) == 1)

    async def destroy_subject(self, subject: str) -> list[str] | None:
        conn = await self._redis.get()
        with self._redis.errors():
            found = await conn.script("subject_destroy", self._subject_keys(subject), [])
        if found is None:
            return None
        return sorted(_text(run_id) for run_id in found)

    async def subject_runs(self, subject: str) -> list[str]:
        conn = await self._redis.get()
        index = self._subject_keys(subject)[1]
        with self._redis.errors():
            return await self._drop_gone_runs(conn, index, await conn.client.smembers(index))

    async def _drop_gone_runs(self, conn: Any, index: str, members: Any) -> list[str]:
        """Remove from run index `index` the entries among `members` whose run is gone;
        returns the others (their runs are stored), sorted."""
        run_ids = sorted(_text(r) for r in members)
        if not run_ids:
            return []
        pipe = conn.client.pipeline(transaction=False)
        for run_id in run_ids:
            pipe.exists(self._keys.run(run_id))
        found = await pipe.execute()
        gone = [run_id for run_id, there in zip(run_ids, found, strict=True) if not there]
        if gone:
            await conn.client.srem(index, *gone)
        return [run_id for run_id, there in zip(run_ids, found, strict=True) if there]

    async def subject_digests(self, cursor: str, limit: int) -> tuple[list[str], str]:
        conn = await self._redis.get()
        client = conn.client
        masters = sorted(node.name for node in client.get_primaries()) if conn.cluster else [""]
        node, scan = (0, 0) if not cursor else (int(p) for p in cursor.split(":", 1))
        prefix = f"{self._keys.ns}:subject:{{"
        pattern = _glob_escaped(prefix) + "*}:key"
        found: list[str] = []
        with self._redis.errors():
            for _ in range(SCANS_PER_CALL):
                if node >= len(masters) or len(found) >= limit:
                    break
                count = min(max(limit, 10), SCAN_COUNT_CAP)
                if conn.cluster:
                    target = client.get_node(node_name=masters[node])
                    if target is None:  # left the cluster: its slots are scanned elsewhere
                        node, scan = node + 1, 0
                        continue
                    cursors, keys = await client.scan(cursor=scan, match=pattern, count=count,
                                                      target_nodes=target)
                    scan = int(cursors[masters[node]])
                else:
                    scan, keys = await client.scan(cursor=scan, match=pattern, count=count)
                    scan = int(scan)
                found += [_text(key)[len(prefix):-len("}:key")] for key in keys]
                if scan == 0:
                    node += 1
        following = "" if node >= len(masters) else f"{node}:{scan}"
        return sorted(set(found)), following

    async def record_erasure(self, record: bytes) -> None:
        conn = await self._redis.get()
        with self._redis.errors():
            await conn.script("erasure_record", [self._subjects_key("erased")],
                              [record, ERASURES_KEPT])

    async def erasures(self, limit: int) -> list[bytes]:
        conn = await self._redis.get()
        with self._redis.errors():
            found = await conn.client.lrange(self._subjects_key("erased"), 0, limit - 1)
        return [bytes(record) for record in found]


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
