"""An async_reactor step's own `gates=`: its child run takes them in the worker that runs it
(keys built from the step's arguments in the parent), holds them while it runs and gives them
back at its final state; a busy gate snoozes the child."""

from __future__ import annotations

import anyio
import msgspec

import reactorflow as rf
from reactorflow.runtime.engine.async_units import child_run_id
from tests.helpers import unique


class Account(msgspec.Struct):
    account_id: str


def _flows(seen: list[list[str]], storage: rf.Storage) -> tuple[rf.Reactor, rf.Reactor]:
    child = rf.Reactor(unique("child"), inputs=Account)

    @child.step
    async def inner(account_id: str) -> str:
        seen.append(await storage.gate_holders(f"ar:{account_id}"))
        return account_id

    parent = rf.Reactor(unique("parent"), inputs=Account)

    @parent.async_reactor(child, gates=[rf.Lock("ar:{account_id}")])
    async def handle(account_id: str) -> Account:
        return Account(account_id)

    @parent.step
    async def after(handle: str) -> str:
        return handle

    return parent, child


async def test_the_child_run_holds_the_async_reactor_steps_gates(storage: rf.Storage) -> None:
    seen: list[list[str]] = []
    parent, _ = _flows(seen, storage)
    started = await parent.run(account_id="Z1")
    done = await parent.wait(started.id, timeout=30)
    assert done.status is rf.Status.COMPLETED and done.value == "Z1"
    assert seen == [[child_run_id(started.id, "handle")]]  # held by the child while it ran
    assert await storage.gate_holders("ar:Z1") == []


async def test_a_busy_async_reactor_gate_snoozes_the_child(storage: rf.Storage) -> None:
    rf.configure(gate_snooze=0.05, async_wait_timeout=3600)  # the parent waits for its child
    seen: list[list[str]] = []
    parent, child = _flows(seen, storage)
    await storage.gate_acquire("ar:Z2", "someone-else", limit=1, ttl=600)
    started = await parent.dispatch(account_id="Z2")  # (run() would wait for its unit)
    child_id = child_run_id(started.id, "handle")
    with anyio.fail_after(30):
        while True:
            try:
                if any(e.kind == "run.snoozed" for e in (await child.get(child_id)).history):
                    break
            except rf.RunNotFound:
                pass  # not stored yet: the parent's worker dispatches it
            await anyio.sleep(0.02)
    assert seen == []  # the child's step never ran while the gate was busy
    await storage.gate_release("ar:Z2", "someone-else")
    done = await parent.wait(started.id, timeout=30)
    assert done.status is rf.Status.COMPLETED and seen == [[child_id]]
