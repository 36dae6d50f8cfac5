"""Workers: dispatch -> completion of a 1-step run against Dramatiq's own enqueue -> start of the
same messages, on one broker and worker (a `reactorflow worker` process, idle between messages);
and the wake-up of a step reading an async_step's result after the unit's record write starts,
against the raw pub/sub floor (PUBLISH from another process -> subscriber awake) and a reader
that polls every second."""

from __future__ import annotations

import asyncio
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

import redis
import redis.asyncio

import reactorflow as rf
from benchmarks._context import Context
from benchmarks._report import Spread, percentile, ratios, settle
from reactorflow import records

TITLE = "workers: dispatch -> completion, and async_step reader wake-up"
NEEDS_REDIS = True
ROOT = Path(__file__).resolve().parents[1]
IDLE_GAP = 0.3  # seconds between messages: the worker is idle each time (its poll backed off)
HANDOFF_RATIO = 1.15


def _start_worker(url: str, namespace: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ, REACTORFLOW_REDIS_URL=url, RF_BENCH_NAMESPACE=namespace,
               RF_BENCH_WORKER="1", PYTHONPATH=str(ROOT))
    return subprocess.Popen(
        [sys.executable, "-m", "reactorflow", "worker", "benchmarks._worker_flows",
         "--processes", "1", "--threads", "8"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)


async def run(ctx: Context) -> None:
    server = ctx.redis()
    namespace = server.namespace("workers")
    os.environ["REACTORFLOW_REDIS_URL"] = server.url
    os.environ["RF_BENCH_NAMESPACE"] = namespace
    from benchmarks import _worker_flows as flows

    worker = _start_worker(server.url, namespace)
    stamps = redis.Redis.from_url(server.url)
    try:
        probe = await flows.one_step.dispatch()
        await flows.one_step.wait(probe.id, timeout=60)  # the worker is up
        await _dispatch(ctx, flows, stamps)
        await _wakeup(ctx, flows, stamps, server.url)
    finally:
        worker.terminate()
        try:
            worker.wait(15)
        except subprocess.TimeoutExpired:
            worker.kill()
        stamps.delete(flows.PICKUP_KEY, flows.WRITTEN_KEY)
        os.environ.pop("REACTORFLOW_REDIS_URL", None)


async def _dispatch(ctx: Context, flows: object, stamps: redis.Redis) -> None:
    """Dispatch -> completion of a 1-step run against Dramatiq's own enqueue -> start, one
    message at a time, the worker idle before each.

    An idle Dramatiq worker polls with a back-off (50 ms bound here), so a pick-up waits a
    random part of that period: its median over a few dozen messages moves by several ms from
    one sample to the next, more than reactorflow's whole share. So the verdict's baseline is
    Dramatiq's enqueue -> start *of the same messages*: for each run, from the moment
    reactorflow calls Dramatiq's enqueue to Dramatiq starting the job in the worker
    (`before_process_message`, before reactorflow's actor body runs). The ratio is the median
    of dispatch -> completion over the median of those pick-ups, both over every message of
    the run; a plain actor's enqueue -> start (`ping`, messages of its own between the runs')
    is shown beside it as a check that the run's messages are picked up as any message is.
    The worker notes a job's start only once the job is over: a Redis write inside the job
    would add its round trip to the figure as if it were reactorflow's."""
    import reactorflow.workers.broker as workers

    report = ctx.report
    one_step = flows.one_step  # type: ignore[attr-defined]
    ping = flows.ping  # type: ignore[attr-defined]
    pickup_key = flows.PICKUP_KEY  # type: ignore[attr-defined]
    started_key = flows.STARTED_KEY  # type: ignore[attr-defined]
    samples = ctx.pick(full=30, quick=5)
    report.note(f"{ctx.reps} repetitions x {samples} messages each way, {IDLE_GAP} s apart "
                "(idle worker); worker: reactorflow worker, 1 process x 8 threads, "
                "idle poll bound 50 ms (reactorflow worker's default)")
    enqueued: dict[str, float] = {}
    original = workers.enqueue_run

    def noted(run_id: str, reactor: str, **options: object) -> None:
        enqueued[run_id] = time.time()
        original(run_id, reactor, **options)  # type: ignore[arg-type]

    workers.enqueue_run = noted  # type: ignore[assignment]
    ours: list[float] = []  # per repetition: medians
    picked: list[float] = []
    theirs: list[float] = []
    own: list[float] = []
    every: list[float] = []  # every message: dispatch -> completion
    every_pick: list[float] = []  # every message: Dramatiq's enqueue -> start of its job
    ends: list[list[float]] = []  # per repetition, for the JSON's distributions
    pickups: list[list[float]] = []
    try:
        for _ in range(ctx.reps):
            settle()
            found: list[float] = []
            picks: list[float] = []
            stamps.delete(pickup_key)
            for _ in range(samples):
                await asyncio.sleep(IDLE_GAP)
                ping.send(time.time())
                await asyncio.sleep(IDLE_GAP)
                start = time.perf_counter()
                run = await one_step.dispatch()
                done = await one_step.wait(run.id, timeout=30)
                elapsed = time.perf_counter() - start
                if done.status is not rf.Status.COMPLETED:
                    raise RuntimeError(f"dispatched run ended {done.status}")
                noted_at = stamps.hget(started_key, run.id)
                while noted_at is None:  # the worker notes it right after the job
                    await asyncio.sleep(0.001)
                    noted_at = stamps.hget(started_key, run.id)
                found.append(elapsed)
                picks.append(float(noted_at) - enqueued[run.id])
            plain = [float(v) for v in stamps.lrange(pickup_key, 0, -1)]
            ends.append(found)
            pickups.append(picks)
            ours.append(percentile(found, 50))
            picked.append(percentile(picks, 50))
            theirs.append(percentile(plain, 50))
            own.append(percentile([f - p for f, p in zip(found, picks, strict=True)], 50))
            every += found
            every_pick += picks
    finally:
        workers.enqueue_run = original  # type: ignore[assignment]
    mine, base = Spread.of(ours).scaled(1000), Spread.of(picked).scaled(1000)
    ratio = percentile(every, 50) / percentile(every_pick, 50)
    group = "dispatch -> completion vs Dramatiq pick-up"
    report.distribution("reactorflow: dispatch -> completion", ends, group=group, unit="ms",
                        scale=1e3)
    report.distribution("baseline: Dramatiq enqueue -> start", pickups, group=group, unit="ms",
                        scale=1e3)
    report.row("reactorflow: dispatch -> completion, p50", mine, "ms",
               "dispatch() + wait() in the caller; the run completes in the worker")
    report.row("baseline: Dramatiq enqueue -> job start, p50", base, "ms",
               "the same messages (Dramatiq's before_process_message)")
    report.row("ratio, per repetition", ratios(ours, picked), "x")
    report.row("ratio over every message", ratio, "x",
               f"{len(every)} messages: p50 {percentile(every, 50) * 1000:.1f} ms / "
               f"{percentile(every_pick, 50) * 1000:.1f} ms")
    report.row("reactorflow's own time around the pick-up, p50", Spread.of(own).scaled(1000),
               "ms", "(dispatch -> completion) - (enqueue -> job start), same message")
    plain_ratio = percentile(every, 50) / statistics.median(theirs)
    report.row("context: a plain actor's enqueue -> start, p50",
               Spread.of(theirs).scaled(1000), "ms",
               f"messages of its own; ratio to it {plain_ratio:.2f}x")
    report.verdict(f"dispatch -> completion <= {HANDOFF_RATIO:g}x Dramatiq enqueue -> start",
                   ratio <= HANDOFF_RATIO,
                   f"{ratio:.3f}x over {len(every)} messages "
                   f"({percentile(every, 50) * 1000:.1f} vs "
                   f"{percentile(every_pick, 50) * 1000:.1f} ms)")


async def _wakeup(ctx: Context, flows: object, stamps: redis.Redis, url: str) -> None:
    report = ctx.report
    units = flows.units  # type: ignore[attr-defined]
    written = flows.WRITTEN_KEY  # type: ignore[attr-defined]
    samples = ctx.pick(full=40, quick=5)
    ours: list[float] = []
    floor: list[float] = []
    woken: list[list[float]] = []
    floors: list[list[float]] = []
    for _ in range(ctx.reps):
        settle()
        found: list[float] = []
        for _ in range(samples):
            run = await units.run()
            if run.status is not rf.Status.COMPLETED:
                raise RuntimeError(f"units run ended {run.status}: {run.error}")
            noted = stamps.hget(written, run.id)
            while noted is None:  # the worker notes it right after the write
                await asyncio.sleep(0.001)
                noted = stamps.hget(written, run.id)
            found.append(run.value - float(noted))
        published = await _pubsub_floor(url, samples)
        woken.append(found)
        floors.append(published)
        ours.append(percentile(found, 50))
        floor.append(percentile(published, 50))
    mine, base = Spread.of(ours).scaled(1e6), Spread.of(floor).scaled(1e6)
    report.distribution("reactorflow: async_step reader wake-up", woken, group="reader wake-up")
    report.distribution("baseline: PUBLISH -> subscriber", floors, group="reader wake-up")
    ratio = Spread.of([a / b for a, b in zip(ours, floor, strict=True)])
    report.row("reactorflow: unit record write -> reader runs, p50", mine, "µs",
               "unit in the worker process, reader in this one")
    report.row("baseline: PUBLISH (other process) -> subscriber, p50", base, "µs")
    report.row("ratio", ratio, "x")
    report.verdict("async_step reader wake-up <= 2x the raw pub/sub floor", ratio.median <= 2.0,
                   f"{ratio.median:.2f}x ({mine.median:.0f} vs {base.median:.0f} µs)")
    polled = await _polling_baseline(ctx, flows, stamps)
    report.row("baseline: a reader polling every 1 s, median", polled * 1e6, "µs",
               f"{polled / (mine.median / 1e6):,.0f}x the notified reader")


async def _polling_baseline(ctx: Context, flows: object, stamps: redis.Redis) -> float:
    """A reader that re-reads the unit's record every second instead of subscribing: how long
    after the write starts it sees the record (measured: dispatched runs, a real poll loop)."""
    units = flows.units  # type: ignore[attr-defined]
    written = flows.WRITTEN_KEY  # type: ignore[attr-defined]
    storage = rf.RedisStorage.from_url(os.environ["REACTORFLOW_REDIS_URL"],
                                       namespace=os.environ["RF_BENCH_NAMESPACE"])
    found: list[float] = []
    try:
        for _ in range(ctx.pick(full=6, quick=2)):
            run = await units.dispatch()
            await asyncio.sleep(random.random())  # a poller's phase is unrelated to the write
            while True:
                raw = await storage.load_step(run.id, "unit")
                if raw is not None and records.decode_step(raw).status == "completed":
                    break
                await asyncio.sleep(1.0)
            seen = time.time()
            found.append(seen - float(stamps.hget(written, run.id) or seen))
            await units.wait(run.id, timeout=30)
    finally:
        await storage.aclose()
    return percentile(found, 50)


async def _pubsub_floor(url: str, samples: int) -> list[float]:
    """PUBLISH from a separate process -> this process's subscriber awake (seconds)."""
    client = redis.asyncio.Redis.from_url(url)
    pubsub = client.pubsub()
    await pubsub.subscribe("rfbench:floor")
    await pubsub.get_message(timeout=1)  # the subscribe confirmation
    code = ("import redis, time\n"
            f"r = redis.Redis.from_url({url!r})\n"
            f"for _ in range({samples}):\n"
            "    time.sleep(0.02)\n"
            "    r.publish('rfbench:floor', repr(time.time()))\n")
    publisher = subprocess.Popen([sys.executable, "-c", code])
    found: list[float] = []
    try:
        while len(found) < samples:
            message = await pubsub.get_message(timeout=5, ignore_subscribe_messages=True)
            if message is None:
                break
            found.append(time.time() - float(message["data"]))
    finally:
        publisher.wait(30)
        await pubsub.aclose()
        await client.aclose()
    return found
