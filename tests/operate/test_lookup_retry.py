"""`rf.get_run`, `rf.list_runs` across reactors, and `reactor.retry` (on both backends)."""

from __future__ import annotations

import time
import uuid

import msgspec
import pytest

import reactorflow as rf
from reactorflow import records
from reactorflow.records import RunMeta, RunState
from tests.helpers import redeploy, unique


class Order(msgspec.Struct):
    item: str
    qty: int = 1


def _flow(name: str, fail: list[bool]) -> rf.Reactor:
    flow = rf.Reactor(name, inputs=Order)

    @flow.step
    async def reserve(item: str, qty: int) -> str:
        if fail[0]:
            raise ValueError(f"no stock for {item}")
        return f"{qty}x{item}"

    @flow.interrupt
    async def approve(payload: bool, reserve: str) -> bool:
        return payload

    @flow.step
    async def ship(reserve: str, approve: bool) -> str:
        return f"shipped {reserve}" if approve else "held"

    return flow


async def test_get_run_reads_any_run_without_its_reactor(storage: rf.Storage) -> None:
    flow = _flow(unique("lookup"), [False])
    paused = await flow.run(item="tea", qty=2)
    run = await rf.get_run(paused.id)
    assert run == await flow.get(paused.id)
    assert run.inputs == Order("tea", 2)
    with pytest.raises(rf.RunNotFound, match="no run 'nope'"):
        await rf.get_run("nope")


async def test_a_reactor_not_declared_here_still_gives_a_readable_snapshot(
        storage: rf.Storage) -> None:
    name = unique("gone")
    flow = _flow(name, [False])
    paused = await flow.run(item="tea")
    redeploy(flow)
    run = await rf.get_run(paused.id)  # no Reactor named `name` in this process any more
    assert (run.reactor, run.status, run.waiting_on) == (name, rf.Status.PAUSED, ["approve"])
    assert run.inputs == {"item": "tea", "qty": 1}  # plain data: the type is not known here
    assert run.steps["reserve"].status == rf.StepStatus.COMPLETED
    assert run.history[0].kind == "run.started"


async def test_list_runs_spans_reactors_newest_first(storage: rf.Storage) -> None:
    one, two = _flow(unique("one"), [False]), _flow(unique("two"), [True])
    started = []
    for flow in (one, two, one, two, one):
        started.append((await flow.run(item="x")).id)
    page = await rf.list_runs(limit=3)
    assert [r.id for r in page.runs] == started[::-1][:3]
    rest = await rf.list_runs(limit=3, cursor=page.next_cursor)
    assert [r.id for r in rest.runs] == started[::-1][3:] and rest.next_cursor is None
    failed = await rf.list_runs(status="failed")
    assert [r.id for r in failed.runs] == [started[3], started[1]]
    assert {r.reactor for r in failed.runs} == {two.name}
    mine = await rf.list_runs(reactor=one.name, status=rf.Status.PAUSED)
    assert [r.id for r in mine.runs] == [started[4], started[2], started[0]]


@pytest.mark.parametrize(("options", "message"), [
    ({"status": "stuck"}, "not a status"),
    ({"limit": 0}, "whole number from 1 to 1000"),
    ({"limit": True}, "whole number"),
    ({"cursor": "??"}, "pass back next_cursor"),
    ({"reactor": ""}, "give a reactor's name"),
])
async def test_list_runs_refuses_bad_options(storage: rf.Storage, options: dict[str, object],
                                             message: str) -> None:
    with pytest.raises(rf.ReactorflowError, match=message):
        await rf.list_runs(**options)  # type: ignore[arg-type]


async def test_retry_starts_a_linked_run_with_the_same_inputs(storage: rf.Storage) -> None:
    fail = [True]
    flow = _flow(unique("retry"), fail)
    failed = await flow.run(item="tea", qty=3)
    assert failed.status is rf.Status.FAILED
    fail[0] = False  # "the bug is fixed"
    again = await flow.retry(failed.id)
    assert again.id != failed.id and again.retried_from == failed.id
    assert again.status is rf.Status.PAUSED and again.inputs == Order("tea", 3)
    assert (await flow.get(again.id)).retried_from == failed.id
    assert await flow.get(failed.id) == failed  # the old run is untouched
    assert (await rf.get_run(failed.id)).retried_from is None


async def test_retry_accepts_a_cancelled_run(storage: rf.Storage) -> None:
    flow = _flow(unique("retry"), [False])
    paused = await flow.run(item="tea")
    cancelled = await flow.cancel(paused.id)
    assert cancelled.status is rf.Status.CANCELLED
    assert (await flow.retry(paused.id)).retried_from == paused.id


