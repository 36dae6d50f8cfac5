"""Composition: a child runs inline inside the root's run; its pauses pause the root; its
rollback joins the parent's (api.md §4, seed 010-interrupt-in-composed-child US1-US3)."""

from __future__ import annotations

import msgspec
import pytest

import reactorflow as rf
from tests.helpers import kinds, unique
from tests.workflows import approvals
from tests.workflows.approvals import fulfilment, order, outer, twice

OK = {"approved": True, "by": "ann"}
PATH = ("fulfil", "approve_child")


@pytest.fixture(autouse=True)
def _clear_log() -> None:
    approvals.LOG.clear()


async def test_child_interrupt_pauses_the_root(storage: rf.Storage) -> None:
    run = await order.run(order_id="K1")
    assert run.status is rf.Status.PAUSED
    assert run.waiting_on == [PATH]
    assert approvals.LOG == ["r1", "c1"]  # c2 and r2 did not run
    assert run.steps["fulfil.c1"].status == "completed"
    assert run.steps["fulfil"].status == "running"
    assert run.steps["r2"].status == "pending"
    assert await order.ready_interrupts(run.id) == [PATH]
    with pytest.raises(rf.RunNotFound) as info:  # the child is never a run of its own
        await fulfilment.get(run.id)
    assert info.value.other_reactor == order.name


async def test_resume_by_path_then_correlation_id(storage: rf.Storage) -> None:
    run = await order.run(order_id="K2")
    done = await order.continue_(run.id, step=["fulfil", "approve_child"], payload=OK)
    assert done.status is rf.Status.COMPLETED
    assert done.value == "done: c1-K2+c2(ann)"
    assert approvals.LOG == ["r1", "c1", "child approved", "c2", "r2"]

    approvals.LOG.clear()
    again = await order.run(order_id="K3")
    by_cid = await order.continue_by_correlation_id("fulfil:K3", step=PATH, payload=OK)
    assert by_cid.id == again.id
    assert by_cid.status is rf.Status.COMPLETED


async def test_resumed_result_equals_an_uninterrupted_one(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("same"))

    @flow.step
    async def base() -> int:
        return 2

    @flow.interrupt
    async def factor(payload: int, base: int) -> int:
        return payload * base

    @flow.step
    async def total(factor: int, base: int) -> int:
        return factor + base

    paused = await flow.run()
    resumed = await flow.continue_(paused.id, step="factor", payload=5)
    assert resumed.value == 5 * 2 + 2


async def test_bare_name_never_matches_a_nested_interrupt(storage: rf.Storage) -> None:
    run = await order.run(order_id="K4")
    for wrong in ("approve_child", ("fulfil",), ("r1", "approve_child"), ("fulfil", "c1")):
        with pytest.raises(rf.InterruptNotPending) as info:
            await order.continue_(run.id, step=wrong, payload=OK)
        assert info.value.pending == [PATH]
        assert repr(PATH) in str(info.value)
    after = await order.get(run.id)
    assert after.status is rf.Status.PAUSED and after.history == run.history


async def test_pause_two_levels_deep(storage: rf.Storage) -> None:
    run = await outer.run(order_id="K5")
    deep = ("inner", "fulfil", "approve_child")
    assert run.status is rf.Status.PAUSED
    assert run.waiting_on == [deep]
    assert approvals.LOG == ["o1", "r1", "c1"]
    done = await outer.continue_(run.id, step=list(deep), payload=OK)
    assert done.status is rf.Status.COMPLETED
    assert done.value == "outer: done: c1-K5+c2(ann)"
    assert approvals.LOG.count("c2") == 1 and approvals.LOG.count("o2") == 1


async def test_nested_max_attempts_rolls_back_from_the_root(storage: rf.Storage) -> None:
    run = await order.run(order_id="K6")
    with pytest.raises(rf.PayloadValidationError) as info:
        await order.continue_(run.id, step=PATH, payload={"approved": "no"})
    assert info.value.exhausted  # the child interrupt declares max_attempts=1
    failed = await order.get(run.id)
    assert failed.status is rf.Status.FAILED
    assert approvals.LOG[-2:] == ["undo c1", "undo r1"]  # the child's steps, then the root's


async def test_child_pausing_twice(storage: rf.Storage) -> None:
    run = await twice.run(order_id="K7")
    assert run.waiting_on == [("checks", "first_ok")]
    mid = await twice.continue_(run.id, step=("checks", "first_ok"), payload=OK)
    assert mid.status is rf.Status.PAUSED
    assert mid.waiting_on == [("checks", "second_ok")]
    done = await twice.continue_(run.id, step=("checks", "second_ok"),
                                 payload={"approved": True, "by": "bo"})
    assert done.value == "finished ann+bo"


