"""Fan-out: a map of 10,000 trivial elements run by 2 `reactorflow worker` processes x 8
threads, against raw Dramatiq draining 10,000 trivial messages on the same workers (same broker,
same queue, same run of the benchmark)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import anyio
import redis

import reactorflow as rf
from benchmarks._context import Context
from benchmarks._report import Spread, ratios, settle

TITLE = "fan-out map of 10,000 elements on 2 workers x 8 threads vs raw Dramatiq, same workers"
NEEDS_REDIS = True
SIZE = 10_000
TARGET_SHARE = 1.0
ROOT = Path(__file__).resolve().parents[1]


def _start_workers(url: str, namespace: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ, REACTORFLOW_REDIS_URL=url, RF_BENCH_NAMESPACE=namespace,
               PYTHONPATH=str(ROOT))
    return subprocess.Popen(
        [sys.executable, "-m", "reactorflow", "worker", "benchmarks._map_worker_flows",
         "--processes", "2", "--threads", "8"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)


async def run(ctx: Context) -> None:
    report = ctx.report
    server = ctx.redis()
    namespace = server.namespace("mapfan")
    os.environ["REACTORFLOW_REDIS_URL"] = server.url
    os.environ["RF_BENCH_NAMESPACE"] = namespace
    from benchmarks import _map_worker_flows as flows

    size = ctx.pick(full=SIZE, quick=2_000)
    reps = ctx.pick(full=ctx.reps, quick=1)
    report.note(f"{reps} repetitions of {size:,} elements and {size:,} raw messages; workers: "
                f"reactorflow worker, 2 processes x 8 threads; map batch_size="
                f"{flows.BATCH_SIZE}")
    workers = _start_workers(server.url, namespace)
    counter = redis.Redis.from_url(server.url)
    try:
        probe = await flows.fleet.run(items=[1, 2])
        await flows.fleet.wait(probe.id, timeout=120)  # the workers are up
        ours: list[float] = []
        theirs: list[float] = []
        for _ in range(reps):
            settle()
            theirs.append(await _raw(flows, counter, size))
            settle()
            ours.append(await _map(flows, size))
    finally:
        workers.terminate()
        try:
            workers.wait(30)
        except subprocess.TimeoutExpired:
            workers.kill()
        os.environ.pop("REACTORFLOW_REDIS_URL", None)
    ours_rate = [size / t for t in ours]
    raw_rate = [size / t for t in theirs]
    share = ratios(ours_rate, raw_rate)
    report.row("reactorflow: fan-out map, elements/s", Spread.of(ours_rate), "/s",
               f"run() -> wait() completed, {size:,} elements")
    report.row("baseline: raw Dramatiq, messages/s", Spread.of(raw_rate), "/s",
               f"{size:,} trivial messages enqueued at once")
    report.row("share of Dramatiq's throughput", share, "x")
    report.verdict(f"fan-out map >= {TARGET_SHARE:.0%} of raw Dramatiq's throughput",
                   share.median >= TARGET_SHARE,
                   f"{share.median:.0%} ({Spread.of(ours_rate).median:,.0f} vs "
                   f"{Spread.of(raw_rate).median:,.0f} per second)")


async def _raw(flows: object, counter: redis.Redis, size: int) -> float:
    key = flows.DONE_KEY  # type: ignore[attr-defined]
    actor = flows.trivial  # type: ignore[attr-defined]
    broker = flows.broker  # type: ignore[attr-defined]
    counter.delete(key)
    start = time.perf_counter()
    messages = [actor.message(i) for i in range(size)]
    for message in messages:
        broker.enqueue(message)
    while int(counter.get(key) or 0) < size:
        await anyio.sleep(0.01)
    return time.perf_counter() - start


async def _map(flows: object, size: int) -> float:
    fleet = flows.fleet  # type: ignore[attr-defined]
    start = time.perf_counter()
    run = await fleet.run(items=list(range(size)))
    done = await fleet.wait(run.id, timeout=3600)
    elapsed = time.perf_counter() - start
    if done.status is not rf.Status.COMPLETED:
        raise RuntimeError(f"the map ended {done.status}: {done.error}")
    return elapsed
