"""Listing runs: newest first, paged without duplicates or gaps, filtered by status."""

from __future__ import annotations

import msgspec
import pytest

import reactorflow as rf
from tests.helpers import unique


class Mode(msgspec.Struct):
    mode: str  # "complete", "fail" or "pause"


def _mixed_flow() -> rf.Reactor:
    flow = rf.Reactor(unique("listing"), inputs=Mode)

    @flow.step
    async def work(mode: str) -> str:
        if mode == "fail":
            raise ValueError("asked to fail")
        return mode

    @flow.step(when=lambda mode: mode == "pause")
    async def needs_gate(work: str, mode: str) -> str:
        return work

    @flow.interrupt  # skipped, with needs_gate, unless mode == "pause"
    async def gate(payload: str, needs_gate: str) -> str:
        return payload

    @flow.step
    async def end(work: str, gate: str = "no gate") -> str:
        return f"{work}/{gate}"

    return flow


async def _all_pages(flow: rf.Reactor, limit: int, status: str | None = None
                     ) -> tuple[list[str], int]:
    ids: list[str] = []
    pages = 0
    cursor: str | None = None
    while True:
        page = await flow.list_runs(status=status, limit=limit, cursor=cursor)
        pages += 1
        assert len(page.runs) <= limit
        ids.extend(r.id for r in page.runs)
        if page.next_cursor is None:
            return ids, pages
        assert page.runs, "a page with a next cursor must not be empty"
        cursor = page.next_cursor


async def test_pages_newest_first_without_duplicates_or_gaps(storage: rf.Storage) -> None:
    flow = _mixed_flow()
    modes = ["complete", "fail", "pause", "complete", "pause"] * 5
    created: list[tuple[str, str]] = []
    for mode in modes:
        run = await flow.run(mode=mode)
        created.append((run.id, str(run.status)))
    expected_status = {"complete": "completed", "fail": "failed", "pause": "paused"}
    assert [s for _, s in created] == [expected_status[m] for m in modes]
    newest_first = [run_id for run_id, _ in reversed(created)]

    for limit in (1, 4, 7, 25, 1000):
        ids, pages = await _all_pages(flow, limit)
        assert ids == newest_first, f"limit={limit}"
        assert pages in (-(-25 // limit), -(-25 // limit) + 1)

    first = await flow.list_runs(limit=5)
    assert [r.id for r in first.runs] == newest_first[:5]
    assert [str(r.status) for r in first.runs] == [s for _, s in reversed(created)][:5]
    assert first.runs[0].waiting_on == ["gate"]  # the newest run is paused on `gate`
    assert first.runs[1].error is None and first.runs[1].status is rf.Status.COMPLETED
    failed_summary = next(r for r in first.runs if r.status is rf.Status.FAILED)
    assert failed_summary.error is not None and failed_summary.error.step == "work"

    for status in ("completed", "failed", "paused"):
        wanted = [run_id for run_id, s in reversed(created) if s == status]
        for limit in (2, 3, 100):
            ids, _ = await _all_pages(flow, limit, status)
            assert ids == wanted, (status, limit)
    ids, _ = await _all_pages(flow, 3, rf.Status.PAUSED)  # the enum works too
    assert len(ids) == 10
    assert (await flow.list_runs(status="halted")).runs == []
    assert (await flow.list_runs(status="halted")).next_cursor is None

    # A status change moves a run between filtered listings.
    paused_id = next(run_id for run_id, s in created if s == "paused")
    await flow.continue_(paused_id, step="gate", payload="ok")
    assert paused_id not in (await _all_pages(flow, 4, "paused"))[0]
    assert paused_id in (await _all_pages(flow, 4, "completed"))[0]
    assert (await _all_pages(flow, 6))[0] == newest_first  # the order is creation order


async def test_runs_of_other_reactors_are_not_listed(storage: rf.Storage) -> None:
    one, two = _mixed_flow(), _mixed_flow()
    a = await one.run(mode="complete")
    b = await two.run(mode="complete")
    assert [r.id for r in (await one.list_runs()).runs] == [a.id]
    assert [r.id for r in (await two.list_runs()).runs] == [b.id]


@pytest.mark.parametrize("status", ["bogus", "COMPLETED", "", "done"])
async def test_unknown_status_is_refused_naming_it(storage: rf.Storage, status: str) -> None:
    flow = _mixed_flow()
    with pytest.raises(rf.ReactorflowError) as info:
        await flow.list_runs(status=status)
    message = str(info.value)
    assert repr(status) in message and "status" in message
    assert "completed" in message  # lists the valid ones


@pytest.mark.parametrize("limit", [0, -1, 1001, True, 2.5, "10", None])
async def test_invalid_limit_is_refused_naming_it(storage: rf.Storage, limit: object) -> None:
    flow = _mixed_flow()
    with pytest.raises(rf.ReactorflowError) as info:
        await flow.list_runs(limit=limit)  # type: ignore[arg-type]
    message = str(info.value)
    assert "limit" in message and repr(limit) in message


async def test_foreign_cursor_is_refused(storage: rf.Storage) -> None:
    flow = _mixed_flow()
    await flow.run(mode="complete")
    with pytest.raises(rf.ReactorflowError, match="cursor"):
        await flow.list_runs(cursor="not-a-cursor!")