@pytest.mark.parametrize("status", ["paused", "completed"])
async def test_retry_refuses_a_run_that_did_not_end_badly(storage: rf.Storage,
                                                          status: str) -> None:
    flow = _flow(unique("retry"), [False])
    run = await flow.run(item="tea")
    if status == "completed":
        run = await flow.continue_(run.id, step="approve", payload=True)
    assert run.status == status
    with pytest.raises(rf.RunStateError, match=f"cannot retry run '{run.id}': it is {status}"):
        await flow.retry(run.id)
    assert len((await flow.list_runs()).runs) == 1  # nothing started


async def test_retry_names_the_run_of_another_reactor(storage: rf.Storage) -> None:
    one, two = _flow(unique("one"), [True]), _flow(unique("two"), [True])
    failed = await one.run(item="x")
    with pytest.raises(rf.RunNotFound, match=f"belongs to reactor '{one.name}'"):
        await two.retry(failed.id)
    with pytest.raises(rf.RunNotFound):
        await one.retry("missing")


async def test_retry_of_an_always_dispatch_reactor_goes_to_a_worker(storage: rf.Storage) -> None:
    fail = [True]
    flow = rf.Reactor(unique("retry-dispatch"), always_dispatch=True)

    @flow.step
    async def work() -> str:
        if fail[0]:
            raise ValueError("down")
        return "done"

    first = await flow.run()
    assert first.status is rf.Status.RUNNING  # handed to the embedded worker
    assert (await flow.wait(first.id, timeout=30)).status is rf.Status.FAILED
    fail[0] = False
    again = await flow.retry(first.id)
    assert again.status is rf.Status.RUNNING and again.retried_from == first.id
    done = await flow.wait(again.id, timeout=30)
    assert (done.status, done.value, done.retried_from) == (rf.Status.COMPLETED, "done", first.id)


async def test_retry_names_a_stored_input_the_current_type_refuses(storage: rf.Storage) -> None:
    flow = _flow(unique("retry"), [True])
    run_id = f"old{uuid.uuid4().hex[:12]}"
    now = time.time()
    meta = RunMeta(records.SCHEMA_VERSION, run_id, flow.name, now,
                   records.raw({"item": "tea", "qty": "two"}), {})  # stored by older code
    state = RunState(rf.Status.FAILED, now, error=rf.RunError("reserve", "ValueError", "x"))
    assert await storage.create_run(run_id, reactor=flow.name, status=rf.Status.FAILED,
                                    meta=records.encode(meta), state=records.encode(state),
                                    created_at=now, owner="w", lock_ttl=10.0)
    await storage.release_lock(run_id, "w")
    with pytest.raises(rf.InputValidationError) as info:
        await flow.retry(run_id)
    assert info.value.field == "qty"
    assert [r.id for r in (await flow.list_runs()).runs] == [run_id]  # nothing started


async def test_a_run_read_without_its_reactor_lists_every_step_in_graph_order(
        storage: rf.Storage) -> None:
    child = rf.Reactor(unique("order-child"), inputs=Order)

    @child.step
    async def pick(item: str) -> str:
        return f"picked {item}"

    @child.step
    async def pack(pick: str) -> str:
        return f"packed {pick}"

    element = rf.Reactor(unique("order-element"), inputs=Order)

    @element.step
    async def label(item: str) -> str:
        return f"label {item}"

    flow = rf.Reactor(unique("order-graph"), inputs=Order)

    @flow.step
    async def reserve(item: str) -> str:
        return item

    @flow.compose(child)
    async def fulfil(item: str, reserve: str) -> Order:
        return Order(item=item)

    @flow.step
    async def items(reserve: str) -> list[str]:
        return [reserve, reserve]

    @flow.map_step(over="items", reactor=element)
    async def labels(item: str) -> Order:
        return Order(item=item)

    @flow.interrupt
    async def approve(payload: bool, labels: list[str]) -> bool:
        return payload

    @flow.step
    async def ship(approve: bool) -> str:
        return "shipped"

    paused = await flow.run(item="tea")
    assert paused.status is rf.Status.PAUSED
    expected = await flow.get(paused.id)  # in graph order, pending steps included
    assert list(expected.steps) == ["reserve", "fulfil", "fulfil.pick", "fulfil.pack", "items",
                                    "labels", "approve", "ship"]
    redeploy(flow)
    run = await rf.get_run(paused.id)  # no reactor: the graph stored with the run says
    assert list(run.steps) == list(expected.steps)
    assert {key: state.status for key, state in run.steps.items()} == {
        key: state.status for key, state in expected.steps.items()}
    assert run.steps["ship"].status is rf.StepStatus.PENDING
