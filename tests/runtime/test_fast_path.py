"""A plain step runs on the forward drive's fast path (`Forward._plain`) when no middleware
observes steps, and on the general path (`_one`, `call_step`) when one does: both leave the same
run behind, on both backends. Each scenario runs once each way and the two snapshots are
compared (statuses, attempts, errors, history, values and their types)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import reactorflow as rf
from reactorflow import records
from reactorflow.runtime.engine import forward
from tests.helpers import Recorder, unique

pytestmark = pytest.mark.usefixtures("storage")


def _converting() -> rf.Reactor:
    """A float-annotated step returning an int: dependents and the snapshot get a float."""
    flow = rf.Reactor(unique("fast.float"))

    @flow.step
    async def count() -> float:
        return 1  # type: ignore[return-value]  # (stored, then read back as 1.0)

    @flow.step
    async def half(count: float) -> str:
        return f"{count!r} {type(count).__name__}"

    return flow


def _retried() -> rf.Reactor:
    flow = rf.Reactor(unique("fast.retry"))

    @flow.step(retries=rf.Retry(attempts=3, backoff=0))
    async def flaky(ctx: rf.StepContext) -> int:
        if ctx.attempt < 2:
            raise ValueError("the first attempt fails")
        return ctx.attempt

    return flow


def _failing() -> rf.Reactor:
    flow = rf.Reactor(unique("fast.fail"))

    @flow.step
    async def first() -> int:
        return 1

    @flow.step
    async def boom(first: int) -> int:
        raise ValueError(f"no {first}")

    return flow


def _halting() -> rf.Reactor:
    flow = rf.Reactor(unique("fast.halt"))

    @flow.step
    async def stop() -> int:
        raise rf.Halt("enough")

    return flow


def _cancelled_by_step_code() -> rf.Reactor:
    flow = rf.Reactor(unique("fast.cancel"))

    @flow.step
    async def awaits_a_cancelled_task() -> int:
        raise asyncio.CancelledError  # as if it awaited a task someone else cancelled

    return flow


def _wrong_type() -> rf.Reactor:
    flow = rf.Reactor(unique("fast.type"))

    @flow.step
    async def number() -> int:
        return True  # a bool is not an int once stored: a SerializationError

    return flow


def _skipping() -> rf.Reactor:
    flow = rf.Reactor(unique("fast.skip"))

    @flow.step(when=lambda: False)
    async def never() -> int:
        return 1

    @flow.step
    async def reads(never: int) -> int:
        return never

    return flow


SCENARIOS = {
    "converting": _converting, "retried": _retried, "failing": _failing, "halting": _halting,
    "cancelled by step code": _cancelled_by_step_code, "wrong type": _wrong_type,
    "skipping": _skipping,
}


def _seen(run: rf.Run) -> dict[str, Any]:
    """What a run shows, without its ids and times."""
    return {
        "status": run.status,
        "value": (run.value, type(run.value)),
        "error": (run.error.step, run.error.type) if run.error is not None else None,
        "steps": {key: (state.status, state.attempts, (state.error or "").split(":")[0],
                        state.result, type(state.result))
                  for key, state in run.steps.items()},
        "history": [(e.kind, e.step, e.attempt) for e in run.history],
    }


@pytest.mark.parametrize("scenario", SCENARIOS)
async def test_the_fast_path_leaves_the_run_the_general_path_leaves(scenario: str) -> None:
    flow = SCENARIOS[scenario]()
    fast = await flow.run()
    recorder = Recorder()
    rf.configure(middleware=[recorder])  # observed: every step takes the general path
    try:
        general = await flow.run()
    finally:
        rf.configure(middleware=[])
    assert recorder.only("before_run")  # observed: it took the general path
    assert _seen(fast) == _seen(general)
    assert _seen(await flow.get(fast.id)) == _seen(await flow.get(general.id))


async def test_a_result_kept_without_decoding_is_the_value_dependents_get() -> None:
    flow = _converting()
    run = await flow.run()
    assert run.status is rf.Status.COMPLETED
    assert run.steps["count"].result == 1.0
    assert type(run.steps["count"].result) is float
    assert run.value == "1.0 float"


# -- a resumed interrupt ---------------------------------------------------------------------------


def _interrupt(body: str) -> rf.Reactor:
    """`prep`, then the interrupt `approve` (a correlation id and a deadline: both carried into
    its completed record), then `finish`; `body` decides how `approve` ends."""
    flow = rf.Reactor(unique("fast.interrupt." + body.replace(" ", "_")))

    @flow.step
    async def prep() -> int:
        return 1

    @flow.interrupt(correlation_id="order:{prep}", timeout=3600)
    async def approve(payload: int, prep: int, ctx: rf.StepContext) -> int:
        if body == "raises":
            raise ValueError(f"no {payload}")
        if body == "halts":
            raise rf.Halt("enough")
        if body == "wrong type":
            return True  # a bool is not an int once stored: a SerializationError
        return payload + prep + ctx.attempt

    @flow.step
    async def finish(approve: int) -> int:
        return approve + 1

    return flow


INTERRUPT_BODIES = ["completes", "raises", "halts", "wrong type"]


async def _stored_record(run_id: str, key: str) -> tuple[Any, ...]:
    stored = await rf.config.current_storage().load_run(run_id)
    assert stored is not None
    record = records.decode_step(stored.steps[key])
    return (record.status, record.attempts, record.deadline is not None, record.correlation_id)


async def _resumed(flow: rf.Reactor) -> rf.Run:
    paused = await flow.run()
    assert paused.status is rf.Status.PAUSED
    return await flow.continue_(paused.id, step="approve", payload=40)


@pytest.mark.parametrize("body", INTERRUPT_BODIES)
async def test_a_resumed_interrupt_on_the_fast_path_leaves_the_run_the_general_path_leaves(
        body: str) -> None:
    flow = _interrupt(body)
    fast = await _resumed(flow)
    recorder = Recorder()
    rf.configure(middleware=[recorder])  # observed: every step takes the general path
    try:
        general = await _resumed(flow)
    finally:
        rf.configure(middleware=[])
    assert recorder.only("before_run")  # observed: it took the general path
    assert _seen(fast) == _seen(general)
    assert _seen(await flow.get(fast.id)) == _seen(await flow.get(general.id))
    assert (await _stored_record(fast.id, "approve")
            == await _stored_record(general.id, "approve"))
    if body == "completes":
        assert fast.value == 43
        assert await _stored_record(fast.id, "approve") == (
            rf.StepStatus.COMPLETED, 1, True, "order:1")


async def test_a_resumed_interrupt_takes_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without middleware, a claimed interrupt's body runs without `call_step` (the general
    path), as a plain step's does."""
    general: list[str] = []
    original = forward.call_step

    async def counted(ex: Any, node: Any, *args: Any, **kwargs: Any) -> Any:
        general.append(node.key)
        return await original(ex, node, *args, **kwargs)

    monkeypatch.setattr(forward, "call_step", counted)
    run = await _resumed(_interrupt("completes"))
    assert run.value == 43
    assert general == []
