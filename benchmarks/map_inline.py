"""Inline map: 10,000 trivial elements of one map step on MemoryStorage vs asyncio.gather of
the same 10,000 coroutines (the element function called directly)."""

from __future__ import annotations

import asyncio

import msgspec

import reactorflow as rf
from benchmarks._context import Context
from benchmarks._report import Spread, ratios, settle, time_per_call

TITLE = "inline map of 10,000 elements on MemoryStorage vs asyncio.gather of the same coroutines"
NEEDS_REDIS = False
SIZE = 10_000
TARGET_RATIO = 3.0


class Items(msgspec.Struct):
    items: list[int]


def flows() -> tuple[rf.Reactor, rf.Reactor, rf.MapStep[..., int]]:
    small = rf.Reactor("bench.map.inline.50", inputs=Items)

    @small.map_step(over="items")  # the default batch_size (50)
    async def double(item: int) -> int:
        return item * 2

    wide = rf.Reactor("bench.map.inline.wide", inputs=Items)

    @wide.map_step(over="items", batch_size=SIZE)
    async def double_all(item: int) -> int:
        return item * 2

    return small, wide, double


async def run(ctx: Context) -> None:
    report = ctx.report
    reps = ctx.reps
    calls = ctx.pick(full=5, quick=2)
    small, wide, element = flows()
    items = list(range(SIZE))
    report.note(f"{reps} repetitions x {calls} maps of {SIZE:,} elements; a fresh MemoryStorage "
                "per repetition; the element returns item * 2")

    async def gather() -> None:
        await asyncio.gather(*(element(i) for i in items))

    async def run_small() -> None:
        await small.run(items=items)

    async def run_wide() -> None:
        await wide.run(items=items)

    rf.configure(storage=rf.MemoryStorage())
    first = await small.run(items=items)
    if first.status is not rf.Status.COMPLETED or first.value != [i * 2 for i in items]:
        report.error(f"the map did not complete as expected: {first.status}")
        return
    t_gather: list[float] = []
    t_small: list[float] = []
    t_wide: list[float] = []
    for _ in range(reps):
        rf.configure(storage=rf.MemoryStorage())
        settle()
        t_gather.append(await time_per_call(gather, calls))
        settle()
        t_small.append(await time_per_call(run_small, calls))
        settle()
        t_wide.append(await time_per_call(run_wide, calls))
    per = 1e6 / SIZE
    ratio = ratios(t_small, t_gather)
    report.row("reactorflow: inline map, batch_size=50", Spread.of(t_small).scaled(per),
               "µs/element")
    report.row(f"reactorflow: inline map, batch_size={SIZE:,}", Spread.of(t_wide).scaled(per),
               "µs/element")
    report.row(f"baseline: asyncio.gather of {SIZE:,} coroutines",
               Spread.of(t_gather).scaled(per), "µs/element")
    report.row("ratio map (batch_size=50) / gather", ratio, "x")
    report.row(f"ratio map (batch_size={SIZE:,}) / gather", ratios(t_wide, t_gather), "x")
    report.verdict(f"inline map <= {TARGET_RATIO:g}x asyncio.gather at {SIZE:,} elements",
                   ratio.median <= TARGET_RATIO,
                   f"{ratio.median:.2f}x ({Spread.of(t_small).median * per:.2f} vs "
                   f"{Spread.of(t_gather).median * per:.2f} µs/element)")
