"""The sweeper leaves a held run alone: it holds nothing and waits for an operator, so it is
never stalled, recovered, re-driven or failed, however long ago it was touched (the record pass
over the run records included)."""

from __future__ import annotations

import time

import anyio
import pytest

import reactorflow as rf
from tests.helpers import unique


def _held_flow(calls: list[str], hold_timeout: float | None) -> rf.Reactor:
    flow = rf.Reactor(unique("sweepheld"), on_failure="hold", hold_timeout=hold_timeout)

    @flow.step
    async def book() -> str:
        calls.append("book")
        return "B1"

    @book.undo
    async def unbook(result: str) -> None:
        calls.append("unbook")

    @flow.step
    async def pay(book: str) -> str:
        calls.append("pay")
        raise ConnectionError("the processor is down")

    return flow


@pytest.mark.parametrize("hold_timeout", [None, 3600.0])
async def test_the_sweeper_never_recovers_or_fails_a_held_run(
        storage: rf.Storage, hold_timeout: float | None) -> None:
    calls: list[str] = []
    flow = _held_flow(calls, hold_timeout)  # (a timeout an hour away: its timer is armed)
    held = await flow.run()
    assert held.status is rf.Status.HELD
    before = await storage.load_run(held.id, history=True)
    rf.configure(stall_timeout=0.05)
    with anyio.fail_after(10):  # its last write is older than the stall timeout
        while time.time() - held.updated_at <= 0.1:
            await anyio.sleep(0.01)
    report = await rf.sweep_once(records=1000)  # the record pass too
    everything = (report.recovered + report.expired + report.timed_out + report.failed
                  + report.skipped + report.enqueued + report.unreadable + report.reindexed)
    assert held.id not in everything, report
    assert await storage.load_run(held.id, history=True) == before  # nothing written
    assert calls == ["book", "pay"]  # nothing ran again, nothing was undone
    assert (await flow.get(held.id)).status is rf.Status.HELD
