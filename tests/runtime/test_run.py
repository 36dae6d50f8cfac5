"""Running a reactor: results, typed values after reload, inputs, snapshots."""

from __future__ import annotations

import msgspec
import pytest

import reactorflow as rf
from tests.helpers import kinds, unique
from tests.workflows import orders
from tests.workflows.orders import Charge, Order, Receipt, checkout


@pytest.fixture(autouse=True)
def _clear_log() -> None:
    orders.LOG.clear()


async def test_completed_run_returns_typed_value(storage: rf.Storage) -> None:
    run = await checkout.run(order_id="A1", amount=10.0, items=["x", "y"])
    assert run.status is rf.Status.COMPLETED
    assert run.status == "completed"
    assert run.value == Receipt("A1", "ch-res-A1-2", "res-A1-2")
    assert isinstance(run.value, Receipt)
    assert run.error is None
    assert {k: s.status for k, s in run.steps.items()} == {
        "reserve": "completed", "fraud_check": "completed", "charge": "completed",
        "receipt": "completed",
    }
    assert all(s.attempts == 1 for s in run.steps.values())


async def test_reload_decodes_results_with_annotations(storage: rf.Storage) -> None:
    run = await checkout.run(Order("B2", 5.0, ["x"]))
    again = await checkout.get(run.id)
    assert again.value == run.value
    assert isinstance(again.value, Receipt)
    assert again.inputs == Order("B2", 5.0, ["x"])
    assert again.created_at <= again.updated_at


async def test_history_lists_events_in_order(storage: rf.Storage) -> None:
    run = await checkout.run(order_id="C3", amount=1.0, items=[])
    history = kinds(run)
    assert history[0] == "run.started"
    assert history[-1] == "run.completed"
    assert history.index("step.completed:reserve") < history.index("step.started:charge")
    assert history.index("step.completed:charge") < history.index("step.started:receipt")


async def test_invalid_inputs_raise_before_anything_is_stored(storage: rf.Storage) -> None:
    with pytest.raises(rf.InputValidationError) as info:
        await checkout.run(order_id="D4", amount="lots", items=[])
    assert info.value.field == "amount"
    assert "Expected `float`" in info.value.reason
    assert "amount" in str(info.value)
    with pytest.raises(rf.InputValidationError) as missing:
        await checkout.run(order_id="D4", amount=1.0)
    assert "items" in str(missing.value)
    page = await checkout.list_runs()
    assert page.runs == []


class Line(msgspec.Struct):
    sku: str
    qty: int


class Basket(msgspec.Struct):
    lines: list[Line]


async def test_nested_input_field_path_is_named(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("basket"), inputs=Basket)

    @flow.step
    async def count(lines: list[Line]) -> int:
        return sum(line.qty for line in lines)

    with pytest.raises(rf.InputValidationError) as info:
        await flow.run(lines=[{"sku": "a", "qty": 1}, {"sku": "b", "qty": "two"}])
    assert info.value.field == "lines[1].qty"
    run = await flow.run(lines=[{"sku": "a", "qty": 1}, {"sku": "b", "qty": 2}])
    assert run.value == 3


async def test_unknown_run_id_raises_run_not_found(storage: rf.Storage) -> None:
    for bad in ("nope", "0" * 24, "../../etc", "💥"):
        with pytest.raises(rf.RunNotFound) as info:
            await checkout.get(bad)
        assert info.value.run_id == bad


async def test_run_of_another_reactor_is_not_found_and_says_whose(storage: rf.Storage) -> None:
    other = rf.Reactor(unique("other"))

    @other.step
    async def only() -> int:
        return 1

    run = await other.run()
    with pytest.raises(rf.RunNotFound) as info:
        await checkout.get(run.id)
    assert info.value.other_reactor == other.name


async def test_value_is_returns_step_or_last_declared(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("returns"), returns="first")

    @flow.step
    async def first() -> str:
        return "one"

    @flow.step
    async def second(first: str) -> str:
        return first + "two"

    run = await flow.run()
    assert run.value == "one"


async def test_reactor_without_inputs_rejects_inputs(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("noinputs"))

    @flow.step
    async def only() -> int:
        return 1

    with pytest.raises(rf.InputValidationError) as info:
        await flow.run(surprise=1)
    assert "declares no inputs" in str(info.value)


async def test_inputs_as_struct_and_kwargs_together_is_an_error(storage: rf.Storage) -> None:
    with pytest.raises(rf.ReactorflowError, match="either"):
        await checkout.run(Order("E5", 1.0, []), amount=2.0)


async def test_step_state_of_charge_is_stored_per_step(storage: rf.Storage) -> None:
    run = await checkout.run(order_id="F6", amount=3.0, items=["a"])
    state = run.steps["charge"]
    assert state.started_at is not None and state.finished_at is not None
    assert state.started_at <= state.finished_at
    assert isinstance((await checkout.get(run.id)).value.charge_id, str)


async def test_plain_function_is_still_awaitable() -> None:
    assert await orders.reserve("Z", ["a", "b"], "") == "res-Z-2"
    charge = await orders.charge(3.0, "r", True, "")
    assert charge == Charge("ch-r", 3.0)


async def test_returned_snapshots_equal_what_storage_holds(storage: rf.Storage) -> None:
    """run() and continue_() build their snapshot from the execution, not by reading it back:
    it must be exactly what `get` reads."""
    from tests.workflows import approvals

    done = await checkout.run(order_id="S1", amount=2.0, items=["a"])
    assert done == await checkout.get(done.id)
    failed = await checkout.run(order_id="S2", amount=2.0, items=["a"], fail_at="receipt")
    assert failed.status is rf.Status.FAILED
    assert failed == await checkout.get(failed.id)
    paused = await approvals.approval_flow.run(order_id="S3")
    assert paused == await approvals.approval_flow.get(paused.id)
    resumed = await approvals.approval_flow.continue_(paused.id, step="approve",
                                                      payload={"approved": True, "by": "x"})
    assert resumed.status is rf.Status.COMPLETED
    assert resumed == await approvals.approval_flow.get(paused.id)
