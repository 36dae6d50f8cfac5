"""Bulk operations by filter (api.md §16), on both backends: a bulk cancel of 500 runs in
which 20 refuse, each outcome reported; a dry run writes nothing; a bulk retry run twice
retries each run once; a selection with no filter is refused unless `all`; the filters
(status, time, error type, version, correlation id) each narrow the selection."""

from __future__ import annotations

import anyio
import msgspec
import pytest

import reactorflow as rf
from reactorflow import clock
from reactorflow.runtime.ops import bulk
from tests.operate.flows import orders


class Label(msgspec.Struct):
    label: str


crates = rf.Reactor("bulk.crates", inputs=Label)


@crates.step
async def pack(label: str) -> str:
    return label


@crates.interrupt
async def sign(payload: str, pack: str) -> str:
    return payload


quick = rf.Reactor("bulk.quick", inputs=Label)


@quick.step
async def stamp(label: str) -> str:
    return label


async def _start(count: int, start: object) -> list[rf.Run]:
    started: list[rf.Run] = []
    limit = anyio.Semaphore(16)

    async def one(index: int) -> None:
        async with limit:
            started.append(await start(index))  # type: ignore[operator]

    async with anyio.create_task_group() as group:
        for index in range(count):
            group.start_soon(one, index)
    return started


async def _everything(storage: rf.Storage) -> list[bytes]:
    """Every stored run with its history, encoded: what a write would change."""
    found: list[bytes] = []
    cursor = None
    while True:
        page = await storage.list_runs(None, None, 1000, cursor)
        for head in page.heads:
            stored = await storage.load_run(head.run_id, history=True)
            found.append(msgspec.msgpack.encode(stored))
        if page.next_cursor is None:
            return sorted(found)
        cursor = page.next_cursor


async def test_a_bulk_cancel_of_500_runs_in_which_20_refuse(storage: rf.Storage) -> None:
    paused = await _start(480, lambda i: crates.run(label=f"c{i}"))
    ended = await _start(20, lambda i: crates.run(label=f"d{i}"))
    for run in ended:  # the 20 that end before the bulk cancel: it refuses them
        await crates.continue_(run.id, step="sign", payload="ok")
    chosen = bulk.selection(reactor="bulk.crates")
    runs = await bulk.select(chosen)
    assert len(runs) == 500
    outcomes: list[bulk.Outcome] = []
    await bulk.apply("cancel", runs, outcomes.append)

    assert sorted(o.id for o in outcomes) == sorted(r.id for r in paused + ended)
    refused = {o.id: o for o in outcomes if not o.ok}
    assert set(refused) == {r.id for r in ended}
    for outcome in refused.values():
        assert outcome.status == "completed" and outcome.error_type == "RunStateError"
        assert outcome.error is not None and "cannot cancel" in outcome.error
    for run in paused:
        assert (await crates.get(run.id)).status is rf.Status.CANCELLED
    for run in ended:
        assert (await crates.get(run.id)).status is rf.Status.COMPLETED

    again: list[bulk.Outcome] = []  # re-running it: the cancelled ones are ok as they are
    await bulk.apply("cancel", await bulk.select(chosen), again.append)
    assert sum(o.ok for o in again) == 480 and sum(not o.ok for o in again) == 20
    assert {o.note for o in again if o.ok} == {"cancelled already"}


async def test_a_dry_run_selects_and_writes_nothing(storage: rf.Storage) -> None:
    for index in range(5):
        await crates.run(label=f"x{index}")
    before = await _everything(storage)
    runs = await bulk.select(bulk.selection(reactor="bulk.crates", status="paused"))
    assert len(runs) == 5
    assert await _everything(storage) == before


async def test_a_bulk_retry_run_twice_retries_each_run_once(storage: rf.Storage) -> None:
    failed = [await orders.run(item=f"i{n}", fail=True) for n in range(3)]
    await anyio.sleep(0.01)  # the retries are created after `until`: not selected
    chosen = bulk.selection(reactor="ops.orders", status="failed", until=clock.now())
    first: list[bulk.Outcome] = []
    await bulk.apply("retry", await bulk.select(chosen), first.append)
    assert {o.id for o in first} == {r.id for r in failed} and all(o.ok for o in first)
    new = {o.retried_as for o in first}
    assert len(new) == 3 and None not in new

    second: list[bulk.Outcome] = []
    await bulk.apply("retry", await bulk.select(chosen), second.append)
    assert {o.id: o.retried_as for o in second} == {o.id: o.retried_as for o in first}
    assert all(o.note and o.note.startswith("retried already") for o in second)
    retries = [r for r in (await rf.list_runs(reactor="ops.orders", limit=100)).runs
               if r.id not in {f.id for f in failed}]
    assert len(retries) == 3  # not 6


