"""A composed child with no inputs (its compose function returns None) rolls back like any other:
a stored `None` is a value, never "no value" (issue 8, defect 1)."""

from __future__ import annotations

import anyio
import pytest

import reactorflow as rf
from tests.helpers import unique


def _family(log: list[str], *, fails: bool = False, pauses: bool = False,
            hangs: anyio.Event | None = None) -> rf.Reactor:
    child = rf.Reactor(unique("bare-child"))  # no inputs at all

    @child.step
    async def k1() -> int:
        log.append("k1")
        return 1

    @k1.undo
    async def undo_k1(result: int) -> None:
        log.append("undo k1")

    if pauses:
        @child.interrupt
        async def approve(payload: bool, k1: int) -> bool:
            return payload

    @child.step(after=("approve",) if pauses else ())
    async def k2(k1: int) -> None:  # returns None: a stored nil result
        log.append("k2")
        if hangs is not None:
            hangs.set()
            await anyio.sleep_forever()
        if fails:
            raise RuntimeError("k2 fails")

    @k2.compensate
    async def compensate_k2(error: Exception) -> None:
        log.append("compensate k2")

    parent = rf.Reactor(unique("bare-parent"))

    @parent.step
    async def p1() -> int:
        log.append("p1")
        return 1

    @p1.undo
    async def undo_p1(result: int) -> None:
        log.append("undo p1")

    @parent.compose(child)
    async def sub(p1: int) -> None:
        return None

    @parent.step
    async def p2(sub: None) -> int:
        log.append("p2")
        return 2

    return parent


async def test_failing_child_without_inputs_rolls_back(storage: rf.Storage) -> None:
    log: list[str] = []
    run = await _family(log, fails=True).run()
    assert run.status is rf.Status.FAILED
    assert run.error is not None and run.error.step == "sub.k2"
    assert log == ["p1", "k1", "k2", "compensate k2", "undo k1", "undo p1"]
    assert run.steps["sub.k2"].status == "compensated"
    assert run.steps["sub.k1"].status == "undone"
    assert run.steps["sub"].status == "undone"
    assert (await _family_get(run)).steps["sub"].status == "undone"


async def _family_get(run: rf.Run) -> rf.Run:
    from reactorflow.definition import registry

    reactor = registry.lookup(run.reactor)
    assert reactor is not None
    return await reactor.get(run.id)


async def test_undo_of_a_run_paused_in_a_child_without_inputs(storage: rf.Storage) -> None:
    log: list[str] = []
    flow = _family(log, pauses=True)
    run = await flow.run()
    assert run.status is rf.Status.PAUSED
    assert run.steps["sub"].status == "running"
    undone = await flow.undo(run.id)
    assert undone.status is rf.Status.CANCELLED
    assert log == ["p1", "k1", "undo k1", "undo p1"]
    assert undone.steps["sub"].status == "undone"
    assert undone.steps["sub.k1"].status == "undone"


async def test_resumed_child_without_inputs_completes(storage: rf.Storage) -> None:
    log: list[str] = []
    flow = _family(log, pauses=True)
    run = await flow.run()
    done = await flow.continue_(run.id, step=("sub", "approve"), payload=True)
    assert done.status is rf.Status.COMPLETED
    assert log == ["p1", "k1", "k2", "p2"]


async def test_aborted_child_without_inputs_is_undone(storage: rf.Storage) -> None:
    log: list[str] = []
    hangs = anyio.Event()
    flow = _family(log, hangs=hangs)
    async with anyio.create_task_group() as tg:
        tg.start_soon(flow.run)
        await hangs.wait()
        tg.cancel_scope.cancel()
    page = await flow.list_runs(status="aborted")
    assert len(page.runs) == 1
    run_id = page.runs[0].id
    aborted = await flow.get(run_id)
    assert aborted.steps["sub"].status == "running"
    assert aborted.steps["sub.k2"].status == "failed"
    undone = await flow.undo(run_id)
    assert undone.status is rf.Status.CANCELLED
    assert log == ["p1", "k1", "k2", "compensate k2", "undo k1", "undo p1"]
    assert undone.steps["sub"].status == "undone"


@pytest.mark.parametrize("fails", [True, False])
async def test_child_without_inputs_in_a_fresh_execution(storage: rf.Storage, fails: bool) -> None:
    """A run paused in such a child, resumed by another execution (records read back)."""
    log: list[str] = []
    flow = _family(log, pauses=True, fails=fails)
    run = await flow.run()
    done = await flow.continue_(run.id, step=("sub", "approve"), payload=True)
    if fails:
        assert done.status is rf.Status.FAILED
        assert log == ["p1", "k1", "k2", "compensate k2", "undo k1", "undo p1"]
        assert done.steps["sub"].status == "undone"
    else:
        assert done.status is rf.Status.COMPLETED
