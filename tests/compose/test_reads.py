"""Maps and async units read each other (issue 22, items 21 and 22), beyond the matrix's one
shape: every way of reading a map from an async unit, a map over what a unit or an interrupt
gave, and what a map over a failed unit says. On both backends, with the embedded worker."""

from __future__ import annotations

import msgspec
import pytest

import reactorflow as rf
from tests.helpers import unique

pytestmark = pytest.mark.usefixtures("storage")


class Order(msgspec.Struct):
    items: list[int]
    fail: bool = False


class Approval(msgspec.Struct):
    approved: list[str]
    by: str


def _with_map(fan_out: bool, *, atomic: bool = True) -> rf.Reactor:
    flow = rf.Reactor(unique("reads"), inputs=Order)

    @flow.map_step(over="items", fan_out=fan_out, atomic=atomic)
    async def double(item: int) -> int:
        if item < 0:
            raise ValueError(f"negative {item}")
        return 2 * item

    return flow


@pytest.mark.parametrize("fan_out", [False, True], ids=["inline", "fanned_out"])
async def test_an_async_step_reads_a_map_as_each_kind_of_reader(fan_out: bool) -> None:
    """Item 21: the worker running the unit loads what its map readers take, as the run does
    (it raised `KeyError: ('double', <MapRead.VALUES>)` for every list reader)."""
    flow = _with_map(fan_out, atomic=False)

    @flow.async_step
    async def tally(double: list[rf.Outcome[int]], items: list[int]) -> str:
        values = [o.value for o in double if o.ok]
        errors = [o.error.message for o in double if o.error is not None]
        return f"{sum(values)} of {len(items)}; {errors}"

    @flow.async_step
    async def lazily(double: rf.MapResults[int]) -> int:
        return sum([o.value async for o in double if o.ok])

    @flow.step
    async def report(tally: str, lazily: int) -> str:
        return f"{tally} / {lazily}"

    run = await flow.run(items=[1, -2, 3])
    run = await flow.wait(run.id, timeout=30)
    assert run.status is rf.Status.COMPLETED, run.error
    assert run.value == "8 of 3; ['negative -2'] / 8"


@pytest.mark.parametrize("fan_out", [False, True], ids=["inline", "fanned_out"])
async def test_an_async_step_s_compensate_reads_the_map_in_its_worker(fan_out: bool) -> None:
    """A unit's compensate runs in its worker too: it takes the map's list as its step did."""
    flow = _with_map(fan_out)
    seen: list[object] = []

    @flow.async_step
    async def publish(double: list[int], fail: bool) -> int:
        if fail:
            raise ConnectionError("down")
        return sum(double)

    @publish.compensate
    async def unpublish(error: Exception, double: list[int]) -> None:
        seen.append(double)

    @flow.step
    async def report(publish: rf.Outcome[int]) -> str:
        return f"published {publish.value}" if publish.ok else f"not published: {publish.error}"

    done = await flow.wait((await flow.run(items=[1, 2])).id, timeout=30)
    assert done.value == "published 6"
    failed = await flow.wait((await flow.run(items=[1, 2], fail=True)).id, timeout=30)
    assert failed.status is rf.Status.COMPLETED, failed.error
    assert failed.value is not None and failed.value.startswith("not published")
    assert "ConnectionError" in failed.value
    assert seen == [[2, 4]]


@pytest.mark.parametrize("fan_out", [False, True], ids=["inline", "fanned_out"])
async def test_a_map_goes_over_the_list_a_manager_approved(fan_out: bool) -> None:
    """Item 22: a map over an interrupt's result (it was refused at the decorator)."""
    flow = rf.Reactor(unique("approved"), inputs=Order)

    @flow.interrupt
    async def approve(payload: Approval) -> list[str]:
        return payload.approved

    @flow.map_step(over="approve", fan_out=fan_out)
    async def ship(sku: str) -> str:
        return f"shipped {sku}"

    paused = await flow.run(items=[])
    assert paused.waiting_on == ["approve"]
    run = await flow.continue_(paused.id, step="approve",
                               payload={"approved": ["a", "b"], "by": "ann"})
    run = await flow.wait(run.id, timeout=30)
    assert run.status is rf.Status.COMPLETED, run.error
    assert run.value == ["shipped a", "shipped b"]


@pytest.mark.parametrize("fan_out", [False, True], ids=["inline", "fanned_out"])
async def test_a_map_over_a_failed_async_step_fails_with_its_error(fan_out: bool) -> None:
    """A map reads its `over` as a strict reader does: the unit's failure fails the map with
    `AsyncUnitFailed` naming the unit (not a "not a list" complaint about its missing value)."""
    flow = rf.Reactor(unique("units"), inputs=Order)

    @flow.async_step
    async def fetch(items: list[int], fail: bool) -> list[int]:
        if fail:
            raise ConnectionError("catalogue down")
        return [i + 1 for i in items]

    @flow.map_step(over=fetch, fan_out=fan_out)
    async def ship(item: int) -> int:
        return item

    ok = await flow.wait((await flow.run(items=[1, 2])).id, timeout=30)
    assert ok.status is rf.Status.COMPLETED, ok.error
    assert ok.value == [2, 3]
    run = await flow.wait((await flow.run(items=[1, 2], fail=True)).id, timeout=30)
    assert run.status is rf.Status.FAILED
    assert run.error is not None and run.error.step == "ship"
    assert run.error.type == "AsyncUnitFailed"
    assert "fetch" in run.error.message and "catalogue down" in run.error.message


async def test_a_manual_undo_gives_a_map_s_undo_the_map_it_read() -> None:
    """A rollback in a later execution (a manual `undo`) loads what a map's undo reads from
    another map, as the forward run did (it got nothing: the handler failed)."""
    flow = _with_map(False)
    undone: list[tuple[int, list[int]]] = []

    @flow.map_step(over="items")
    async def pack(item: int, double: list[int]) -> int:
        return item + sum(double)

    @pack.undo
    async def unpack(result: int, double: list[int]) -> None:
        undone.append((result, double))

    run = await flow.run(items=[1, 2])
    assert run.status is rf.Status.COMPLETED, run.error
    undo = await flow.undo(run.id)
    assert undo.status is rf.Status.CANCELLED, undo.error
    assert undone == [(8, [2, 4]), (7, [2, 4])]
