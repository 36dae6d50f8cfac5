"""Firing in real time: five concurrent firers (and this process's own firing loop) resume each
sleeping run once, on both backends; and a timer that falls due while Redis is down fires late,
once, after the restart (append-only file, fsync always)."""

from __future__ import annotations

import collections
import uuid

import anyio
import msgspec

import reactorflow as rf
from tests.recovery.test_start_outage import Server, server, storage_on

__all__ = ["server", "storage_on"]  # fixtures


class Nap(msgspec.Struct):
    n: int


def napper(log: collections.Counter[int], seconds: float) -> rf.Reactor:
    flow = rf.Reactor(f"timers.fire.{uuid.uuid4().hex[:8]}", inputs=Nap)

    @flow.sleep
    async def nap(n: int) -> float:
        return seconds

    @flow.step
    async def woke(nap: object, n: int) -> int:
        log[n] += 1
        return n

    return flow


async def _settled(flow: rf.Reactor, runs: list[rf.Run]) -> list[rf.Run]:
    return [await flow.wait(run.id, timeout=30) for run in runs]


async def test_five_concurrent_firers_resume_each_run_once(storage: rf.Storage) -> None:
    log: collections.Counter[int] = collections.Counter()
    flow = napper(log, 0.5)
    runs = [await flow.run(n=n) for n in range(30)]
    assert {run.status for run in runs} == {rf.Status.RUNNING}
    await anyio.sleep(0.5)
    fired: list[rf.Run] = []

    async def firer() -> None:
        fired.extend(await rf.fire_timers())

    async with anyio.create_task_group() as tg:
        for _ in range(5):
            tg.start_soon(firer)
    done = await _settled(flow, runs)
    assert [run.status for run in done] == [rf.Status.COMPLETED] * 30
    assert log == dict.fromkeys(range(30), 1)
    assert len({run.id for run in fired}) == len(fired)  # no run resumed by two firers
    assert await storage.next_timer() is None


async def test_a_timer_due_during_a_redis_outage_fires_late_once(
        server: Server, storage_on: rf.RedisStorage) -> None:
    log: collections.Counter[int] = collections.Counter()
    flow = napper(log, 1.0)
    runs = [await flow.run(n=n) for n in range(5)]
    server.stop()  # down before the deadline...
    await anyio.sleep(1.5)  # ...which passes while it is down
    server.start()
    done = await _settled(flow, runs)
    assert [run.status for run in done] == [rf.Status.COMPLETED] * 5
    assert log == dict.fromkeys(range(5), 1)
    for run in done:
        nap = run.steps["nap"]
        assert nap.finished_at is not None and nap.result is not None
        assert nap.finished_at - nap.result.timestamp() >= 0.4  # late, never early


class Approval(msgspec.Struct):
    approved: bool
    by: str


async def test_a_continue_racing_an_interrupts_timer_either_wins_or_is_already_resumed(
        storage: rf.Storage) -> None:
    """The timer (this process's firing loop) and a `continue_` at the deadline: one resume per
    run, whichever claims first."""
    resumed: collections.Counter[str] = collections.Counter()
    flow = rf.Reactor(f"timers.race.{uuid.uuid4().hex[:8]}", inputs=Nap)

    @flow.interrupt(timeout=0.3, on_timeout=Approval(approved=False, by="timer"))
    async def approve(payload: Approval, n: int) -> Approval:
        resumed[f"{n}"] += 1
        return payload

    runs = [await flow.run(n=n) for n in range(10)]
    await anyio.sleep(0.3)  # the deadlines fall due now
    answers: dict[str, str] = {}

    async def answer(run: rf.Run) -> None:
        try:
            await flow.continue_(run.id, step="approve", payload={"approved": True, "by": "ann"})
            answers[run.id] = "ann"
        except rf.AlreadyResumed:
            answers[run.id] = "timer"

    async with anyio.create_task_group() as tg:
        for run in runs:
            tg.start_soon(answer, run)
    with anyio.fail_after(10):
        while {(await flow.get(r.id)).status for r in runs} != {rf.Status.COMPLETED}:
            await anyio.sleep(0.02)
    assert resumed == dict.fromkeys([f"{n}" for n in range(10)], 1)
    for run in runs:
        value = (await flow.get(run.id)).steps["approve"].result
        assert value.by == answers[run.id]
