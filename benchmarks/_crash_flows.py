"""The reactor of `crash_resume`, imported both by the benchmark and by the `reactorflow worker`
processes it starts (configuration from the environment: the Redis URL, the namespace, and
`RF_BENCH_LOCK_TTL` when the run lock's TTL is not the default)."""

from __future__ import annotations

import os
import time

import redis
from dramatiq.brokers.redis import RedisBroker

import reactorflow as rf

URL = os.environ["REACTORFLOW_REDIS_URL"]
NAMESPACE = os.environ.get("RF_BENCH_NAMESPACE", "rfbench-crash")
STARTS_KEY = "rfbench:crash:starts:"  # + run id: "<pid> <time>" per start of `hold`
FIRST_KEY = "rfbench:crash:first:"  # + run id: the pid of the first start (first wins)
NEXT_KEY = "rfbench:crash:next"  # hash: run id -> "<pid> <time>" when `carry_on` starts
BLOCK_SECONDS = 3600.0

_ttl = os.environ.get("RF_BENCH_LOCK_TTL")
rf.configure(storage=rf.RedisStorage.from_url(URL, namespace=NAMESPACE),
             broker=RedisBroker(url=URL), **({"lock_ttl": float(_ttl)} if _ttl else {}))
_stamps = redis.Redis.from_url(URL)

crash = rf.Reactor("bench.crash")


@crash.step
async def hold(ctx: rf.StepContext) -> int:
    """Notes each start; the first one blocks its process (the benchmark kills it there), a
    re-run returns at once."""
    pid = os.getpid()
    _stamps.rpush(STARTS_KEY + ctx.run_id, f"{pid} {time.time()!r}")
    if _stamps.set(FIRST_KEY + ctx.run_id, pid, nx=True):
        time.sleep(BLOCK_SECONDS)  # blocks the event loop: the lock keeper's thread extends
    return pid


@crash.step
async def carry_on(hold: int, ctx: rf.StepContext) -> int:
    """The step after the interrupted one: when it starts, the run went on."""
    _stamps.hset(NEXT_KEY, ctx.run_id, f"{os.getpid()} {time.time()!r}")
    return hold
