"""Run idempotency keys: one run per key, whatever the concurrency."""

from __future__ import annotations

import anyio
import msgspec
import pytest

import reactorflow as rf
from tests.helpers import unique


class Numbers(msgspec.Struct):
    n: int


def _flow(bodies: list[int]) -> rf.Reactor:
    flow = rf.Reactor(unique("idem"), inputs=Numbers)

    @flow.step
    async def double(n: int) -> int:
        bodies.append(n)
        await anyio.sleep(0.05)  # the other callers arrive while the first run executes
        return 2 * n

    return flow


async def test_concurrent_runs_with_one_key_create_one_run(storage: rf.Storage) -> None:
    bodies: list[int] = []
    flow = _flow(bodies)
    ids: list[str] = []

    async def start(index: int) -> None:
        run = await flow.run(n=index, idempotency_key="k")
        ids.append(run.id)

    async with anyio.create_task_group() as tg:
        for index in range(20):
            tg.start_soon(start, index)

    assert len(ids) == 20
    assert len(set(ids)) == 1
    (run_id,) = set(ids)
    assert len(bodies) == 1
    page = await flow.list_runs(limit=100)
    assert [r.id for r in page.runs] == [run_id] and page.next_cursor is None
    first = await flow.wait(run_id, timeout=5)
    assert first.status is rf.Status.COMPLETED and first.value == 2 * bodies[0]

    later = await flow.run(n=999, idempotency_key="k")  # other inputs: still the first run
    assert later.id == run_id
    assert later.status is rf.Status.COMPLETED and later.value == 2 * bodies[0]
    assert later.inputs == Numbers(bodies[0])
    assert len(bodies) == 1
    assert len((await flow.list_runs()).runs) == 1


async def test_invalid_inputs_claim_nothing(storage: rf.Storage) -> None:
    bodies: list[int] = []
    flow = _flow(bodies)
    with pytest.raises(rf.InputValidationError):
        await flow.run(n="not a number", idempotency_key="k2")
    with pytest.raises(rf.InputValidationError):
        await flow.run(idempotency_key="k2")  # missing field
    assert (await flow.list_runs()).runs == []

    run = await flow.run(n=4, idempotency_key="k2")  # the key is still free
    assert run.status is rf.Status.COMPLETED and run.value == 8
    assert bodies == [4]
    assert [r.id for r in (await flow.list_runs()).runs] == [run.id]
    assert (await flow.run(n=5, idempotency_key="k2")).id == run.id


async def test_keys_are_per_reactor_and_distinct_keys_make_distinct_runs(
        storage: rf.Storage) -> None:
    bodies: list[int] = []
    one, two = _flow(bodies), _flow(bodies)
    a = await one.run(n=1, idempotency_key="same")
    b = await two.run(n=2, idempotency_key="same")
    c = await one.run(n=3, idempotency_key="other")
    assert len({a.id, b.id, c.id}) == 3
    assert sorted(bodies) == [1, 2, 3]


# -- a claimer that died before storing its run (issue 8, defect 8) ---------------------------


async def test_claim_of_a_start_that_died_before_storing_is_taken_over(
        storage: rf.Storage) -> None:
    bodies: list[int] = []
    flow = _flow(bodies)
    dead = "dead-claimer-run"
    assert await storage.acquire_lock(dead, "dead-owner", 0.3)  # lapses: nobody extends it
    assert await storage.claim_idempotency(flow.name, "k3", dead) == dead

    run = await flow.run(n=7, idempotency_key="k3")
    assert run.id != dead
    assert run.status is rf.Status.COMPLETED and run.value == 14
    assert run.replayed is False
    assert bodies == [7]

    again = await flow.run(n=8, idempotency_key="k3")
    assert again.id == run.id and again.replayed is True
    assert again.status is rf.Status.COMPLETED and again.value == 14
    assert (await flow.get(run.id)).replayed is False
    assert bodies == [7]

    # the dead start comes back late: it can no longer store its run
    late = await storage.create_run(dead, reactor=flow.name, status="running", meta=b"m",
                                    state=b"s", created_at=0.0, owner="dead-owner",
                                    lock_ttl=1.0)
    assert late is False
    with pytest.raises(rf.RunNotFound):
        await flow.get(dead)
    assert [r.id for r in (await flow.list_runs()).runs] == [run.id]


async def test_a_take_over_cut_off_before_releasing_the_claim_is_finished_by_the_next_start(
        storage: rf.Storage) -> None:
    """A take-over holds the dead claimer's lock as a tombstone, then releases the claim: cut
    off between the two (a storage outage: the chaos cluster lane's failover), it left the key
    naming a run that can never be stored, under a lock held for `retention`, and every start
    with the key failed with `LockTimeout`. The next start finishes the take-over."""
    bodies: list[int] = []
    flow = _flow(bodies)
    dead = "dead-claimer-run-2"
    assert await storage.claim_idempotency(flow.name, "k6", dead) == dead
    assert await storage.acquire_lock(dead, f"taken-over-{dead}", storage.retention)
    rf.configure(lock_ttl=1.0, lock_wait=0.5)  # (the patience a wedged key used to exhaust)

    run = await flow.run(n=5, idempotency_key="k6")
    assert run.id != dead and run.replayed is False
    assert run.status is rf.Status.COMPLETED and run.value == 10
    assert bodies == [5]
    assert (await flow.run(n=6, idempotency_key="k6")).id == run.id  # the key names it now
    assert await storage.lock_owner(dead) == f"taken-over-{dead}"  # the dead run stays barred


async def test_live_claimer_is_waited_for_not_taken_over(storage: rf.Storage) -> None:
    bodies: list[int] = []
    flow = _flow(bodies)
    first = await flow.run(n=1, idempotency_key="k4")
    assert first.replayed is False
    replays = [await flow.run(n=2, idempotency_key="k4") for _ in range(3)]
    assert {r.id for r in replays} == {first.id}
    assert all(r.replayed for r in replays)
    assert bodies == [1]


async def test_a_claimer_still_storing_its_run_is_waited_for(storage: rf.Storage) -> None:
    from reactorflow.definition.graph import plan_for
    from reactorflow.runtime.engine.ownership import new_owner
    from reactorflow.runtime.ops.creation import create_run
    from reactorflow.runtime.ops.operations import new_run_id, run_owned

    bodies: list[int] = []
    flow = _flow(bodies)
    first, owner = new_run_id(), new_owner()
    assert await storage.acquire_lock(first, owner, 30.0)  # as a start does before claiming
    assert await storage.claim_idempotency(flow.name, "k5", first) == first
    replays: list[rf.Run] = []

    async def second_start() -> None:
        replays.append(await flow.run(n=2, idempotency_key="k5"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(second_start)  # finds the key claimed, the run not yet stored
        await create_run(storage, flow, plan_for(flow), first, Numbers(1), owner)
        await run_owned(flow, storage, first, owner)
    assert [r.id for r in replays] == [first] and replays[0].replayed is True
    assert bodies == [1]  # the second start started nothing
    assert [r.id for r in (await flow.list_runs()).runs] == [first]
