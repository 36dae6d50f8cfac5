"""Newest-first pages over one or more Redis run indexes (sorted sets scored by `created_at`).

`list_runs` of one reactor reads one index; across reactors it merges the reactors' indexes
(one per reactor, or one per reactor and status) instead of keeping another index that every
status change would have to write. The algorithm, in order:

1. Each index gets a reader that fetches it newest first in batches (`ZREVRANGEBYSCORE` from
   the cursor's score down, with an offset for members tied on that score), keeping only members
   strictly after the cursor (`(created_at, run id)` smaller than the cursor's).
2. The readers that need more members fetch them together in one pipelined round trip.
3. Members are taken in order (largest `(created_at, run id)` first across readers) only while
   every reader that is not exhausted holds at least one member: a reader with nothing buffered
   could still hold the next member.
4. The caller verifies the taken members against their run records (index entries are hints);
   stale ones are skipped. Repeat from 2 until enough heads are found or every reader is
   exhausted.

The cost is a few round trips whatever the number of stored runs (the sorted-set reads are
logarithmic), and grows with the number of indexes merged, not with the number of runs.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from redis.asyncio import Redis

from reactorflow.storage.contract.values import RunHead

Member = tuple[float, str]  # (created_at, run id)
Taken = tuple[str, str, str]  # (index key, reactor, run id)


class IndexReader:
    """One index read newest first, a batch at a time, from a cursor."""

    __slots__ = ("after", "buffer", "done", "floor", "index", "offset", "reactor", "top")

    def __init__(self, index: str, reactor: str, after: Member | None,
                 since: float | None = None, until: float | None = None) -> None:
        self.index = index
        self.reactor = reactor
        self.after = after
        self.top: float | str = "+inf" if after is None else after[0]
        if until is not None and (after is None or until <= after[0]):
            self.top = f"({until!r}"  # exclusive: runs created before `until`
        self.floor: float | str = "-inf" if since is None else since  # inclusive
        self.offset = 0  # members already read whose score equals `top` (ties on created_at)
        self.done = False
        self.buffer: deque[Member] = deque()

    @property
    def starved(self) -> bool:
        return not self.buffer and not self.done

    def take(self, rows: Sequence[tuple[Any, Any]], batch: int) -> None:
        members = [(float(score), _text(member)) for member, score in rows]
        if len(members) < batch:
            self.done = True
        if not members:
            return
        after = self.after
        self.buffer.extend(m for m in members if after is None or m < after)
        last = members[-1][0]
        self.offset = (self.offset + len(members) if last == self.top
                       else sum(1 for score, _ in members if score == last))
        self.top = last


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


async def newest_first(client: Redis, readers: Sequence[IndexReader], want: int,
                       verify: Callable[[list[Taken]], Awaitable[list[RunHead]]]
                       ) -> list[RunHead]:
    """Up to `want` verified heads, newest first, merged across `readers` (see the module)."""
    batch = min(max(2 * want, 32), 1000)
    heads: list[RunHead] = []
    while len(heads) < want:
        starved = [r for r in readers if r.starved]
        if starved:
            pipe = client.pipeline(transaction=False)
            for reader in starved:
                pipe.zrevrangebyscore(reader.index, reader.top, reader.floor, start=reader.offset,
                                      num=batch, withscores=True)
            for reader, rows in zip(starved, await pipe.execute(), strict=True):
                reader.take(rows, batch)
        taken: list[Taken] = []
        while len(taken) < want - len(heads) and not any(r.starved for r in readers):
            holding = [r for r in readers if r.buffer]
            if not holding:
                break
            best = max(holding, key=lambda r: r.buffer[0])
            taken.append((best.index, best.reactor, best.buffer.popleft()[1]))
        if taken:
            heads += await verify(taken)
        elif not any(r.starved for r in readers):
            break  # every reader is exhausted
    return heads
