"""Holding a failed run instead of rolling it back, and repairing it (api.md §15), on both
backends: `on_failure="hold"` at reactor and step level, `retry_step` after a fix on the same
run id, `skip_step` with its validation, `undo` and `cancel` of a held run, `hold_timeout` under
the fake clock, and concurrent operator actions on one run."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import anyio
import msgspec
import pytest

import reactorflow as rf
from reactorflow.testing import Environment
from tests.helpers import unique


class Charge(msgspec.Struct):
    amount: float
    ref: str


class Ledger:
    """What the steps did, and whether the charge is fixed (a deploy flips it)."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.keys: list[str] = []
        self.fixed = False


def _billing(ledger: Ledger, *, reactor_hold: bool = True, step_hold: str | None = None,
             hold_timeout: float | None = None, name: str | None = None) -> rf.Reactor:
    flow = rf.Reactor(name or unique("billing"),
                      on_failure="hold" if reactor_hold else "rollback",
                      hold_timeout=hold_timeout)

    @flow.step
    async def reserve() -> str:
        ledger.log.append("reserve")
        return "R1"

    @reserve.undo
    async def release(result: str) -> None:
        ledger.log.append(f"release {result}")

    @flow.step
    async def invoice(reserve: str) -> str:
        ledger.log.append("invoice")
        return "I1"

    @invoice.undo
    async def void(result: str) -> None:
        ledger.log.append(f"void {result}")

    @flow.step(on_failure=step_hold)
    async def charge(invoice: str, ctx: rf.StepContext) -> Charge:
        ledger.log.append("charge")
        ledger.keys.append(ctx.idempotency_key)
        if not ledger.fixed:
            raise ConnectionError("the card processor is down")
        return Charge(12.0, "C1")

    @charge.compensate
    async def refund_attempt(error: Exception) -> None:  # (later: rebuilt as rf.RecordedError)
        kind = error.type if isinstance(error, rf.RecordedError) else type(error).__name__
        ledger.log.append(f"compensate charge ({kind})")

    @flow.step
    async def receipt(charge: Charge) -> str:
        ledger.log.append(f"receipt {charge.ref}")
        return f"receipt for {charge.amount}"

    return flow


async def _held(flow: rf.Reactor, ledger: Ledger) -> rf.Run:
    run = await flow.run()
    assert run.status is rf.Status.HELD, run
    assert ledger.log == ["reserve", "invoice", "charge"]  # nothing undone or compensated
    assert run.error is not None and run.error.step == "charge"
    assert run.error.type == "ConnectionError"
    assert run.steps["invoice"].result == "I1"
    assert any(e.kind == rf.EventKind.RUN_HELD for e in run.history)
    return run


async def test_a_reactor_level_hold_keeps_completed_work_and_undoes_nothing(
        storage: rf.Storage) -> None:
    ledger = Ledger()
    flow = _billing(ledger)
    run = await _held(flow, ledger)
    assert (await flow.get(run.id)).status is rf.Status.HELD
    assert (await flow.wait(run.id, timeout=5)).status is rf.Status.HELD  # wait returns on held


async def test_a_step_level_hold_holds_only_for_that_step(storage: rf.Storage) -> None:
    ledger = Ledger()
    flow = _billing(ledger, reactor_hold=False, step_hold="hold")
    await _held(flow, ledger)
    rolled = Ledger()
    saga = _billing(rolled, reactor_hold=True, step_hold="rollback")  # the step's own wins
    run = await saga.run()
    assert run.status is rf.Status.FAILED
    assert rolled.log == ["reserve", "invoice", "charge", "compensate charge (ConnectionError)",
                          "void I1", "release R1"]


async def test_retry_step_after_a_fix_finishes_the_same_run(storage: rf.Storage) -> None:
    ledger = Ledger()
    flow = _billing(ledger)
    run = await _held(flow, ledger)
    ledger.fixed = True  # the fix is deployed
    done = await flow.retry_step(run.id, "charge")
    assert done.id == run.id and done.status is rf.Status.COMPLETED
    assert ledger.log == ["reserve", "invoice", "charge", "charge", "receipt C1"]
    assert ledger.keys[0] == ledger.keys[1] == f"{run.id}:charge"  # the same step's key
    assert done.value == "receipt for 12.0" and done.error is None
    assert [e.detail for e in done.history if e.kind == rf.EventKind.RUN_REPAIRED] == [
        "retry_step charge"]


