"""Migrations of runs parked at each kind of wait (api.md §14), on both backends through the
test kit: a run with a composed child, a fanned-out map in flight, a sleeping run, an async
unit out; and a job for a version no worker has, handed back until the patience runs out."""

from __future__ import annotations

from datetime import timedelta

import anyio
import msgspec
import pytest

import reactorflow as rf
from reactorflow.runtime.engine import job_queue as queue
from reactorflow.testing import Environment
from tests.helpers import unique


class Approval(msgspec.Struct):
    ok: bool


@pytest.fixture(params=["rf_env", "rf_redis_env"])
def env(request: pytest.FixtureRequest) -> Environment:
    return request.getfixturevalue(request.param)  # type: ignore[no-any-return]


async def test_a_run_with_a_composed_child_migrates_with_its_child_steps(
        env: Environment) -> None:
    log: list[str] = []
    child = rf.Reactor(unique("pack"))

    @child.step
    async def pack() -> str:
        log.append("pack")
        return "box"

    @child.step
    async def label(pack: str) -> str:
        log.append("label")
        return f"label for {pack}"

    name = unique("ship")
    v1 = rf.Reactor(name, version=1)

    @v1.compose(child)
    async def ship() -> None:  # the child takes no inputs
        return None

    @v1.interrupt
    async def approve(ship: str, payload: Approval) -> bool:
        return payload.ok

    run = await v1.run()
    assert run.status is rf.Status.PAUSED and log == ["pack", "label"]

    v2 = rf.Reactor(name, version=2)

    @v2.compose(child)
    async def delivery() -> None:
        return None

    @v2.interrupt(name="approve")
    async def approve_v2(delivery: str, payload: Approval) -> bool:
        return payload.ok

    @v2.step
    async def notify(approve: bool, delivery: str) -> str:
        log.append(f"notify {delivery}")
        return "sent"

    @v2.migrate(from_version=1)
    def moved(run: rf.Migration) -> None:
        run.rename("ship", "delivery")  # and its child's steps with it

    with env.undeclared(v1):
        done = await v2.continue_(run.id, step="approve", payload={"ok": True})
    assert done.status is rf.Status.COMPLETED and done.version == 2
    assert {"delivery", "delivery.pack", "delivery.label"} <= set(done.steps)
    assert log == ["pack", "label", "notify label for box"]  # the child never ran again


async def test_a_run_parked_at_a_fanned_out_map_migrates_and_its_later_elements_run_on_v2(
        env: Environment) -> None:
    log: list[str] = []
    name = unique("fan")
    started = anyio.Event()
    release = anyio.Event()

    def declare(version: int) -> rf.Reactor:
        flow = rf.Reactor(name, version=version)

        @flow.step
        async def items() -> list[int]:
            return [1, 2, 3]

        @flow.map_step(over="items", fan_out=True, batch_size=2)
        async def double(item: int) -> int:
            if version == 1:
                started.set()
                await release.wait()
            log.append(f"v{version} double {item}")
            return item * 2

        @flow.step
        async def total(double: list[int]) -> int:
            log.append(f"v{version} total")
            return sum(double)

        return flow

    v1 = declare(1)
    run = await v1.run()
    assert run.status is rf.Status.RUNNING  # parked at the map: two elements out (batch 2)
    await started.wait()
    with env.undeclared(v1):
        v2 = declare(2)
        v2.migrate(from_version=1)(lambda run: None)  # the same graph: nothing to change
        moved = await v2.migrate(run.id)
        assert moved.version == 2 and moved.status is rf.Status.RUNNING
        release.set()  # the elements in flight finish on the code that started them...
        await env.drain()  # ...and the one sent after them finds the run on version 2
        done = await v2.get(run.id)
    assert done.status is rf.Status.COMPLETED and done.steps["total"].result == 12
    assert sorted(log) == ["v1 double 1", "v1 double 2", "v2 double 3", "v2 total"]


async def test_a_sleeping_run_migrates_without_waking_and_wakes_on_v2(env: Environment) -> None:
    log: list[str] = []
    name = unique("nap")

    def declare(version: int) -> rf.Reactor:
        flow = rf.Reactor(name, version=version)

        @flow.step
        async def order() -> str:
            return "O1"

        @flow.sleep
        async def cool_off(order: str) -> timedelta:
            return timedelta(hours=1)

        @flow.step(name="remind" if version == 1 else "nudge")
        async def remind(cool_off: object, order: str) -> str:
            log.append(f"v{version} {order}")
            return "reminded"

        return flow

    v1 = declare(1)
    run = await v1.run()
    assert run.status is rf.Status.RUNNING and run.steps["cool_off"].wake_at is not None
    with env.undeclared(v1):
        v2 = declare(2)

        @v2.migrate(from_version=1)
        def nothing_ran_yet(run: rf.Migration) -> None:
            assert "remind" not in run.steps

        moved = await v2.migrate(run.id)
        assert moved.version == 2 and moved.steps["cool_off"].status == rf.StepStatus.WAITING
        assert log == []  # not woken
        await env.clock.advance(timedelta(hours=1).total_seconds())
        await env.drain()
        done = await v2.get(run.id)
    assert done.status is rf.Status.COMPLETED and log == ["v2 O1"]


async def test_a_job_for_a_version_no_worker_has_fails_its_run_after_the_patience(
        env: Environment) -> None:
    name = unique("stray")
    v1 = rf.Reactor(name, version=1)

    @v1.interrupt
    async def approve(payload: Approval) -> bool:
        return payload.ok

    run = await v1.run()
    rf.configure(version_patience=30.0)
    with env.undeclared(v1):
        newer = rf.Reactor(name, version=2)  # this "worker" has version 2, no migration

        @newer.step
        async def other() -> int:
            return 1

        queue.enqueue_run(run.id, name, version=1)
        await env.drain()  # handed back (not failed): it waits for a worker with version 1
        assert (await newer.get(run.id)).status is rf.Status.PAUSED
        await env.clock.advance(10.0)
        await env.drain()
        assert (await newer.get(run.id)).status is rf.Status.PAUSED
        await env.clock.advance(25.0)  # past the patience since the first refusal
        await env.drain()
        failed = await newer.get(run.id)
    assert failed.status is rf.Status.FAILED and failed.error is not None
    assert failed.error.type == "DefinitionChanged" and "version 1" in failed.error.message
