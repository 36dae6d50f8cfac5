"""Interrupts: pause for a validated payload, resume exactly once (api.md §3)."""

from __future__ import annotations

import time
from typing import Annotated

import anyio
import msgspec
import pytest

import reactorflow as rf
from tests.helpers import kinds, redeploy, unique, until_past
from tests.workflows import approvals
from tests.workflows.approvals import Approval, approval_flow

OK = {"approved": True, "by": "ann"}


@pytest.fixture(autouse=True)
def _clear_log() -> None:
    approvals.LOG.clear()


async def test_run_pauses_after_independent_steps(storage: rf.Storage) -> None:
    run = await approval_flow.run(order_id="P1")
    assert run.status is rf.Status.PAUSED
    assert run.waiting_on == ["approve"]
    assert sorted(approvals.LOG) == ["prepare", "side"]  # side does not depend on approve
    assert run.steps["approve"].status == "waiting"
    assert run.steps["ship"].status == "pending"
    assert kinds(run)[-1] == "run.paused"
    assert await approval_flow.ready_interrupts(run.id) == ["approve"]
    assert run.timeout_at is None


async def test_continue_resumes_to_completion_each_step_once(storage: rf.Storage) -> None:
    paused = await approval_flow.run(order_id="P2")
    run = await approval_flow.continue_(paused.id, step="approve", payload=OK)
    assert run.status is rf.Status.COMPLETED
    assert run.value == "shipped prep-P2 ok=True"
    assert sorted(approvals.LOG) == ["approve by ann", "prepare", "ship", "side"]
    assert run.steps["approve"].status == "completed"
    assert run.waiting_on == []
    assert "run.resumed" in kinds(run)


async def test_continue_by_correlation_id_resolves_the_run(storage: rf.Storage) -> None:
    paused = await approval_flow.run(order_id="P3")
    run = await approval_flow.continue_by_correlation_id("approval:P3", step="approve",
                                                         payload=Approval(True, "cy"))
    assert run.id == paused.id
    assert run.status is rf.Status.COMPLETED
    with pytest.raises(rf.RunNotFound, match="correlation id 'approval:nope'"):
        await approval_flow.continue_by_correlation_id("approval:nope", step="approve",
                                                       payload=OK)


async def test_invalid_payload_counts_and_leaves_run_unchanged(storage: rf.Storage) -> None:
    paused = await approval_flow.run(order_id="P4")
    with pytest.raises(rf.PayloadValidationError) as info:
        await approval_flow.continue_(paused.id, step="approve",
                                      payload={"approved": "maybe", "by": "ann"})
    error = info.value
    assert error.field == "approved"
    assert "Expected `bool`" in error.reason
    assert (error.attempts, error.max_attempts, error.exhausted) == (1, 3, False)
    assert error.run_id == paused.id and error.step == "approve"
    assert "interrupt 'approve' of run" in str(error)
    after = await approval_flow.get(paused.id)
    assert after.status is rf.Status.PAUSED
    assert after.steps == paused.steps
    assert after.history == paused.history
    with pytest.raises(rf.PayloadValidationError) as missing:
        await approval_flow.continue_(paused.id, step="approve", payload={"approved": True})
    assert "by" in str(missing.value) and missing.value.attempts == 2
    run = await approval_flow.continue_(paused.id, step="approve", payload=OK)
    assert run.status is rf.Status.COMPLETED


async def test_max_attempts_rolls_the_run_back_to_failed(storage: rf.Storage) -> None:
    paused = await approval_flow.run(order_id="P5")
    bad = {"approved": 1, "by": "x"}
    for _ in range(2):
        with pytest.raises(rf.PayloadValidationError):
            await approval_flow.continue_(paused.id, step="approve", payload=bad)
    assert (await approval_flow.get(paused.id)).status is rf.Status.PAUSED
    with pytest.raises(rf.PayloadValidationError) as info:
        await approval_flow.continue_(paused.id, step="approve", payload=bad)
    assert info.value.exhausted
    assert "rolled back" in str(info.value)
    run = await approval_flow.get(paused.id)
    assert run.status is rf.Status.FAILED
    assert run.error is not None and run.error.step == "approve"
    assert "approved" in run.error.message and "Expected `bool`" in run.error.message
    assert sorted(approvals.LOG[-2:]) == ["undo prepare", "undo side"]
    with pytest.raises(rf.NotPaused):
        await approval_flow.continue_(paused.id, step="approve", payload=OK)


