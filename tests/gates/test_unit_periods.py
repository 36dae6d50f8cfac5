"""A step `Period` on an async unit (`async_step`, `async_reactor`) skips the step once the
period is used, as a step gate's period skips a step: its dependents follow the skip rules, the
run goes on. Checked before the unit is dispatched; a period used between the dispatch and the
unit's run (the worker's check, or the child run's) skips the step too."""

from __future__ import annotations

import msgspec
import pytest

import reactorflow as rf
from reactorflow.runtime.services import job_handling as jobs
from tests.helpers import Captured, unique


class Account(msgspec.Struct):
    account_id: str


def _period(key: str) -> rf.Period:
    return rf.Period(f"{key}:{{account_id}}", every="month")


def _flow(kind: str, key: str, ran: list[str]) -> rf.Reactor:
    """A reactor whose unit `handle` (an async_step or an async_reactor) has a step period;
    `after` reads it, `last` reads `after`; `own` reads nothing of it."""
    flow = rf.Reactor(unique(f"unitperiod.{kind}"), inputs=Account)
    if kind == "async_reactor":
        child = rf.Reactor(unique("unitperiod.child"), inputs=Account)

        @child.step
        async def inner(account_id: str) -> str:
            ran.append(account_id)
            return account_id

        @flow.async_reactor(child, gates=[_period(key)])
        async def handle(account_id: str) -> Account:
            return Account(account_id)
    else:
        @flow.async_step(gates=[_period(key)])
        async def handle(account_id: str) -> str:
            ran.append(account_id)
            return account_id

    @flow.step
    async def after(handle: str) -> str:
        return handle

    @flow.step
    async def last(after: str) -> str:
        return after

    @flow.step
    async def own(account_id: str) -> str:
        return account_id

    return flow


def _user(key: str) -> rf.Reactor:
    """Another reactor using the same period (a plain step's): running it uses the period."""
    user = rf.Reactor(unique("unitperiod.user"), inputs=Account)

    @user.step(gates=[_period(key)])
    async def use(account_id: str) -> str:
        return account_id

    return user


def _assert_skipped(run: rf.Run) -> None:
    assert run.status is rf.Status.COMPLETED, run.error
    assert {k: run.steps[k].status for k in ("handle", "after", "last", "own")} == {
        "handle": "skipped", "after": "skipped", "last": "skipped", "own": "completed"}


@pytest.mark.parametrize("kind", ["async_step", "async_reactor"])
async def test_a_used_step_period_on_an_async_unit_skips_the_step(
        storage: rf.Storage, kind: str) -> None:
    ran: list[str] = []
    flow = _flow(kind, unique("up"), ran)
    first = await flow.wait((await flow.run(account_id="A1")).id, timeout=30)
    assert first.status is rf.Status.COMPLETED and first.steps["last"].status == "completed"
    again = await flow.wait((await flow.run(account_id="A1")).id, timeout=30)
    _assert_skipped(again)
    assert ran == ["A1"]  # the second run's unit never ran


@pytest.mark.parametrize("kind", ["async_step", "async_reactor"])
async def test_a_step_period_used_after_the_dispatch_skips_the_unit(
        storage: rf.Storage, captured: Captured, kind: str) -> None:
    """The period is free when the unit is dispatched and used before it runs: the worker
    (async_step) or the child run (async_reactor) finds it used, and the step is skipped."""
    key = unique("ur")
    ran: list[str] = []
    flow = _flow(kind, key, ran)
    run = await flow.dispatch(account_id="A1")
    captured.jobs.clear()
    await jobs.execute_run(run.id, flow.name)  # dispatches the unit, then parks
    assert (await _user(key).run(account_id="A1")).status is rf.Status.COMPLETED
    while captured.jobs:  # the unit (or the child run), then the run it wakes
        await jobs.execute(captured.jobs.pop(0))
    _assert_skipped(await flow.get(run.id))
    assert ran == []
