"""The saga rules: compensate the failing step if its body started, undo completed steps in
reverse completion order, collect every rollback failure, halt without rollback."""

from __future__ import annotations

from typing import Annotated

import anyio
import pytest

import reactorflow as rf
from tests.helpers import Recorder, kinds, unique
from tests.workflows import orders
from tests.workflows.orders import checkout


@pytest.fixture(autouse=True)
def _clear_log() -> None:
    orders.LOG.clear()


async def test_failure_compensates_then_undoes_in_reverse(storage: rf.Storage) -> None:
    run = await checkout.run(order_id="A1", amount=10.0, items=["x"], fail_at="charge",
                             reserve_last=True)
    assert run.status is rf.Status.FAILED
    assert run.error is not None
    assert run.error.step == "charge"
    assert run.error.type == "RuntimeError"
    assert run.error.message == "charge exploded"
    assert "RuntimeError" in run.error.traceback
    assert str(run.error) == "step 'charge' failed: RuntimeError: charge exploded"
    assert run.error.rollback_failures == []
    rollback = orders.LOG[orders.LOG.index("charge") + 1:]
    assert rollback[0] == "void:charge exploded"
    # reserve and fraud_check ran concurrently; reserve (declared first) completed last, so it
    # is undone first: reverse completion order, not reverse declaration order
    assert kinds(run, "step.completed") == ["step.completed:fraud_check",
                                            "step.completed:reserve"]
    assert rollback[1:] == ["release:res-A1-1", "forget_check"]
    assert run.steps["charge"].status == "compensated"
    assert run.steps["reserve"].status == "undone"
    assert run.steps["receipt"].status == "pending"


async def test_exact_event_sequence_through_middleware(storage: rf.Storage) -> None:
    recorder = Recorder()
    flow = rf.Reactor(unique("seq"), middleware=[recorder])
    gate = anyio.Event()

    @flow.step
    async def a() -> int:
        return 1

    @a.undo
    async def undo_a(result: int) -> None:
        pass

    @flow.step
    async def b(a: int) -> int:
        await gate.wait()  # b completes after c even though declared first
        return 2

    @b.undo
    async def undo_b(result: int) -> None:
        pass

    @flow.step
    async def c(a: int) -> int:
        gate.set()
        return 3

    @c.undo
    async def undo_c(result: int) -> None:
        pass

    @flow.step
    async def d(b: int, c: int) -> int:
        raise ValueError("d fails")

    @d.compensate
    async def comp_d(error: Exception) -> None:
        assert isinstance(error, ValueError)

    run = await flow.run()
    assert run.status is rf.Status.FAILED
    assert recorder.only("before_compensate", "after_compensate", "before_undo",
                         "after_undo") == [
        "before_compensate:d", "after_compensate[completed]:d",
        "before_undo:b", "after_undo[completed]:b",
        "before_undo:c", "after_undo[completed]:c",
        "before_undo:a", "after_undo[completed]:a",
    ]
    assert recorder.events[0] == "before_run"
    assert recorder.events[-1] == "after_run:failed"


async def test_in_flight_siblings_finish_and_are_undone(storage: rf.Storage) -> None:
    log: list[str] = []
    flow = rf.Reactor(unique("inflight"))
    started = anyio.Event()

    @flow.step
    async def slow() -> str:
        started.set()
        await anyio.sleep(0.05)
        log.append("slow done")
        return "s"

    @slow.undo
    async def undo_slow(result: str) -> None:
        log.append("undo slow")

    @flow.step
    async def boom() -> str:
        await started.wait()
        raise RuntimeError("boom")

    @flow.step
    async def never(slow: str, boom: str) -> str:
        log.append("never")
        return "n"

    run = await flow.run()
    assert run.status is rf.Status.FAILED
    assert log == ["slow done", "undo slow"]
    assert run.steps["slow"].status == "undone"
    assert run.steps["never"].status == "pending"


async def test_nothing_starts_after_a_failure_is_seen(storage: rf.Storage) -> None:
    started: list[str] = []
    flow = rf.Reactor(unique("nostart"), max_concurrency=1)

    @flow.step
    async def first() -> int:
        started.append("first")
        raise RuntimeError("first fails")

    @flow.step
    async def second() -> int:
        started.append("second")
        return 2

    run = await flow.run()
    assert run.status is rf.Status.FAILED
    assert started == ["first"]
    assert run.steps["second"].status == "pending"


