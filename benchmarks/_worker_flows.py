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


class _JobStarts(dramatiq.Middleware):
    """Dramatiq's own start of each run job (`before_process_message`, in the worker thread,
    before reactorflow's actor body runs), noted in Redis only once the job is over: a write
    inside the job would add its round trip to reactorflow's figure."""

    def __init__(self) -> None:
        self.started: dict[str, float] = {}

    def before_process_message(self, broker: dramatiq.Broker, message: Any) -> None:
        if message.actor_name == "reactorflow.execute_run":
            self.started.setdefault(message.message_id, time.time())

    def after_process_message(self, broker: dramatiq.Broker, message: Any, *,
                              result: Any = None, exception: Any = None) -> None:
        started = self.started.pop(message.message_id, None)
        if started is not None:
            _stamps.hsetnx(STARTED_KEY, str(message.args[0]), repr(started))


def _instrument_worker() -> None:
    """In the worker: note when Dramatiq starts a run's job, and when a unit's record write
    starts (that write publishes)."""
    from reactorflow.runtime.services import job_handling as bodies

    report = bodies.report

    async def noted_report(storage: Any, run_id: str, key: str, record: Any,
                           events: Any, **options: Any) -> None:
        started = time.time()  # noted after the write, so the noting does not delay it
        await report(storage, run_id, key, record, events, **options)
        _stamps.hset(WRITTEN_KEY, run_id, repr(started))

    bodies.report = noted_report  # type: ignore[assignment]
    broker.add_middleware(_JobStarts())


if os.environ.get("RF_BENCH_WORKER"):
    _instrument_worker()
