"""Interruption by the process (abort), cancel, manual undo, and changed definitions."""

from __future__ import annotations

import anyio
import pytest

import reactorflow as rf
from tests.helpers import completed_elsewhere, kinds, redeploy, unique


def _aborting_flow(log: list[str], entered: anyio.Event, name: str | None = None) -> rf.Reactor:
    flow = rf.Reactor(name or unique("abort"))

    @flow.step
    async def first() -> int:
        log.append("first")
        return 1

    @first.undo
    async def undo_first(result: int) -> None:
        log.append("undo first")

    @flow.step
    async def hangs(first: int) -> int:
        entered.set()
        await anyio.sleep_forever()
        return 2

    @hangs.compensate
    async def comp_hangs(error: Exception) -> None:
        log.append(f"compensate hangs ({type(error).__name__})")

    return flow


async def _abort_by_cancelling_the_caller(flow: rf.Reactor, entered: anyio.Event) -> str:
    async with anyio.create_task_group() as tg:
        tg.start_soon(flow.run)
        await entered.wait()
        tg.cancel_scope.cancel()
    page = await flow.list_runs(status="aborted")
    assert len(page.runs) == 1
    return page.runs[0].id


async def test_cancelled_caller_aborts_without_running_rollback(storage: rf.Storage) -> None:
    log: list[str] = []
    entered = anyio.Event()
    flow = _aborting_flow(log, entered)
    run_id = await _abort_by_cancelling_the_caller(flow, entered)
    assert log == ["first"]  # no undo, no compensate ran
    run = await flow.get(run_id)
    assert run.status is rf.Status.ABORTED
    assert run.steps["first"].status == "completed"
    assert run.steps["hangs"].status == "failed"
    assert kinds(run)[-1] == "run.aborted"

    undone = await flow.undo(run_id)
    assert undone.status is rf.Status.CANCELLED
    assert log == ["first", "compensate hangs (RecordedError)", "undo first"]
    assert undone.steps["hangs"].status == "compensated"
    assert undone.steps["first"].status == "undone"


async def test_keyboard_interrupt_in_a_step_aborts_and_propagates(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("kbint"))
    log: list[str] = []

    @flow.step
    async def done() -> int:
        return 1

    @done.undo
    async def undo_done(result: int) -> None:
        log.append("undo")

    @flow.step
    async def interrupted(done: int) -> int:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        await flow.run()
    assert log == []
    page = await flow.list_runs(status="aborted")
    assert len(page.runs) == 1
    await flow.undo(page.runs[0].id)
    assert log == ["undo"]


async def test_system_exit_in_a_step_aborts_and_propagates(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("sysexit"))

    @flow.step
    async def leaving() -> int:
        raise SystemExit(3)

    with pytest.raises(SystemExit):
        await flow.run()
    assert [r.status for r in (await flow.list_runs()).runs] == ["aborted"]


async def test_cancel_of_a_running_run_stops_at_the_next_boundary(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("cancel"))
    entered, release = anyio.Event(), anyio.Event()
    log: list[str] = []
    run_ids: list[str] = []

    @flow.step
    async def working(ctx: rf.StepContext) -> int:
        run_ids.append(ctx.run_id)
        entered.set()
        await release.wait()
        return 1

    @working.undo
    async def undo_working(result: int) -> None:
        log.append("undo")

    @flow.step
    async def later(working: int) -> int:
        log.append("later")
        return 2

    results: list[rf.Run] = []
    async with anyio.create_task_group() as tg:
        async def go() -> None:
            results.append(await flow.run())

        tg.start_soon(go)
        await entered.wait()
        pending = await flow.cancel(run_ids[0], reason="customer changed mind")
        assert pending.status is rf.Status.RUNNING  # a request, honoured at the next boundary
        release.set()
    final = results[0]
    assert final.status is rf.Status.CANCELLED
    assert final.cancel_reason == "customer changed mind"
    assert final.steps["working"].status == "completed"  # no rollback on cancel
    assert log == []
    again = await flow.cancel(final.id)
    assert again.status is rf.Status.CANCELLED
    undone = await flow.undo(final.id)  # cancel then undo rolls back
    assert log == ["undo"]
    assert undone.status is rf.Status.CANCELLED


