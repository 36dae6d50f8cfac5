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


def _instrument_unit_writes() -> None:
    """In the worker: note when a unit's record write starts (the write publishes)."""
    from reactorflow.workers import jobs

    original = jobs.report

    async def noted(storage: Any, run_id: str, key: str, record: Any, events: Any) -> None:
        _stamps.hset(WRITTEN_KEY, run_id, repr(time.time()))
        await original(storage, run_id, key, record, events)

    jobs.report = noted  # type: ignore[assignment]


if os.environ.get("RF_BENCH_WORKER"):
    _instrument_unit_writes()
