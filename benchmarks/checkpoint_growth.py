"""Checkpoint cost growth: in a 1,000-step chain, does checkpointing step ~1000 cost more than
checkpointing step ~10?

Each `save_step` call is timed by a thin proxy on the storage instance (its bound `save_step`
replaced by a timing wrapper). Per repetition: the median of calls 5-15 and the median of calls
990-1000 (pooled over the repetition's runs), and their ratio. The interval between the starts
of consecutive checkpoints (engine + storage time of one step) is reported the same way, as
context. Run on MemoryStorage and on RedisStorage.
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Sequence
from typing import Any

import reactorflow as rf
from benchmarks import _flows
from benchmarks._context import Context
from benchmarks._flows import SaveStepTimer
from benchmarks._report import Spread, ratios, settle

TITLE = "1,000-step chain: cost of checkpointing step ~1000 vs step ~10 (Memory and Redis)"
NEEDS_REDIS = False  # Redis is used when available; MemoryStorage is measured regardless
LENGTH = 1000
EARLY = slice(4, 15)  # calls 5-15 (1-based)
LATE = slice(989, 1000)  # calls 990-1000
TARGET_RATIO = 1.2


def _window(runs: Sequence[list[tuple[float, float]]], part: slice,
            intervals: bool = False) -> float:
    values: list[float] = []
    for calls in runs:
        if intervals:
            starts = [start for start, _ in calls]
            gaps = [b - a for a, b in itertools.pairwise(starts)]
            values += gaps[slice(part.start - 1, part.stop - 1)]  # gap i ends at call i+1
        else:
            values += [duration for _, duration in calls[part]]
    return statistics.median(values)


async def _measure(ctx: Context, label: str, storage_factory: Any, runs_per_rep: int) -> None:
    report = ctx.report
    flow, _ = _flows.chain(f"chain1000.{label}", LENGTH)
    storage = storage_factory()
    rf.configure(storage=storage)
    timer = SaveStepTimer(storage)
    warm = await flow.run()  # warm-up (plan compiled, connection and scripts ready)
    if warm.status is not rf.Status.COMPLETED or warm.value != LENGTH - 1:
        report.error(f"{label}: the chain did not complete: {warm.status}")
        timer.remove()
        return
    timer.take()
    early: list[float] = []
    late: list[float] = []
    gap_early: list[float] = []
    gap_late: list[float] = []
    per_run: list[float] = []
    counts: set[int] = set()
    for _ in range(ctx.reps):
        if label == "memory":  # a fresh MemoryStorage per repetition (same as the first)
            timer.remove()
            storage = storage_factory()
            rf.configure(storage=storage)
            timer = SaveStepTimer(storage)
        runs: list[list[tuple[float, float]]] = []
        settle()
        began = time.perf_counter()
        for _ in range(runs_per_rep):
            await flow.run()
            runs.append(timer.take())
        per_run.append((time.perf_counter() - began) / runs_per_rep)
        counts.update(len(calls) for calls in runs)
        early.append(_window(runs, EARLY))
        late.append(_window(runs, LATE))
        gap_early.append(_window(runs, EARLY, intervals=True))
        gap_late.append(_window(runs, LATE, intervals=True))
    timer.remove()

    us = 1e6
    ratio = ratios(late, early)
    report.row(f"{label}: save_step, calls 5-15 (median)", Spread.of(early).scaled(us), "µs")
    report.row(f"{label}: save_step, calls 990-1000 (median)", Spread.of(late).scaled(us), "µs")
    report.row(f"{label}: ratio late / early", ratio, "x")
    report.row(f"{label}: step interval, steps 5-15 (context)", Spread.of(gap_early).scaled(us),
               "µs")
    report.row(f"{label}: step interval, steps 990-1000 (context)",
               Spread.of(gap_late).scaled(us), "µs",
               f"ratio {ratios(gap_late, gap_early).median:.2f}x")
    report.row(f"{label}: whole 1,000-step run", Spread.of(per_run).scaled(1e3), "ms/run")
    if counts != {LENGTH}:
        report.note(f"{label}: save_step calls per run were {sorted(counts)}, not {LENGTH}")
    report.verdict(f"{label}: step-1000 checkpoint <= {TARGET_RATIO:g}x step-10",
                   ratio.median <= TARGET_RATIO,
                   f"{ratio.median:.2f}x ({Spread.of(late).median * us:.1f} vs "
                   f"{Spread.of(early).median * us:.1f} µs)")


async def run(ctx: Context) -> None:
    report = ctx.report
    memory_runs = ctx.pick(full=4, quick=1)
    redis_runs = ctx.pick(full=3, quick=1)
    report.note(f"{ctx.reps} repetitions x {memory_runs} runs (Memory) / {redis_runs} runs "
                f"(Redis) of a {LENGTH}-step chain; history_limit default (1000 events)")
    await _measure(ctx, "memory", rf.MemoryStorage, memory_runs)
    try:
        ctx.redis()
    except RuntimeError as exc:
        report.skipped(f"redis: {exc}")
        return
    storage = ctx.redis_storage("growth")
    await _measure(ctx, "redis", lambda: storage, redis_runs)
