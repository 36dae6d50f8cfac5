"""A step's own `rf.OrderedLock`, on both backends: steps of concurrent runs take turns in the
order they reached the step; the ticket is `<run id>|<step>` and leaves when the step ends; a
rollback never waits for the turn again (an undo runs while another run holds it)."""

from __future__ import annotations

import anyio
import msgspec

import reactorflow as rf
from tests.helpers import unique


class Entry(msgspec.Struct):
    account_id: str
    n: int


async def _until_waiting(key: str, count: int) -> None:
    with anyio.fail_after(30):
        while (await rf.ordered_peek(key)).waiting < count:
            await anyio.sleep(0.005)


async def test_steps_take_turns_in_the_order_they_reached_the_step(storage: rf.Storage) -> None:
    lane = unique("lane")
    flow = rf.Reactor(unique("steps"), inputs=Entry)
    applied: list[int] = []
    inside: list[int] = []
    first_in, let_go = anyio.Event(), anyio.Event()

    @flow.step(gates=[rf.OrderedLock(lane + ":{account_id}", wait=60)])
    async def apply(account_id: str, n: int) -> int:
        inside.append(n)
        assert len(inside) == 1  # one at a time
        if n == 0:
            first_in.set()
            await let_go.wait()
        applied.append(n)
        inside.remove(n)
        return n

    key = f"{lane}:A1"
    runs: dict[int, rf.Run] = {}

    async def start(n: int) -> None:
        runs[n] = await flow.run(account_id="A1", n=n)

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(start, 0)
            await first_in.wait()
            line = await rf.ordered_peek(key)
            assert line.turn is not None and line.turn.endswith("|apply")  # a step's ticket
            for n in (1, 2, 3):  # each joins the line before the next starts
                tg.start_soon(start, n)
                await _until_waiting(key, n)
            let_go.set()
    assert applied == [0, 1, 2, 3]
    assert all(runs[n].status is rf.Status.COMPLETED for n in runs)
    assert (await rf.ordered_peek(key)).turn is None  # every ticket left with its step


async def test_a_rollback_undoes_without_taking_the_turn_again(storage: rf.Storage) -> None:
    """Run Y's ordered step completed and let go of its turn; run X then holds the turn. Y
    fails later and rolls back: the ordered step's undo runs at once, X still holding the
    turn (an undo never waits for an ordered lock)."""
    lane = unique("lane")
    flow = rf.Reactor(unique("undo"), inputs=Entry)
    calls: list[str] = []
    x_in, x_go, y_ready, y_fail = anyio.Event(), anyio.Event(), anyio.Event(), anyio.Event()

    @flow.step(gates=[rf.OrderedLock(lane + ":{account_id}", wait=60)])
    async def post(account_id: str, n: int) -> int:
        if n == 1:  # run X: holds the turn until told
            x_in.set()
            await x_go.wait()
        calls.append(f"post {n}")
        return n

    @post.undo
    async def unpost(result: int) -> None:
        holder = (await rf.ordered_peek(f"{lane}:A1")).turn
        calls.append(f"unpost {result} while {holder.split('|')[0] if holder else None}")

    @flow.step
    async def check(post: int) -> int:
        if post == 0:  # run Y: fails once X holds the turn
            y_ready.set()
            await y_fail.wait()
            raise ValueError("ledger mismatch")
        return post

    results: dict[int, rf.Run] = {}

    async def start(n: int) -> None:
        results[n] = await flow.run(account_id="A1", n=n)

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(start, 0)
            await y_ready.wait()  # Y's post is done: its ticket left the line
            tg.start_soon(start, 1)
            await x_in.wait()  # X holds the turn now
            y_fail.set()
            with anyio.fail_after(30):
                while 0 not in results:  # Y rolls back while X still holds the turn
                    await anyio.sleep(0.005)
            x_go.set()
    y, x = results[0], results[1]
    assert y.status is rf.Status.FAILED and y.error is not None
    assert y.error.type == "ValueError"
    assert f"unpost 0 while {x.id}" in calls
    assert calls.index(f"unpost 0 while {x.id}") < calls.index("post 1")
    assert x.status is rf.Status.COMPLETED
