"""The fanned-out map and the plain Dramatiq actor of `map_fanout`, imported by the benchmark
and by the `reactorflow worker` processes it starts (configuration from the environment)."""

from __future__ import annotations

import os

import dramatiq
import msgspec
import redis
from dramatiq.brokers.redis import RedisBroker

import reactorflow as rf

URL = os.environ["REACTORFLOW_REDIS_URL"]
NAMESPACE = os.environ.get("RF_BENCH_NAMESPACE", "rfbench-mapfan")
DONE_KEY = f"{NAMESPACE}:raw-done"
BATCH_SIZE = int(os.environ.get("RF_BENCH_MAP_BATCH", "500"))

broker = RedisBroker(url=URL)
rf.configure(storage=rf.RedisStorage.from_url(URL, namespace=NAMESPACE), broker=broker)
_counter = redis.Redis.from_url(URL)


@dramatiq.actor(broker=broker, queue_name="reactorflow", max_retries=0)
def trivial(index: int) -> None:
    """Dramatiq's own baseline: a trivial message that notes it ran."""
    _counter.incr(DONE_KEY)


class Items(msgspec.Struct):
    items: list[int]


fleet = rf.Reactor("bench.map.fanout", inputs=Items)


@fleet.map_step(over="items", fan_out=True, batch_size=BATCH_SIZE)
async def element(item: int) -> int:
    return item
