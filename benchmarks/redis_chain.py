"""A 10-step chain on RedisStorage: time per step against one SET round trip, Redis commands
per run and per step (counted with MONITOR), and the bytes one completed run stores."""

from __future__ import annotations

import statistics
import time
from typing import Any

import redis.asyncio

import reactorflow as rf
from benchmarks import _flows, _redis
from benchmarks._context import Context
from benchmarks._flows import SaveStepTimer
from benchmarks._report import Spread, ratios, settle, time_per_call

TITLE = "10-step chain on RedisStorage vs one SET round trip; commands and bytes per run"
NEEDS_REDIS = True
TARGET_RATIO = 1.6
# The run's keys, in the documented layout (docs/reference/redis-keys.md).
RUN_KEYS = ("run", "steps", "hist", "ctl", "claims", "ctr", "tok", "lock")


async def _commands(ctx: Context, url: str) -> None:
    """Count the commands of one run of 1, 10 and 20 steps; fit `a per step + b per run`."""
    report = ctx.report
    sizes = (1, 10, 20)
    flows = {n: _flows.chain(f"redis.count{n}", n)[0] for n in sizes}
    for flow in flows.values():
        await flow.run()  # warm: plan compiled, scripts loaded, connections open
    seen: dict[int, _redis.Traffic] = {}
    for n, flow in flows.items():
        async with _redis.watch(url) as traffic:
            result = await flow.run()
        if result.status is not rf.Status.COMPLETED:
            report.error(f"{n}-step run ended {result.status}")
            return
        seen[n] = traffic
    for n in sizes:
        t = seen[n]
        report.row(f"commands, one {n}-step run", f"{t.total}",
                   note=f"{t.round_trips} round trips, {t.lua} Lua-issued; {t.breakdown()}")
    per_step = (seen[20].total - seen[10].total) / 10
    per_run = seen[10].total - 10 * per_step
    linear = seen[1].total == per_run + per_step
    trips_step = (seen[20].round_trips - seen[10].round_trips) / 10
    trips_run = seen[10].round_trips - 10 * trips_step
    lua_step = (seen[20].lua - seen[10].lua) / 10
    report.row("commands: fit over 1 / 10 / 20 steps",
               f"{per_step:g} per step + {per_run:g} per run",
               note="(exact for all three)" if linear else "(NOT linear: see the rows above)")
    report.row("round trips: same fit", f"{trips_step:g} per step + {trips_run:g} per run")
    report.row("Lua-issued commands per step (context)", f"{lua_step:g}")
    report.verdict("1 command per step + a constant per run", per_step == 1 and linear,
                   f"{per_step:g} per step + {per_run:g} per run "
                   f"({seen[10].total} for 10 steps)")


async def _bytes(ctx: Context, storage_ns: str, url: str, flow: rf.Reactor) -> None:
    """Everything one completed 10-step run leaves in its keys, read back."""
    report = ctx.report
    result = await flow.run()
    client = redis.asyncio.Redis.from_url(url)
    try:
        total_payload = 0
        total_memory = 0
        details = []
        for part in RUN_KEYS:
            key = f"{storage_ns}:{part}:{{{result.id}}}"
            kind_raw = await client.type(key)
            kind = kind_raw.decode() if isinstance(kind_raw, bytes) else str(kind_raw)
            if kind == "none":
                continue
            payload: Any
            if kind == "hash":
                payload = await client.hgetall(key)
                size = sum(len(k) + len(v) for k, v in payload.items())
                count = len(payload)
            elif kind == "list":
                payload = await client.lrange(key, 0, -1)
                size = sum(len(v) for v in payload)
                count = len(payload)
            elif kind == "string":
                size = len(await client.get(key) or b"")
                count = 1
            else:
                size, count = 0, 0
            memory = int(await client.memory_usage(key, samples=0) or 0)
            total_payload += size
            total_memory += memory
            details.append(f"{part} ({kind}, {count}): {size:,} B / {memory:,} B")
        steps = await client.hgetall(f"{storage_ns}:steps:{{{result.id}}}")
        record = sum(len(v) for v in steps.values()) / max(1, len(steps))
        indexed = [name for name in (f"idx:all:{flow.name}", f"idx:st:completed:{flow.name}")
                   if await client.zscore(f"{storage_ns}:{name}", result.id) is not None]
    finally:
        await client.aclose()
    report.row("bytes stored, one completed 10-step run", f"{total_payload:,} B",
               note="sum of field names + values / list items / string values")
    report.row("  MEMORY USAGE of its keys (SAMPLES 0)", f"{total_memory:,} B")
    report.row("  mean step record (steps hash value)", f"{record:,.0f} B")
    for line in details:
        report.note(f"    {line}")
    report.note(f"    plus index entries (sorted-set members) in: {', '.join(indexed) or '-'}")
    report.verdict("bytes stored per run (no target: reported)", None,
                   f"{total_payload:,} B of data, {total_memory:,} B MEMORY USAGE")


