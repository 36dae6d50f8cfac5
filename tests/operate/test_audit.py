"""Audit (api.md §16): every operator action records who did it on the event it writes to the
run's history (`rf.Event.actor`): `actor=` in Python, else this process's `user@host`; the
events the engine writes by itself have none. On both backends."""

from __future__ import annotations

import anyio
import anyio.abc
import httpx
import msgspec
import pytest

import reactorflow as rf
from reactorflow.audit import operator
from reactorflow.web import create_app
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


class Held:
    """A run waiting on two interrupts; continuing `first` keeps the run held, in `slow`, by
    that continuation, while a payload for `second` is given."""

    def __init__(self) -> None:
        self.entered, self.release = anyio.Event(), anyio.Event()
        flow = self.flow = rf.Reactor(unique("audit.held"))

        @flow.interrupt
        async def first(payload: int) -> int:
            return payload

        @flow.interrupt
        async def second(payload: int) -> int:
            return payload

        @flow.step
        async def slow(first: int) -> int:
            self.entered.set()
            await self.release.wait()
            return first

        @flow.step
        async def total(slow: int, second: int) -> int:
            return slow + second

    async def hold(self, tasks: anyio.abc.TaskGroup, ended: list[rf.Run]) -> rf.Run:
        """The paused run, once a continuation (by "bob") holds it inside `slow`."""
        paused = await self.flow.run()
        assert sorted(paused.waiting_on) == ["first", "second"]

        async def drive() -> None:
            ended.append(await self.flow.continue_(paused.id, step="first", payload=1,
                                                   actor="bob"))

        tasks.start_soon(drive)
        await self.entered.wait()
        return paused


async def test_a_payload_accepted_while_another_execution_holds_the_run_names_its_actor(
        storage: rf.Storage) -> None:
    held, ended = Held(), []
    async with anyio.create_task_group() as tasks:
        paused = await held.hold(tasks, ended)
        accepted = await held.flow.continue_(paused.id, step="second", payload=41, actor="ann")
        assert accepted.status is rf.Status.RUNNING and accepted.waiting_on == []
        assert acted(accepted) == [("run.resumed", "bob"), ("interrupt.accepted", "ann")]
        held.release.set()
    done = await held.flow.get(paused.id)
    assert done.status is rf.Status.COMPLETED and done.value == 42  # the holder applied it
    assert ended[0].status is rf.Status.COMPLETED
    assert acted(done) == [("run.resumed", "bob"), ("interrupt.accepted", "ann")]
    [event] = [e for e in done.history if e.kind is rf.EventKind.INTERRUPT_ACCEPTED]
    assert event.step == "second"


async def test_a_payload_accepted_through_the_api_while_the_run_is_held_names_the_token(
        storage: rf.Storage, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REACTORFLOW_DASHBOARD_TOKEN", raising=False)
    secret = "SECRET-operate-audit"
    app = create_app(tokens={"alice": {"role": "operate", "token": secret}})
    held, ended = Held(), []
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t",
                                 headers={"Authorization": f"Bearer {secret}"}) as http:
        async with anyio.create_task_group() as tasks:
            paused = await held.hold(tasks, ended)
            answer = await http.post(f"/api/runs/{paused.id}/continue",
                                     json={"step": "second", "payload": 41})
            assert answer.status_code == 200 and answer.json()["status"] == "running"
            held.release.set()
        shown = (await http.get(f"/api/runs/{paused.id}")).json()["history"]
    assert [(e["kind"], e["step"], e["actor"]) for e in shown if e["actor"]] == [
        ("run.resumed", "", "bob"), ("interrupt.accepted", "second", "alice")]
    done = await held.flow.get(paused.id)
    assert done.status is rf.Status.COMPLETED and done.value == 42
    assert [(str(e.kind), e.step, e.actor) for e in done.history if e.actor] == [
        ("run.resumed", "", "bob"), ("interrupt.accepted", "second", "alice")]


async def test_a_continue_that_resumes_the_run_itself_names_its_actor_once(
        storage: rf.Storage) -> None:
    """Its claim's own `running` write names the actor (`run.resumed`); with a gate first (no
    such write: admission decides), the claim's `interrupt.accepted` does, and the resume the
    drive then writes names nobody."""
    paused = await orders.run(item="tea")
    done = await orders.continue_(paused.id, step="approve", payload=approval(), actor="ann")
    assert done.status is rf.Status.COMPLETED
    assert acted(done) == [("run.resumed", "ann")]

    gated = rf.Reactor(unique("audit.gated"), gates=[rf.Lock("audit-gated")])

    @gated.interrupt
    async def approve(payload: int) -> int:
        return payload

    waiting = await gated.run()
    finished = await gated.continue_(waiting.id, step="approve", payload=3, actor="cy")
    assert finished.status is rf.Status.COMPLETED and finished.value == 3
    assert acted(finished) == [("interrupt.accepted", "cy")]
    assert [e.kind for e in finished.history].count(rf.EventKind.RUN_RESUMED) == 1
    background = await gated.run()
    anonymous = await gated.continue_(background.id, step="approve", payload=4)
    assert acted(anonymous) == [("interrupt.accepted", operator())]  # user@host: no actor=


class _Answer(msgspec.Struct):
    approved: bool


async def test_an_interrupt_resumed_by_its_deadline_names_nobody(storage: rf.Storage) -> None:
    """The deadline's `on_timeout` payload is the engine's own act: its `run.resumed` has no
    actor (it named the `user@host` of the process whose timer fired)."""
    flow = rf.Reactor(unique("audit.deadline"))

    @flow.interrupt(timeout=0.2, on_timeout=_Answer(approved=False))
    async def approve(payload: _Answer) -> bool:
        return payload.approved

    run = await flow.run()
    with anyio.fail_after(20):  # (paused until its deadline: this process's timers fire it)
        while (done := await flow.get(run.id)).status is rf.Status.PAUSED:
            await anyio.sleep(0.05)
    assert done.status is rf.Status.COMPLETED, done.error
    assert done.value is False
    assert rf.EventKind.RUN_RESUMED in [e.kind for e in done.history]
    assert acted(done) == []
