"""An operator's `pause` and `resume` (api.md §15, issue 27 item 3), on both backends: a run
driven here stops at its next step boundary (steps in flight finish); a run no execution holds
(asleep, parked at a fanned-out map) is paused without being woken; the refusals; and
concurrent operator actions on one run, each applied once or refused."""

from __future__ import annotations

import contextlib
import math
import random
from datetime import datetime, timedelta
from typing import Any

import anyio
import msgspec
import pytest

import reactorflow as rf
from reactorflow import records
from reactorflow.records import Control, PausedBy
from reactorflow.status import ControlKind
from reactorflow.testing import Environment
from tests.helpers import kinds, unique


@pytest.fixture(params=["rf_env", "rf_redis_env"])
def env(request: pytest.FixtureRequest) -> Environment:
    return request.getfixturevalue(request.param)  # type: ignore[no-any-return]


class Approval(msgspec.Struct):
    ok: bool


SEED = 27


def paused_events(run: rf.Run) -> list[str]:
    return [e.detail for e in run.history if e.kind == rf.EventKind.RUN_PAUSED]


# -- a run driven here: stops at its next step boundary -------------------------------------------


def _two_in_flight() -> tuple[rf.Reactor, dict[str, anyio.Event], list[str]]:
    flow = rf.Reactor(unique("pause.inflight"), max_concurrency=4)
    gates = {"left": anyio.Event(), "right": anyio.Event()}
    entered = {"left": anyio.Event(), "right": anyio.Event()}
    ran: list[str] = []

    @flow.step
    async def left() -> int:
        entered["left"].set()
        await gates["left"].wait()
        ran.append("left")
        return 1

    @flow.step
    async def right() -> int:
        entered["right"].set()
        await gates["right"].wait()
        ran.append("right")
        return 2

    @flow.step
    async def after(left: int, right: int) -> int:
        ran.append("after")
        return left + right

    return flow, {**gates, "entered_left": entered["left"],
                  "entered_right": entered["right"]}, ran


async def test_pause_with_steps_in_flight_lets_them_finish_and_starts_nothing_more(
        storage: rf.Storage) -> None:
    rf.configure(lock_wait=0.2)  # the pause leaves its request and returns while steps run
    flow, events, ran = _two_in_flight()
    outcome: dict[str, rf.Run] = {}

    async def drive() -> None:
        outcome["run"] = await flow.run()

    async with anyio.create_task_group() as tg:
        tg.start_soon(drive)
        await events["entered_left"].wait()
        await events["entered_right"].wait()
        run_id = (await flow.list_runs()).runs[0].id
        asked = await flow.pause(run_id, reason="supplier outage", by="ops@test")
        assert asked.status is rf.Status.RUNNING  # requested: both steps are still in flight
        with pytest.raises(rf.RunStateError, match="Another request"):
            await flow.pause(run_id, by="someone else")  # one request at a time
        events["left"].set()  # the first completion reads the request back: nothing new starts
        events["right"].set()
    paused = outcome["run"]  # the caller's drive stopped at the boundary
    assert paused.status is rf.Status.PAUSED
    assert sorted(ran) == ["left", "right"]  # both in flight finished; `after` never started
    assert paused.steps["left"].status is rf.StepStatus.COMPLETED
    assert paused.steps["right"].status is rf.StepStatus.COMPLETED
    assert paused.steps["after"].status is rf.StepStatus.PENDING
    assert paused.waiting_on == []
    assert paused.paused_by is not None
    assert (paused.paused_by.by, paused.paused_by.reason) == ("ops@test", "supplier outage")
    assert paused_events(paused) == ["paused by ops@test: supplier outage"]
    assert await flow.get(run_id) == paused
    assert await storage.lock_owner(run_id) is None  # it holds nothing
    assert (await flow.wait(run_id, timeout=5)).status is rf.Status.PAUSED  # wait returns

    with pytest.raises(rf.RunStateError, match=r"resume\(run_id\)"):  # not continue_
        await flow.continue_(run_id, step="after", payload=None)

    done = await flow.resume(run_id)
    assert done.status is rf.Status.COMPLETED
    assert done.value == 3
    assert ran[2:] == ["after"]
    assert done.paused_by is None
    assert kinds(done, "run.")[-3:] == ["run.paused", "run.resumed", "run.completed"]


