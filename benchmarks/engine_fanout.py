"""Fan-out: 100 independent trivial steps on MemoryStorage vs an asyncio.TaskGroup running the
same 100 coroutines (and, for context, an anyio task group: reactorflow runs on anyio)."""

from __future__ import annotations

import asyncio

import anyio

import reactorflow as rf
from benchmarks import _flows
from benchmarks._context import Context
from benchmarks._report import Spread, ratios, settle, time_per_call

TITLE = "100 independent steps on MemoryStorage vs asyncio.TaskGroup of the same coroutines"
NEEDS_REDIS = False
WIDTH = 100
TARGET_RATIO = 1.5


async def run(ctx: Context) -> None:
    report = ctx.report
    reps = ctx.reps
    runs = ctx.pick(full=300, quick=30)
    groups = runs * 4
    flow, steps = _flows.fanout("fanout100", WIDTH)
    report.note(f"{reps} repetitions x {runs} runs (task groups: x {groups}); "
                "a fresh MemoryStorage per repetition")

    async def taskgroup() -> None:
        async with asyncio.TaskGroup() as tg:
            for fn in steps:
                tg.create_task(fn())

    async def anyio_group() -> None:
        async with anyio.create_task_group() as tg:
            for fn in steps:
                tg.start_soon(fn)

    rf.configure(storage=rf.MemoryStorage())
    for _ in range(ctx.pick(full=40, quick=10)):
        await flow.run()
        await taskgroup()
        await anyio_group()
    first = await flow.run()
    if first.status is not rf.Status.COMPLETED or len(first.steps) != WIDTH:
        report.error(f"the fan-out did not complete as expected: {first.status}")
        return

    t_flow: list[float] = []
    t_tg: list[float] = []
    t_anyio: list[float] = []
    for _ in range(reps):
        rf.configure(storage=rf.MemoryStorage())
        settle()
        t_tg.append(await time_per_call(taskgroup, groups))
        settle()
        t_anyio.append(await time_per_call(anyio_group, groups))
        settle()
        t_flow.append(await time_per_call(flow.run, runs))

    us = 1e6
    ratio = ratios(t_flow, t_tg)
    report.row(f"reactorflow: await flow.run(), {WIDTH} steps", Spread.of(t_flow).scaled(us),
               "µs/run")
    report.row(f"baseline: asyncio.TaskGroup of {WIDTH}", Spread.of(t_tg).scaled(us), "µs")
    report.row(f"context: anyio task group of {WIDTH}", Spread.of(t_anyio).scaled(us), "µs")
    report.row("ratio reactorflow / asyncio.TaskGroup", ratio, "x")
    report.row("ratio reactorflow / anyio task group", ratios(t_flow, t_anyio), "x")
    report.row("ratio anyio / asyncio.TaskGroup", ratios(t_anyio, t_tg), "x")
    report.row("engine cost per step ((run - TaskGroup) / 100)",
               Spread.of([(f - t) / WIDTH * us for f, t in zip(t_flow, t_tg, strict=True)]),
               "µs/step")
    report.verdict(f"run <= {TARGET_RATIO:g}x asyncio.TaskGroup", ratio.median <= TARGET_RATIO,
                   f"{ratio.median:.1f}x ({Spread.of(t_flow).median * us:,.0f} µs vs "
                   f"{Spread.of(t_tg).median * us:,.0f} µs)")
