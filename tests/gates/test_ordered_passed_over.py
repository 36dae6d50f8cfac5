"""An `rf.OrderedLock` whose first run starts late, past the poison-pill timeout, on both
backends: the run behind it passes it over and holds the turn; the late run, started while
that one still holds it, must not run beside it. It lost its turn: it waits behind the run
whose turn came and runs after it (one holder at a time).

Jobs are delivered by the test itself (a queue that keeps them), so "its worker did not start
it in time" is a state the test stands in; both runs then execute at once in this process."""

from __future__ import annotations

import anyio
import msgspec

import reactorflow as rf
from tests.gates.test_parked_gates import _deliver
from tests.helpers import Captured, kinds, unique

POISON = 1.0
"""The lock's poison-pill timeout: the first run's job is held back longer than this."""


class Entry(msgspec.Struct):
    account_id: str
    n: int


async def test_a_run_passed_over_while_late_waits_for_the_run_whose_turn_came(
        storage: rf.Storage, captured: Captured) -> None:
    rf.configure(gate_snooze=0.05)
    lane = unique("late")
    flow = rf.Reactor(unique("ledger"), inputs=Entry,
                      gates=[rf.OrderedLock(lane + ":{account_id}", poison_pill_timeout=POISON)])
    inside: set[int] = set()
    applied: list[int] = []
    peak = 0
    second_in, let_go = anyio.Event(), anyio.Event()

    @flow.step
    async def apply(n: int) -> int:
        nonlocal peak
        inside.add(n)
        peak = max(peak, len(inside))
        if n == 2:
            second_in.set()
            await let_go.wait()
        applied.append(n)
        inside.discard(n)
        return n

    key = f"{lane}:A1"
    late = await flow.dispatch(account_id="A1", n=1)  # first in line ...
    second = await flow.dispatch(account_id="A1", n=2)
    await anyio.sleep(POISON * 1.5)  # ... but its worker does not start it in time
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(_deliver, captured, second.id)  # passes the late run over
            await second_in.wait()
            await _deliver(captured, late.id, once=True)  # the late run starts after all
            line = await rf.ordered_peek(key)
            let_go.set()
        assert peak == 1 and applied == [2]  # it did not run beside the second ...
        assert (line.turn, line.waiting) == (second.id, 1)  # ... it waits behind it
        await _deliver(captured, late.id)  # its snoozes' jobs: its turn comes
    assert peak == 1  # never both inside: one holder at a time
    assert applied == [2, 1]
    done = await flow.get(late.id)
    assert done.status is rf.Status.COMPLETED and kinds(done, "run.snoozed")
    assert (await flow.get(second.id)).status is rf.Status.COMPLETED
    assert (await rf.ordered_peek(key)).turn is None
