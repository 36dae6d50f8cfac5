"""Inline maps on both storage backends: element order, the batch_size window, atomic and
non-atomic failure, undo/undo_all, readers, retries and idempotency keys (api.md §4 "Maps")."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import msgspec
import pytest

import reactorflow as rf
from tests.helpers import unique
from tests.maps.flows import Batch, Window, saga


class Loose(msgspec.Struct):
    items: Any


def mapping(**options: Any) -> tuple[rf.Reactor, list[str], Window]:
    return saga(**options)


async def test_results_come_in_element_order_and_the_window_is_bounded(
        storage: rf.Storage) -> None:
    flow, _log, window = mapping(batch_size=3)
    run = await flow.run(tag="a", items=list(range(20)))
    assert run.status is rf.Status.COMPLETED, run.error
    assert run.value == sum(i * i for i in range(20))
    assert window.started == list(range(20))  # started in index order
    assert window.peak == 3  # measured: never more than batch_size in flight
    assert run.steps["square"].status == "completed"


async def test_a_map_value_is_the_list_a_reader_gets(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("value"), inputs=Batch)

    @flow.map_step(over="items")
    async def double(item: int) -> int:
        return 2 * item

    run = await flow.run(tag="v", items=[3, 1, 2])
    assert run.value == [6, 2, 4]
    assert (await flow.get(run.id)).value == [6, 2, 4]
    assert (await rf.get_run(run.id)).value == [6, 2, 4]


async def test_an_empty_list_completes_the_map_at_once(storage: rf.Storage) -> None:
    flow, _log, _window = mapping()
    run = await flow.run(tag="e", items=[])
    assert run.status is rf.Status.COMPLETED
    assert run.value == 0


async def test_atomic_failure_stops_new_elements_and_undoes_highest_index_first(
        storage: rf.Storage) -> None:
    flow, log, window = mapping(batch_size=2)
    run = await flow.run(tag="f", items=list(range(10)), fail=[3])
    assert run.status is rf.Status.FAILED
    assert run.error is not None and run.error.step == "square"
    assert run.error.type == "ValueError" and "element 3 broke" in run.error.message
    assert window.started[:4] == [0, 1, 2, 3]
    assert len(window.started) < 10  # no new element started after the failure
    started = sorted(window.started)
    completed = [i for i in started if i != 3]
    assert log.count("compensate:3:element 3 broke") == 1
    undone = [entry for entry in log if entry.startswith("undo:")]
    assert undone == [f"undo:{i}:{i * i}" for i in sorted(completed, reverse=True)]
    assert log[-1] == "unprepare:p-f"  # earlier steps after the map
    assert run.steps["square"].status == "undone"
    assert run.error.rollback_failures == []


async def test_in_flight_elements_finish_before_the_rollback(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("inflight"), inputs=Batch)
    log: list[str] = []
    release = anyio.Event()
    both_started = anyio.Event()
    started: list[int] = []

    @flow.map_step(over="items", batch_size=3)
    async def work(item: int) -> int:
        if item == 0:
            await both_started.wait()  # 1 and 2 are in flight when 0 fails
            release.set()
            raise RuntimeError("first broke")
        started.append(item)
        if len(started) == 2:
            both_started.set()
        await release.wait()
        await anyio.sleep(0.01)
        log.append(f"done:{item}")
        return item

    @work.undo
    async def unwork(result: int) -> None:
        log.append(f"undo:{result}")

    run = await flow.run(tag="i", items=[0, 1, 2, 3, 4])
    assert run.status is rf.Status.FAILED
    assert started == [1, 2]  # 3 and 4 never started
    assert sorted(log[:2]) == ["done:1", "done:2"]  # in flight: finished, then undone
    assert log[2:] == ["undo:2", "undo:1"]


async def test_non_atomic_map_completes_with_every_outcome(storage: rf.Storage) -> None:
    flow, log, _window = mapping(atomic=False)
    run = await flow.run(tag="n", items=list(range(6)), fail=[1, 4])
    assert run.status is rf.Status.COMPLETED
    assert run.value == sum(i * i for i in range(6) if i not in (1, 4))
    assert sorted(e for e in log if e.startswith("compensate")) == [
        "compensate:1:element 1 broke", "compensate:4:element 4 broke"]
    assert not any(e.startswith("undo") for e in log)


async def test_non_atomic_outcomes_carry_run_errors(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("outcomes"), inputs=Batch)

    @flow.map_step(over="items", atomic=False)
    async def check(item: int) -> int:
        if item < 0:
            raise ValueError(f"negative {item}")
        return item

    @flow.step
    async def seen(check: list[rf.Outcome[int]]) -> list[str]:
        return [f"ok:{o.value}" if o.ok else f"{o.error.type}:{o.error.message}"
                for o in check if o.ok or o.error is not None]

    run = await flow.run(tag="o", items=[1, -2, 3])
    assert run.value == ["ok:1", "ValueError:negative -2", "ok:3"]
    got = await flow.get(run.id)
    assert got.value == ["ok:1", "ValueError:negative -2", "ok:3"]


async def test_map_results_is_lazy_sized_and_iterable_twice(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("lazy"), inputs=Batch)

    @flow.map_step(over="items", atomic=False, batch_size=50)
    async def inc(item: int) -> int:
        if item == 7:
            raise KeyError("seven")
        return item + 1

    @flow.step
    async def summary(inc: rf.MapResults[int]) -> list[int]:
        first = [o.value async for o in inc if o.ok]
        second = [o.ok async for o in inc]
        return [len(inc), len(first), second.count(False), sum(v or 0 for v in first)]

    items = list(range(1234))  # more than one page
    run = await flow.run(tag="l", items=items)
    assert run.value == [1234, 1233, 1, sum(i + 1 for i in items if i != 7)]


async def test_undo_all_is_called_once_with_results_in_index_order(storage: rf.Storage) -> None:
    flow, log, _window = mapping(batch_size=5, undo_all=True)
    run = await flow.run(tag="u", items=[5, 4, 3, 2, 1], late=True)
    assert run.status is rf.Status.FAILED and run.error is not None
    assert run.error.step == "total"
    assert log.count("undo_all:p-u:[25, 16, 9, 4, 1]") == 1
    assert [e for e in log if e.startswith("undo")] == ["undo_all:p-u:[25, 16, 9, 4, 1]"]
    assert log[-1] == "unprepare:p-u"


async def test_undo_all_is_not_called_when_no_element_completed(storage: rf.Storage) -> None:
    flow, log, _window = mapping(batch_size=1, undo_all=True)
    run = await flow.run(tag="z", items=[0, 1, 2], fail=[0])
    assert run.status is rf.Status.FAILED
    assert not any(e.startswith("undo_all") for e in log)
    assert log[-1] == "unprepare:p-z"


async def test_a_failing_undo_all_is_recorded_and_earlier_steps_are_still_undone(
        storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("undoallfail"), inputs=Batch)
    log: list[str] = []

    @flow.step
    async def first() -> str:
        return "one"

    @first.undo
    async def unfirst(result: str) -> None:
        log.append("unfirst")

    @flow.map_step(over="items")
    async def each(item: int, first: str) -> int:
        return item

    @each.undo_all
    async def all_back(results: AsyncIterator[int]) -> None:
        raise OSError("bulk undo broke")

    @flow.step
    async def boom(each: list[int]) -> None:
        raise RuntimeError("boom")

    run = await flow.run(tag="x", items=[1, 2])
    assert run.status is rf.Status.FAILED and run.error is not None
    assert [(f.step, f.kind, f.message) for f in run.error.rollback_failures] == [
        ("each", "undo_all", "bulk undo broke")]
    assert log == ["unfirst"]
    again = await flow.get(run.id)
    assert again.error is not None and again.error.rollback_failures[0].kind == "undo_all"


async def test_a_later_failure_undoes_every_element(storage: rf.Storage) -> None:
    flow, log, _window = mapping(batch_size=2)
    run = await flow.run(tag="l", items=[1, 2, 3], late=True)
    assert run.status is rf.Status.FAILED
    assert [e for e in log if e.startswith("undo")] == ["undo:3:9", "undo:2:4", "undo:1:1"]
    assert run.steps["square"].status == "undone"


async def test_a_failing_element_undo_is_recorded_and_the_rollback_goes_on(
        storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("undofail"), inputs=Batch)
    log: list[str] = []

    @flow.map_step(over="items")
    async def each(item: int) -> int:
        return item

    @each.undo
    async def back(result: int) -> None:
        if result == 2:
            raise OSError("cannot undo 2")
        log.append(f"undo:{result}")

    @flow.step
    async def boom(each: list[int]) -> None:
        raise RuntimeError("boom")

    run = await flow.run(tag="x", items=[1, 2, 3])
    assert log == ["undo:3", "undo:1"]
    assert run.error is not None
    failures = run.error.rollback_failures
    assert [(f.step, f.kind) for f in failures] == [("each", "undo")]
    assert "cannot undo 2" in failures[0].message and "element 1" in failures[0].message


async def test_element_timeout_fails_that_element(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("timeout"), inputs=Batch)

    @flow.map_step(over="items", timeout=0.05, atomic=False)
    async def slow(item: int) -> int:
        if item:
            await anyio.sleep(5)
        return item

    @flow.step
    async def kinds(slow: list[rf.Outcome[int]]) -> list[str]:
        return ["ok" if o.ok else o.error.type for o in slow if o.ok or o.error]

    run = await flow.run(tag="t", items=[0, 1])
    assert run.value == ["ok", "StepTimeout"]


async def test_a_source_that_is_not_a_list_fails_the_map_naming_the_type(
        storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("badsource"), inputs=Loose)

    @flow.map_step(over="items")
    async def each(item: int) -> int:
        return item

    run = await flow.run(items={"a": 1})
    assert run.status is rf.Status.FAILED and run.error is not None
    assert run.error.step == "each"
    assert run.error.type == "ArgumentError"
    assert "'items', which is a dict in this run, not a list or tuple" in run.error.message


async def test_an_element_result_not_matching_the_annotation_fails_that_element(
        storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("badresult"), inputs=Batch)

    @flow.map_step(over="items")
    async def each(item: int) -> int:
        return "x" if item == 2 else item  # type: ignore[return-value]

    run = await flow.run(tag="b", items=[2, 1])
    assert run.status is rf.Status.FAILED and run.error is not None
    assert run.error.type == "SerializationError"
    assert "map 'each', element 0" in run.error.message


async def test_a_non_encodable_element_result_names_the_map_and_index(
        storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("noencode"), inputs=Batch)

    @flow.map_step(over="items")
    async def each(item: int) -> object:
        return object() if item == 1 else item

    run = await flow.run(tag="b", items=[0, 1])
    assert run.status is rf.Status.FAILED and run.error is not None
    assert run.error.type == "SerializationError"
    assert "map 'each', element 1" in run.error.message


async def test_a_map_over_another_map(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("mapmap"), inputs=Batch)

    @flow.map_step(over="items")
    async def first(item: int) -> int:
        return item + 1

    @flow.map_step(over="first")
    async def second(value: int) -> int:
        return value * 10

    run = await flow.run(tag="m", items=[1, 2])
    assert run.value == [20, 30]


async def test_when_false_skips_the_map(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("when"), inputs=Batch)

    @flow.map_step(over="items", when=lambda tag: tag == "go")
    async def each(item: int, tag: str) -> int:
        return item

    run = await flow.run(tag="stop", items=[1])
    assert run.status is rf.Status.COMPLETED
    assert run.steps["each"].status == "skipped"
    assert run.value is None


@pytest.mark.parametrize("atomic", [True, False])
async def test_element_outcomes_are_stored_in_their_slots(storage: rf.Storage,
                                                          atomic: bool) -> None:
    flow, _log, _window = mapping(atomic=atomic)
    run = await flow.run(tag="s", items=[1, 2])
    assert await storage.count_elements(run.id, "square") == 2
