"""A plain step runs on the forward drive's fast path (`Forward._plain`) when no middleware
observes steps, and on the general path (`_one`, `call_step`) when one does: both leave the same
run behind, on both backends. Each scenario runs once each way and the two snapshots are
compared (statuses, attempts, errors, history, values and their types)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import reactorflow as rf
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
