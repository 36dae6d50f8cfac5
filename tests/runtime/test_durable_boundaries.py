"""Regression tests, on both storage backends: a step's completion checkpoint cut off by an abort
keeps the step's record and the run's history in agreement, and `undo` does the right thing.

The timing is made deterministic by a storage whose step checkpoint blocks on an event the test
controls (the write landed, the reply has not come back), never by a sleep.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import msgspec
import pytest

import reactorflow as rf
from reactorflow import records
from tests.helpers import kinds, unique

pytestmark = pytest.mark.usefixtures("storage")


class ChildIn(msgspec.Struct):
    n: int


class CutCheckpoint:
    """Wraps `storage.save_step` for the checkpoint of `key` as `status`: by default it is
    written, then its reply waits for `release` (as a Redis reply still on its way back);
    `interrupt="after"`/`"before"` raises KeyboardInterrupt after/before the write instead."""

    def __init__(self, storage: rf.Storage, key: str, status: rf.StepStatus,
                 interrupt: str | None = None) -> None:
        self.landed = anyio.Event()
        self.release = anyio.Event()
        inner = storage.save_step

        async def save_step(run_id: str, owner: str, step: str, record: bytes,
                            events: Sequence[bytes] = (), *, unit: bool = False) -> bytes | None:
            if step != key or records.decode_step(record).status != status:
                return await inner(run_id, owner, step, record, events, unit=unit)
            if interrupt == "before":
                raise KeyboardInterrupt
            control = await inner(run_id, owner, step, record, events, unit=unit)
            if interrupt == "after":
                raise KeyboardInterrupt
            self.landed.set()
            await self.release.wait()
            return control

        storage.save_step = save_step  # type: ignore[method-assign]


def _child_with_hanging_sibling(log: list[str], entered: anyio.Event) -> rf.Reactor:
    child = rf.Reactor(unique("child"), inputs=ChildIn)

    @child.step
    async def fast(n: int) -> int:
        log.append("fast")
        return n

    @fast.undo
    async def undo_fast(result: int) -> None:
        log.append("undo fast")

    @fast.compensate
    async def compensate_fast(error: Exception) -> None:
        log.append("compensate fast")

    @child.step
    async def hangs(n: int) -> int:
        entered.set()
        await anyio.sleep_forever()
        return n

    @hangs.compensate
    async def compensate_hangs(error: Exception) -> None:
        log.append("compensate hangs")

    parent = rf.Reactor(unique("parent"))

    @parent.compose(child)
    async def sub() -> ChildIn:
        return ChildIn(n=1)

    return parent


async def test_an_abort_while_a_completion_checkpoint_awaits_its_reply_keeps_it_completed(
        storage: rf.Storage) -> None:
    log: list[str] = []
    entered = anyio.Event()
    flow = _child_with_hanging_sibling(log, entered)
    blocked = CutCheckpoint(storage, "sub.fast", rf.StepStatus.COMPLETED)
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(flow.run)
            await blocked.landed.wait()
            await entered.wait()
            tg.cancel_scope.cancel()  # the caller's scope: an abort
            blocked.release.set()  # ...then the reply arrives
    page = await flow.list_runs(status="aborted")
    assert len(page.runs) == 1
    run = await flow.get(page.runs[0].id)
    # the record and the history agree: the step completed
    assert "step.completed:sub.fast" in kinds(run)
    assert run.steps["sub.fast"].status is rf.StepStatus.COMPLETED
    assert run.steps["sub.hangs"].status is rf.StepStatus.FAILED

    undone = await flow.undo(run.id)
    assert undone.status is rf.Status.CANCELLED
    assert sorted(log) == ["compensate hangs", "fast", "undo fast"]
    assert undone.steps["sub.fast"].status is rf.StepStatus.UNDONE
    assert undone.steps["sub.hangs"].status is rf.StepStatus.COMPENSATED



async def _undo_after_an_interrupt_inside_the_checkpoint(
        where: str, storage: rf.Storage) -> tuple[rf.Run, rf.Run, list[str]]:
    """Abort the run by a KeyboardInterrupt `where` ("after"/"before") the completion
    checkpoint of sub.fast is written; returns the aborted run, the undone run, the log."""
    log: list[str] = []
    entered = anyio.Event()
    flow = _child_with_hanging_sibling(log, entered)
    CutCheckpoint(storage, "sub.fast", rf.StepStatus.COMPLETED, interrupt=where)
    with anyio.fail_after(20), pytest.raises(KeyboardInterrupt):
        await flow.run()
    page = await flow.list_runs(status="aborted")
    assert len(page.runs) == 1
    aborted = await flow.get(page.runs[0].id)
    return aborted, await flow.undo(aborted.id), log


async def test_an_interrupted_completion_checkpoint_that_landed_stays_completed(
        storage: rf.Storage) -> None:
    aborted, undone, log = await _undo_after_an_interrupt_inside_the_checkpoint("after", storage)
    assert "step.completed:sub.fast" in kinds(aborted)
    assert aborted.steps["sub.fast"].status is rf.StepStatus.COMPLETED
    assert undone.steps["sub.fast"].status is rf.StepStatus.UNDONE
    assert "undo fast" in log and "compensate fast" not in log


async def test_an_interrupted_completion_checkpoint_that_did_not_land_is_compensated(
        storage: rf.Storage) -> None:
    aborted, undone, log = await _undo_after_an_interrupt_inside_the_checkpoint("before", storage)
    assert "step.completed:sub.fast" not in kinds(aborted)
    assert aborted.steps["sub.fast"].status is rf.StepStatus.FAILED  # the body ran: roll back
    assert undone.steps["sub.fast"].status is rf.StepStatus.COMPENSATED
    assert "compensate fast" in log and "undo fast" not in log

