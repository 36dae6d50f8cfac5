"""The features-compose matrix (issue 22, item 23): each kind of step produces a value that each
other kind reads, on every lane. The kinds and pairs are declared in `tests.workflows.matrix`
(one entry per kind in `PRODUCERS` and `CONSUMERS`); each pair is a test of its own here.

Lanes:
- `memory`, `redis`: that storage, with the embedded in-process worker (the default broker);
- `memory_codec`, `redis_codec`: the same with an `rf.EncryptionCodec` configured (every
  value each kind stores is sealed, and read back by the other kind);
- `testkit`, `testkit_redis`: `reactorflow.testing.Environment` (what `rf_env` and
  `rf_redis_env` give a user's test) on memory and on Redis, its in-test queue drained by the
  test;
- `workers`: Redis, and one real `reactorflow worker tests.workflows.matrix` subprocess shared
  by the whole module (one key namespace and queue for all its tests).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import anyio
import pytest

import reactorflow as rf
from reactorflow import config
from reactorflow.testing import Environment
from tests.conftest import make_storage
from tests.helpers import configured, redis_namespace
from tests.workers.test_real_workers import Shared, Workers
from tests.workflows import background as bg
from tests.workflows import matrix

LANES = ("memory", "redis", "memory_codec", "redis_codec", "testkit", "testkit_redis", "workers")
SETTLE_TIMEOUT = 30.0
"""Seconds a run may take to reach its next pause or its end (a broken hand-over waits this
long, then the test fails naming where the run stood)."""


@dataclass
class Lane:
    name: str
    env: Environment | None = None

    async def settle(self, flow: rf.Reactor, run: rf.Run) -> rf.Run:
        """The run at its next pause or its end."""
        if self.env is not None:
            await self.env.drain()
            run = await flow.get(run.id)
            while run.status is rf.Status.RUNNING and (asleep := [
                    s.wake_at for s in run.steps.values() if s.wake_at is not None]):
                await self.env.clock.advance_to(min(asleep).timestamp())  # fires its timer
                await self.env.drain()
                run = await flow.get(run.id)
            return run
        if run.status is rf.Status.RUNNING:
            return await flow.wait(run.id, timeout=SETTLE_TIMEOUT)
        return run

    async def step_settled(self, flow: rf.Reactor, run_id: str, step: str) -> rf.Run:
        """The run once `step`, a unit nobody reads (fire and forget), has its record."""
        with anyio.fail_after(SETTLE_TIMEOUT):
            while True:
                if self.env is not None:
                    await self.env.drain()
                found = await flow.get(run_id)
                if found.steps[step].status != rf.StepStatus.RUNNING:
                    return found
                await anyio.sleep(0.01)  # no notification for a unit nobody reads: look again


@pytest.fixture(scope="module")
def worker_lane(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shared]:
    """One `reactorflow worker` for the whole module, in a key namespace of its own."""
    root = tmp_path_factory.mktemp("matrix")
    gates = root / "gates"
    gates.mkdir()
    shared = Shared(redis_url, redis_namespace("matrix"), root / "notes.log")
    workers = Workers(shared, gates, module="tests.workflows.matrix", threads=4)
    try:
        yield shared
    finally:
        workers.stop()


@pytest.fixture
async def lane(request: pytest.FixtureRequest) -> AsyncIterator[Lane]:
    name = request.param
    if name in ("memory", "redis"):
        async with configured(make_storage(name, request)):
            yield Lane(name)
    elif name in ("memory_codec", "redis_codec"):
        async with configured(make_storage(name.removesuffix("_codec"), request)):
            rf.configure(codec=rf.EncryptionCodec(keys={"k1": os.urandom(32)}, current="k1"))
            yield Lane(name)
    elif name == "testkit":
        async with Environment() as env:
            yield Lane(name, env)
    elif name == "testkit_redis":
        async with Environment(storage=make_storage("redis", request)) as env:
            yield Lane(name, env)
    else:
        shared: Shared = request.getfixturevalue("worker_lane")
        storage, broker = bg.namespaced(shared.url, shared.namespace)
        rf.configure(storage=storage, broker=broker, lock_ttl=2.0, stall_timeout=0.5)
        try:
            yield Lane(name)
        finally:
            config.reset()
            await storage.aclose()


PAYLOADS = {"make": matrix.MADE_PAYLOAD, "use": matrix.USE_PAYLOAD}
CASES = [pytest.param(lane, producer, consumer, id=f"{lane}-{producer}-{consumer}")
         for lane in LANES for producer, consumer in matrix.PAIRS]


@pytest.mark.parametrize(("lane", "producer", "consumer"), CASES, indirect=["lane"])
async def test_a_kind_reads_what_another_kind_made(lane: Lane, producer: str,
                                                    consumer: str) -> None:
    flow = matrix.PAIRS[(producer, consumer)]
    run = await flow.run()
    answered: list[str] = []
    while True:
        run = await lane.settle(flow, run)
        if run.status is not rf.Status.PAUSED:
            break
        [step] = run.waiting_on
        assert isinstance(step, str) and step not in answered, run.waiting_on
        answered.append(step)
        run = await flow.continue_(run.id, step=step, payload=PAYLOADS[step])
    assert run.status is rf.Status.COMPLETED, (run.status, run.error, dict(run.steps))
    skips = matrix.PRODUCERS[producer].skips
    assert answered == [s for s, kind in (("make", producer), ("use", consumer))
                        if kind == "interrupt" and not (skips and s == "use")]
    made = rf.StepStatus.SKIPPED if skips else rf.StepStatus.COMPLETED
    assert run.steps["make"].status == made
    if not matrix.CONSUMERS[consumer].readable:
        run = await lane.step_settled(flow, run.id, "use")
    assert run.steps["use"].status == made, run.steps["use"]
    if skips:
        assert run.value is None
    elif matrix.CONSUMERS[consumer].readable:
        assert run.value == matrix.EXPECTED
    else:
        assert run.steps["use"].result == matrix.EXPECTED
