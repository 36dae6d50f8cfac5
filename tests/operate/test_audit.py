"""Audit (api.md §16): every operator action records who did it on the event it writes to the
run's history (`rf.Event.actor`): `actor=` in Python, else this process's `user@host`; the
events the engine writes by itself have none. On both backends."""

from __future__ import annotations

import anyio
import msgspec
import pytest

import reactorflow as rf
from reactorflow.audit import operator
from tests.helpers import redeploy, unique
from tests.operate.flows import Bill, approval, invoices, orders, reminders


def acted(run: rf.Run) -> list[tuple[str, str]]:
    """The (kind, actor) of every event of the run's history that names an actor."""
    return [(str(e.kind), e.actor) for e in run.history if e.actor]


async def test_each_operator_action_records_its_actor(storage: rf.Storage) -> None:
    paused = await orders.run(item="tea")
    done = await orders.continue_(paused.id, step="approve", payload=approval(), actor="ann")
    assert done.status is rf.Status.COMPLETED
    undone = await orders.undo(paused.id, actor="bob")
    assert acted(undone) == [("run.resumed", "ann"), ("run.undo_requested", "bob")]

    other = await orders.run(item="gin")
    cancelled = await orders.cancel(other.id, reason="no need", actor="cy")
    assert acted(cancelled) == [("run.cancelled", "cy")]
    retried = await orders.retry(other.id, actor="dee")
    assert retried.history[0].kind is rf.EventKind.RUN_STARTED
    assert acted(retried) == [("run.started", "dee")]

    held = await invoices.run(customer="ACME")
    assert held.status is rf.Status.HELD
    again = await invoices.retry_step(held.id, "bill", actor="eve")  # fails again: held
    skipped = await invoices.skip_step(held.id, "bill", result=Bill("B-9", 3.0), actor="fay")
    assert again.status is rf.Status.HELD and skipped.status is rf.Status.COMPLETED
    rewound = await invoices.rewind(held.id, to="mail", actor="gus")
    assert rewound.status is rf.Status.COMPLETED
    assert acted(rewound) == [("run.repaired", "eve"), ("run.repaired", "fay"),
                              ("run.rewinding", "gus")]

    sleeping = await reminders.run(order_id="A1")  # parked at its sleep, no execution holds it
    await reminders.pause(sleeping.id, actor="hal")
    resumed = await reminders.resume(sleeping.id, actor="ivy")
    assert acted(resumed) == [("run.paused", "hal"), ("run.resumed", "ivy")]
    assert resumed.paused_by is None


async def test_without_actor_the_process_user_at_host_is_recorded(storage: rf.Storage) -> None:
    run = await orders.run(item="tea")
    cancelled = await orders.cancel(run.id)
    assert acted(cancelled) == [("run.cancelled", operator())]
    held = await invoices.run(customer="ACME")
    undone = await invoices.undo(held.id)  # a held run's undo: its rollback, by the engine
    assert ("run.undo_requested", operator()) in acted(undone)
    assert undone.status is rf.Status.FAILED


async def test_a_cancel_honoured_by_the_execution_that_drives_the_run_names_its_actor(
        storage: rf.Storage) -> None:
    started, release = anyio.Event(), anyio.Event()
    flow = rf.Reactor(unique("audit.busy"))

    @flow.step
    async def slow() -> str:
        started.set()
        await release.wait()
        return "done"

    @flow.step
    async def after(slow: str) -> str:
        return slow

    ended: list[rf.Run] = []
    async with anyio.create_task_group() as tasks:
        async def drive() -> None:
            ended.append(await flow.run())

        tasks.start_soon(drive)
        await started.wait()
        run_id = (await rf.list_runs(reactor=flow.name)).runs[0].id
        requested = await flow.cancel(run_id, actor="kim")  # left as a request: it is busy
        assert requested.status is rf.Status.RUNNING
        release.set()
    assert ended[0].status is rf.Status.CANCELLED
    assert acted(ended[0]) == [("run.cancelled", "kim")]


async def test_migrate_records_its_actor(storage: rf.Storage) -> None:
    name = unique("audit.moved")

    def declare(version: int) -> rf.Reactor:
        flow = rf.Reactor(name, version=version)

        @flow.interrupt
        async def wait_here(payload: int) -> int:
            return payload

        return flow

    v1 = declare(1)
    run = await v1.run()
    redeploy(v1)
    v2 = declare(2)
    v2.migrate(from_version=1)(lambda migration: None)
    moved = await v2.migrate(run.id, actor="lee")
    assert moved.version == 2
    assert acted(moved) == [("run.migrated", "lee")]


async def test_a_blank_or_non_text_actor_is_refused_and_nothing_changes(
        storage: rf.Storage) -> None:
    run = await orders.run(item="tea")
    for bad in ("", "   ", 7):
        with pytest.raises(rf.ReactorflowError, match=r"cancel\(run .*\): actor must name who"):
            await orders.cancel(run.id, actor=bad)  # type: ignore[arg-type]
    assert (await orders.get(run.id)).status is rf.Status.PAUSED


def test_an_event_written_with_an_actor_reads_back_in_code_without_the_field() -> None:
    class OldEvent(msgspec.Struct, frozen=True, omit_defaults=True, array_like=True):
        at: float
        kind: str
        step: str = ""
        attempt: int = 0
        detail: str = ""

    new = msgspec.msgpack.encode(rf.Event(1.0, rf.EventKind.RUN_CANCELLED, actor="ann"))
    assert msgspec.msgpack.decode(new, type=OldEvent) == OldEvent(1.0, "run.cancelled")
    old = msgspec.msgpack.encode(OldEvent(1.0, "run.cancelled", detail="why"))
    assert msgspec.msgpack.decode(old, type=rf.Event).actor == ""