async def test_no_filter_is_refused_unless_all(storage: rf.Storage) -> None:
    with pytest.raises(rf.errors.BulkSelectionError) as refused:
        bulk.selection()
    assert refused.value.field == "filter" and "--all" in str(refused.value)
    await quick.run(label="a")
    assert len(await bulk.select(bulk.selection(all_runs=True))) == 1


@pytest.mark.parametrize(("given", "field"), [
    ({"status": "stuck"}, "status"), ({"since": "2 fortnights"}, "since"),
    ({"until": "yesterday"}, "until"), ({"version": 0}, "version"),
    ({"reactor": ""}, "reactor"),
])
def test_a_bad_filter_value_names_its_field(given: dict[str, object], field: str) -> None:
    with pytest.raises(rf.errors.BulkSelectionError) as refused:
        bulk.selection(**given)  # type: ignore[arg-type]
    assert refused.value.field == field and repr(next(iter(given.values()))) in str(
        refused.value)


async def test_each_filter_narrows_the_selection(storage: rf.Storage) -> None:
    old = await quick.run(label="old")
    mark = clock.now()
    await anyio.sleep(0.01)
    new = await quick.run(label="new")
    failed = await orders.run(item="gin", fail=True)
    paused = await orders.run(item="tea")

    async def ids(**given: object) -> set[str]:
        return {r.id for r in await bulk.select(bulk.selection(**given))}  # type: ignore[arg-type]

    assert await ids(reactor="bulk.quick", since=mark) == {new.id}
    assert await ids(reactor="bulk.quick", until=mark) == {old.id}
    assert await ids(since="1h") == {old.id, new.id, failed.id, paused.id}
    assert await ids(until="1h") == set()
    assert await ids(error_type="ValueError") == {failed.id}
    assert await ids(status="paused") == {paused.id}
    assert await ids(version=1, reactor="ops.orders") == {failed.id, paused.id}
    assert await ids(version=2) == set()


async def test_an_unknown_action_and_a_missing_step_are_refused(storage: rf.Storage) -> None:
    with pytest.raises(rf.errors.BulkSelectionError) as refused:
        await bulk.apply("explode", [], lambda o: None)
    assert refused.value.field == "action"
    with pytest.raises(rf.errors.BulkSelectionError) as missing:
        await bulk.apply("retry-step", [], lambda o: None)
    assert missing.value.field == "step"


keyed = rf.Reactor("bulk.keyed", inputs=Label)


@keyed.step
async def tag(label: str) -> str:
    return label


@keyed.interrupt(correlation_id="crate:{label}")
async def receive(payload: str, tag: str) -> str:
    return payload


async def test_a_correlation_id_an_idempotency_key_or_run_ids_select_those_runs(
        storage: rf.Storage) -> None:
    wanted = await keyed.run(label="K1")
    other = await keyed.run(label="K2")
    await crates.run(label="K1")  # another reactor, no correlation id

    async def ids(**given: object) -> list[str]:
        return [r.id for r in await bulk.select(bulk.selection(**given))]  # type: ignore[arg-type]

    assert await ids(correlation_id="crate:K1") == [wanted.id]
    assert await ids(correlation_id="crate:K1", reactor="bulk.keyed") == [wanted.id]
    assert await ids(correlation_id="crate:K1", status="completed") == []
    assert await ids(correlation_id="crate:nobody") == []
    started = await quick.run(label="I1", idempotency_key="bulk-I1")
    await quick.run(label="I2", idempotency_key="bulk-I2")
    assert await ids(idempotency_key="bulk-I1") == [started.id]
    assert sorted(await ids(ids=[wanted.id, other.id, "no-such-run"])) == sorted(
        [wanted.id, other.id])
    with pytest.raises(rf.errors.BulkSelectionError) as refused:
        bulk.selection(ids="not-a-list")  # type: ignore[arg-type]
    assert refused.value.field == "ids"
