"""Rewind (api.md §15), on both backends: a step and its dependents are undone, newest first,
and run again in the same run, with changed inputs; independent steps keep their results; an
interrupt among them waits again; a crash mid-rewind is recovered to the same end; and the
refusals write nothing."""

from __future__ import annotations

from collections import Counter

import msgspec
import pytest

import reactorflow as rf
from reactorflow.testing import Environment
from tests.helpers import unique


class Order(msgspec.Struct):
    item: str
    qty: int


class Approval(msgspec.Struct):
    ok: bool


class Calls:
    def __init__(self) -> None:
        self.bodies: Counter[str] = Counter()
        self.undos: list[str] = []
        self.keys: dict[str, list[str]] = {}


def _shop(calls: Calls, *, interrupt: bool = False) -> rf.Reactor:
    """reserve -> ship, and quote -> price -> invoice (-> approve -> close, with `interrupt`):
    a rewind to price takes back price and invoice (and what follows), never reserve, ship or
    quote."""
    flow = rf.Reactor(unique("shop"), inputs=Order)

    def noted(name: str, ctx: rf.StepContext) -> None:
        calls.bodies[name] += 1
        calls.keys.setdefault(name, []).append(ctx.idempotency_key)

    @flow.step
    async def reserve(item: str, ctx: rf.StepContext) -> str:
        noted("reserve", ctx)
        return f"R-{item}"

    @reserve.undo
    async def unreserve(result: str) -> None:
        calls.undos.append("reserve")

    @flow.step
    async def ship(reserve: str, ctx: rf.StepContext) -> str:
        noted("ship", ctx)
        return f"shipped {reserve}"

    @flow.step
    async def quote(item: str, ctx: rf.StepContext) -> float:
        noted("quote", ctx)
        return 2.5

    @flow.step
    async def price(quote: float, qty: int, ctx: rf.StepContext) -> float:
        noted("price", ctx)
        return quote * qty

    @price.undo
    async def unprice(result: float) -> None:
        calls.undos.append(f"price {result}")

    @flow.step
    async def invoice(price: float, ctx: rf.StepContext) -> str:
        noted("invoice", ctx)
        return f"invoice {price}"

    @invoice.undo
    async def void(result: str) -> None:
        calls.undos.append(f"void {result}")

    if interrupt:
        @flow.interrupt
        async def approve(invoice: str, payload: Approval) -> bool:
            return payload.ok

        @flow.step
        async def close(approve: bool, ctx: rf.StepContext) -> str:
            noted("close", ctx)
            return "closed" if approve else "rejected"

    return flow


async def test_rewind_of_a_completed_run_reruns_only_the_step_and_its_dependents(
        storage: rf.Storage) -> None:
    calls = Calls()
    flow = _shop(calls)
    run = await flow.run(item="tea", qty=2)
    assert run.status is rf.Status.COMPLETED and run.steps["invoice"].result == "invoice 5.0"
    again = await flow.rewind(run.id, to="price", inputs={"qty": 4})
    assert again.id == run.id and again.status is rf.Status.COMPLETED
    assert calls.undos == ["void invoice 5.0", "price 5.0"]  # newest first, nothing else
    assert calls.bodies == Counter(reserve=1, ship=1, quote=1, price=2, invoice=2)
    assert again.steps["invoice"].result == "invoice 10.0" and again.inputs == Order("tea", 4)
    assert again.steps["ship"].result == "shipped R-tea"  # independent: kept
    first, second = calls.keys["price"]
    assert first == f"{run.id}:price" and second != first  # its effects were undone: a new key
    kinds = [e.kind for e in again.history]
    assert rf.EventKind.RUN_REWINDING in kinds and rf.EventKind.RUN_REWOUND in kinds


async def test_a_second_rewind_gives_yet_another_key(storage: rf.Storage) -> None:
    calls = Calls()
    flow = _shop(calls)
    run = await flow.run(item="tea", qty=1)
    await flow.rewind(run.id, to="invoice")
    await flow.rewind(run.id, to="invoice")
    assert len(set(calls.keys["invoice"])) == 3 and calls.bodies["price"] == 1


async def test_an_interrupt_among_the_rewound_steps_waits_for_a_new_payload(
        storage: rf.Storage) -> None:
    calls = Calls()
    flow = _shop(calls, interrupt=True)
    run = await flow.run(item="tea", qty=2)
    assert run.status is rf.Status.PAUSED
    done = await flow.continue_(run.id, step="approve", payload={"ok": True})
    assert done.status is rf.Status.COMPLETED and done.value == "closed"
    rewound = await flow.rewind(run.id, to="price")
    assert rewound.status is rf.Status.PAUSED and rewound.waiting_on == ["approve"]
    assert calls.bodies["close"] == 1
    final = await flow.continue_(run.id, step="approve", payload={"ok": False})  # accepted anew
    assert final.status is rf.Status.COMPLETED and final.value == "rejected"


async def test_rewind_of_a_paused_run_to_before_its_interrupt(storage: rf.Storage) -> None:
    calls = Calls()
    flow = _shop(calls, interrupt=True)
    run = await flow.run(item="tea", qty=2)
    rewound = await flow.rewind(run.id, to="quote", inputs={"item": "coffee"})
    assert rewound.status is rf.Status.PAUSED and rewound.waiting_on == ["approve"]
    assert calls.undos == ["void invoice 5.0", "price 5.0"]
    assert calls.bodies == Counter(reserve=1, ship=1, quote=2, price=2, invoice=2)
    done = await flow.continue_(run.id, step="approve", payload={"ok": True})
    assert done.status is rf.Status.COMPLETED and done.inputs == Order("coffee", 2)


