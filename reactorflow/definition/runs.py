"""The run methods of `rf.Reactor`, kept apart from its declarations: each delegates to the
runtime (imported lazily, so importing a module of reactors never starts anything)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from reactorflow.definition.reactor import Reactor
    from reactorflow.snapshot import Run, RunPage


class RunMethods:
    """Running, reading and steering the runs of a reactor."""

    __slots__ = ()

    def _self(self) -> Reactor:
        from reactorflow.definition.reactor import Reactor

        assert isinstance(self, Reactor)
        return self

    async def run(self, inputs: Any = None, /, *, idempotency_key: str | None = None,
                  **fields: Any) -> Run:
        """Validate the inputs, store the run, execute it here, and return its snapshot.

        A reactor declared with `always_dispatch=True` hands the run to a worker instead (as
        `dispatch`). A second run with the same `idempotency_key` returns the first run.
        """
        from reactorflow.runtime import operations

        return await operations.start(self._self(), inputs, fields,
                                      idempotency_key=idempotency_key)

    async def dispatch(self, inputs: Any = None, /, *, idempotency_key: str | None = None,
                       **fields: Any) -> Run:
        """Validate the inputs here, store the run, and hand all of it to a worker.

        Returns at once with status `running`; `wait(run.id)` follows it.
        """
        from reactorflow.runtime import operations

        return await operations.start(self._self(), inputs, fields,
                                      idempotency_key=idempotency_key, dispatch=True)

    async def get(self, run_id: str) -> Run:
        """The run's snapshot as stored (raises `rf.RunNotFound`)."""
        from reactorflow.runtime import operations

        return await operations.get(self._self(), run_id)

    async def wait(self, run_id: str, *, timeout: float | None = None) -> Run:
        """Wait (notified, not polled) until the run is terminal or paused."""
        from reactorflow.runtime import operations

        return await operations.wait(self._self(), run_id, timeout=timeout)

    async def undo(self, run_id: str) -> Run:
        """Roll back every completed step of the run (newest first); it ends `cancelled`."""
        from reactorflow.runtime import operations

        return await operations.undo(self._self(), run_id)

    async def cancel(self, run_id: str, *, reason: str = "") -> Run:
        """Stop the run without rollback; a running run stops at its next step boundary."""
        from reactorflow.runtime import operations

        return await operations.cancel(self._self(), run_id, reason=reason)

    async def retry(self, run_id: str) -> Run:
        """Start a new run with the inputs of a failed, cancelled or aborted run.

        The new run executes like `run` (or `dispatch` for an `always_dispatch` reactor) and
        records `retried_from=run_id`; the old run is left untouched.

        Args:
            run_id: the id of a run of this reactor that is failed, cancelled or aborted.

        Raises:
            RunNotFound: no such run of this reactor.
            RunStateError: the run is not failed, cancelled or aborted.
            InputValidationError: the current inputs type refuses the stored inputs.
        """
        from reactorflow.runtime import retrying

        return await retrying.retry(self._self(), run_id)

    async def list_runs(self, *, status: str | None = None, limit: int = 50,
                        cursor: str | None = None) -> RunPage:
        """Runs of this reactor, newest first, a page at a time."""
        from reactorflow.runtime import operations

        return await operations.list_runs(self._self(), status=status, limit=limit,
                                          cursor=cursor)

    async def continue_(self, run_id: str, *, step: str | Sequence[str], payload: Any) -> Run:
        """Deliver the payload a paused run waits for at interrupt `step` (a path if nested)."""
        from reactorflow.runtime import resume

        return await resume.continue_run(self._self(), run_id, step=step, payload=payload)

    async def continue_by_correlation_id(self, correlation_id: str, *,
                                         step: str | Sequence[str], payload: Any) -> Run:
        """`continue_` for the run that registered this correlation id."""
        from reactorflow.runtime import resume

        return await resume.continue_by_correlation(self._self(), correlation_id, step=step,
                                                    payload=payload)

    async def ready_interrupts(self, run_id: str) -> list[str | tuple[str, ...]]:
        """The interrupts the run waits on: names at the root, paths inside composed children."""
        run = await self.get(run_id)
        return list(run.waiting_on)
