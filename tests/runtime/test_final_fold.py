"""The completion that completes a resumed run (the tail of a `continue_`) rides in the run's
final save (one write fewer), on memory, Redis and the Redis Cluster: shielded from the
caller's cancellation as a checkpoint is; a control request that came while that step ran
refuses that save, and is honoured as at any step boundary."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import pytest

import reactorflow as rf
from reactorflow import records
from reactorflow.records import Control, RunError
from reactorflow.status import ControlKind
from reactorflow.storage.redis.storage import RedisStorage
from tests.conftest import ALL_BACKENDS, on_every
from tests.helpers import unique
from tests.storage.test_contract import _commands_during


@pytest.fixture(params=ALL_BACKENDS)
async def storage(request: pytest.FixtureRequest) -> AsyncIterator[rf.Storage]:
    async for backend in on_every(request):
        yield backend


def _kinds(run: rf.Run) -> list[str]:
    return [f"{e.kind}:{e.step}" if e.step else e.kind for e in run.history]


def _with_tail(tail: Callable[..., Awaitable[int]] | None = None,
               undone: list[int] | None = None) -> rf.Reactor:
    """Interrupt `approve`, then the tail step `last` (by default: approve + 1), whose undo
    notes its result in `undone`."""
    flow = rf.Reactor(unique("fold"))

    @flow.interrupt
    async def approve(payload: int) -> int:
        return payload

    async def last(approve: int) -> int:
        return approve + 1

    step = flow.step(name="last")(tail or last)

    @step.undo
    async def undo_last(result: int) -> None:
        if undone is not None:
            undone.append(result)

    return flow


async def test_the_last_completion_is_stored_with_the_final_save(storage: rf.Storage) -> None:
    flow = _with_tail()
    paused = await flow.run()
    run = await flow.continue_(paused.id, step="approve", payload=1)
    stored = await flow.get(run.id)
    assert stored.status is rf.Status.COMPLETED and stored.value == 2
    assert {k: s.status for k, s in stored.steps.items()} == {"approve": "completed",
                                                              "last": "completed"}
    assert _kinds(stored) == _kinds(run)
    assert _kinds(stored)[-2:] == ["step.completed:last", "run.completed"]


async def test_redis_continue_with_a_one_step_tail_is_three_commands(redis_url: str) -> None:
    """The claim's script, the interrupt's checkpoint, the final save with the tail's
    completion."""
    storage = RedisStorage.from_url(redis_url, namespace=unique("ns"))
    rf.configure(storage=storage)
    flow = _with_tail()
    found: list[rf.Run] = []
    try:
        warm, paused = await flow.run(), await flow.run()
        await flow.continue_(warm.id, step="approve", payload=1)  # (scripts loaded)

        async def resume() -> None:
            found.append(await flow.continue_(paused.id, step="approve", payload=1))

        commands = [c["command"].split(" ", 1)[0] for c in
                    await _commands_during(redis_url, resume) if c["client_type"] != "lua"]
    finally:
        await storage.aclose()
    assert found[0].status is rf.Status.COMPLETED
    assert commands == ["EVALSHA"] * 3


async def test_the_final_save_on_its_way_when_the_caller_is_cancelled_lands(
        storage: rf.Storage) -> None:
    flow = _with_tail()
    paused = await flow.run()
    real = storage.save_state
    sending, sent = anyio.Event(), anyio.Event()
    written: list[str] = []

    async def slow_save(run_id: str, owner: str, **options: Any) -> bytes | None:
        if options["status"] == "completed":
            sending.set()
            await sent.wait()  # the write is on its way, not yet in storage
        control = await real(run_id, owner, **options)
        written.append(options["status"])
        return control

    storage.save_state = slow_save  # type: ignore[method-assign]
    scopes: list[anyio.CancelScope] = []

    async def caller() -> None:
        with anyio.CancelScope() as scope:
            scopes.append(scope)
            await flow.continue_(paused.id, step="approve", payload=1)

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(caller)
            await sending.wait()
            scopes[0].cancel()
            await anyio.wait_all_tasks_blocked()  # (an unshielded write is cancelled here)
            assert "completed" not in written
            sent.set()
    assert "completed" in written
    run = await flow.get(paused.id)
    assert run.status is rf.Status.COMPLETED and run.steps["last"].status == "completed"


@pytest.mark.parametrize("kind", [ControlKind.CANCEL, ControlKind.FAIL])
async def test_a_request_during_the_last_step_is_honoured(storage: rf.Storage,
                                                          kind: ControlKind) -> None:
    entered, release = anyio.Event(), anyio.Event()
    undone: list[int] = []

    async def last(approve: int) -> int:
        entered.set()
        await release.wait()
        return approve + 1

    flow = _with_tail(last, undone)
    paused = await flow.run()
    results: list[rf.Run] = []
    async with anyio.create_task_group() as tg:
        async def go() -> None:
            results.append(await flow.continue_(paused.id, step="approve", payload=1))

        tg.start_soon(go)
        await entered.wait()
        if kind is ControlKind.CANCEL:
            pending = await flow.cancel(paused.id, reason="changed mind")
            assert pending.status is rf.Status.RUNNING
        else:
            request = Control(ControlKind.FAIL, "failed from outside",
                              RunError(None, "Outside", "failed from outside"))
            assert await storage.request_control(paused.id, records.encode(request))
        release.set()
    final = await flow.get(paused.id)
    kinds = _kinds(final)
    assert kinds.count("step.completed:last") == 1 and "run.completed" not in kinds
    if kind is ControlKind.CANCEL:
        assert final.status is rf.Status.CANCELLED and final.cancel_reason == "changed mind"
        assert final.steps["last"].status == "completed" and undone == []
    else:
        assert final.status is rf.Status.FAILED and final.error is not None
        assert final.error.type == "Outside"
        assert final.steps["last"].status == "undone" and undone == [2]
    assert results[0].status is final.status