async def test_a_retried_step_that_fails_again_holds_again(storage: rf.Storage) -> None:
    ledger = Ledger()
    flow = _billing(ledger)
    run = await _held(flow, ledger)
    again = await flow.retry_step(run.id, "charge")
    assert again.status is rf.Status.HELD and ledger.log.count("charge") == 2
    assert "compensate charge (ConnectionError)" not in ledger.log


async def test_skip_step_records_a_validated_result_and_goes_on(storage: rf.Storage) -> None:
    ledger = Ledger()
    flow = _billing(ledger)
    run = await _held(flow, ledger)
    before = await storage.load_run(run.id, history=True)
    with pytest.raises(rf.ResultValidationError) as info:
        await flow.skip_step(run.id, "charge", result={"amount": "twelve", "ref": "C9"})
    assert info.value.field == "amount" and info.value.step == "charge"
    with pytest.raises(rf.ResultValidationError):
        await flow.skip_step(run.id, "charge", result={"ref": "C9"})  # amount is required
    with pytest.raises(rf.StepNotFailed) as not_failed:
        await flow.skip_step(run.id, "invoice", result="I2")
    assert not_failed.value.failed == "charge" and not_failed.value.step_status == "completed"
    with pytest.raises(rf.StepNotFailed):
        await flow.retry_step(run.id, "receipt")  # never ran
    after = await storage.load_run(run.id, history=True)
    assert after == before  # nothing written by the refusals
    done = await flow.skip_step(run.id, "charge", result={"amount": 9.5, "ref": "MANUAL"})
    assert done.status is rf.Status.COMPLETED and done.steps["charge"].result == Charge(9.5,
                                                                                       "MANUAL")
    assert ledger.log == ["reserve", "invoice", "charge", "receipt MANUAL"]
    with pytest.raises(rf.RunStateError) as refused:
        await flow.skip_step(run.id, "charge", result={"amount": 1.0, "ref": "x"})
    assert refused.value.status == "completed" and "held" in refused.value.message


async def test_undo_of_a_held_run_compensates_first_then_undoes_newest_first(
        storage: rf.Storage) -> None:
    ledger = Ledger()
    flow = _billing(ledger)
    run = await _held(flow, ledger)
    undone = await flow.undo(run.id)
    assert undone.status is rf.Status.FAILED
    assert undone.error is not None and undone.error.step == "charge"
    assert ledger.log[3:] == ["compensate charge (ConnectionError)", "void I1", "release R1"]


async def test_cancel_of_a_held_run_ends_it_without_rollback(storage: rf.Storage) -> None:
    ledger = Ledger()
    flow = _billing(ledger)
    run = await _held(flow, ledger)
    cancelled = await flow.cancel(run.id, reason="written off")
    assert cancelled.status is rf.Status.CANCELLED and ledger.log[3:] == []


async def test_retry_step_of_a_run_that_is_not_held_is_refused(storage: rf.Storage) -> None:
    ledger = Ledger()
    ledger.fixed = True
    flow = _billing(ledger)
    run = await flow.run()
    assert run.status is rf.Status.COMPLETED
    with pytest.raises(rf.RunStateError) as info:
        await flow.retry_step(run.id, "charge")
    assert info.value.operation == "retry_step" and info.value.status == "completed"


async def test_twenty_concurrent_operator_actions_apply_once(storage: rf.Storage) -> None:
    ledger = Ledger()
    flow = _billing(ledger)
    run = await _held(flow, ledger)
    ledger.fixed = True
    outcomes: list[str] = []

    async def act(i: int) -> None:
        try:
            if i % 2:
                await flow.retry_step(run.id, "charge")
            else:
                await flow.skip_step(run.id, "charge", result=Charge(1.0, f"S{i}"))
            outcomes.append("applied")
        except (rf.RunStateError, rf.LockTimeout) as exc:
            outcomes.append(type(exc).__name__)

    async with anyio.create_task_group() as tg:
        for i in range(20):
            tg.start_soon(act, i)
    assert outcomes.count("applied") == 1, outcomes
    final = await flow.get(run.id)
    assert final.status is rf.Status.COMPLETED
    assert len([e for e in final.history if e.kind == rf.EventKind.RUN_REPAIRED]) == 1
    assert ledger.log.count("receipt C1") + sum(
        ledger.log.count(f"receipt S{i}") for i in range(20)) == 1