async def test_rollback_failures_are_collected_and_rollback_goes_on(storage: rf.Storage) -> None:
    log: list[str] = []
    flow = rf.Reactor(unique("collect"))

    @flow.step
    async def one() -> int:
        return 1

    @one.undo
    async def undo_one(result: int) -> None:
        log.append("undo one")

    @flow.step
    async def two(one: int) -> int:
        return 2

    @two.undo
    async def undo_two(result: int) -> None:
        raise OSError("undo two broke")

    @flow.step
    async def three(two: int) -> int:
        raise ValueError("three fails")

    @three.compensate
    async def comp_three(error: Exception) -> None:
        raise KeyError("compensate broke")

    run = await flow.run()
    assert run.status is rf.Status.FAILED
    assert log == ["undo one"]
    assert run.error is not None
    assert [(f.step, f.kind, f.type) for f in run.error.rollback_failures] == [
        ("three", "compensate", "KeyError"), ("two", "undo", "OSError"),
    ]
    assert "undo two broke" in run.error.rollback_failures[1].message
    assert "2 rollback failure(s)" in str(run.error)
    assert run.steps["two"].error == "OSError: undo two broke"


async def test_step_that_fails_before_its_body_is_not_compensated(storage: rf.Storage) -> None:
    log: list[str] = []
    flow = rf.Reactor(unique("argfail"))

    @flow.step
    async def data() -> dict[str, int]:
        return {"a": 1}

    @data.undo
    async def undo_data(result: dict[str, int]) -> None:
        log.append("undo data")

    @flow.step
    async def use(value: Annotated[int, rf.Result("data", "missing")]) -> int:
        log.append("body ran")
        return value

    @use.compensate
    async def comp_use(error: Exception) -> None:
        log.append("compensated")

    run = await flow.run()
    assert run.status is rf.Status.FAILED
    assert run.error is not None and run.error.type == "ArgumentError"
    assert "missing" in run.error.message
    assert log == ["undo data"]


async def test_halt_stops_without_rollback(storage: rf.Storage) -> None:
    log: list[str] = []
    flow = rf.Reactor(unique("halt"))

    @flow.step
    async def first() -> int:
        return 1

    @first.undo
    async def undo_first(result: int) -> None:
        log.append("undo")

    @flow.step
    async def stop(first: int) -> int:
        raise rf.Halt("out of stock")

    @flow.step
    async def after(stop: int) -> int:
        log.append("after")
        return 3

    run = await flow.run()
    assert run.status is rf.Status.HALTED
    assert run.halt_reason == "out of stock"
    assert run.error is None
    assert log == []
    assert run.steps["stop"].status == "halted"
    assert run.steps["after"].status == "pending"
    assert run.value is None


async def test_when_false_skips_step_and_its_dependents(storage: rf.Storage) -> None:
    log: list[str] = []
    flow = rf.Reactor(unique("when"))

    @flow.step
    async def amount() -> int:
        return 5

    @flow.step(when=lambda amount: amount > 10)
    async def big(amount: int) -> str:
        log.append("big")
        return "big"

    @big.undo
    async def undo_big(result: str) -> None:
        log.append("undo big")

    @flow.step
    async def needs_big(big: str) -> str:
        log.append("needs_big")
        return big

    @flow.step
    async def tolerant(big: str = "default") -> str:
        return big

    @flow.step(after=["big"])
    async def ordered() -> str:
        log.append("ordered")
        return "o"

    @flow.step
    async def fail(tolerant: str) -> str:
        raise RuntimeError("then fail")

    run = await flow.run()
    assert run.status is rf.Status.FAILED
    assert run.steps["big"].status == "skipped"
    assert run.steps["needs_big"].status == "skipped"
    assert run.steps["ordered"].status == "skipped"
    assert run.steps["tolerant"].status == "completed"
    assert log == []  # skipped steps never ran and are never undone


async def test_skipped_value_step_gives_none(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("skipvalue"))

    @flow.step(when=lambda: False)
    async def only() -> int:
        return 1

    run = await flow.run()
    assert run.status is rf.Status.COMPLETED
    assert run.value is None


async def test_serialization_error_fails_step_and_compensates(storage: rf.Storage) -> None:
    log: list[str] = []
    flow = rf.Reactor(unique("serial"))

    class Opaque:
        pass

    @flow.step
    async def bad():  # type: ignore[no-untyped-def]
        return Opaque()

    @bad.compensate
    async def comp_bad(error: Exception) -> None:
        log.append(type(error).__name__)

    run = await flow.run()
    assert run.status is rf.Status.FAILED
    assert run.error is not None
    assert run.error.type == "SerializationError"
    assert "'bad'" in run.error.message and "Opaque" in run.error.message
    assert log == ["SerializationError"]


async def test_result_not_matching_annotation_fails_step(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("mismatch"))

    @flow.step
    async def wrong() -> int:
        return "not a number"  # type: ignore[return-value]

    run = await flow.run()
    assert run.status is rf.Status.FAILED
    assert run.error is not None and run.error.type == "SerializationError"
    assert "annotation" in run.error.message


async def test_base_exception_subclass_from_user_code_is_a_failure(storage: rf.Storage) -> None:
    """Only interpreter exits and cancellation abort; an Exception subclass rolls back."""

    class Custom(Exception):
        pass

    flow = rf.Reactor(unique("custom"))

    @flow.step
    async def raises() -> int:
        raise Custom("x")

    run = await flow.run()
    assert run.status is rf.Status.FAILED
    assert run.error is not None and run.error.type == "Custom"
