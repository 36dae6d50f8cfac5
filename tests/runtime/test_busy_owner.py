"""A failure decided while another execution holds the run is left to that execution as a
"fail" request: an interrupt whose payload attempts ran out, or whose deadline passed, while a
continuation of another interrupt is still driving the run. The holder fails the run, with a
full rollback, at its next step boundary."""

from __future__ import annotations

import functools

import anyio
import pytest

import reactorflow as rf
from tests.helpers import kinds, unique, until_past


class Busy:
    """A run waiting on two interrupts; continuing `other` keeps the run busy in `slow`."""

    def __init__(self, timeout: float | None = None) -> None:
        self.log: list[str] = []
        self.entered, self.release = anyio.Event(), anyio.Event()
        flow = self.flow = rf.Reactor(unique("busy"))
        log = self.log

        @flow.step
        async def prep() -> str:
            return "prepped"

        @prep.undo
        async def unprep(result: str) -> None:
            log.append("undo prep")

        @flow.interrupt(max_attempts=1, timeout=timeout)
        async def strict(payload: int, prep: str) -> int:
            log.append("strict ran")
            return payload

        @flow.interrupt
        async def other(payload: int, prep: str) -> int:
            return payload

        @flow.step
        async def slow(other: int) -> int:
            self.entered.set()
            await self.release.wait()
            log.append("slow done")
            return other

        @slow.undo
        async def unslow(result: int) -> None:
            log.append("undo slow")

        @flow.step
        async def after_slow(slow: int) -> int:
            log.append("after_slow ran")
            return slow

        @flow.step
        async def end(strict: int, after_slow: int) -> int:
            return strict + after_slow


async def _held_by_a_continuation(busy: Busy, tg: anyio.abc.TaskGroup) -> rf.Run:
    paused = await busy.flow.run()
    assert paused.status is rf.Status.PAUSED
    assert sorted(paused.waiting_on) == ["other", "strict"]
    tg.start_soon(functools.partial(busy.flow.continue_, paused.id, step="other", payload=1))
    await busy.entered.wait()  # that continuation owns the run, inside `slow`
    return paused


async def _failed_by_the_holder(busy: Busy, run_id: str, error_type: str) -> None:
    run = await busy.flow.get(run_id)
    assert run.status is rf.Status.FAILED
    assert run.error is not None and run.error.type == error_type
    assert run.error.step == "strict"
    # the holder finished `slow`, then failed the run at that boundary: nothing after it ran
    assert busy.log == ["slow done", "undo slow", "undo prep"]
    assert run.steps["slow"].status == "undone"
    assert run.steps["after_slow"].status == "pending"
    assert "run.rolling_back" in kinds(run)


async def test_payload_attempts_exhausted_while_the_run_is_held(storage: rf.Storage) -> None:
    busy = Busy()
    rf.configure(lock_wait=0.2)  # how long the refusal waits for the run before leaving a request
    async with anyio.create_task_group() as tg:
        paused = await _held_by_a_continuation(busy, tg)
        with pytest.raises(rf.PayloadValidationError) as info:
            await busy.flow.continue_(paused.id, step="strict", payload="not a number")
        assert info.value.exhausted
        assert (await busy.flow.get(paused.id)).status is rf.Status.RUNNING  # not failed yet
        busy.release.set()
    await _failed_by_the_holder(busy, paused.id, "PayloadValidationError")


async def test_interrupt_expired_while_the_run_is_held(storage: rf.Storage) -> None:
    busy = Busy(timeout=1.0)
    rf.configure(lock_wait=0.2)
    async with anyio.create_task_group() as tg:
        paused = await _held_by_a_continuation(busy, tg)
        await until_past(paused.timeout_at)
        with pytest.raises(rf.InterruptExpired):
            await busy.flow.continue_(paused.id, step="strict", payload=1)
        assert (await busy.flow.get(paused.id)).status is rf.Status.RUNNING  # not failed yet
        busy.release.set()
    await _failed_by_the_holder(busy, paused.id, "InterruptExpired")
