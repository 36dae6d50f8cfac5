"""The scheduled reactor of `schedule_latency`, imported by the `reactorflow scheduler` and
`reactorflow worker` processes it starts (configuration from the environment).

In a scheduler process (RF_BENCH_WARP set) the engine's clock (`reactorflow.clock`) runs WARP
times faster than real time from RF_BENCH_ORIGIN (epoch seconds, when both times agree): a
minutely cron expression ticks every 60 / WARP real seconds. Only time is scaled: every storage
operation, dispatch and sleep of the scheduler runs as it would, and a sleep ends when the real
time reaches the scaled deadline, so a late wake-up is late by the same real milliseconds.
"""

from __future__ import annotations

import os
import time
from contextlib import AbstractContextManager
from datetime import datetime

import anyio
import msgspec
import redis
from dramatiq.brokers.redis import RedisBroker

import reactorflow as rf
from reactorflow import clock

URL = os.environ["REACTORFLOW_REDIS_URL"]
NAMESPACE = os.environ.get("RF_BENCH_NAMESPACE", "rfbench-schedules")
WARP = float(os.environ.get("RF_BENCH_WARP") or 0)
ORIGIN = float(os.environ.get("RF_BENCH_ORIGIN") or 0)
STARTED_KEY = f"{NAMESPACE}:bench:step-started"
"""A hash: tick (`Tick.at`) -> when its run's step started in the worker (real epoch seconds)."""


class Warped:
    """The engine's clock, `factor` times faster than real time from `origin`."""

    def __init__(self, origin: float, factor: float) -> None:
        self.origin = origin
        self.factor = factor

    def now(self) -> float:
        return self.origin + (time.time() - self.origin) * self.factor

    def monotonic(self) -> float:
        return time.monotonic() * self.factor

    async def sleep(self, seconds: float) -> None:
        await anyio.sleep(max(seconds, 0.0) / self.factor)

    def move_on_after(self, seconds: float | None) -> AbstractContextManager[anyio.CancelScope]:
        return anyio.move_on_after(None if seconds is None else seconds / self.factor)


def real(virtual: float, origin: float, factor: float) -> float:
    """The real epoch time at which a warped clock reads `virtual`."""
    return origin + (virtual - origin) / factor


if WARP:
    clock.use(Warped(ORIGIN, WARP))

rf.configure(storage=rf.RedisStorage.from_url(URL, namespace=NAMESPACE, retention=3600),
             broker=RedisBroker(url=URL, namespace=f"{NAMESPACE}-dramatiq"))
_stamps = redis.Redis.from_url(URL)


class Tick(msgspec.Struct):
    at: float  # the tick, epoch seconds on the scheduler's (warped) clock


def at_tick(tick: datetime) -> Tick:
    return Tick(at=tick.timestamp())


scheduled = rf.Reactor("bench.schedules.minutely", inputs=Tick,
                       schedules=[rf.Schedule("* * * * *", inputs=at_tick)])


@scheduled.step
async def started(at: float) -> float:
    _stamps.hsetnx(STARTED_KEY, repr(at), repr(time.time()))
    return at
