"""Inline map on RedisStorage: the cost per element of a 10,000-element map (elements that
suspend once, as any element calling a service does) against one SET round trip. Element
outcomes are written in batches: those that finish while a write is on its way go together."""

from __future__ import annotations

import anyio
import msgspec
import redis.asyncio

import reactorflow as rf
from benchmarks import _redis
from benchmarks._context import Context
from benchmarks._report import Spread, ratios, settle, time_per_call

TITLE = "inline map of 10,000 elements on RedisStorage: cost per element vs one SET round trip"
NEEDS_REDIS = True
SIZE = 10_000
TARGET_RATIO = 1.5


class Items(msgspec.Struct):
    items: list[int]


flow = rf.Reactor("bench.map.redis", inputs=Items)


@flow.map_step(over="items", batch_size=100)
async def double(item: int) -> int:
    await anyio.sleep(0)  # a real element awaits something
    return item * 2


async def run(ctx: Context) -> None:
    report = ctx.report
    server = ctx.redis()
    storage = ctx.redis_storage("map")
    rf.configure(storage=storage)
    reps = ctx.reps
    maps = ctx.pick(full=3, quick=1)
    sets = ctx.pick(full=3000, quick=300)
    items = list(range(SIZE))
    client = redis.asyncio.Redis.from_url(server.url)
    report.note(f"{reps} repetitions x {maps} maps of {SIZE:,} elements (batch_size=100); SET "
                f"baseline x {sets}")

    async def one_map() -> None:
        done = await flow.run(items=items)
        if done.status is not rf.Status.COMPLETED:
            raise RuntimeError(f"the map ended {done.status}")

    try:
        await one_map()
        await _redis.set_round_trip(client, server.baseline_key, 500)
        t_map: list[float] = []
        t_set: list[float] = []
        for _ in range(reps):
            settle()
            t_set.append(await _redis.set_round_trip(client, server.baseline_key, sets))
            settle()
            t_map.append(await time_per_call(one_map, maps))
    finally:
        await client.aclose()
    us = 1e6
    per = [t / SIZE for t in t_map]
    ratio = ratios(per, t_set)
    report.row(f"reactorflow: one map of {SIZE:,} elements", Spread.of(t_map).scaled(1000),
               "ms/run")
    report.row("reactorflow: per element (run / elements)", Spread.of(per).scaled(us),
               "µs/element")
    report.row("baseline: await client.set(k, 256 B)", Spread.of(t_set).scaled(us), "µs")
    report.row("ratio per element / SET round trip", ratio, "x")
    report.verdict(f"per element <= {TARGET_RATIO:g}x one SET round trip",
                   ratio.median <= TARGET_RATIO,
                   f"{ratio.median:.2f}x ({Spread.of(per).median * us:.1f} µs/element vs "
                   f"{Spread.of(t_set).median * us:.0f} µs SET)")
