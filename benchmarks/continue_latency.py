"""`flow.continue_(...)` on RedisStorage: a paused run whose interrupt has a one-step tail
(`prep` → interrupt `approve` → `finish`). Latency of the call (p50, p90), against one SET
round trip in the same run, and the Redis commands one call sends (MONITOR).

The SET baseline is timed *interleaved* with the calls — one SET, then one `continue_`, in
turn — so that both figures of a repetition are taken in the same state of the machine. A
block of back-to-back SETs (the baseline before, shown as context) runs in another regime: the
client and the server ping-pong without a pause, both stay on a CPU, and on a shared 2-core
machine its p50 jumps between ~60 and ~130 µs from one block to the next as other processes
come and go, while `continue_` (three round trips with Python work between them) moves much
less. That jump, not `continue_`, made the ratio's spread across repetitions (4.9x to 10.7x);
interleaved, the two move together (see docs/performance.md)."""

from __future__ import annotations

import time

import redis.asyncio

import reactorflow as rf
from benchmarks import _flows, _redis
from benchmarks._context import Context
from benchmarks._report import Spread, percentile, settle

TITLE = "continue_ of a paused run (interrupt + one-step tail) on Redis vs one SET round trip"
NEEDS_REDIS = True
TARGET_RATIO = 5.0
TARGET_ROUND_TRIPS = 3


async def run(ctx: Context) -> None:
    report = ctx.report
    server = ctx.redis()
    storage = ctx.redis_storage("continue")
    rf.configure(storage=storage)
    flow = _flows.paused_with_tail("continue")
    reps = ctx.reps
    calls = ctx.pick(full=300, quick=30)
    client = redis.asyncio.Redis.from_url(server.url)
    report.note(f"{reps} repetitions x {calls} continue_ calls (each on its own paused run, "
                f"created untimed), each after one timed SET (interleaved); context: a block "
                f"of {calls * 4} back-to-back SETs")

    async def paused_runs(count: int) -> list[str]:
        ids = []
        for _ in range(count):
            run_ = await flow.run()
            if run_.status is not rf.Status.PAUSED:
                raise RuntimeError(f"expected a paused run, got {run_.status}")
            ids.append(run_.id)
        return ids

    async def resume(run_id: str) -> rf.Run:
        return await flow.continue_(run_id, step="approve", payload=41)

    clock = time.perf_counter
    try:
        for run_id in await paused_runs(ctx.pick(full=50, quick=10)):  # warm-up
            done = await resume(run_id)
        if done.status is not rf.Status.COMPLETED or done.value != 43:
            report.error(f"continue_ did not complete the run: {done.status} {done.value!r}")
            return
        await _redis.set_latencies(client, server.baseline_key, 500)
        p50: list[float] = []
        p90: list[float] = []
        set50: list[float] = []
        set90: list[float] = []
        block50: list[float] = []
        not_completed = 0
        samples: list[list[float]] = []
        baselines: list[list[float]] = []
        value = b"x" * 256
        for _ in range(reps):
            ids = await paused_runs(calls)
            settle()
            block50.append(percentile(
                await _redis.set_latencies(client, server.baseline_key, calls * 4), 50))
            settle()
            found = []
            sets = []
            for run_id in ids:
                start = clock()
                await client.set(server.baseline_key, value)
                sets.append(clock() - start)
                start = clock()
                done = await resume(run_id)
                found.append(clock() - start)
                not_completed += done.status is not rf.Status.COMPLETED
            samples.append(found)
            baselines.append(sets)
            p50.append(percentile(found, 50))
            p90.append(percentile(found, 90))
            set50.append(percentile(sets, 50))
            set90.append(percentile(sets, 90))
        (run_id,) = await paused_runs(1)
        async with _redis.watch(server.url) as traffic:
            await resume(run_id)
        (run_id,) = await paused_runs(1)
        async with _redis.watch(server.url) as traffic_run:
            await flow.run()
    finally:
        await client.aclose()

    us = 1e6
    report.distribution("reactorflow: continue_", samples, group="continue_ vs SET")
    report.distribution("baseline: SET", baselines, group="continue_ vs SET")
    ratio = Spread.of([a / b for a, b in zip(p50, set50, strict=True)])
    report.row("reactorflow: continue_ p50", Spread.of(p50).scaled(us), "µs")
    report.row("reactorflow: continue_ p90", Spread.of(p90).scaled(us), "µs")
    report.row("baseline: await client.set(k, 256 B) p50", Spread.of(set50).scaled(us), "µs",
               "interleaved with the calls")
    report.row("baseline: await client.set(k, 256 B) p90", Spread.of(set90).scaled(us), "µs")
    report.row("ratio continue_ p50 / SET p50", ratio, "x")
    report.row("context: back-to-back SETs, p50", Spread.of(block50).scaled(us), "µs",
               "a block of SETs alone (the earlier baseline)")
    report.row("context: ratio to the back-to-back SET p50",
               Spread.of([a / b for a, b in zip(p50, block50, strict=True)]), "x")
    report.row("commands, one continue_", f"{traffic.total}",
               note=f"{traffic.round_trips} round trips, {traffic.lua} Lua-issued; "
                    f"{traffic.breakdown()}")
    report.row("context: commands of the run() that paused it", f"{traffic_run.total}",
               note=f"{traffic_run.round_trips} round trips; {traffic_run.breakdown()}")
    if not_completed:
        report.note(f"{not_completed} continue_ calls did not end COMPLETED")
    report.verdict(f"continue_ p50 <= {TARGET_RATIO:g}x SET p50", ratio.median <= TARGET_RATIO,
                   f"p50 {Spread.of(p50).median * us:,.0f} µs = {ratio.median:.1f}x SET, "
                   f"p90 {Spread.of(p90).median * us:,.0f} µs")
    report.verdict(f"continue_ in <= {TARGET_ROUND_TRIPS} round trips",
                   traffic.round_trips <= TARGET_ROUND_TRIPS,
                   f"{traffic.round_trips} round trips, {traffic.total} commands "
                   f"({traffic.breakdown()})")