async def _distributions(ctx: Context, flow: rf.Reactor, client: redis.asyncio.Redis, key: str,
                         runs: int) -> None:
    """For the charts, after the timed loops: each run of the chain timed alone (per step:
    run / 10) beside single SETs, one repetition, recorded with the results."""
    clock = time.perf_counter
    settle()
    sets = await _redis.set_latencies(client, key, runs * 4)
    settle()
    found = []
    for _ in range(runs):
        start = clock()
        await flow.run()
        found.append((clock() - start) / 10)
    group = "10-step chain per step vs SET"
    ctx.report.distribution("reactorflow: chain run / 10 steps", [found], group=group)
    ctx.report.distribution("baseline: SET", [sets], group=group)


async def run(ctx: Context) -> None:
    report = ctx.report
    server = ctx.redis()
    storage = ctx.redis_storage("chain")
    rf.configure(storage=storage)
    reps = ctx.reps
    runs = ctx.pick(full=300, quick=30)
    sets = ctx.pick(full=3000, quick=300)
    flow, _ = _flows.chain("redis.chain10", 10)
    client = redis.asyncio.Redis.from_url(server.url)
    report.note(f"{reps} repetitions x {runs} runs; SET baseline x {sets} "
                f"(redis.asyncio, hiredis={redis.utils.HIREDIS_AVAILABLE})")
    try:
        for _ in range(ctx.pick(full=50, quick=10)):
            await flow.run()
        await _redis.set_round_trip(client, server.baseline_key, 500)
        await _redis.wire_set_round_trip(storage, server.baseline_key, 500)
        t_run: list[float] = []
        t_set: list[float] = []
        t_wire: list[float] = []
        t_save: list[float] = []
        for _ in range(reps):
            settle()
            t_set.append(await _redis.set_round_trip(client, server.baseline_key, sets))
            wire = await _redis.wire_set_round_trip(storage, server.baseline_key, sets)
            if wire is not None:
                t_wire.append(wire)
            settle()
            t_run.append(await time_per_call(flow.run, runs))
            timer = SaveStepTimer(storage)  # context, after the timed loop: one checkpoint
            for _ in range(ctx.pick(full=30, quick=5)):
                await flow.run()
            t_save.append(statistics.median(d for _, d in timer.take()))
            timer.remove()
        await _distributions(ctx, flow, client, server.baseline_key, runs)
    finally:
        await client.aclose()
    us = 1e6
    per_step = [t / 10 for t in t_run]
    ratio = ratios(per_step, t_set)
    report.row("reactorflow: await flow.run(), 10 steps", Spread.of(t_run).scaled(us), "µs/run")
    report.row("reactorflow: per step (run / 10)", Spread.of(per_step).scaled(us), "µs/step")
    report.row("baseline: await client.set(k, 256 B)", Spread.of(t_set).scaled(us), "µs")
    report.row("ratio per step / SET round trip", ratio, "x")
    if t_wire:  # the same SET through the connection the run scripts use
        report.row("  context: SET through the storage's wire path", Spread.of(t_wire).scaled(us),
                   "µs", "(storage/redis/wire.py: the connection the run scripts use)")
        report.row("  context: ratio per step / wire SET", ratios(per_step, t_wire), "x")
    report.row("  context: one save_step (EVALSHA) call, median", Spread.of(t_save).scaled(us),
               "µs", f"{ratios(t_save, t_set).median:.2f}x SET")
    report.row("  context: rest of the run (run - 10 x save_step)",
               Spread.of([r - 10 * c for r, c in zip(t_run, t_save, strict=True)]).scaled(us),
               "µs/run")
    report.verdict(f"per step <= {TARGET_RATIO:g}x one SET round trip",
                   ratio.median <= TARGET_RATIO,
                   f"{ratio.median:.2f}x ({Spread.of(per_step).median * us:.0f} µs/step vs "
                   f"{Spread.of(t_set).median * us:.0f} µs SET)")
    await _commands(ctx, server.url)
    await _bytes(ctx, ctx.namespace(storage), server.url, flow)
