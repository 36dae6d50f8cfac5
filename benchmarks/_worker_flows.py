"""Reactors and a plain Dramatiq actor for `worker_latency`, imported both by the benchmark
and by the `reactorflow worker` process it starts (configuration from the environment)."""

from __future__ import annotations

import os
import time
from typing import Any

import dramatiq
import redis
from dramatiq.brokers.redis import RedisBroker

import reactorflow as rf

URL = os.environ["REACTORFLOW_REDIS_URL"]
NAMESPACE = os.environ.get("RF_BENCH_NAMESPACE", "rfbench-workers")
PICKUP_KEY = "rfbench:pickup"
WRITTEN_KEY = "rfbench:unit-written"
STARTED_KEY = "rfbench:run-job-started"

broker = RedisBroker(url=URL)
rf.configure(storage=rf.RedisStorage.from_url(URL, namespace=NAMESPACE), broker=broker)
_stamps = redis.Redis.from_url(URL)


@dramatiq.actor(broker=broker, queue_name="rfbench", max_retries=0)
def ping(sent_at: float) -> None:
    """Dramatiq's own enqueue -> start: the worker notes how long the message took."""
    _stamps.rpush(PICKUP_KEY, repr(time.time() - sent_at))


one_step = rf.Reactor("bench.workers.one_step")


@one_step.step
async def only() -> int:
    return 1


units = rf.Reactor("bench.workers.units")


@units.async_step
async def unit() -> str:
    return "u"


@units.step
async def reader(unit: str) -> float:
    return time.time()  # when the reader was woken and ran


def _instrument_worker() -> None:
    """In the worker: note when a run's job starts, and when a unit's record write starts
    (that write publishes)."""
    from reactorflow.runtime.services import job_handling as bodies
    from reactorflow.workers import jobs

    report, execute_run = bodies.report, jobs.execute_run

    async def noted_report(storage: Any, run_id: str, key: str, record: Any,
                           events: Any) -> None:
        started = time.time()  # noted after the write, so the noting does not delay it
        await report(storage, run_id, key, record, events)
        _stamps.hset(WRITTEN_KEY, run_id, repr(started))

    async def noted_run(run_id: str, reactor_name: str, snoozes: int = 0) -> None:
        started = time.time()  # noted after the job, so the noting does not delay the run
        try:
            await execute_run(run_id, reactor_name, snoozes)
        finally:
            _stamps.hsetnx(STARTED_KEY, run_id, repr(started))

    bodies.report = noted_report  # type: ignore[assignment]
    jobs.execute_run = noted_run  # type: ignore[assignment]


if os.environ.get("RF_BENCH_WORKER"):
    _instrument_worker()