async def test_a_cancelled_run_rewound_is_live_again(storage: rf.Storage) -> None:
    calls = Calls()
    flow = _shop(calls, interrupt=True)
    run = await flow.run(item="tea", qty=2)
    assert (await flow.cancel(run.id)).status is rf.Status.CANCELLED
    rewound = await flow.rewind(run.id, to="invoice")
    assert rewound.status is rf.Status.PAUSED  # live again: it waits for approval
    done = await flow.continue_(run.id, step="approve", payload={"ok": True})
    assert done.status is rf.Status.COMPLETED


async def test_refused_rewinds_write_nothing(storage: rf.Storage) -> None:
    calls = Calls()
    flow = _shop(calls)
    run = await flow.run(item="tea", qty=2)
    before = await storage.load_run(run.id, history=True, claims=True)
    with pytest.raises(rf.StepNotFound) as unknown:
        await flow.rewind(run.id, to="pricing")
    assert "price" in unknown.value.steps
    with pytest.raises(rf.InputValidationError) as bad:
        await flow.rewind(run.id, to="price", inputs={"qty": "four"})
    assert bad.value.field == "qty"
    with pytest.raises(rf.InputValidationError):
        await flow.rewind(run.id, to="price", inputs={"colour": "red"})  # no such field
    assert await storage.load_run(run.id, history=True, claims=True) == before
    assert calls.undos == []
    broken = rf.Reactor(unique("broken"))

    @broken.step
    async def fails() -> int:
        raise ValueError("no")

    failed = await broken.run()
    with pytest.raises(rf.RunStateError) as refused:
        await broken.rewind(failed.id, to="fails")
    assert refused.value.status == "failed" and "retry" in refused.value.message


@pytest.fixture(params=["rf_env", "rf_redis_env"])
def env(request: pytest.FixtureRequest) -> Environment:
    return request.getfixturevalue(request.param)  # type: ignore[no-any-return]


async def test_a_crash_mid_rewind_is_recovered_to_the_same_end(env: Environment) -> None:
    calls = Calls()
    flow = _shop(calls)
    run = await flow.run(item="tea", qty=2)
    with env.crash(flow, "invoice", when="before"):  # the undo done, price run again
        await flow.rewind(run.id, to="price", inputs={"qty": 3})
    assert calls.undos == ["void invoice 5.0", "price 5.0"]
    assert (await flow.get(run.id)).status is rf.Status.RUNNING
    await env.recover()
    done = await flow.get(run.id)
    assert done.status is rf.Status.COMPLETED and done.steps["invoice"].result == "invoice 7.5"
    assert calls.undos == ["void invoice 5.0", "price 5.0"]  # never undone twice
    assert calls.bodies["price"] == 2 and calls.bodies["reserve"] == 1


class Batch(msgspec.Struct):
    n: int


@pytest.mark.parametrize("fan_out", [False, True], ids=["inline", "fanned-out"])
async def test_rewind_through_a_map_runs_it_again_from_nothing(storage: rf.Storage,
                                                               fan_out: bool) -> None:
    undone: list[int] = []
    ran: list[int] = []
    flow = rf.Reactor(unique("maps"), inputs=Batch)

    @flow.step
    async def items(n: int) -> list[int]:
        return list(range(1, n + 1))

    @flow.map_step(over="items", fan_out=fan_out, batch_size=2)
    async def double(item: int) -> int:
        ran.append(item)
        return item * 2

    @double.undo
    async def halve(result: int, item: int) -> None:
        undone.append(item)

    @flow.step
    async def total(double: list[int]) -> int:
        return sum(double)

    run = await flow.run(n=2)
    if fan_out:
        run = await flow.wait(run.id, timeout=30)
    assert run.steps["total"].result == 6
    again = await flow.rewind(run.id, to="items", inputs={"n": 3})
    if fan_out:
        again = await flow.wait(run.id, timeout=30)
    assert again.status is rf.Status.COMPLETED and again.steps["total"].result == 12
    assert sorted(undone) == [1, 2]  # every element of the first pass undone once
    assert sorted(ran) == [1, 1, 2, 2, 3]


async def test_rewind_of_an_async_reactor_step_starts_a_new_child_run(
        storage: rf.Storage) -> None:
    child = rf.Reactor(unique("report"))
    made: list[str] = []

    @child.step
    async def build(ctx: rf.StepContext) -> str:
        made.append(ctx.run_id)
        return f"report {len(made)}"

    flow = rf.Reactor(unique("parent"))
    flow.async_reactor(child, name="report")(_no_inputs)

    @flow.step
    async def publish(report: str) -> str:
        return f"published {report}"

    run = await flow.run()
    done = await flow.wait(run.id, timeout=30)
    assert done.status is rf.Status.COMPLETED and done.value == "published report 1"
    again = await flow.rewind(run.id, to="report")
    again = await flow.wait(run.id, timeout=30)
    assert again.status is rf.Status.COMPLETED and again.value == "published report 2"
    assert made == [f"{run.id}-report", f"{run.id}-report-r1"]  # a new child run


async def _no_inputs() -> None:
    return None