@pytest.fixture(params=["rf_env", "rf_redis_env"])
def env(request: pytest.FixtureRequest) -> Environment:
    return request.getfixturevalue(request.param)  # type: ignore[no-any-return]


async def test_hold_timeout_rolls_the_run_back_by_itself(env: Environment) -> None:
    ledger = Ledger()
    flow = _billing(ledger, hold_timeout=timedelta(hours=2).total_seconds())
    run = await _held(flow, ledger)
    await env.clock.advance(3600.0)
    await env.drain()
    assert (await flow.get(run.id)).status is rf.Status.HELD
    await env.clock.advance(3600.0)
    await env.drain()
    failed = await flow.get(run.id)
    assert failed.status is rf.Status.FAILED
    assert failed.error is not None and failed.error.step == "charge"  # the step's failure
    assert any(e.kind == rf.EventKind.RUN_HOLD_EXPIRED for e in failed.history)
    assert ledger.log[3:] == ["compensate charge (ConnectionError)", "void I1", "release R1"]


async def test_a_retried_held_run_disarms_its_hold_timeout(env: Environment) -> None:
    ledger = Ledger()
    flow = _billing(ledger, hold_timeout=60.0)
    run = await _held(flow, ledger)
    ledger.fixed = True
    assert (await flow.retry_step(run.id, "charge")).status is rf.Status.COMPLETED
    await env.clock.advance(120.0)
    await env.drain()
    assert (await flow.get(run.id)).status is rf.Status.COMPLETED


def test_bad_on_failure_and_hold_timeout_are_definition_errors() -> None:
    bad: list[dict[str, Any]] = [{"on_failure": "retry"}, {"on_failure": 1},
                                 {"hold_timeout": 0}, {"hold_timeout": "1h"}]
    for options in bad:
        with pytest.raises(rf.DefinitionError) as info:
            rf.Reactor(unique("bad"), **options)
        assert next(iter(options)) in info.value.message
    flow = rf.Reactor(unique("bad"))
    with pytest.raises(rf.DefinitionError) as step_info:
        @flow.step(on_failure="later")
        async def one() -> int:
            return 1
    assert "on_failure" in step_info.value.message and step_info.value.step == "one"


async def test_rewind_of_a_held_run_compensates_the_failed_step_and_reruns(
        storage: rf.Storage) -> None:
    ledger = Ledger()
    flow = _billing(ledger)
    run = await _held(flow, ledger)
    ledger.fixed = True
    done = await flow.rewind(run.id, to="invoice")
    assert done.status is rf.Status.COMPLETED and done.error is None
    assert ledger.log == ["reserve", "invoice", "charge", "compensate charge (ConnectionError)",
                          "void I1", "invoice", "charge", "receipt C1"]


class Account(msgspec.Struct):
    account_id: str


async def test_a_held_run_holds_no_gate(storage: rf.Storage) -> None:
    """A gate around the held step, and one around the whole run, are free while it is held:
    another run takes them at once (wait=0 would refuse a busy one)."""
    tries: list[str] = []
    flow = rf.Reactor(unique("gated-hold"), inputs=Account, on_failure="hold",
                      gates=[rf.Lock("run:{account_id}", wait=0)])

    @flow.step(gates=[rf.Lock("acct:{account_id}", wait=0)])
    async def debit(account_id: str) -> str:
        tries.append(account_id)
        if len(tries) == 1:
            raise RuntimeError("the first debit fails")
        return f"debited {account_id}"

    held = await flow.run(account_id="A1")
    assert held.status is rf.Status.HELD
    other = await flow.run(account_id="A1")  # both gates are free
    assert other.status is rf.Status.COMPLETED
    done = await flow.retry_step(held.id, "debit")  # and the retry takes them again
    assert done.status is rf.Status.COMPLETED and tries == ["A1", "A1", "A1"]
