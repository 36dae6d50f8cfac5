"""What a snapshot shows: each step's typed result (lazily decoded), a one-line error summary,
and a wait that times out on a run no worker has taken."""

from __future__ import annotations

import copy
import pickle

import anyio
import msgspec
import pytest
from dramatiq.brokers.stub import StubBroker

import reactorflow as rf
from reactorflow.runtime.maps.fanout import element_lock
from tests.helpers import unique


class Hotel(msgspec.Struct):
    reference: str
    price: float


def booking_flow(fail: bool = False) -> rf.Reactor:
    flow = rf.Reactor(unique("booking"))

    @flow.step
    async def hotel() -> Hotel:
        return Hotel("HT-1", 80.0)

    @flow.step
    async def nights() -> int:
        return 3

    @flow.step
    async def total(hotel: Hotel, nights: int) -> float:
        if fail:
            raise ValueError("the card was declined\n  reason: insufficient funds\n")
        return hotel.price * nights

    @hotel.undo
    async def cancel_hotel(booked: Hotel) -> None:
        pass

    return flow


async def test_step_results_are_typed_by_their_annotations(storage: rf.Storage) -> None:
    flow = booking_flow()
    run = await flow.run()
    for snapshot in (run, await flow.get(run.id)):
        assert snapshot.steps["hotel"].result == Hotel("HT-1", 80.0)
        assert isinstance(snapshot.steps["hotel"].result, Hotel)
        assert snapshot.steps["nights"].result == 3
        assert snapshot.steps["total"].result == 240.0 == snapshot.value
    undone = await flow.undo(run.id)
    assert undone.steps["hotel"].status == "undone"
    assert undone.steps["hotel"].result == Hotel("HT-1", 80.0)  # kept: what was undone


async def test_steps_without_a_result_show_none(storage: rf.Storage) -> None:
    flow = booking_flow(fail=True)
    run = await flow.run()
    assert run.status is rf.Status.FAILED
    assert run.steps["total"].status == "failed" and run.steps["total"].result is None
    assert run.steps["hotel"].status == "undone"
    paused_flow = rf.Reactor(unique("paused"))

    @paused_flow.interrupt
    async def approve(payload: bool) -> bool:
        return payload

    paused = await paused_flow.run()
    assert paused.steps["approve"].status == "waiting"
    assert paused.steps["approve"].result is None


async def test_a_result_survives_copies_and_is_left_out_of_encodings(
        storage: rf.Storage) -> None:
    flow = booking_flow()
    run = await flow.get((await flow.run()).id)
    state = run.steps["hotel"]
    assert pickle.loads(pickle.dumps(state)).result == Hotel("HT-1", 80.0)
    assert copy.deepcopy(run).steps["hotel"].result == Hotel("HT-1", 80.0)
    assert "result" not in msgspec.json.decode(msgspec.json.encode(state))


async def test_composed_step_result_is_the_childs_value(storage: rf.Storage) -> None:
    child = booking_flow()
    parent = rf.Reactor(unique("trip"))

    @parent.compose(child)
    async def book() -> None:
        return None

    run = await parent.get((await parent.run()).id)
    assert run.steps["book"].result == 240.0
    assert run.steps["book.hotel"].result == Hotel("HT-1", 80.0)


async def test_error_summary_is_one_line(storage: rf.Storage) -> None:
    flow = booking_flow(fail=True)
    run = await flow.run()
    assert run.error is not None
    assert run.error.message == "the card was declined\n  reason: insufficient funds\n"
    summary = str(run.error)
    assert "\n" not in summary and "\r" not in summary
    assert summary == ("step 'total' failed: ValueError: the card was declined / reason: "
                       "insufficient funds")
    stored = await flow.get(run.id)
    assert str(stored.error) == summary
    assert "\n" not in next(e for e in stored.history if e.kind == "run.failed").detail


async def test_wait_timeout_says_no_worker_took_the_run(storage: rf.Storage) -> None:
    rf.configure(broker=StubBroker())  # a broker that no worker consumes
    flow = booking_flow()
    handed = await flow.dispatch()
    with pytest.raises(rf.WaitTimeout) as info:
        await flow.wait(handed.id, timeout=0.3)
    assert info.value.unclaimed and info.value.status == "running"
    assert "no worker has taken it" in str(info.value)
    assert "reactorflow worker" in str(info.value)


class Crate(msgspec.Struct):
    items: list[str]


async def test_wait_timeout_says_no_worker_took_a_fanned_out_maps_elements(
        storage: rf.Storage) -> None:
    rf.configure(broker=StubBroker())  # a broker that no worker consumes
    flow = rf.Reactor(unique("fanned"), inputs=Crate)

    @flow.map_step(over="items", fan_out=True, batch_size=2)
    async def pack(item: str) -> str:
        return item

    parked = await flow.run(items=["a", "b", "c"])
    assert parked.status is rf.Status.RUNNING  # parked at the map, its elements enqueued
    with pytest.raises(rf.WaitTimeout) as info:
        await flow.wait(parked.id, timeout=0.3)
    assert info.value.unclaimed and info.value.map == "pack"
    assert "parked at fanned-out map 'pack'" in str(info.value)
    assert "no worker has taken any of them" in str(info.value)
    assert "reactorflow worker" in str(info.value)
    # a worker that took element 1 holds its lock, as element jobs do while they run
    assert await storage.acquire_lock(element_lock(parked.id, "pack", 1), "worker", 30)
    with pytest.raises(rf.WaitTimeout) as taken:
        await flow.wait(parked.id, timeout=0.3)
    assert not taken.value.unclaimed and taken.value.map is None
    assert "no worker" not in str(taken.value)


async def test_wait_timeout_on_a_run_in_progress_does_not_blame_workers(
        storage: rf.Storage) -> None:
    entered, release = anyio.Event(), anyio.Event()
    flow = rf.Reactor(unique("slow"))
    ids: list[str] = []

    @flow.step
    async def slow(ctx: rf.StepContext) -> int:
        ids.append(ctx.run_id)
        entered.set()
        await release.wait()
        return 1

    async with anyio.create_task_group() as tg:
        tg.start_soon(flow.run)
        with anyio.fail_after(10):
            await entered.wait()
        with pytest.raises(rf.WaitTimeout) as info:
            await flow.wait(ids[0], timeout=0.3)
        release.set()
    assert not info.value.unclaimed
    assert "no worker" not in str(info.value)


async def test_a_map_steps_result_is_its_element_count(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("mapped"))

    @flow.step
    async def items() -> list[str]:
        return ["a", "b", "c"]

    @flow.map_step(over="items")
    async def ship(item: str) -> Hotel:
        return Hotel(item, 1.0)

    run = await flow.run()
    assert run.value == [Hotel("a", 1.0), Hotel("b", 1.0), Hotel("c", 1.0)]
    for snapshot in (run, await flow.get(run.id)):
        assert snapshot.steps["items"].result == ["a", "b", "c"]
        assert snapshot.steps["ship"].result == 3
