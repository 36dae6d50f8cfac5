"""Correlation ids are per reactor and free again once their run has ended (issue 8, defect
27)."""

from __future__ import annotations

import msgspec
import pytest

import reactorflow as rf
from tests.helpers import unique


class Order(msgspec.Struct):
    order_id: str


def _flow(name: str, *, fails_after: bool = False) -> rf.Reactor:
    flow = rf.Reactor(unique(name), inputs=Order)

    @flow.step
    async def prepare(order_id: str) -> str:
        return order_id

    @flow.interrupt(correlation_id="order:{order_id}")
    async def approve(payload: bool, prepare: str) -> bool:
        return payload

    @flow.step
    async def finish(approve: bool, prepare: str) -> str:
        if fails_after or not approve:
            raise RuntimeError("refused")
        return f"{prepare} done"

    return flow


async def test_two_reactors_may_use_the_same_correlation_id(storage: rf.Storage) -> None:
    shipping, billing = _flow("shipping"), _flow("billing")
    ship = await shipping.run(order_id="A1")
    bill = await billing.run(order_id="A1")
    assert ship.status is rf.Status.PAUSED and bill.status is rf.Status.PAUSED
    done = await billing.continue_by_correlation_id("order:A1", step="approve", payload=True)
    assert done.id == bill.id and done.status is rf.Status.COMPLETED
    shipped = await shipping.continue_by_correlation_id("order:A1", step="approve",
                                                        payload=True)
    assert shipped.id == ship.id and shipped.status is rf.Status.COMPLETED


async def test_a_paused_holder_still_refuses_a_second_run(storage: rf.Storage) -> None:
    flow = _flow("held")
    first = await flow.run(order_id="B1")
    second = await flow.run(order_id="B1")
    assert first.status is rf.Status.PAUSED
    assert second.status is rf.Status.FAILED
    assert second.error is not None and second.error.type == "CorrelationConflict"


@pytest.mark.parametrize("ending", ["cancel", "undo", "fail", "complete"])
async def test_an_ended_run_frees_its_correlation_id(storage: rf.Storage, ending: str) -> None:
    flow = _flow("reuse")
    first = await flow.run(order_id="C1")
    assert first.status is rf.Status.PAUSED
    if ending == "cancel":
        ended = await flow.cancel(first.id, reason="customer called")
    elif ending == "undo":
        ended = await flow.undo(first.id)
    else:
        ended = await flow.continue_by_correlation_id(
            "order:C1", step="approve", payload=ending == "complete")
    assert ended.status.is_terminal

    second = await flow.run(order_id="C1")
    assert second.status is rf.Status.PAUSED, second.error
    resumed = await flow.continue_by_correlation_id("order:C1", step="approve", payload=True)
    assert resumed.id == second.id and resumed.status is rf.Status.COMPLETED


async def test_a_mapping_left_by_an_ended_run_is_taken_over(storage: rf.Storage) -> None:
    """A crash between a run's final save and the release of its ids leaves the mapping."""
    flow = _flow("stale")
    first = await flow.run(order_id="D1")
    await flow.cancel(first.id)
    assert await storage.resolve_correlation(flow.name, "order:D1") is None  # released
    assert await storage.map_correlation(flow.name, "order:D1", first.id) == first.id  # as if not
    second = await flow.run(order_id="D1")
    assert second.status is rf.Status.PAUSED, second.error
    assert await storage.resolve_correlation(flow.name, "order:D1") == second.id
