"""The last step of a run that completes has no checkpoint of its own: its record and events ride
in the run's final save (one round trip less per run), on both storage backends; a cancel that
arrives while it runs still cancels the run, and an abort before the final save still stores
the step completed (tests/storage/test_redis_round_trips.py counts the round trips on Redis).
Where something watches every checkpoint (a `save_step` replaced on the storage: the test
kit's crash points, fault injection) each step is written through it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
import pytest

import reactorflow as rf
from reactorflow import records
from tests.helpers import kinds, unique


def _chain(name: str) -> rf.Reactor:
    flow = rf.Reactor(unique(name))

    @flow.step
    async def a() -> int:
        return 1

    @flow.step
    async def b(a: int) -> int:
        return a + 1

    @flow.step
    async def c(b: int) -> int:
        return b + 1

    return flow


def _saves(storage: rf.Storage) -> list[dict[str, Any]]:
    """The options of every `save_state` call (its `save_step` left as it is)."""
    seen: list[dict[str, Any]] = []
    inner = storage.save_state

    async def save_state(run_id: str, owner: str, **options: Any) -> bytes | None:
        seen.append(options)
        return await inner(run_id, owner, **options)

    storage.save_state = save_state  # type: ignore[method-assign]
    return seen


async def test_the_last_step_rides_in_the_final_save(storage: rf.Storage) -> None:
    saves = _saves(storage)
    flow = _chain("fold")
    run = await flow.run()
    assert run.status is rf.Status.COMPLETED and run.value == 3
    [final] = saves
    assert final["status"] == "completed"
    assert list(final["steps"]) == ["c"]
    assert records.decode_step(final["steps"]["c"]).status == rf.StepStatus.COMPLETED
    assert await flow.get(run.id) == run
    assert kinds(run, "run.", "step.completed") == [
        "run.started", "step.completed:a", "step.completed:b", "step.completed:c",
        "run.completed"]


async def test_a_replaced_save_step_sees_every_step(storage: rf.Storage) -> None:
    written: list[str] = []
    inner = storage.save_step

    async def save_step(run_id: str, owner: str, key: str, record: bytes,
                        events: Sequence[bytes] = (), *, unit: bool = False) -> bytes | None:
        written.append(key)
        return await inner(run_id, owner, key, record, events, unit=unit)

    storage.save_step = save_step  # type: ignore[method-assign]
    saves = _saves(storage)
    run = await _chain("watched").run()
    assert run.status is rf.Status.COMPLETED
    assert written == ["a", "b", "c"]
    assert [s.get("steps") for s in saves] == [None]


async def test_a_cancel_that_arrives_while_the_last_step_runs_cancels_the_run(
        storage: rf.Storage) -> None:
    entered, go = anyio.Event(), anyio.Event()
    flow = rf.Reactor(unique("fold-cancel"))

    @flow.step
    async def first() -> int:
        return 1

    @flow.step
    async def last(first: int) -> int:
        entered.set()
        await go.wait()
        return first + 1

    results: list[rf.Run] = []

    async def run() -> None:
        results.append(await flow.run())

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            await entered.wait()
            [running] = (await flow.list_runs(status="running")).runs
            await flow.cancel(running.id, reason="enough")  # the run is busy: requested
            go.set()
    [result] = results
    assert result.status is rf.Status.CANCELLED
    assert result.steps["last"].status is rf.StepStatus.COMPLETED
    assert kinds(result)[-2:] == ["step.completed:last", "run.cancelled"]
    assert await flow.get(result.id) == result


async def test_an_abort_before_the_final_save_keeps_the_last_step_completed(
        storage: rf.Storage) -> None:
    inner = storage.save_state

    async def save_state(run_id: str, owner: str, **options: Any) -> bytes | None:
        if options["status"] == "completed":
            raise KeyboardInterrupt  # the process is interrupted before the final save
        return await inner(run_id, owner, **options)

    storage.save_state = save_state  # type: ignore[method-assign]
    flow = _chain("fold-abort")
    with anyio.fail_after(20), pytest.raises(KeyboardInterrupt):
        await flow.run()
    [aborted] = (await flow.list_runs(status="aborted")).runs
    run = await flow.get(aborted.id)
    assert {k: s.status for k, s in run.steps.items()} == {
        "a": rf.StepStatus.COMPLETED, "b": rf.StepStatus.COMPLETED, "c": rf.StepStatus.COMPLETED}
    assert kinds(run)[-2:] == ["step.completed:c", "run.aborted"]