async def test_undo_of_a_completed_run_goes_newest_first(storage: rf.Storage) -> None:
    """Newest *completed* first: `a` is declared first but completes after `b`."""
    flow = rf.Reactor(unique("undo"))
    log: list[str] = []

    @flow.step
    async def a(ctx: rf.StepContext) -> int:
        await completed_elsewhere(flow, ctx.run_id, "b")
        return 1

    @flow.step
    async def b() -> int:
        return 2

    @flow.step
    async def c(a: int) -> int:
        return 3

    for step in (a, b, c):
        step.undo(_undo_logger(step.name, log))
    run = await flow.run()
    assert run.status is rf.Status.COMPLETED
    assert kinds(run, "step.completed") == ["step.completed:b", "step.completed:a",
                                            "step.completed:c"]
    undone = await flow.undo(run.id)
    assert undone.status is rf.Status.CANCELLED
    assert log == ["undo c", "undo a", "undo b"]
    assert kinds(undone)[-1] == "run.undone"
    second = await flow.undo(run.id)  # nothing left to undo
    assert second.status is rf.Status.CANCELLED
    assert log == ["undo c", "undo a", "undo b"]


def _undo_logger(name: str, log: list[str]):  # type: ignore[no-untyped-def]
    async def undo(result: int) -> None:
        log.append(f"undo {name}")

    return undo


async def test_undo_and_cancel_refuse_wrong_states(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("refuse"))

    @flow.step
    async def boom() -> int:
        raise RuntimeError("x")

    failed = await flow.run()
    with pytest.raises(rf.RunStateError, match="already rolled back"):
        await flow.undo(failed.id)
    with pytest.raises(rf.RunStateError, match="already rolled back") as info:
        await flow.cancel(failed.id)
    assert "undo(run_id)" not in str(info.value)  # undo refuses a failed run: never advise it
    with pytest.raises(rf.RunNotFound):
        await flow.undo("missing")


async def test_undo_while_another_execution_holds_the_run(storage: rf.Storage) -> None:
    rf.configure(lock_wait=0.2)
    flow = rf.Reactor(unique("busy"))
    entered, release = anyio.Event(), anyio.Event()
    ids: list[str] = []

    @flow.step
    async def busy(ctx: rf.StepContext) -> int:
        ids.append(ctx.run_id)
        entered.set()
        await release.wait()
        return 1

    async with anyio.create_task_group() as tg:
        tg.start_soon(flow.run)
        await entered.wait()
        with pytest.raises(rf.LockTimeout) as info:
            await flow.undo(ids[0])
        assert info.value.run_id == ids[0]
        release.set()


async def test_changed_graph_refuses_to_continue_stored_run(storage: rf.Storage) -> None:
    name = unique("versioned")
    log: list[str] = []
    entered = anyio.Event()
    old = _aborting_flow(log, entered, name)
    run_id = await _abort_by_cancelling_the_caller(old, entered)
    redeploy(old)

    new = rf.Reactor(name)

    @new.step
    async def first() -> int:  # same step...
        return 1

    @new.step
    async def renamed(first: int) -> int:  # ...but "hangs" was renamed
        return 2

    with pytest.raises(rf.DefinitionChanged) as info:
        await new.undo(run_id)
    assert any("'hangs' was removed or renamed" in d for d in info.value.differences)
    assert info.value.run_id == run_id


async def test_added_steps_are_compatible(storage: rf.Storage) -> None:
    name = unique("growing")
    log: list[str] = []
    entered = anyio.Event()
    old = _aborting_flow(log, entered, name)
    run_id = await _abort_by_cancelling_the_caller(old, entered)
    redeploy(old)
    log.clear()
    grown = _aborting_flow(log, anyio.Event(), name)

    @grown.step
    async def extra(hangs: int) -> int:
        return 3

    undone = await grown.undo(run_id)
    assert undone.status is rf.Status.CANCELLED
    assert log == ["compensate hangs (RecordedError)", "undo first"]


async def test_a_cancellation_older_than_a_run_that_never_suspends_is_the_callers() -> None:
    """On MemoryStorage a run whose step never suspends never yields to the event loop, so no
    cancellation can reach it: one asked for before it started is seen at the caller's next
    checkpoint, and the run is stored completed (it is not aborted after its work was done).
    (One step: a step another step reads is checkpointed on its own, where a cancellation
    asked for meanwhile is honoured.)"""
    rf.configure(storage=rf.MemoryStorage())
    flow = rf.Reactor(unique("never-suspends"))

    @flow.step
    async def a() -> int:
        return 1

    runs: list[rf.Run] = []
    with anyio.CancelScope() as scope:
        scope.cancel()
        runs.append(await flow.run())
        await anyio.sleep(0)  # the caller's checkpoint: the cancellation lands here
    assert scope.cancelled_caught
    [run] = runs
    assert run.status is rf.Status.COMPLETED and run.value == 1
    assert await flow.get(run.id) == run
