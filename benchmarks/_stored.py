"""Stored runs for the benchmarks that read many of them (`runs_list`, `sweep_cost`): written
straight through `Storage.create_run`, untimed, 500 at a time."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

import reactorflow as rf
from reactorflow import records
from reactorflow.runtime.engine.execution import new_state
from reactorflow.status import Status


async def fill(storage: rf.RedisStorage, count: int, reactors: Sequence[str],
               statuses: Sequence[Status], *, first: int = 0, owner: str = "bench",
               release: bool = False) -> list[str]:
    """Store `count` runs, the i-th of `reactors[i % len]` in `statuses[i % len]`, created 10 ms
    apart ending now; `release=True` lets go of each run's lock (else `owner` holds it for 10
    minutes: a live execution). Run ids are unique per `first` (the index of the first run)."""
    started = time.time() - count * 0.01

    async def one(i: int) -> str:
        reactor = reactors[i % len(reactors)]
        status = statuses[i % len(statuses)]
        created = started + (i - first) * 0.01
        run_id = f"{int(created * 1000):012x}{i:012x}"
        meta = records.RunMeta(records.SCHEMA_VERSION, run_id, reactor, created,
                               records.raw({"order": i, "item": "tea"}), {})
        await storage.create_run(run_id, reactor=reactor, status=status,
                                 meta=records.encode(meta),
                                 state=records.encode(new_state(status)),
                                 created_at=created, owner=owner, lock_ttl=600.0)
        if release:
            await storage.release_lock(run_id, owner)
        return run_id

    ids: list[str] = []
    for start in range(first, first + count, 500):
        ids += await asyncio.gather(*(one(i) for i in range(start, min(first + count,
                                                                        start + 500))))
    return ids
