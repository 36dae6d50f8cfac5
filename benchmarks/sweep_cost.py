"""What the sweeper and the run indexes cost as runs accumulate on Redis.

1. Ended runs: one `rf.sweep_once()` pass over the same 150 live runs (running ones whose
   executions hold their locks, and paused ones) with 0, then 10,000, then 100,000 ended runs
   stored beside them: its time, Redis commands (MONITOR) and round trips, against the pass
   with none stored (the baseline, same run); and the index memory per stored run.
2. Live runs: the same pass with 10x the live runs (1,500; `limit` above them, since a pass
   looks at up to `limit` live runs): the time per live run, running (locked) and paused
   (each read on its own: its head, then its claims)."""

from __future__ import annotations

import time

import redis.asyncio

import reactorflow as rf
from benchmarks import _redis
from benchmarks._context import Context
from benchmarks._report import Spread, ratios, settle
from benchmarks._stored import fill
from reactorflow.status import Status

TITLE = "sweeper pass and index memory as ended and live runs accumulate (Redis)"
NEEDS_REDIS = True
REACTORS = ("sweep.orders", "sweep.billing")
ENDED = (Status.COMPLETED, Status.COMPLETED, Status.FAILED, Status.CANCELLED)
LIVE_RUNNING = 100
LIVE_PAUSED = 50
LIMIT = 10_000  # above every live run here: each pass looks at all of them


async def _index_bytes(client: redis.asyncio.Redis, namespace: str) -> int:
    """MEMORY USAGE of every index key of the namespace (the run keys left out)."""
    total = 0
    async for key in client.scan_iter(match=f"{namespace}:idx:*", count=1000):
        total += int(await client.memory_usage(key, samples=0) or 0)
    return total


async def _passes(ctx: Context, passes: int) -> tuple[list[float], _redis.Traffic]:
    """Seconds per `sweep_once()` pass (`passes` of them per repetition), then one pass's
    commands (MONITOR). The limit is above every live run: a pass looks at all of them."""
    times = []
    for _ in range(ctx.reps):
        settle()
        began = time.perf_counter()
        for _ in range(passes):
            await rf.sweep_once(limit=LIMIT)
        times.append((time.perf_counter() - began) / passes)
    async with _redis.watch(ctx.redis().url) as traffic:
        await rf.sweep_once(limit=LIMIT)
    return times, traffic


async def _live_growth(ctx: Context, storage: rf.RedisStorage,
                       passes: int) -> tuple[int, list[float], _redis.Traffic]:
    """Add 9x the live runs; time a pass over all of them."""
    grow = 9
    await fill(storage, LIVE_RUNNING * grow, REACTORS, [Status.RUNNING], first=3 * 10**9)
    await fill(storage, LIVE_PAUSED * grow, REACTORS, [Status.PAUSED], first=4 * 10**9,
               release=True)
    await rf.sweep_once(limit=LIMIT)
    times, traffic = await _passes(ctx, max(1, passes // 4))
    return (LIVE_RUNNING + LIVE_PAUSED) * (grow + 1), times, traffic


async def run(ctx: Context) -> None:
    report = ctx.report
    server = ctx.redis()
    storage = ctx.redis_storage("sweep")
    namespace = ctx.namespace(storage)
    rf.configure(storage=storage)
    declared = [rf.Reactor(name) for name in REACTORS]  # as in a process that sweeps (kept:
    for flow in declared:                                 # the registry holds them weakly)
        @flow.step
        async def only() -> int:
            return 1
    sizes = (0, ctx.pick(full=10_000, quick=1_000), ctx.pick(full=100_000, quick=10_000))
    passes = ctx.pick(full=20, quick=5)
    client = redis.asyncio.Redis.from_url(server.url)
    await fill(storage, LIVE_RUNNING, REACTORS, [Status.RUNNING], first=10**9)
    await fill(storage, LIVE_PAUSED, REACTORS, [Status.PAUSED], first=2 * 10**9, release=True)
    report.note(f"live runs throughout: {LIVE_RUNNING} running (their locks held, as by live "
                f"executions) and {LIVE_PAUSED} paused (no lock, nothing claimed), over "
                f"{len(REACTORS)} reactors; ended runs (completed, failed, cancelled) added "
                f"between the figures, untimed; {ctx.reps} repetitions x {passes} passes")
    stored = 0
    figures: list[tuple[int, list[float], _redis.Traffic, int]] = []
    try:
        for size in sizes:
            if size > stored:
                await fill(storage, size - stored, REACTORS, ENDED, first=stored, release=True)
                stored = size
            sweep = await rf.sweep_once(limit=LIMIT)  # warm; and nothing may need recovering
            if sweep.recovered or sweep.expired or sweep.failed or sweep.unreadable:
                report.error(f"the sweep acted on live runs: {sweep}")
                return
            times, traffic = await _passes(ctx, passes)
            figures.append((size, times, traffic, await _index_bytes(client, namespace)))
        live = await _live_growth(ctx, storage, passes)
    finally:
        await client.aclose()
    base_times = figures[0][1]
    for size, times, traffic, index_bytes in figures:
        runs = size + LIVE_RUNNING + LIVE_PAUSED
        report.row(f"sweep_once() with {size:,} ended runs stored", Spread.of(times).scaled(1e3),
                   "ms", f"{ratios(times, base_times).median:.2f}x the pass with none; "
                   f"{traffic.total} commands, {traffic.round_trips} round trips")
        report.row(f"  index memory, {runs:,} runs stored", f"{index_bytes:,} B",
                   note=f"{index_bytes / runs:,.0f} B per run (MEMORY USAGE of the idx:* keys)")
        report.note(f"    commands: {traffic.breakdown()}")
    base_live = LIVE_RUNNING + LIVE_PAUSED
    for count, times, traffic in ((base_live, base_times, figures[-1][2]), live):
        report.row(f"sweep_once(limit={LIMIT:,}) with {count:,} live runs",
                   Spread.of(times).scaled(1e3), "ms",
                   f"{Spread.of(times).median / count * 1e6:,.0f} µs per live run; "
                   f"{traffic.total} commands, {traffic.round_trips} round trips")
    totals = {traffic.total for _, _, traffic, _ in figures}
    report.verdict("sweep commands per pass constant in the ended runs stored", len(totals) == 1,
                   " / ".join(f"{traffic.total}" for _, _, traffic, _ in figures)
                   + f" commands with {' / '.join(f'{s:,}' for s, *_ in figures)} ended runs; "
                   f"time {ratios(figures[-1][1], base_times).median:.2f}x the pass with none")
