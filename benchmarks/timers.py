"""Timers on Redis (api.md §12, issue 25's figures).

1. Fire lateness: 1,000 runs sleep until the same second; one firing loop (this process's,
   with the embedded worker resuming the runs, as one worker does) fires them. Per run: the
   moment its timer was claimed (fire lateness) and the moment its sleep step completed
   (resume lateness), after the deadline; p50/p99. Baseline, same run: 1,000 asyncio tasks
   sleeping until that second (the event loop's own lateness).
2. Storage per sleeping run: MEMORY USAGE of a namespace holding N sleeping runs (their run
   keys and timer entries) per run, beside a namespace of N runs paused at an interrupt.
3. Worker memory: the RSS of a fresh process running the firing loop (what every worker
   process runs beside its Dramatiq threads) after the loop has looked for 4 s, with 100,000
   sleeping runs stored (runs and timers, not due) against none.
4. A firing pass with nothing due: its time and Redis commands with 0, then 100,000 timers
   armed for later.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import redis.asyncio

import reactorflow as rf
from benchmarks import _redis
from benchmarks._context import Context
from benchmarks._report import Spread, percentile, settle
from benchmarks._stored import fill
from benchmarks._timer_flows import nappers
from reactorflow.runtime.services.timers import FIRER, fire_due
from reactorflow.status import Status

TITLE = "timers: fire lateness, bytes per sleeping run, worker memory, a firing pass (Redis)"
NEEDS_REDIS = True
ROOT = Path(__file__).resolve().parent.parent


class _Watched(rf.RedisStorage):
    """Notes when each claimed timer was claimed (the fire)."""

    claimed: dict[str, float]

    async def claim_timers(self, now: float, lease: float, limit: int):  # type: ignore[no-untyped-def]
        got = await super().claim_timers(now, lease, limit)
        at = time.time()
        for timer in got:
            self.claimed.setdefault(timer.run_id, at)
        return got


async def _namespace_bytes(client: redis.asyncio.Redis, namespace: str) -> int:
    total = 0
    async for key in client.scan_iter(match=f"{namespace}:*", count=1000):
        total += int(await client.memory_usage(key, samples=0) or 0)
    return total


async def _lateness(ctx: Context, count: int) -> None:
    report = ctx.report
    server = ctx.redis()
    storage = _Watched.from_url(server.url, namespace=f"bench-timers-{os.getpid()}")
    storage.claimed = {}
    rf.configure(storage=storage)
    FIRER.start()  # this process's firing loop: one worker's
    at = float(int(time.time()) + 3 + count // 400)  # a whole second, after the runs start
    runs = [await nappers.run(at=at) for _ in range(count)]
    if {run.status for run in runs} != {Status.RUNNING}:
        report.error("the runs did not all park at their sleep")
        return

    async def bare(into: list[float]) -> None:
        await asyncio.sleep(max(0.0, at + 5 - time.time()))
        into.append(time.time() - (at + 5))

    baseline: list[float] = []
    deadline = time.time() + 60
    while len(storage.claimed) < count and time.time() < deadline:
        await asyncio.sleep(0.05)
    done = [await nappers.wait(run.id, timeout=60) for run in runs]
    fire = [storage.claimed[run.id] - at for run in runs]
    resume = [(run.steps["nap"].finished_at or at) - at for run in done]
    await asyncio.gather(*(bare(baseline) for _ in range(count)))
    report.row(f"fire lateness, {count:,} timers due in one second (p50)",
               percentile(fire, 50) * 1e3, "ms",
               f"p99 {percentile(fire, 99) * 1e3:.1f} ms; asyncio.sleep baseline p99 "
               f"{percentile(baseline, 99) * 1e3:.1f} ms")
    report.row("resume lateness (sleep step completed), p50", percentile(resume, 50) * 1e3,
               "ms", f"p99 {percentile(resume, 99) * 1e3:.1f} ms (the embedded worker resumes "
               "the runs one after another on its loop)")
    report.verdict("fire lateness p99 <= 100 ms", percentile(fire, 99) <= 0.1,
                   f"p99 {percentile(fire, 99) * 1e3:.1f} ms")
    FIRER.stop()
    await storage.aclose()
    rf.configure(storage=None)


async def _bytes(ctx: Context, count: int) -> None:
    report = ctx.report
    server = ctx.redis()
    client = redis.asyncio.Redis.from_url(server.url)
    figures = {}
    for kind in ("sleeping", "paused"):
        namespace = f"bench-timer-bytes-{kind}-{os.getpid()}"
        storage = rf.RedisStorage.from_url(server.url, namespace=namespace)
        rf.configure(storage=storage)
        if kind == "sleeping":
            for _ in range(count):
                await nappers.run(at=time.time() + 86_400)
        else:
            paused = rf.Reactor(f"bench.timers.paused.{os.getpid()}", inputs=None)

            @paused.interrupt
            async def wait(payload: float) -> float:
                return payload

            for _ in range(count):
                await paused.run()
        figures[kind] = await _namespace_bytes(client, namespace) / count
        await storage.aclose()
    rf.configure(storage=None)
    await client.aclose()
    report.row("storage per sleeping run", figures["sleeping"], "B",
               f"{figures['paused']:,.0f} B per run paused at an interrupt (baseline); "
               f"{count:,} runs each")


def _worker_rss(url: str, namespace: str) -> float:
    env = dict(os.environ, REACTORFLOW_REDIS_URL=url, PYTHONPATH=str(ROOT),
               REACTORFLOW_BENCH_NAMESPACE=namespace)
    proc = subprocess.Popen([sys.executable, "-c", _WORKER, url, namespace], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, text=True)
    out, _ = proc.communicate(timeout=120)
    return float(out.strip().splitlines()[-1])


_WORKER = """
import sys, time, anyio
import reactorflow as rf
from reactorflow.runtime.services.timers import FIRER
rf.configure(storage=rf.RedisStorage.from_url(sys.argv[1], namespace=sys.argv[2]))
import benchmarks._timer_flows
FIRER.start()
time.sleep(4.0)   # several looks of the firing loop
kb = [int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmRSS')][0]
FIRER.stop()
print(kb)
"""


async def _worker_memory(ctx: Context, count: int) -> None:
    report = ctx.report
    server = ctx.redis()
    empty = f"bench-timer-rss-none-{os.getpid()}"
    full = f"bench-timer-rss-full-{os.getpid()}"
    storage = rf.RedisStorage.from_url(server.url, namespace=full)
    ids = await fill(storage, count, ("bench.timers.nap",), [Status.RUNNING], release=True)
    later = time.time() + 86_400
    for start in range(0, len(ids), 1000):
        await asyncio.gather(*(storage.arm_timer(run_id, "bench.timers.nap", later + i)
                               for i, run_id in enumerate(ids[start:start + 1000])))
    await storage.aclose()
    none = [_worker_rss(server.url, empty) for _ in range(ctx.reps)]
    many = [_worker_rss(server.url, full) for _ in range(ctx.reps)]
    grew = (Spread.of(many).median - Spread.of(none).median) / 1024
    report.row(f"firing process RSS with {count:,} sleeping runs", Spread.of(many).scaled(1 / 1024),
               "MB", f"{Spread.of(none).median / 1024:.1f} MB with none (baseline): "
               f"{grew:+.1f} MB")
    report.verdict("worker RSS with the sleeping runs <= +5 MB", grew <= 5.0, f"{grew:+.1f} MB")


async def _pass_cost(ctx: Context, count: int) -> None:
    report = ctx.report
    server = ctx.redis()
    storage = rf.RedisStorage.from_url(server.url, namespace=f"bench-timer-pass-{os.getpid()}")
    rf.configure(storage=storage)
    figures = []
    armed = 0
    for size in (0, count):
        while armed < size:
            batch = min(1000, size - armed)
            await asyncio.gather(*(storage.arm_timer(f"r{armed + i}", "x", 2e9 + armed + i)
                                   for i in range(batch)))
            armed += batch
        times = []
        for _ in range(ctx.reps):
            settle()
            began = time.perf_counter()
            for _ in range(50):
                await fire_due(storage)
                await storage.next_timer()
            times.append((time.perf_counter() - began) / 50)
        async with _redis.watch(server.url) as traffic:
            await fire_due(storage)
            await storage.next_timer()
        figures.append((size, times, traffic))
    await storage.aclose()
    rf.configure(storage=None)
    base = Spread.of(figures[0][1]).median
    for size, times, traffic in figures:
        report.row(f"firing pass, nothing due, {size:,} timers armed for later",
                   Spread.of(times).scaled(1e6), "µs",
                   f"{Spread.of(times).median / base:.2f}x the pass with none; "
                   f"{traffic.total} commands")
    totals = {traffic.total for *_, traffic in figures}
    ratio = Spread.of(figures[-1][1]).median / base
    report.verdict("a firing pass independent of the timers not yet due",
                   len(totals) == 1 and ratio < 1.5,
                   f"{' / '.join(str(t.total) for *_, t in figures)} commands; "
                   f"{ratio:.2f}x the time")


async def run(ctx: Context) -> None:
    FIRER.stop()  # (started by an embedded worker of an earlier benchmark)
    await _pass_cost(ctx, ctx.pick(full=100_000, quick=10_000))
    await _bytes(ctx, ctx.pick(full=1_000, quick=200))
    await _worker_memory(ctx, ctx.pick(full=100_000, quick=10_000))
    await _lateness(ctx, ctx.pick(full=1_000, quick=200))