async def test_a_pause_that_waits_for_the_boundary_returns_the_run_paused(
        storage: rf.Storage, monkeypatch: pytest.MonkeyPatch) -> None:
    """With `lock_wait` to spare, `pause` waits for the execution to stop and returns the
    run paused; the steps in flight finished."""
    flow, events, ran = _two_in_flight()
    outcome: dict[str, rf.Run] = {}
    requested = anyio.Event()
    request_control = storage.request_control

    async def noted(run_id: str, control: bytes) -> bool:  # the real call, then a note
        left = await request_control(run_id, control)
        requested.set()
        return left

    monkeypatch.setattr(storage, "request_control", noted)

    async def drive() -> None:
        outcome["run"] = await flow.run()

    async def pause(run_id: str) -> None:
        outcome["pause"] = await flow.pause(run_id, by="ops")

    async with anyio.create_task_group() as tg:
        tg.start_soon(drive)
        await events["entered_left"].wait()
        await events["entered_right"].wait()
        run_id = (await flow.list_runs()).runs[0].id
        tg.start_soon(pause, run_id)
        await requested.wait()  # left while both steps are in flight
        events["left"].set()
        events["right"].set()
    assert outcome["pause"].status is rf.Status.PAUSED
    assert outcome["run"].status is rf.Status.PAUSED
    assert outcome["pause"].steps["after"].status is rf.StepStatus.PENDING
    assert sorted(ran) == ["left", "right"]


# -- a run no execution holds: paused without waking it ------------------------------------------


def _sleeper() -> tuple[rf.Reactor, list[str]]:
    flow = rf.Reactor(unique("pause.sleep"))
    seen: list[str] = []

    @flow.step
    async def ship() -> str:
        seen.append("ship")
        return "parcel"

    @flow.sleep
    async def cool_off(ship: str) -> timedelta:
        return timedelta(hours=3)

    @flow.step
    async def remind(cool_off: datetime) -> str:
        seen.append("remind")
        return "reminded"

    return flow, seen


async def _whole_second(env: Environment) -> None:
    await env.clock.advance_to(math.ceil(env.clock.now()))


async def test_a_sleeping_run_is_paused_without_waking_and_completes_after_resume(
        env: Environment) -> None:
    await _whole_second(env)
    flow, seen = _sleeper()
    run = await flow.run()
    assert run.status is rf.Status.RUNNING
    assert run.steps["cool_off"].status is rf.StepStatus.WAITING
    asleep_until = await env.storage.timer_of(run.id)
    assert asleep_until is not None

    paused = await flow.pause(run.id, reason="hold the reminders")
    assert paused.status is rf.Status.PAUSED
    assert paused.paused_by is not None and "@" in paused.paused_by.by  # user@host by default
    assert paused.steps["cool_off"].status is rf.StepStatus.WAITING  # not woken
    assert await env.storage.timer_of(run.id) == asleep_until  # its timer stays armed

    await env.clock.advance(3 * 3600 + 1)  # the timer fires while the run is paused
    await env.drain()
    still = await flow.get(run.id)
    assert still.status is rf.Status.PAUSED
    assert still.steps["cool_off"].status is rf.StepStatus.WAITING
    assert seen == ["ship"]
    assert kinds(still, "sleep.") == ["sleep.started:cool_off"]
    assert await rf.sweep_once() is not None  # the sweeper leaves it be
    assert (await flow.get(run.id)).status is rf.Status.PAUSED

    done = await flow.resume(run.id)  # its deadline passed: the sleep completes now
    assert done.status is rf.Status.COMPLETED
    assert seen == ["ship", "remind"]


async def test_a_run_resumed_before_its_sleep_ends_waits_for_its_deadline(
        env: Environment) -> None:
    await _whole_second(env)
    flow, seen = _sleeper()
    run = await flow.run()
    await flow.pause(run.id)
    await env.clock.advance(3600)
    resumed = await flow.resume(run.id)
    assert resumed.status is rf.Status.RUNNING  # still asleep, holding nothing
    assert resumed.steps["cool_off"].status is rf.StepStatus.WAITING
    assert await env.storage.timer_of(run.id) is not None
    await env.clock.advance(2 * 3600 - 1)
    await env.drain()
    assert (await flow.get(run.id)).status is rf.Status.RUNNING  # never early
    await env.clock.advance(1)
    await env.drain()
    done = await flow.get(run.id)
    assert done.status is rf.Status.COMPLETED
    assert seen == ["ship", "remind"]


