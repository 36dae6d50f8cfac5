"""Durable mode: Redis with `appendonly yes` and `appendfsync always` (every write is in the
append-only file and fsynced before its reply), a private redis-server started here.

1. A 3-step saga (every step has an undo) run end to end with `await flow.run()`: its p50 and
   p99 beside a bare `SET` p50 and p99 on the same server, measured in the same repetition.
2. The server's time per durable step: `INFO commandstats` after `CONFIG RESETSTAT`, the usec
   of the commands the runs sent (their EVALSHA calls; a script's inner commands are inside
   its time) divided by the steps, for sagas of 1, 3 and 10 steps (a per-step and a per-run
   fit), and the main thread's CPU (`INFO cpu`) over the same runs beside it.
3. Where that time goes: each script's median time per call (`SLOWLOG` at threshold 0, the
   script named by its SHA; a slowlog entry per inner command inflates these by ~15 %), and
   the inner commands' own time per run (`INFO commandstats`).
"""

from __future__ import annotations

import collections
import hashlib
import os
import statistics
import time

import redis.asyncio

import reactorflow as rf
from benchmarks import _flows, _redis
from benchmarks._context import Context
from benchmarks._report import Spread, percentile, ratios, settle
from reactorflow.storage.redis.connections import SOURCES

TITLE = "3-step saga at appendfsync always vs a SET p50; Redis server µs per durable step"
TARGET_RATIO = 4.0
TARGET_SERVER_US = 25.0
RESTATE_MS = 50.0  # Restate's published invoke-to-result of a 3-step handler, fsync per step
STEPS = 3
SIZES = (1, 3, 10)  # saga lengths of the server-cost fit


async def _latency(ctx: Context, client: redis.asyncio.Redis, key: str,
                   flow: rf.Reactor) -> None:
    """Per repetition: SET and run latencies, interleaved in slices (the disk's fsync time
    drifts with what else writes to it: each slice of runs sits beside its own SETs); p50 and
    p99 of each."""
    report = ctx.report
    slices = ctx.pick(full=20, quick=6)
    runs, sets = 20, 50  # per slice
    report.note(f"{ctx.reps} repetitions x {slices * runs} runs of a {STEPS}-step saga; SET "
                f"baseline x {slices * sets} (256 B, redis.asyncio) in each repetition, in "
                f"alternating slices of {sets} SETs and {runs} runs")
    for _ in range(ctx.pick(full=50, quick=10)):
        await flow.run()
    await _redis.set_latencies(client, key, 200)
    clock = time.perf_counter
    run_p50: list[float] = []
    run_p99: list[float] = []
    set_p50: list[float] = []
    set_p99: list[float] = []
    for _ in range(ctx.reps):
        settle()
        found: list[float] = []
        taken: list[float] = []
        for _ in range(slices):
            found += await _redis.set_latencies(client, key, sets)
            for _ in range(runs):
                start = clock()
                result = await flow.run()
                taken.append(clock() - start)
                if result.status is not rf.Status.COMPLETED:
                    raise RuntimeError(f"a saga run ended {result.status}: {result.error}")
        set_p50.append(percentile(found, 50))
        set_p99.append(percentile(found, 99))
        run_p50.append(percentile(taken, 50))
        run_p99.append(percentile(taken, 99))
    ms = 1e3
    ratio = ratios(run_p50, set_p50)
    report.row(f"reactorflow: await flow.run(), {STEPS}-step saga, p50",
               Spread.of(run_p50).scaled(ms), "ms")
    report.row("  p99", Spread.of(run_p99).scaled(ms), "ms")
    report.row("baseline: await client.set(k, 256 B), p50", Spread.of(set_p50).scaled(ms), "ms")
    report.row("  p99", Spread.of(set_p99).scaled(ms), "ms")
    report.row("ratio saga p50 / SET p50", ratio, "x")
    report.verdict(f"{STEPS}-step saga p50 <= {TARGET_RATIO:g}x a SET p50 (appendfsync always)",
                   ratio.median <= TARGET_RATIO,
                   f"{ratio.median:.2f}x ({Spread.of(run_p50).median * ms:.2f} ms vs "
                   f"{Spread.of(set_p50).median * ms:.3f} ms SET; p99 "
                   f"{Spread.of(run_p99).median * ms:.2f} ms)")
    report.verdict(f"p50 beside Restate's ~{RESTATE_MS:g} ms (3-step handler, fsync per step)",
                   None,
                   f"{Spread.of(run_p50).median * ms:.2f} ms here, p99 "
                   f"{Spread.of(run_p99).median * ms:.2f} ms: one local Redis on this VM's disk, "
                   "in-process caller; Restate's is invoke-to-result through its server to a "
                   "service over HTTP, its log on EBS (a network disk): not comparable as a race")


async def _sent(url: str, flow: rf.Reactor) -> _redis.Traffic:
    """The commands and round trips of one run (MONITOR)."""
    async with _redis.watch(url) as traffic:
        result = await flow.run()
    if result.status is not rf.Status.COMPLETED:
        raise RuntimeError(f"a saga run ended {result.status}: {result.error}")
    return traffic