async def test_second_continue_is_already_resumed(storage: rf.Storage) -> None:
    paused = await approval_flow.run(order_id="P6")
    await approval_flow.continue_(paused.id, step="approve", payload=OK)
    before = await approval_flow.get(paused.id)
    with pytest.raises(rf.AlreadyResumed) as info:
        await approval_flow.continue_(paused.id, step="approve", payload=OK)
    assert info.value.run_id == paused.id
    assert (await approval_flow.get(paused.id)).history == before.history


async def test_wrong_step_lists_pending_interrupts(storage: rf.Storage) -> None:
    paused = await approval_flow.run(order_id="P7")
    for wrong in ("ship", "nope", ("approve", "x")):
        with pytest.raises(rf.InterruptNotPending) as info:
            await approval_flow.continue_(paused.id, step=wrong, payload=OK)
        assert info.value.pending == ["approve"]
        assert "pending interrupts: 'approve'" in str(info.value)
    assert (await approval_flow.get(paused.id)).status is rf.Status.PAUSED


async def test_cancel_while_paused_refuses_later_continue(storage: rf.Storage) -> None:
    paused = await approval_flow.run(order_id="P8")
    cancelled = await approval_flow.cancel(paused.id, reason="customer left")
    assert cancelled.status is rf.Status.CANCELLED
    assert cancelled.cancel_reason == "customer left"
    assert cancelled.waiting_on == []
    with pytest.raises(rf.NotPaused) as info:
        await approval_flow.continue_(paused.id, step="approve", payload=OK)
    assert info.value.status == "cancelled"
    assert sorted(approvals.LOG) == ["prepare", "side"]  # no rollback on cancel
    assert cancelled.steps["approve"].status == "skipped"


async def test_undo_while_paused_rolls_back_and_cancels(storage: rf.Storage) -> None:
    paused = await approval_flow.run(order_id="P9")
    undone = await approval_flow.undo(paused.id)
    assert undone.status is rf.Status.CANCELLED
    assert sorted(approvals.LOG[2:]) == ["undo prepare", "undo side"]
    with pytest.raises(rf.NotPaused):
        await approval_flow.continue_(paused.id, step="approve", payload=OK)


async def test_interrupt_timeout_expires_and_rolls_back(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("expiring"))
    log: list[str] = []

    @flow.step
    async def work() -> str:
        return "w"

    @work.undo
    async def unwork(result: str) -> None:
        log.append("undo work")

    @flow.interrupt(timeout=0.1)
    async def approve(payload: Approval, work: str) -> Approval:
        return payload

    before = time.time()
    paused = await flow.run()
    after = time.time()
    assert paused.timeout_at is not None
    assert before + 0.1 <= paused.timeout_at <= after + 0.1  # 0.1 s after it started waiting
    await until_past(paused.timeout_at)
    with pytest.raises(rf.InterruptExpired) as info:
        await flow.continue_(paused.id, step="approve", payload=OK)
    assert info.value.timeout_at == paused.timeout_at
    run = await flow.get(paused.id)
    assert run.status is rf.Status.FAILED
    assert run.error is not None and run.error.type == "InterruptExpired"
    assert log == ["undo work"]


def test_interrupt_schema_is_json_schema() -> None:
    schema = approval_flow.interrupt_schema("approve")
    component = schema["$defs"]["Approval"]
    assert component["required"] == ["approved", "by"]
    assert component["properties"]["approved"] == {"type": "boolean"}
    with pytest.raises(rf.DefinitionError, match="no interrupt 'ship'"):
        approval_flow.interrupt_schema("ship")


async def test_concurrent_continues_accept_exactly_one(storage: rf.Storage) -> None:
    paused = await approval_flow.run(order_id="P10")
    outcomes: list[str] = []

    async def attempt(index: int) -> None:
        try:
            await approval_flow.continue_(paused.id, step="approve",
                                          payload={"approved": True, "by": f"u{index}"})
            outcomes.append("accepted")
        except rf.AlreadyResumed:
            outcomes.append("already")
        except rf.NotPaused:
            outcomes.append("not paused")

    async with anyio.create_task_group() as tg:
        for i in range(200):
            tg.start_soon(attempt, i)
    assert outcomes.count("accepted") == 1
    assert outcomes.count("already") == 199  # every other call: AlreadyResumed
    run = await approval_flow.get(paused.id)
    assert run.status is rf.Status.COMPLETED
    assert approvals.LOG.count("ship") == 1
    assert sum(1 for line in approvals.LOG if line.startswith("approve by")) == 1
    assert kinds(run).count("interrupt.resumed:approve") == 1


