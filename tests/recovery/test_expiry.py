"""The sweeper expires paused runs whose interrupt deadline passed: rolled back to failed."""

from __future__ import annotations

import pytest

import reactorflow as rf
from tests.helpers import kinds, unfired, unique, until_past


def _flow(log: list[str], timeout: float | None) -> rf.Reactor:
    flow = rf.Reactor(unique("expiry"))

    @flow.step
    async def hold() -> str:
        log.append("hold")
        return "seat"

    @hold.undo
    async def release(result: str) -> None:
        log.append(f"release {result}")

    @flow.step
    async def unrelated() -> str:
        return "no undo"

    @flow.interrupt(timeout=timeout)
    async def confirm(payload: bool, hold: str) -> bool:
        log.append("confirm")
        return payload

    @flow.step
    async def book(confirm: bool) -> str:
        log.append("book")
        return "booked"

    return flow


async def test_overdue_interrupt_is_expired_and_rolled_back(storage: rf.Storage) -> None:
    log: list[str] = []
    flow = _flow(log, timeout=2.0)  # the early sweep below has 2 s to happen before it
    paused = await flow.run()
    await unfired(paused)
    assert paused.status is rf.Status.PAUSED and paused.timeout_at is not None

    early = await rf.sweep_once()  # before the deadline: left waiting
    assert paused.id not in early.expired + early.failed + early.recovered
    assert (await flow.get(paused.id)).status is rf.Status.PAUSED

    await until_past(paused.timeout_at)
    report = await rf.sweep_once()
    assert report.expired == [paused.id]
    assert report.recovered == report.failed == report.skipped == []

    run = await flow.get(paused.id)
    assert run.status is rf.Status.FAILED
    assert run.error is not None and run.error.type == "InterruptExpired"
    assert run.error.step == "confirm"
    assert "confirm" in run.error.message
    assert log == ["hold", "release seat"]  # rolled back; the interrupt never ran
    assert run.steps["hold"].status == "undone"
    assert run.steps["confirm"].status == "skipped"  # it never got a payload
    assert run.steps["book"].status == "pending"
    assert run.waiting_on == []
    assert await storage.lock_owner(paused.id) is None

    again = await rf.sweep_once()
    assert paused.id not in again.expired + again.failed + again.recovered
    assert kinds(await flow.get(paused.id)) == kinds(run)  # untouched
    with pytest.raises(rf.InterruptExpired) as info:  # api.md §3: also after a sweep expired it
        await flow.continue_(paused.id, step="confirm", payload=True)
    assert info.value.timeout_at == paused.timeout_at and info.value.label == "confirm"
    with pytest.raises(rf.NotPaused):  # another interrupt name: not the one that expired
        await flow.continue_(paused.id, step="book", payload=True)
    assert log == ["hold", "release seat"]


async def test_only_overdue_runs_are_expired(storage: rf.Storage) -> None:
    log: list[str] = []
    quick, patient = _flow(log, timeout=0.5), _flow(log, timeout=60)
    forever = _flow(log, timeout=None)
    overdue = await quick.run()
    await unfired(overdue)
    waiting = await patient.run()
    await unfired(waiting)
    untimed = await forever.run()
    await unfired(untimed)
    await until_past(overdue.timeout_at)

    report = await rf.sweep_once()
    assert report.expired == [overdue.id]
    assert (await quick.get(overdue.id)).status is rf.Status.FAILED
    assert (await patient.get(waiting.id)).status is rf.Status.PAUSED
    assert (await forever.get(untimed.id)).status is rf.Status.PAUSED

    done = await patient.continue_(waiting.id, step="confirm", payload=True)
    assert done.status is rf.Status.COMPLETED and done.value == "booked"


async def test_paused_run_held_by_another_execution_is_not_expired(storage: rf.Storage) -> None:
    log: list[str] = []
    flow = _flow(log, timeout=0.5)
    paused = await flow.run()
    await unfired(paused)
    assert await storage.acquire_lock(paused.id, "someone-else", 60.0)
    await until_past(paused.timeout_at)
    report = await rf.sweep_once()
    assert paused.id not in report.expired
    assert (await flow.get(paused.id)).status is rf.Status.PAUSED
    assert await storage.release_lock(paused.id, "someone-else") == 0

    report = await rf.sweep_once()
    assert report.expired == [paused.id]
    assert (await flow.get(paused.id)).status is rf.Status.FAILED


async def test_expired_interrupt_is_not_left_waiting(storage: rf.Storage) -> None:
    log: list[str] = []
    flow = _flow(log, timeout=0.5)
    paused = await flow.run()
    await unfired(paused)
    await until_past(paused.timeout_at)
    assert (await rf.sweep_once()).expired == [paused.id]
    run = await flow.get(paused.id)
    assert run.status is rf.Status.FAILED
    assert run.steps["confirm"].status == "skipped"
    assert run.waiting_on == []