async def test_a_run_parked_at_a_fanned_out_map_is_paused_and_collects_after_resume(
        env: Environment) -> None:
    flow = rf.Reactor(unique("pause.map"))
    release = anyio.Event()
    started: list[int] = []

    @flow.step
    async def items() -> list[int]:
        return [1, 2, 3]

    @flow.map_step(over="items", fan_out=True, batch_size=3)
    async def square(item: int) -> int:
        started.append(item)
        await release.wait()
        return item * item

    @flow.step
    async def total(square: list[int]) -> int:
        return sum(square)

    run = await flow.run()
    assert run.status is rf.Status.RUNNING  # parked at the map: no execution holds it
    with anyio.fail_after(10):
        while len(started) < 3:
            await anyio.sleep(0.01)
    paused = await flow.pause(run.id, by="ops")
    assert paused.status is rf.Status.PAUSED
    release.set()  # the elements out finish ...
    await env.drain()
    still = await flow.get(run.id)
    assert still.status is rf.Status.PAUSED  # ... and their wake finds the run paused
    assert still.steps["total"].status is rf.StepStatus.PENDING
    done = await flow.resume(run.id)
    assert done.status is rf.Status.COMPLETED
    assert done.value == 14
    assert sorted(started) == [1, 2, 3]  # each element once


async def test_a_pause_request_read_back_by_a_park_is_applied_not_stranded(
        env: Environment, monkeypatch: pytest.MonkeyPatch) -> None:
    """A request that lands after the last step boundary, while the run's owner parks it
    (between its sleep's checkpoint and its park save), is read back by the park's save:
    the owner takes the lock again and applies it."""
    await _whole_second(env)
    flow, seen = _sleeper()
    storage = env.storage
    arm = storage.arm_timer
    racer = PausedBy("racer", env.clock.now(), "in the window")

    async def arm_then_request(run_id: str, *args: Any, **kwargs: Any) -> None:
        await storage.request_control(run_id, records.encode(
            Control(ControlKind.PAUSE, racer.reason, paused_by=racer)))
        await arm(run_id, *args, **kwargs)

    monkeypatch.setattr(storage, "arm_timer", arm_then_request)
    run = await flow.run()
    monkeypatch.setattr(storage, "arm_timer", arm)
    assert run.status is rf.Status.PAUSED
    assert run.paused_by == racer
    assert paused_events(run) == ["paused by racer: in the window"]
    await env.clock.advance(3 * 3600)
    await env.drain()
    assert (await flow.get(run.id)).status is rf.Status.PAUSED
    assert (await flow.resume(run.id)).status is rf.Status.COMPLETED
    assert seen == ["ship", "remind"]


# -- refusals: each names the status and what it allows; nothing is written ------------------------


async def test_refusals_name_the_status_and_write_nothing(env: Environment) -> None:
    flow = rf.Reactor(unique("pause.refusals"))

    @flow.step
    async def prepare() -> int:
        return 1

    @flow.interrupt
    async def approve(payload: Approval, prepare: int) -> Approval:
        return payload

    @flow.step
    async def finish(approve: Approval) -> bool:
        return approve.ok

    at_interrupt = await flow.run()
    assert at_interrupt.status is rf.Status.PAUSED
    with pytest.raises(rf.RunStateError, match=r"continue_\(run_id") as refused:
        await flow.resume(at_interrupt.id)
    assert (refused.value.status, refused.value.operation) == ("paused", "resume")
    with pytest.raises(rf.RunStateError, match="'approve'") as refused:
        await flow.pause(at_interrupt.id)
    assert refused.value.operation == "pause"
    assert await flow.get(at_interrupt.id) == at_interrupt  # nothing written

    done = await flow.continue_(at_interrupt.id, step="approve", payload={"ok": True})
    assert done.status is rf.Status.COMPLETED
    with pytest.raises(rf.RunStateError, match="it is completed") as refused:
        await flow.pause(done.id, reason="too late")
    assert "undo(run_id)" in str(refused.value)
    with pytest.raises(rf.RunStateError, match="it is completed"):
        await flow.resume(done.id)
    assert await flow.get(done.id) == done

    sleeper, _ = _sleeper()
    asleep = await sleeper.run()
    with pytest.raises(rf.RunStateError, match="pause\\(run_id\\)") as refused:
        await sleeper.resume(asleep.id)  # running: not paused
    assert refused.value.status == "running"
    paused = await sleeper.pause(asleep.id, by="first")
    with pytest.raises(rf.RunStateError, match="first paused it already"):
        await sleeper.pause(asleep.id, by="second")
    with pytest.raises(rf.ReactorflowError, match="by must name"):
        await sleeper.pause(asleep.id, by="  ")
    with pytest.raises(rf.ReactorflowError, match="reason must be a str"):
        await sleeper.pause(asleep.id, reason=3)  # type: ignore[arg-type]
    assert await sleeper.get(asleep.id) == paused
    with pytest.raises(rf.RunNotFound):
        await sleeper.pause("no-such-run")


