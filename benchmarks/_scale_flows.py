"""The 5-step reactor of the `scale` benchmark, imported by the benchmark and by the
`reactorflow worker` processes it starts (storage URL, broker URL and namespace from the
environment: the storage may be a Redis Cluster, the broker is a RedisBroker on a plain Redis)."""

from __future__ import annotations

import os

from dramatiq.brokers.redis import RedisBroker

import reactorflow as rf

STORAGE_ENV = "RF_BENCH_SCALE_STORAGE"
BROKER_ENV = "RF_BENCH_SCALE_BROKER"
NAMESPACE_ENV = "RF_BENCH_SCALE_NAMESPACE"

if os.environ.get(STORAGE_ENV):
    _namespace = os.environ[NAMESPACE_ENV]
    rf.configure(storage=rf.RedisStorage.from_url(os.environ[STORAGE_ENV], namespace=_namespace,
                                                  retention=3600),
                 broker=RedisBroker(url=os.environ[BROKER_ENV],
                                    namespace=f"{_namespace}-dramatiq"))

five = rf.Reactor("bench.scale.five")


@five.step
async def s1() -> int:
    return 1


@five.step
async def s2(s1: int) -> int:
    return s1 + 1


@five.step
async def s3(s2: int) -> int:
    return s2 + 1


@five.step
async def s4(s3: int) -> int:
    return s3 + 1


@five.step
async def s5(s4: int) -> int:
    return s4 + 1


# One step that says which worker process ran it: the benchmark dispatches these until every
# process it started has answered, so no process is still starting up while it measures.
probe = rf.Reactor("bench.scale.probe")


@probe.step
async def pid() -> int:
    return os.getpid()