async def test_undo_of_a_root_paused_in_a_child(storage: rf.Storage) -> None:
    run = await order.run(order_id="K8")
    undone = await order.undo(run.id)
    assert undone.status is rf.Status.CANCELLED
    assert approvals.LOG == ["r1", "c1", "undo c1", "undo r1"]
    assert undone.steps["fulfil"].status == "undone"
    with pytest.raises(rf.NotPaused):
        await order.continue_(run.id, step=PATH, payload=OK)


async def test_cancel_of_a_root_paused_in_a_child(storage: rf.Storage) -> None:
    run = await order.run(order_id="K9")
    await order.cancel(run.id)
    with pytest.raises(rf.NotPaused):
        await order.continue_(run.id, step=PATH, payload=OK)
    assert approvals.LOG == ["r1", "c1"]


class ChildIn(msgspec.Struct):
    n: int


def _family(log: list[str], *, child_fails: bool = False, parent_fails: bool = False
            ) -> rf.Reactor:
    child = rf.Reactor(unique("child"), inputs=ChildIn)

    @child.step
    async def k1(n: int) -> int:
        log.append("k1")
        return n + 1

    @k1.undo
    async def undo_k1(result: int) -> None:
        log.append("undo k1")

    @child.step
    async def k2(k1: int) -> int:
        log.append("k2")
        if child_fails:
            raise RuntimeError("k2 fails")
        return k1 * 10

    @k2.undo
    async def undo_k2(result: int) -> None:
        log.append("undo k2")

    parent = rf.Reactor(unique("parent"))

    @parent.step
    async def p1() -> int:
        log.append("p1")
        return 1

    @p1.undo
    async def undo_p1(result: int) -> None:
        log.append("undo p1")

    @parent.compose(child)
    async def sub(p1: int) -> ChildIn:
        return ChildIn(n=p1)

    @parent.step
    async def p2(sub: int) -> int:
        log.append("p2")
        if parent_fails:
            raise RuntimeError("p2 fails")
        return sub

    return parent


async def test_child_value_is_the_compose_step_result(storage: rf.Storage) -> None:
    log: list[str] = []
    run = await _family(log).run()
    assert run.status is rf.Status.COMPLETED
    assert run.value == 20
    assert log == ["p1", "k1", "k2", "p2"]


async def test_failing_child_rolls_back_itself_before_the_parent(storage: rf.Storage) -> None:
    log: list[str] = []
    run = await _family(log, child_fails=True).run()
    assert run.status is rf.Status.FAILED
    assert run.error is not None and run.error.step == "sub.k2"
    assert log == ["p1", "k1", "k2", "undo k1", "undo p1"]
    assert run.steps["sub"].status == "undone"


async def test_completed_child_is_undone_once_with_its_parent(storage: rf.Storage) -> None:
    log: list[str] = []
    run = await _family(log, parent_fails=True).run()
    assert run.status is rf.Status.FAILED
    assert log == ["p1", "k1", "k2", "p2", "undo k2", "undo k1", "undo p1"]
    assert kinds(run, "undo.completed") == [
        "undo.completed:sub.k2", "undo.completed:sub.k1", "undo.completed:sub",
        "undo.completed:p1",
    ]


async def test_manual_undo_reaches_the_child(storage: rf.Storage) -> None:
    log: list[str] = []
    flow = _family(log)
    run = await flow.run()
    await flow.undo(run.id)
    assert log[4:] == ["undo k2", "undo k1", "undo p1"]


async def test_child_inputs_are_validated(storage: rf.Storage) -> None:
    child = rf.Reactor(unique("strict-child"), inputs=ChildIn)

    @child.step
    async def k(n: int) -> int:
        return n

    parent = rf.Reactor(unique("strict-parent"))

    @parent.compose(child)
    async def sub() -> dict[str, object]:
        return {"n": "not a number"}

    run = await parent.run()
    assert run.status is rf.Status.FAILED
    assert run.error is not None and run.error.type == "InputValidationError"
    assert "n: Expected `int`" in run.error.message


async def test_halt_inside_a_child_halts_the_whole_run(storage: rf.Storage) -> None:
    child = rf.Reactor(unique("halting-child"))

    @child.step
    async def stop() -> int:
        raise rf.Halt("child says stop")

    parent = rf.Reactor(unique("halting-parent"))
    after: list[str] = []

    @parent.compose(child)
    async def sub() -> None:
        return None

    @parent.step
    async def later(sub: int) -> int:
        after.append("later")
        return 1

    run = await parent.run()
    assert run.status is rf.Status.HALTED
    assert run.halt_reason == "child says stop"
    assert after == []
