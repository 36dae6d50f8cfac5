"""Stored runs for the benchmarks that read many of them (`runs_list`, `search_key`,
`deploy_check`, `sweep_cost`, `timers`): written straight through the storage, untimed, BATCH
at a time, by `store_runs`; `plain_runs` writes each as `Storage.create_run` would."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import reactorflow as rf
from benchmarks._context import Context
from reactorflow import records
from reactorflow.runtime.engine.execution import new_state
from reactorflow.status import Status

BATCH = 500
Writer = Callable[[rf.RedisStorage, int], Awaitable[str]]  # (storage, index) -> run id


@dataclass(frozen=True, slots=True)
class Stored:
    ids: list[str]
    seconds: float  # how long storing them took (never part of a figure)


def bulk_storage(ctx: Context, name: str) -> tuple[rf.RedisStorage, int]:
    """A RedisStorage of its own (`ctx.redis_storage(name)`), configured as the default, and
    how many runs to store in it: 100,000 (10,000 with --quick)."""
    storage = ctx.redis_storage(name)
    rf.configure(storage=storage)
    return storage, ctx.pick(full=100_000, quick=10_000)


async def store_runs(storage: rf.RedisStorage, count: int, write: Writer, *,
                     first: int = 0) -> Stored:
    """Store `count` runs, the i-th (i from `first`) by `write(storage, i)`, BATCH at a time
    concurrently; their ids in order and the time it took."""
    began = time.perf_counter()
    ids: list[str] = []
    for start in range(first, first + count, BATCH):
        ids += await asyncio.gather(*(write(storage, i)
                                      for i in range(start, min(first + count, start + BATCH))))
    return Stored(ids, time.perf_counter() - began)


def plain_runs(reactors: Sequence[str], statuses: Sequence[Status], count: int, *,
               first: int = 0, owner: str = "bench", release: bool = False) -> Writer:
    """A writer of runs that have no step yet: the i-th of `reactors[i % len]` in
    `statuses[i % len]`, the `count` of them created 10 ms apart ending now; `release=True`
    lets go of each run's lock (else `owner` holds it for 10 minutes: a live execution). Run
    ids are unique per `first` (the index of the first run)."""
    started = time.time() - count * 0.01

    async def one(storage: rf.RedisStorage, i: int) -> str:
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

    return one


async def fill(storage: rf.RedisStorage, count: int, reactors: Sequence[str],
               statuses: Sequence[Status], *, first: int = 0, owner: str = "bench",
               release: bool = False) -> list[str]:
    """Store `count` `plain_runs` (see there) and return their ids."""
    stored = await store_runs(storage, count, plain_runs(reactors, statuses, count, first=first,
                                                         owner=owner, release=release),
                              first=first)
    return stored.ids
