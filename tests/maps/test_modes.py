"""The same map behaviours in both modes (inline, and fanned out on the embedded worker), on
both backends: manual undo, retries and idempotency keys, undo_all's failure, undo_all not
called when nothing completed, maps in composed children, a map after a background hand-off,
and an async step inside an element reactor."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator

import msgspec
import pytest

import reactorflow as rf
from tests.helpers import unique
from tests.maps.flows import Batch, saga

MODES = pytest.mark.parametrize("fan_out", [False, True], ids=["inline", "fan_out"])


@MODES
async def test_manual_undo_of_a_completed_run_undoes_the_map(storage: rf.Storage,
                                                             fan_out: bool) -> None:
    flow, log, _ = saga(fan_out=fan_out, batch_size=2)
    run = await flow.wait((await flow.run(tag="m", items=[1, 2, 3])).id, timeout=30)
    assert run.status is rf.Status.COMPLETED
    undone = await flow.undo(run.id)
    assert undone.status is rf.Status.CANCELLED
    assert [e for e in log if e.startswith("undo")] == ["undo:3:9", "undo:2:4", "undo:1:1"]
    assert log[-1] == "unprepare:p-m"


@MODES
async def test_element_retries_keep_one_idempotency_key(storage: rf.Storage,
                                                        fan_out: bool) -> None:
    flow = rf.Reactor(unique("retry"), inputs=Batch)
    seen: dict[int, list[tuple[int, str]]] = {}
    lock = threading.Lock()

    @flow.map_step(over="items", retries=rf.Retry(3, backoff=0), fan_out=fan_out)
    async def flaky(item: int, ctx: rf.StepContext) -> int:
        with lock:
            seen.setdefault(item, []).append((ctx.attempt, ctx.idempotency_key))
        if ctx.attempt < 3 and item % 2:
            raise ConnectionError("flaky")
        return item

    run = await flow.wait((await flow.run(tag="r", items=[0, 1, 2, 3])).id, timeout=30)
    assert run.status is rf.Status.COMPLETED
    assert run.value == [0, 1, 2, 3]
    for item, calls in seen.items():
        assert {key for _, key in calls} == {f"{run.id}:flaky:{item}"}
        assert [attempt for attempt, _ in calls] == ([1, 2, 3] if item % 2 else [1])


@MODES
async def test_undo_all_failure_and_nothing_completed(storage: rf.Storage,
                                                      fan_out: bool) -> None:
    flow = rf.Reactor(unique("undoall"), inputs=Batch)
    log: list[str] = []

    @flow.map_step(over="items", fan_out=fan_out, batch_size=1)
    async def each(item: int, fail: list[int]) -> int:
        if item in fail:
            raise ValueError(f"no {item}")
        return item

    @each.undo_all
    async def all_back(results: AsyncIterator[int]) -> None:
        got = [r async for r in results]
        log.append(f"undo_all {got}")
        raise OSError("bulk undo broke")

    @flow.step
    async def boom(each: list[int], late: bool) -> None:
        if late:
            raise RuntimeError("boom")

    run = await flow.wait((await flow.run(tag="x", items=[1, 2], late=True)).id, timeout=30)
    assert run.status is rf.Status.FAILED and run.error is not None
    assert log == ["undo_all [1, 2]"]
    assert [(f.step, f.kind) for f in run.error.rollback_failures] == [("each", "undo_all")]
    log.clear()
    none = await flow.wait((await flow.run(tag="y", items=[1, 2], fail=[1])).id, timeout=30)
    assert none.status is rf.Status.FAILED
    assert log == []  # no element completed: undo_all is not called


@MODES
async def test_a_map_inside_a_composed_child(storage: rf.Storage, fan_out: bool) -> None:
    child = rf.Reactor(unique("child"), inputs=Batch)
    log: list[str] = []

    @child.map_step(over="items", batch_size=2, fan_out=fan_out)
    async def inner(item: int, tag: str) -> str:
        return f"{tag}{item}"

    @inner.undo
    async def uninner(result: str) -> None:
        log.append(f"undo:{result}")

    parent = rf.Reactor(unique("parent"), inputs=Batch)

    @parent.compose(child)
    async def sub(tag: str, items: list[int]) -> Batch:
        return Batch(tag=tag, items=items)

    @parent.step
    async def after(sub: list[str], late: bool) -> list[str]:
        if late:
            raise RuntimeError("late")
        return sub

    run = await parent.wait((await parent.run(tag="c", items=[1, 2, 3])).id, timeout=30)
    assert run.status is rf.Status.COMPLETED, run.error
    assert run.value == ["c1", "c2", "c3"]
    failed = await parent.wait((await parent.run(tag="d", items=[1, 2], late=True)).id,
                               timeout=30)
    assert failed.status is rf.Status.FAILED
    assert log == ["undo:d2", "undo:d1"]


@MODES
async def test_a_map_after_a_background_hand_off(storage: rf.Storage, fan_out: bool) -> None:
    flow = rf.Reactor(unique("handoff"), inputs=Batch)
    where: list[str] = []

    @flow.step
    async def first(tag: str) -> str:
        where.append(threading.current_thread().name)
        return tag

    flow.background(after="first")

    @flow.map_step(over="items", fan_out=fan_out)
    async def each(item: int, first: str) -> str:
        return f"{first}{item}"

    run = await flow.run(tag="h", items=[1, 2])
    assert run.status is rf.Status.RUNNING  # handed to a worker after `first`
    done = await flow.wait(run.id, timeout=30)
    assert done.status is rf.Status.COMPLETED and done.value == ["h1", "h2"]


class Job(msgspec.Struct):
    n: int


@MODES
async def test_an_async_step_inside_an_element_reactor(storage: rf.Storage,
                                                       fan_out: bool) -> None:
    child = rf.Reactor(unique("unitchild"), inputs=Job)

    @child.async_step
    async def side(n: int) -> int:
        return n * 10

    @child.step
    async def use(side: int) -> int:
        return side + 1

    parent = rf.Reactor(unique("unitparent"), inputs=Batch)

    @parent.map_step(over="items", reactor=child, fan_out=fan_out)
    async def each(item: int) -> Job:
        return Job(item)

    run = await parent.wait((await parent.run(tag="u", items=[1, 2])).id, timeout=30)
    assert run.status is rf.Status.COMPLETED, run.error
    assert run.value == [11, 21]