async def _server_cost(ctx: Context, client: redis.asyncio.Redis, url: str) -> None:
    """Server usec per run of sagas of each size in SIZES; the target at STEPS steps."""
    report = ctx.report
    runs = ctx.pick(full=500, quick=80)
    per_run: dict[int, float] = {}
    cpu_per_run: dict[int, float] = {}
    for n in SIZES:
        flow = _flows.saga(f"durable.cost{n}", n)
        for _ in range(20):
            await flow.run()
        traffic = await _sent(url, flow)
        sent = set(traffic.commands)  # the client's own commands (EVALSHA): not the inner ones
        report.row(f"commands, one {n}-step saga", f"{traffic.total}",
                   note=f"{traffic.round_trips} round trips (each write one fsync), "
                        f"{traffic.lua} Lua-issued; {traffic.breakdown()}")
        usec: list[float] = []
        cpu: list[float] = []
        for _ in range(ctx.reps):
            settle()
            await client.config_resetstat()
            main_before, _ = await _redis.server_cpu(client)
            for _ in range(runs):
                await flow.run()
            main_after, _ = await _redis.server_cpu(client)
            stats = await _redis.command_usec(client)
            usec.append(sum(u for name, (_, u) in stats.items() if name.upper() in sent) / runs)
            cpu.append((main_after - main_before) * 1e6 / runs)
        per_run[n] = statistics.median(usec)
        cpu_per_run[n] = statistics.median(cpu)
        report.row(f"server usec per step, {n}-step saga (commandstats)",
                   Spread.of([u / n for u in usec]), "µs/step",
                   f"{per_run[n]:.0f} µs/run; main-thread CPU {cpu_per_run[n] / n:.0f} µs/step "
                   "(INFO cpu: parsing, replies, AOF write and fsync calls too)")
    long, short = SIZES[-1], SIZES[-2]
    step = (per_run[long] - per_run[short]) / (long - short)
    fixed = per_run[short] - short * step
    report.row(f"fit over {short} / {long} steps", f"{step:.1f} µs per step + {fixed:.0f} µs "
               "per run", note=f"(a 1-step saga measured {per_run[1]:.0f} µs, the fit says "
                               f"{step + fixed:.0f})")
    target = per_run[STEPS] / STEPS
    report.verdict(f"Redis server time per durable step <= {TARGET_SERVER_US:g} µs "
                   f"(commandstats, {STEPS}-step saga)", target <= TARGET_SERVER_US,
                   f"{target:.1f} µs/step ({per_run[STEPS]:.0f} µs per run; {step:.1f} µs per "
                   f"further step; main-thread CPU {cpu_per_run[STEPS] / STEPS:.0f} µs/step)")


async def _profile(ctx: Context, client: redis.asyncio.Redis, flow: rf.Reactor) -> None:
    """Each script's time per call (SLOWLOG), and the inner commands' time per run."""
    report = ctx.report
    runs = ctx.pick(full=300, quick=50)
    names = {hashlib.sha1(source.encode()).hexdigest(): name for name, source in SOURCES.items()}
    await client.config_set("slowlog-log-slower-than", 0)
    await client.config_set("slowlog-max-len", 32 * runs * (STEPS + 1))
    try:
        await client.slowlog_reset()
        await client.config_resetstat()
        for _ in range(runs):
            await flow.run()
        entries = await client.slowlog_get(32 * runs * (STEPS + 1))
        stats = await _redis.command_usec(client)
    finally:
        await client.config_set("slowlog-log-slower-than", 10000)
        await client.slowlog_reset()
    calls: dict[str, list[int]] = collections.defaultdict(list)
    for entry in entries:
        words = entry["command"].split(b" ", 2)
        if words[0].upper() in (b"EVALSHA", b"EVAL") and len(words) > 1:
            calls[names.get(words[1].decode(), words[1][:8].decode())].append(
                int(entry["duration"]))
    for name, took in sorted(calls.items(), key=lambda item: -sum(item[1])):
        report.row(f"  script {name} (SLOWLOG, per call)", f"{statistics.median(took):.0f} µs",
                   note=f"{len(took) / runs:g} per run, {sum(took) / runs:.0f} µs per run")
    inner = {name: value for name, value in stats.items()
             if name.split("|")[0] not in ("evalsha", "eval", "slowlog", "config")}
    top = sorted(inner.items(), key=lambda item: -item[1][1])
    report.row("  inner commands, µs per run (commandstats)",
               f"{sum(u for _, u in inner.values()) / runs:.0f} µs",
               note=", ".join(f"{name} {c / runs:g}x {u / runs:.1f}" for name, (c, u) in top))


async def run(ctx: Context) -> None:
    report = ctx.report
    try:
        server = _redis.start_private(_redis.DURABLE)
    except RuntimeError as exc:
        report.skipped(f"needs redis-server: {exc}")
        return
    where = server.directory.name if server.directory is not None else "?"
    report.out(f"  [redis] {server.description}; its append-only file under {where}")
    load = os.getloadavg()
    report.note(f"load average {load[0]:.1f} at the start, {os.cpu_count()} CPUs")
    storage = rf.RedisStorage.from_url(server.url, namespace=server.namespace("durable"),
                                       retention=3600)
    rf.configure(storage=storage)
    client = redis.asyncio.Redis.from_url(server.url)
    try:
        fsync = (await client.config_get("appendfsync")).get("appendfsync")
        if fsync != "always":
            raise RuntimeError(f"the server runs appendfsync {fsync!r}, not 'always'")
        flow = _flows.saga("durable.saga", STEPS)
        await _latency(ctx, client, server.baseline_key, flow)
        await _server_cost(ctx, client, server.url)
        await _profile(ctx, client, flow)
    finally:
        await client.aclose()
        await storage.aclose()
        server.stop()
