"""Schedules: tick -> run started (stored and dispatched), p50 and p99, with 1 and 2
`reactorflow scheduler` processes on a real Redis, and tick -> the run's step running in a
`reactorflow worker` (the pick-up added); beside floors measured in the same run: how late an
asyncio sleep until a deadline wakes (any timer-driven scheduler's floor) and a bare
`dispatch()` with an idempotency key (a run's start, what each tick does). Then the Redis
commands of one tick with few and with many runs stored (target: a constant).

The scheduler processes run the engine's clock 120 times faster than real time (see
`_schedule_flows`): a minutely schedule ticks every 0.5 s, and every latency is measured and
reported in real milliseconds.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from dramatiq.brokers.redis import RedisBroker

import reactorflow as rf
from benchmarks import _redis
from benchmarks._context import Context
from benchmarks._report import percentile, settle
from reactorflow import clock

TITLE = "schedules: tick -> run started (1 and 2 scheduler processes), commands per tick"
NEEDS_REDIS = True
ROOT = Path(__file__).resolve().parents[1]
WARP = 120.0
TARGET_MS = 100.0
FLOWS = "benchmarks._schedule_flows"


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min), {os.cpu_count()} CPUs"


def _ms(values: list[float]) -> str:
    return (f"p50 {percentile(values, 50) * 1000:.1f} ms, p99 {percentile(values, 99) * 1000:.1f}"
            f" ms, max {max(values) * 1000:.1f} ms (n={len(values)})")


async def run(ctx: Context) -> None:
    report = ctx.report
    ticks = ctx.pick(full=60, quick=8)
    report.note(f"{ticks} ticks per configuration, one tick every {60 / WARP:.2f} s real; "
                f"{_load()}")
    settle()
    overshoot = await _sleep_overshoot(ticks * 2)
    report.row("baseline: asyncio sleep until a deadline, lateness", _ms(overshoot), "",
               "in this process")
    bare = await _bare_dispatch(ctx, ticks * 2)
    report.row("baseline: dispatch() with an idempotency key", _ms(bare), "",
               "in this process, same Redis")
    for count in (1, 2):
        settle()
        every, picked, runs, distinct = await _scheduled(ctx, count, ticks)
        report.row(f"{count} scheduler process(es): first tick after start", every[0] * 1000,
                   "ms", "warm-up: connections, lazy imports, first dispatch")
        started = every[1:]
        report.row(f"{count} scheduler process(es): tick -> run started", _ms(started), "",
                   f"later ticks; {runs} runs for {distinct} ticks")
        report.row(f"{count} scheduler process(es): tick -> step running in the worker",
                   _ms(picked[1:]), "", "later ticks; reactorflow worker: 1 process x 4 threads")
        p99 = percentile(started, 99) * 1000
        report.verdict(f"{count} scheduler(s): tick -> run started p99 < {TARGET_MS:.0f} ms, one "
                       "run per tick", p99 < TARGET_MS and runs == distinct,
                       f"p99 {p99:.1f} ms; {runs} runs / {distinct} ticks")
    await _commands_per_tick(ctx)
    report.note(f"after: {_load()}")


async def _sleep_overshoot(samples: int) -> list[float]:
    """How late `asyncio.sleep(deadline - now)` wakes (seconds), deadlines 20-30 ms away."""
    found = []
    for _ in range(samples):
        deadline = time.time() + 0.02 + random.random() * 0.01
        await asyncio.sleep(deadline - time.time())
        found.append(time.time() - deadline)
    return found


def _configure(ctx: Context, name: str) -> rf.RedisStorage:
    storage = ctx.redis_storage(name)
    rf.configure(storage=storage, broker=RedisBroker(
        url=ctx.redis().url, namespace=f"{ctx.namespace(storage)}-dramatiq"))
    return storage


async def _bare_dispatch(ctx: Context, samples: int) -> list[float]:
    """Seconds of one `dispatch(idempotency_key=...)` of a one-step reactor."""
    _configure(ctx, "schedules-bare")
    bare = rf.Reactor("bench.schedules.bare")

    @bare.step
    async def only() -> int:
        return 1

    await bare.dispatch(idempotency_key="warm-up")
    found = []
    for index in range(samples):
        began = time.perf_counter()
        await bare.dispatch(idempotency_key=f"tick-{index}")
        found.append(time.perf_counter() - began)
    return found


def _spawn(args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "reactorflow", *args, FLOWS], cwd=ROOT,
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def _stop(proc: subprocess.Popen[bytes], sig: int) -> None:
    proc.send_signal(sig)
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(15)


async def _scheduled(ctx: Context, count: int, ticks: int
                     ) -> tuple[list[float], list[float], int, int]:
    """Run `count` scheduler processes and a worker until `ticks` ticks ran; returns the
    latencies tick -> run started and tick -> step running (real seconds), oldest tick first,
    the runs and the distinct ticks."""
    url = ctx.redis().url
    storage = _configure(ctx, f"schedules-{count}")
    namespace = ctx.namespace(storage)
    env = dict(os.environ, REACTORFLOW_REDIS_URL=url, RF_BENCH_NAMESPACE=namespace,
               REACTORFLOW_REDIS_NAMESPACE=namespace,
               PYTHONPATH=str(ROOT))
    origin = time.time()
    warped = dict(env, RF_BENCH_WARP=repr(WARP), RF_BENCH_ORIGIN=repr(origin))
    worker = _spawn(["worker", "--processes", "1", "--threads", "4"], env)
    schedulers = [_spawn(["scheduler"], warped) for _ in range(count)]
    stamps_key = f"{namespace}:bench:step-started"
    client = _redis.redis.asyncio.Redis.from_url(url)
    try:
        deadline = time.monotonic() + 60 + ticks * 60 / WARP * 4
        while await client.hlen(stamps_key) < ticks:  # the worker ran `ticks` runs
            if time.monotonic() > deadline or any(p.poll() is not None for p in schedulers):
                raise RuntimeError(f"{count} scheduler(s): {await client.hlen(stamps_key)} of "
                                   f"{ticks} scheduled runs ran in time")
            await asyncio.sleep(0.1)
    finally:
        for proc in schedulers:
            _stop(proc, signal.SIGINT)
        _stop(worker, signal.SIGTERM)
    stamps = {float(k): float(v) for k, v in (await client.hgetall(stamps_key)).items()}
    await client.aclose()
    page = await rf.list_runs(limit=1000)
    found = sorted([(float(run.inputs["at"]), run.created_at)
                    for run in [await rf.get_run(summary.id) for summary in page.runs]])
    started = [(created - tick) / WARP for tick, created in found]
    picked = [stamps[tick] - (origin + (tick - origin) / WARP)
              for tick, _ in found if tick in stamps]
    return started, picked, len(found), len({tick for tick, _ in found})


class _Shifted(clock.RealClock):
    """The real clock, `shift` seconds ahead for `now()` (ticks come due when moved)."""

    shift = 0.0

    def now(self) -> float:  # type: ignore[override]
        return time.time() + self.shift


async def _commands_per_tick(ctx: Context) -> None:
    """Redis commands (and round trips) of the `schedule_once` pass that starts one tick's run,
    with no run stored and with many."""
    report = ctx.report
    _configure(ctx, "schedules-ops")
    counted = rf.Reactor("bench.schedules.ops", schedules=[rf.Schedule("* * * * *")])

    @counted.step
    async def only() -> int:
        return 1

    shifted = _Shifted()
    previous = clock.use(shifted)
    found: list[tuple[int, int, _redis.Traffic]] = []
    try:
        await rf.schedule_once(reactors=[counted])  # first seen
        many = ctx.pick(full=2000, quick=200)
        for stored in (0, many):
            for _ in range(stored):
                await counted.dispatch()
            shifted.shift += 60
            async with _redis.watch(ctx.redis().url) as traffic:
                [_] = await rf.schedule_once(reactors=[counted])
            found.append((stored, traffic.round_trips, traffic))
        passes = []
        for _ in range(ctx.pick(full=100, quick=10)):
            shifted.shift += 60
            began = time.perf_counter()
            await rf.schedule_once(reactors=[counted])
            passes.append(time.perf_counter() - began)
    finally:
        clock.use(previous)
    report.row("in-process schedule_once() pass that starts a tick's run", _ms(passes), "",
               "the work of one tick without the wake-up (this process)")
    for stored, trips, traffic in found:
        report.row(f"one tick with {stored} runs stored: commands", traffic.total, "",
                   f"{trips} round trips; {traffic.breakdown()}")
    totals = {traffic.total for _, _, traffic in found}
    report.verdict("storage operations per tick constant in the runs stored", len(totals) == 1,
                   f"{' vs '.join(str(t.total) for _, _, t in found)} commands")
