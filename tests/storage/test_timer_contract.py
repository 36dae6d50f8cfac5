"""The timers of the storage contract, on every backend (memory, Redis, and the Redis Cluster
of the cluster lane): one per run, claimed first-wins with a lease, disarmed compare-and-delete,
and a claim that reads only what is due."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import anyio
import pytest

from reactorflow.storage.contract.storage import Storage
from reactorflow.storage.contract.values import DueTimer
from tests.conftest import ALL_BACKENDS, on_every


@pytest.fixture(params=ALL_BACKENDS)
async def storage(request: pytest.FixtureRequest) -> AsyncIterator[Storage]:
    async for backend in on_every(request):
        yield backend


def run_id() -> str:
    return f"run-{uuid.uuid4().hex[:10]}"


async def test_a_due_timer_is_claimed_with_its_reactor_and_due_time(storage: Storage) -> None:
    r = run_id()
    await storage.arm_timer(r, "checkout", 1_000.25)
    assert await storage.claim_timers(999.0, 30.0, 10) == []  # not yet due: never early
    assert await storage.timer_of(r) == 1_000.25
    claimed = await storage.claim_timers(1_000.25, 30.0, 10)
    assert claimed == [DueTimer(r, "checkout", 1_000.25, 1_030.25)]
    assert await storage.timer_of(r) == 1_030.25  # leased, not gone


async def test_arming_again_moves_the_one_timer_of_the_run(storage: Storage) -> None:
    r = run_id()
    await storage.arm_timer(r, "checkout", 2_000.0)
    await storage.arm_timer(r, "checkout", 1_500.0)
    assert await storage.next_timer() == 1_500.0
    assert [t.due for t in await storage.claim_timers(5_000.0, 10.0, 10)] == [1_500.0]


async def test_of_concurrent_claims_exactly_one_gets_each_timer(storage: Storage) -> None:
    runs = [run_id() for _ in range(30)]
    for i, r in enumerate(runs):
        await storage.arm_timer(r, "nightly", 100.0 + i)
    got: list[str] = []

    async def claim() -> None:
        for _ in range(5):
            got.extend(t.run_id for t in await storage.claim_timers(500.0, 60.0, 4))

    async with anyio.create_task_group() as tg:
        for _ in range(8):
            tg.start_soon(claim)
    assert sorted(got) == sorted(runs)  # each one once
    assert await storage.claim_timers(559.0, 60.0, 100) == []  # leased until 560
    again = await storage.claim_timers(560.0, 60.0, 100)  # a dead claimer's lease ran out
    assert sorted(t.run_id for t in again) == sorted(runs)


async def test_claims_come_earliest_first_up_to_the_limit(storage: Storage) -> None:
    runs = [run_id() for _ in range(5)]
    for i, r in enumerate(runs):
        await storage.arm_timer(r, "x", 50.0 - i)
    first = await storage.claim_timers(100.0, 10.0, 2)
    assert [t.run_id for t in first] == [runs[4], runs[3]]


async def test_a_disarm_after_a_claim_leaves_a_timer_armed_again_meanwhile(
        storage: Storage) -> None:
    r, s = run_id(), run_id()
    await storage.arm_timer(r, "x", 10.0)
    await storage.arm_timer(s, "x", 10.0)
    claims = {t.run_id: t for t in await storage.claim_timers(10.0, 5.0, 10)}
    await storage.arm_timer(r, "x", 99.0)  # the run parked anew before the firer disarmed
    assert await storage.disarm_timer(r, claims[r].leased_until) is False
    assert await storage.disarm_timer(s, claims[s].leased_until) is True
    assert await storage.timer_of(r) == 99.0 and await storage.timer_of(s) is None
    assert await storage.disarm_timer(r) is True  # unconditionally
    assert await storage.disarm_timer(r) is False
    assert await storage.next_timer() is None


async def test_a_claim_reads_only_what_is_due(storage: Storage) -> None:
    """Many timers not yet due, a few due: the claim returns the few (its cost is theirs: the
    benchmark measures the time; here, that nothing else is touched)."""
    later = [run_id() for _ in range(300)]
    for r in later:
        await storage.arm_timer(r, "x", 10_000.0)
    due = run_id()
    await storage.arm_timer(due, "x", 5.0)
    assert [t.run_id for t in await storage.claim_timers(6.0, 1.0, 1000)] == [due]
    assert all([await storage.timer_of(r) == 10_000.0 for r in later[:5]])
