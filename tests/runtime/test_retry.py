"""Step retry policies, timeouts and the step context."""

from __future__ import annotations

import anyio
import pytest

import reactorflow as rf
from tests.helpers import Recorder, kinds, unique


def test_backoff_strategies() -> None:
    assert [rf.Retry(5, 1.0).delay(n) for n in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, 8.0]
    linear = rf.Retry(5, 0.5, strategy="linear")
    assert [linear.delay(n) for n in (1, 2, 3)] == [0.5, 1.0, 1.5]
    fixed = rf.Retry(5, 2.0, strategy="fixed")
    assert [fixed.delay(n) for n in (1, 2, 3)] == [2.0, 2.0, 2.0]
    capped = rf.Retry(9, 1.0, max_delay=3.0)
    assert [capped.delay(n) for n in (1, 2, 3, 4)] == [1.0, 2.0, 3.0, 3.0]
    jittery = rf.Retry(3, 1.0, jitter=0.5)
    assert all(1.0 <= jittery.delay(1) <= 1.5 for _ in range(50))


def test_retry_filters() -> None:
    policy = rf.Retry(3, 0, retry_on=(OSError,), never_retry=(FileNotFoundError,))
    assert policy.should_retry(OSError(), 1)
    assert not policy.should_retry(FileNotFoundError(), 1)
    assert not policy.should_retry(ValueError(), 1)
    assert not policy.should_retry(OSError(), 3)  # attempts counts the first try


@pytest.mark.parametrize("bad", [
    dict(attempts=0), dict(attempts=2.5), dict(attempts="3"), dict(backoff=-1),
    dict(strategy="random"), dict(jitter=2), dict(retry_on=(int,)), dict(max_delay=-1),
])
def test_bad_retry_options_are_definition_errors(bad: dict[str, object]) -> None:
    with pytest.raises(rf.DefinitionError):
        rf.Retry(**bad)  # type: ignore[arg-type]


async def test_retries_until_success_with_stable_idempotency_key(storage: rf.Storage) -> None:
    recorder = Recorder()
    flow = rf.Reactor(unique("retry"), middleware=[recorder])
    seen: list[tuple[int, str]] = []
    log: list[str] = []

    @flow.step(retries=rf.Retry(attempts=3, backoff=0))
    async def flaky(ctx: rf.StepContext) -> str:
        seen.append((ctx.attempt, ctx.idempotency_key))
        if ctx.attempt < 3:
            raise ConnectionError("try again")
        return "ok"

    @flaky.compensate
    async def never(error: Exception) -> None:
        log.append("compensated")

    run = await flow.run()
    assert run.status is rf.Status.COMPLETED
    assert [a for a, _ in seen] == [1, 2, 3]
    assert len({k for _, k in seen}) == 1
    assert seen[0][1] == f"{run.id}:flaky"
    assert run.steps["flaky"].attempts == 3
    assert log == []  # a failed attempt followed by a success is never compensated
    assert kinds(run, "step.retried") == ["step.retried:flaky", "step.retried:flaky"]
    assert recorder.only("before_retry", "after_retry") == [
        "before_retry:flaky", "after_retry:flaky", "before_retry:flaky", "after_retry:flaky",
    ]


async def test_compensate_runs_once_after_the_last_attempt(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("exhaust"))
    log: list[str] = []

    @flow.step(retries=rf.Retry(attempts=2, backoff=0.01, strategy="fixed"))
    async def always(ctx: rf.StepContext) -> str:
        log.append(f"attempt {ctx.attempt}")
        raise ConnectionError("down")

    @always.compensate
    async def comp(error: Exception, ctx: rf.StepContext) -> None:
        log.append(f"compensate {type(error).__name__} {ctx.step}")

    run = await flow.run()
    assert run.status is rf.Status.FAILED
    assert log == ["attempt 1", "attempt 2", "compensate ConnectionError always"]
    assert run.steps["always"].attempts == 2


async def test_never_retry_goes_straight_to_compensation(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("never"))
    attempts: list[int] = []

    compensated: list[str] = []

    @flow.step(retries=rf.Retry(attempts=5, backoff=0, never_retry=(ValueError,)))
    async def strict(ctx: rf.StepContext) -> str:
        attempts.append(ctx.attempt)
        raise ValueError("bad data")

    @strict.compensate
    async def clean_up(error: Exception, ctx: rf.StepContext) -> None:
        compensated.append(f"{type(error).__name__}: {error} after {ctx.attempt}")

    run = await flow.run()
    assert run.status is rf.Status.FAILED
    assert attempts == [1]
    assert compensated == ["ValueError: bad data after 1"]
    assert run.steps["strict"].status == "compensated"
    assert run.steps["strict"].attempts == 1
    assert run.error is not None and run.error.type == "ValueError"


async def test_timeout_fails_the_attempt_and_can_be_retried(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("timeout"))
    attempts: list[int] = []

    @flow.step(timeout=0.05, retries=rf.Retry(attempts=2, backoff=0))
    async def sleepy(ctx: rf.StepContext) -> str:
        attempts.append(ctx.attempt)
        if ctx.attempt == 1:
            await anyio.sleep(5)
        return "awake"

    run = await flow.run()
    assert run.status is rf.Status.COMPLETED
    assert attempts == [1, 2]

    @flow.step(timeout=0.05)
    async def stuck() -> str:
        await anyio.sleep(5)
        return "never"

    failed = await flow.run()
    assert failed.status is rf.Status.FAILED
    assert failed.error is not None and failed.error.type == "StepTimeout"
    assert "0.05" in failed.error.message
