"""`continue_` checks, claims, locks and marks the run `running` in one storage call
(`claim_and_lock` with a `ResumeCheck`), on memory, Redis and the Redis Cluster; what that call
cannot decide (a compatible change of the graph) still resumes through the caller's checks."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

import reactorflow as rf
from reactorflow.storage.redis.storage import RedisStorage
from tests.conftest import ALL_BACKENDS, on_every
from tests.helpers import redeploy, unique
from tests.storage.test_contract import _commands_during


@pytest.fixture(params=ALL_BACKENDS)
async def storage(request: pytest.FixtureRequest) -> AsyncIterator[rf.Storage]:
    async for backend in on_every(request):
        yield backend


class Seen:
    """The run's id, and its status as `approve`'s body saw it."""

    def __init__(self) -> None:
        self.run_id = ""
        self.statuses: list[rf.Status] = []


def _flow(name: str, seen: Seen, *, extra: bool = False) -> rf.Reactor:
    """`prep` -> interrupt `approve` (records the run's status while its body runs) -> `finish`;
    with `extra`, one more step (a compatible change of the graph)."""
    flow = rf.Reactor(name)

    @flow.step
    async def prep() -> int:
        return 1

    @flow.interrupt
    async def approve(payload: int, prep: int) -> int:
        if seen.run_id:  # (not when counting commands)
            seen.statuses.append((await flow.get(seen.run_id)).status)
        return payload + prep

    @flow.step
    async def finish(approve: int) -> int:
        return approve + 1

    if extra:
        @flow.step
        async def audit(finish: int) -> int:
            return finish

    return flow


async def test_continue_shows_the_run_running_while_the_interrupt_body_runs(
        storage: rf.Storage) -> None:
    seen = Seen()
    flow = _flow(unique("trips"), seen)
    paused = await flow.run()
    seen.run_id = paused.id
    run = await flow.continue_(paused.id, step="approve", payload=41)
    assert run.status is rf.Status.COMPLETED and run.value == 43
    assert seen.statuses == [rf.Status.RUNNING]
    assert [e.kind for e in run.history].count("run.resumed") == 1
    assert [r.id for r in (await flow.list_runs(status="completed")).runs] == [paused.id]
    assert (await flow.list_runs(status="paused")).runs == []
    assert (await flow.list_runs(status="running")).runs == []


async def test_continue_after_a_compatible_change_of_the_graph(storage: rf.Storage) -> None:
    """The stored graph is not the current one, but only grew: the storage's check cannot
    tell, the caller's can, and the run resumes (one step more)."""
    name = unique("grown")
    seen = Seen()
    old = _flow(name, seen)
    paused = await old.run()
    seen.run_id = paused.id
    redeploy(old)
    grown = _flow(name, seen, extra=True)
    run = await grown.continue_(paused.id, step="approve", payload=41)
    assert run.status is rf.Status.COMPLETED and run.value == 43
    assert seen.statuses == [rf.Status.RUNNING]
    assert run.steps["audit"].status == "completed"


async def test_redis_continue_reads_nothing_before_its_claim(redis_url: str) -> None:
    """No head read first: the checks are made by the claim's own script."""
    storage = RedisStorage.from_url(redis_url, namespace=unique("ns"))
    rf.configure(storage=storage)
    seen = Seen()
    flow = _flow(unique("trips"), seen)
    try:
        paused = await flow.run()
        found: list[Any] = []

        async def resume() -> None:
            found.append(await flow.continue_(paused.id, step="approve", payload=41))

        commands = [c["command"].split(" ", 1)[0] for c in
                    await _commands_during(redis_url, resume) if c["client_type"] != "lua"]
    finally:
        await storage.aclose()
    assert found[0].status is rf.Status.COMPLETED
    assert commands[0] == "EVALSHA"
    assert all(c == "EVALSHA" for c in commands), commands
