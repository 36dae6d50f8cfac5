"""Whatever a caller or a step passes, the stored record stays readable (issue 8, defects 14
and 15): non-`str` halt and cancel reasons, exceptions whose `__str__` raises."""

from __future__ import annotations

import pytest

import reactorflow as rf
from tests.helpers import unique


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


async def _readable(flow: rf.Reactor, run_id: str) -> rf.Run:
    """The run reads back, lists, and (when it can be) undoes without CorruptRecord."""
    run = await flow.get(run_id)
    page = await flow.list_runs()
    assert [r.id for r in page.runs] == [run_id]
    return run


# -- defect 14: reasons --------------------------------------------------------------------------


class Stop(rf.Halt):
    def __init__(self) -> None:
        super().__init__("set below")
        self.reason = ["not", "text"]  # type: ignore[assignment]


@pytest.mark.parametrize(("halt", "expected"), [(lambda: rf.Halt(404), "404"),  # type: ignore[arg-type]
                                                (Stop, "['not', 'text']")])
async def test_non_str_halt_reason_is_stored_as_text(storage: rf.Storage, halt: object,
                                                     expected: str) -> None:
    flow = rf.Reactor(unique("halt-404"))
    log: list[str] = []

    @flow.step
    async def first() -> int:
        return 1

    @first.undo
    async def undo_first(result: int) -> None:
        log.append("undo first")

    @flow.step
    async def stop(first: int) -> int:
        raise halt()  # type: ignore[operator]

    run = await flow.run()
    assert run.status is rf.Status.HALTED
    assert run.halt_reason == expected
    again = await _readable(flow, run.id)
    assert again.halt_reason == expected
    assert [e.detail for e in again.history if e.kind == "run.halted"] == [expected]
    undone = await flow.undo(run.id)
    assert undone.status is rf.Status.CANCELLED and log == ["undo first"]


def test_halt_reason_is_converted_once_at_construction() -> None:
    assert rf.Halt(404).reason == "404"
    assert rf.Halt().reason == ""


async def test_non_str_cancel_reason_is_refused_and_nothing_changes(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("cancel-list"))

    @flow.step
    async def first() -> int:
        return 1

    @flow.interrupt
    async def approve(payload: bool, first: int) -> bool:
        return payload

    run = await flow.run()
    assert run.status is rf.Status.PAUSED
    with pytest.raises(rf.ReactorflowError, match="reason must be a str, not list"):
        await flow.cancel(run.id, reason=["x"])  # type: ignore[arg-type]
    still = await _readable(flow, run.id)
    assert still.status is rf.Status.PAUSED
    cancelled = await flow.cancel(run.id, reason="changed my mind")
    assert cancelled.status is rf.Status.CANCELLED
    assert cancelled.cancel_reason == "changed my mind"
    assert (await _readable(flow, run.id)).cancel_reason == "changed my mind"


async def test_non_str_idempotency_key_is_refused(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("idem-int"))

    @flow.step
    async def only() -> int:
        return 1

    with pytest.raises(rf.ReactorflowError, match="idempotency_key must be a str, not int"):
        await flow.run(idempotency_key=123)  # type: ignore[arg-type]
    assert (await flow.list_runs()).runs == []


# -- defect 15: exceptions whose __str__ raises ----------------------------------------------


async def test_step_error_whose_str_raises_fails_the_run_and_rolls_back(
        storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("unprintable"))
    log: list[str] = []

    @flow.step
    async def first() -> int:
        return 1

    @first.undo
    async def undo_first(result: int) -> None:
        log.append("undo first")

    @flow.step
    async def breaks(first: int) -> int:
        raise Unprintable

    @breaks.compensate
    async def compensate_breaks(error: Exception) -> None:
        log.append(f"compensate {type(error).__name__}")

    run = await flow.run()
    assert run.status is rf.Status.FAILED
    assert run.error is not None
    assert run.error.step == "breaks" and run.error.type == "Unprintable"
    assert "Unprintable.__str__ raised RuntimeError" in run.error.message
    assert log == ["compensate Unprintable", "undo first"]
    again = await _readable(flow, run.id)
    assert again.error == run.error
    assert again.steps["first"].status == "undone"
    assert again.steps["breaks"].status == "compensated"
    str(again.error)  # the summary is text too


async def test_rollback_handler_errors_whose_str_raises_are_recorded(
        storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("unprintable-undo"))

    @flow.step
    async def first() -> int:
        return 1

    @first.undo
    async def undo_first(result: int) -> None:
        raise Unprintable

    @flow.step
    async def second(first: int) -> int:
        raise ValueError("second fails")

    @second.compensate
    async def compensate_second(error: Exception) -> None:
        raise Unprintable

    run = await flow.run()
    assert run.status is rf.Status.FAILED
    assert run.error is not None and run.error.message == "second fails"
    failures = [(f.step, f.kind, f.type) for f in run.error.rollback_failures]
    assert failures == [("second", "compensate", "Unprintable"), ("first", "undo", "Unprintable")]
    assert all("__str__ raised" in f.message for f in run.error.rollback_failures)
    assert (await _readable(flow, run.id)).error == run.error


async def test_when_and_compose_errors_whose_str_raises_fail_the_step(
        storage: rf.Storage) -> None:
    child = rf.Reactor(unique("unprintable-child"))

    @child.step
    async def inner() -> int:
        return 1

    flow = rf.Reactor(unique("unprintable-when"))

    def broken_condition() -> bool:
        raise Unprintable

    @flow.step(when=broken_condition)
    async def guarded() -> int:
        return 1

    @flow.compose(child)
    async def sub() -> None:
        raise Unprintable

    run = await flow.run()
    assert run.status is rf.Status.FAILED
    assert run.error is not None
    assert "Unprintable.__str__ raised" in run.error.message
    await _readable(flow, run.id)


async def test_retried_error_whose_str_raises(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("unprintable-retry"))
    attempts: list[int] = []

    @flow.step(retries=rf.Retry(2, backoff=0))
    async def flaky() -> int:
        attempts.append(1)
        if len(attempts) == 1:
            raise Unprintable
        return 2

    run = await flow.run()
    assert run.status is rf.Status.COMPLETED and run.value == 2
    await _readable(flow, run.id)