async def test_second_interrupt_resumed_while_first_executes(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("p4"))
    gate = anyio.Event()
    entered = anyio.Event()

    @flow.interrupt
    async def first(payload: Approval) -> str:
        return payload.by

    @flow.step
    async def slow(first: str) -> str:
        entered.set()
        await gate.wait()
        return f"slow after {first}"

    @flow.interrupt
    async def second(payload: Approval) -> str:
        return payload.by

    @flow.step
    async def end(slow: str, second: str) -> str:
        return f"{slow} & {second}"

    paused = await flow.run()
    assert sorted(paused.waiting_on) == ["first", "second"]  # type: ignore[type-var]
    results: list[rf.Run] = []
    async with anyio.create_task_group() as tg:
        async def resume_first() -> None:
            results.append(await flow.continue_(paused.id, step="first", payload=OK))

        tg.start_soon(resume_first)
        await entered.wait()
        during = await flow.continue_(paused.id, step="second",
                                      payload={"approved": True, "by": "bo"})
        assert during.status is rf.Status.RUNNING  # accepted; applied once the run is free
        gate.set()
    final = await flow.wait(paused.id, timeout=10)
    assert final.status is rf.Status.COMPLETED
    assert final.value == "slow after ann & bo"


async def test_correlation_id_taken_by_another_run_fails_the_second(storage: rf.Storage) -> None:
    first = await approval_flow.run(order_id="DUP")
    second = await approval_flow.run(order_id="DUP")
    assert first.status is rf.Status.PAUSED
    assert second.status is rf.Status.FAILED
    assert second.error is not None and second.error.type == "CorrelationConflict"
    assert first.id in second.error.message


class Strict(msgspec.Struct):
    count: Annotated[int, msgspec.Meta(ge=1, le=10)]


async def test_payload_may_be_an_instance_and_constraints_apply(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("constrained"))

    @flow.interrupt
    async def qty(payload: Strict) -> int:
        return payload.count

    paused = await flow.run()
    for bad in (Strict(0), {"count": 11}):  # an instance is checked like a mapping
        with pytest.raises(rf.PayloadValidationError) as info:
            await flow.continue_(paused.id, step="qty", payload=bad)
        assert info.value.field == "count"
    assert (await flow.get(paused.id)).status is rf.Status.PAUSED  # refused, nothing claimed
    assert await storage.claims(paused.id) == {}
    done = await flow.continue_(paused.id, step="qty", payload=Strict(4))
    assert done.value == 4


def test_correlation_template_names_only_what_the_interrupt_waits_for() -> None:
    flow = rf.Reactor(unique("template"), inputs=approvals.OrderIn)

    @flow.step
    async def unrelated(order_id: str) -> str:
        return order_id

    with pytest.raises(rf.DefinitionError, match="a step this interrupt waits for"):
        @flow.interrupt(correlation_id="x:{unrelated}")
        async def approve(payload: Approval) -> Approval:
            return payload

    @flow.interrupt(correlation_id="x:{order_id}:{unrelated}")
    async def approve_after(payload: Approval, unrelated: str) -> Approval:
        return payload


async def test_continue_with_a_changed_graph_refuses_before_claiming(
        storage: rf.Storage) -> None:
    name = unique("changing")

    def build(extra_dep: bool) -> rf.Reactor:
        flow = rf.Reactor(name)

        @flow.step
        async def base() -> int:
            return 1

        if extra_dep:
            @flow.interrupt
            async def gate(payload: int, base: int) -> int:
                return payload
        else:
            @flow.interrupt
            async def gate(payload: int) -> int:
                return payload

        return flow

    old = build(extra_dep=False)
    paused = await old.run()
    redeploy(old)
    new = build(extra_dep=True)
    with pytest.raises(rf.DefinitionChanged, match="'gate' now depends on"):
        await new.continue_(paused.id, step="gate", payload=1)
    assert await storage.claims(paused.id) == {}  # nothing was claimed
