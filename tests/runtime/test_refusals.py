"""What cancel, undo, continue_ and retry say when a run's status refuses them: for every status,
the advice names only what that status allows (never an operation that is refused in turn)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import msgspec

import reactorflow as rf
from tests.helpers import unique

OPERATIONS = ("cancel", "undo", "continue", "retry")
HELD = (rf.Status.RUNNING, rf.Status.ROLLING_BACK)


class Mode(msgspec.Struct):
    mode: str


class Scenario:
    """Runs of one reactor, each driven into the status its input names; events hold the
    running and rolling-back ones in place."""

    def __init__(self) -> None:
        self.entered = anyio.Event()
        self.release = anyio.Event()
        self.flow = flow = rf.Reactor(unique("refusals"), inputs=Mode)

        @flow.step
        async def first(mode: str) -> str:
            return "first"

        @first.undo
        async def undo_first(result: str, mode: str) -> None:
            if mode == "rolling_back":
                self.entered.set()
                await self.release.wait()

        @flow.step
        async def second(first: str, mode: str) -> str:
            if mode in ("running", "aborted"):
                self.entered.set()
                await self.release.wait()
            if mode in ("failed", "rolling_back"):
                raise RuntimeError("second failed")
            if mode == "halted":
                raise rf.Halt("stop here")
            return "second"

        @flow.step(on_failure="hold")
        async def third(first: str, mode: str) -> str:
            if mode == "held":
                raise RuntimeError("third failed: the run is held")
            return "third"

        @flow.interrupt(when=lambda mode: mode in ("paused", "cancelled"))
        async def approve(second: str, mode: str, payload: bool) -> bool:
            return payload

    async def settled(self, status: rf.Status) -> str:
        """A new run in a settled status (paused or terminal)."""
        if status is rf.Status.ABORTED:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self.flow.run, Mode("aborted"))
                with anyio.fail_after(10):
                    await self.entered.wait()
                tg.cancel_scope.cancel()
            self.entered = anyio.Event()
            return (await self.flow.list_runs(status="aborted")).runs[0].id
        run = await self.flow.run(Mode(status.value))
        if status is rf.Status.CANCELLED:
            run = await self.flow.cancel(run.id)
        assert run.status is status
        return run.id

    @asynccontextmanager
    async def held(self, status: rf.Status) -> AsyncIterator[str]:
        """A run held `running` or `rolling_back` by a step (or an undo) that waits."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.flow.run, Mode(status.value))
            with anyio.fail_after(10):
                await self.entered.wait()
            page = await self.flow.list_runs(status=status.value)
            try:
                yield page.runs[0].id
            finally:
                self.release.set()
        self.entered, self.release = anyio.Event(), anyio.Event()

    async def attempt(self, operation: str, run_id: str) -> Exception | None:
        try:
            if operation == "cancel":
                await self.flow.cancel(run_id)
            elif operation == "undo":
                await self.flow.undo(run_id)
            elif operation == "continue":
                await self.flow.continue_(run_id, step="approve", payload=True)
            else:
                self.release.set()  # the new run of a retried "aborted" run must not wait
                try:
                    await self.flow.retry(run_id)
                finally:
                    self.entered, self.release = anyio.Event(), anyio.Event()
        except (rf.RunStateError, rf.LockTimeout, rf.InterruptNotPending) as exc:
            return exc
        return None


def suggested(message: str) -> set[str]:
    """The operations a refusal tells the caller to use ("undo(run_id) rolls back ...")."""
    return {"continue" if name == "continue_" else name
            for name in re.findall(r"\b(cancel|undo|continue_|retry)\(run_id[,)]", message)}


async def test_every_refusal_says_what_its_status_allows(storage: rf.Storage) -> None:
    rf.configure(lock_wait=0.2)
    scenario = Scenario()
    outcomes: dict[tuple[rf.Status, str], Exception | None] = {}
    for status in rf.Status:
        for operation in OPERATIONS:
            if status in HELD:
                async with scenario.held(status) as run_id:
                    outcomes[status, operation] = await scenario.attempt(operation, run_id)
            else:
                run_id = await scenario.settled(status)
                outcomes[status, operation] = await scenario.attempt(operation, run_id)

    allowed = {key for key, error in outcomes.items() if error is None}
    assert allowed == {
        (rf.Status.RUNNING, "cancel"), (rf.Status.PAUSED, "cancel"),
        (rf.Status.CANCELLED, "cancel"),  # a no-op
        (rf.Status.HELD, "cancel"), (rf.Status.HELD, "undo"),
        (rf.Status.PAUSED, "continue"),
        *((status, "undo") for status in (rf.Status.COMPLETED, rf.Status.PAUSED,
                                          rf.Status.HALTED, rf.Status.CANCELLED,
                                          rf.Status.ABORTED)),
        *((status, "retry") for status in (rf.Status.FAILED, rf.Status.CANCELLED,
                                           rf.Status.ABORTED)),
    }
    for (status, operation), error in outcomes.items():
        if error is None or not isinstance(error, rf.RunStateError):
            continue
        assert error.status == status and error.operation == operation
        message = str(error)
        assert f"it is {status.value}" in message
        assert "get(run_id)" not in message  # the fallback: every refusal has its own advice
        for advice in suggested(message) - {operation}:
            assert (status, advice) in allowed, (
                f"refusing {operation} of a {status.value} run advises {advice}, which a "
                f"{status.value} run refuses too: {message}")
    # the refusals of a failed run send nobody around in circles: nothing is left to do
    # but a retry (a new run)
    for operation in ("cancel", "undo", "continue"):
        error = outcomes[rf.Status.FAILED, operation]
        assert isinstance(error, rf.RunStateError)
        assert suggested(str(error)) == {"retry"}
        assert "already rolled back" in str(error)
    # a running run: undo waits for its lock (another execution holds it), continue_ names
    # the interrupts it waits on (none)
    assert isinstance(outcomes[rf.Status.RUNNING, "undo"], rf.LockTimeout)
    assert isinstance(outcomes[rf.Status.RUNNING, "continue"], rf.InterruptNotPending)
    rolling_undo = outcomes[rf.Status.ROLLING_BACK, "undo"]
    assert isinstance(rolling_undo, rf.RunStateError) and "already being rolled back" in str(
        rolling_undo)