# -- concurrent operator actions: each applied once or refused -----------------------------------


async def test_twenty_concurrent_operator_actions_each_apply_once_or_are_refused(
        env: Environment) -> None:
    flow, _ = _sleeper()
    run = await flow.run()
    assert run.status is rf.Status.RUNNING  # asleep: every action acts under the lock itself
    actions = ["pause"] * 9 + ["resume"] * 8 + ["cancel"] * 3
    random.Random(SEED).shuffle(actions)
    outcomes: list[tuple[str, str, rf.Run | None]] = []

    async def act(index: int, action: str) -> None:
        await anyio.sleep(random.Random(SEED + index).random() / 100)
        name = f"op{index}"
        try:
            if action == "pause":
                result = await flow.pause(run.id, by=name)
            elif action == "resume":
                result = await flow.resume(run.id)
            else:
                result = await flow.cancel(run.id, reason=name)
        except rf.RunStateError:
            outcomes.append((action, name, None))
            return
        outcomes.append((action, name, result))

    async with anyio.create_task_group() as tg:
        for index, action in enumerate(actions):
            tg.start_soon(act, index, action)
    final = await flow.get(run.id)
    details = paused_events(final)
    for action, name, result in outcomes:
        if action == "pause":  # applied exactly once, or refused and never applied
            assert details.count(f"paused by {name}") == (0 if result is None else 1), name
    resumes = [e for e in final.history if e.kind == rf.EventKind.RUN_RESUMED]
    assert len(resumes) == sum(1 for a, _, r in outcomes if a == "resume" and r is not None)
    cancelled = [e for e in final.history if e.kind == rf.EventKind.RUN_CANCELLED]
    assert len(cancelled) <= 1
    # the history replays to the final state: pauses and resumes alternate from running
    status = rf.Status.RUNNING
    for e in final.history:
        if e.kind == rf.EventKind.RUN_PAUSED:
            assert status is rf.Status.RUNNING
            status = rf.Status.PAUSED
        elif e.kind == rf.EventKind.RUN_RESUMED:
            assert status is rf.Status.PAUSED
            status = rf.Status.RUNNING
        elif e.kind == rf.EventKind.RUN_CANCELLED:
            status = rf.Status.CANCELLED
    assert final.status is status
    assert (final.paused_by is not None) == (status is rf.Status.PAUSED)
    if any(a == "cancel" and r is not None for a, _, r in outcomes):  # accepted: applied
        assert cancelled and final.status is rf.Status.CANCELLED
    assert await env.storage.lock_owner(run.id) is None


async def test_a_cancel_racing_a_pause_is_never_lost(env: Environment) -> None:
    """A cancel whose request was left while a pause held the run (the pause does not read
    requests back) still ends the run cancelled: it waits its turn for the lock."""
    flow, _ = _sleeper()
    runs = [await flow.run() for _ in range(12)]
    cancels: dict[str, rf.Run] = {}

    async def pause(run_id: str) -> None:
        with contextlib.suppress(rf.RunStateError):
            await flow.pause(run_id)

    async def cancel(run_id: str) -> None:
        cancels[run_id] = await flow.cancel(run_id, reason="race")

    async with anyio.create_task_group() as tg:
        for run in runs:
            tg.start_soon(pause, run.id)
            tg.start_soon(cancel, run.id)
    for run in runs:
        final = await flow.get(run.id)
        assert final.status is rf.Status.CANCELLED, kinds(final)
        assert cancels[run.id].status is rf.Status.CANCELLED
