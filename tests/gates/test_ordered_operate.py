"""Operating an ordered lock's line by hand (`rf.ordered_peek`, `rf.ordered_skip`,
`rf.ordered_reset`) with real runs on both backends, and their errors."""

from __future__ import annotations

import anyio
import msgspec
import pytest

import reactorflow as rf
from tests.helpers import unique


class Entry(msgspec.Struct):
    account_id: str
    n: int


def _ledger(applied: list[int]) -> tuple[rf.Reactor, str]:
    lane = unique("lane")
    flow = rf.Reactor(unique("ledger"), inputs=Entry,
                      gates=[rf.OrderedLock(lane + ":{account_id}")])

    @flow.interrupt(when=lambda n: n == 0)
    async def approve(payload: bool, n: int) -> bool:
        return payload

    @flow.step
    async def apply(n: int) -> int:
        applied.append(n)
        return n

    return flow, f"{lane}:A1"


async def _snoozed(flow: rf.Reactor, run_id: str) -> None:
    with anyio.fail_after(30):
        while not any(e.kind == "run.snoozed" for e in (await flow.get(run_id)).history):
            await anyio.sleep(0.02)


async def test_a_turn_left_by_an_ended_run_is_passed_over_by_the_next_run(
        storage: rf.Storage) -> None:
    """A completed run whose `ordered_leave` was lost (a failover dropped the acknowledged
    write: the run is put back at the head of the line here) no longer holds the turn for
    the lock's poison-pill timeout (600 s): the next run that asks passes it over once it was
    quiet for `ENDED_TURN_QUIET`, and the runs behind go on in order."""
    rf.configure(gate_snooze=0.05)
    applied: list[int] = []
    flow, key = _ledger(applied)
    ended = await flow.run(account_id="A1", n=1)
    assert ended.status is rf.Status.COMPLETED
    await storage.ordered_enter(key, ended.id)  # its leave lost: the head of the line again
    assert await storage.ordered_turn(key, ended.id, 600) is True  # stamped, as while it ran
    behind = [await flow.dispatch(account_id="A1", n=n) for n in (2, 3)]
    done = [await flow.wait(run.id, timeout=30) for run in behind]
    assert [run.status for run in done] == [rf.Status.COMPLETED] * 2
    assert applied == [1, 2, 3]
    assert (await rf.ordered_peek(key)).turn != ended.id


async def test_a_run_stuck_on_its_turn_is_skipped_by_hand(storage: rf.Storage) -> None:
    """A paused run keeps its turn: the runs behind it wait (in a worker) until an operator
    peeks at the line and skips it; they then run in order. The skipped run, continued later,
    takes a new place at the end."""
    rf.configure(gate_snooze=0.05)
    applied: list[int] = []
    flow, key = _ledger(applied)
    stuck = await flow.run(account_id="A1", n=0)
    assert stuck.status is rf.Status.PAUSED
    behind = [await flow.dispatch(account_id="A1", n=n) for n in (1, 2)]
    await _snoozed(flow, behind[0].id)
    line = await rf.ordered_peek(key)
    assert (line.key, line.turn, line.waiting) == (key, stuck.id, 2)
    assert line.turn_stamp is not None
    assert await rf.ordered_skip(key) == stuck.id  # whoever holds the turn
    done = [await flow.wait(run.id, timeout=30) for run in behind]
    assert [run.status for run in done] == [rf.Status.COMPLETED] * 2
    assert applied == [0, 1, 2]
    with anyio.fail_after(30):  # the last run leaves the line just after its final save
        while (turn := (await rf.ordered_peek(key)).turn) is not None:
            assert turn == behind[1].id  # one read per look: the turn may clear between two
            await anyio.sleep(0.01)
    resumed = await flow.continue_(stuck.id, step="approve", payload=True)
    assert resumed.status is rf.Status.COMPLETED
    assert (await rf.ordered_peek(key)).turn is None


async def test_a_reset_line_lets_its_runs_take_new_places(storage: rf.Storage) -> None:
    rf.configure(gate_snooze=0.05)
    applied: list[int] = []
    flow, key = _ledger(applied)
    stuck = await flow.run(account_id="A1", n=0)
    waiting = await flow.dispatch(account_id="A1", n=1)
    await _snoozed(flow, waiting.id)
    assert await rf.ordered_reset(key) == 2
    done = await flow.wait(waiting.id, timeout=30)
    assert done.status is rf.Status.COMPLETED and applied == [0, 1]
    await flow.continue_(stuck.id, step="approve", payload=True)  # (a worker may finish it)
    assert (await flow.wait(stuck.id, timeout=30)).status is rf.Status.COMPLETED


async def test_operating_a_line_refuses_bad_input(storage: rf.Storage) -> None:
    key = unique("line")
    with pytest.raises(rf.NotInLine) as caught:
        await rf.ordered_skip(key)
    assert caught.value.key == key and caught.value.ticket is None
    assert "rf.ordered_peek" in str(caught.value)
    await storage.ordered_enter(key, "run-1")
    with pytest.raises(rf.NotInLine) as caught:
        await rf.ordered_skip(key, "run-2")
    assert caught.value.ticket == "run-2" and "run-2" in str(caught.value)
    assert (await rf.ordered_peek(key)).turn == "run-1"  # nothing changed
    for call in (lambda: rf.ordered_peek(""), lambda: rf.ordered_reset(42),  # type: ignore[arg-type]
                 lambda: rf.ordered_skip(key, "")):
        with pytest.raises(rf.ReactorflowError) as refused:
            await call()
        assert "nothing was changed" in str(refused.value)
