"""The run methods of `rf.Reactor`, kept apart from its declarations: each delegates to the
runtime bound here by the `reactorflow` package at import (`bind`). The declaration layer never
imports the runtime (the runtime is the layer above it), so importing a module of reactors
never starts anything."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast

from reactorflow.errors import ConfigurationError

if TYPE_CHECKING:
    from reactorflow.definition.reactor import Reactor
    from reactorflow.snapshot import Run, RunPage


class Runtime(Protocol):
    """What the run methods need of the runtime (`reactorflow.runtime.service`)."""

    async def start(self, reactor: Reactor, inputs: Any, fields: Mapping[str, Any], *,
                    idempotency_key: str | None = None, dispatch: bool = False) -> Run: ...

    async def get(self, reactor: Reactor, run_id: str) -> Run: ...

    async def wait(self, reactor: Reactor, run_id: str, *, timeout: float | None = None
                   ) -> Run: ...

    async def undo(self, reactor: Reactor, run_id: str) -> Run: ...

    async def cancel(self, reactor: Reactor, run_id: str, *, reason: str = "") -> Run: ...

    async def retry(self, reactor: Reactor, run_id: str) -> Run: ...

    async def list_runs(self, reactor: Reactor, *, status: str | None, limit: int,
                        cursor: str | None) -> RunPage: ...

    async def continue_run(self, reactor: Reactor, run_id: str, *, step: str | Sequence[str],
                           payload: Any) -> Run: ...

    async def continue_by_correlation(self, reactor: Reactor, correlation_id: str, *,
                                      step: str | Sequence[str], payload: Any) -> Run: ...


_runtime: Runtime | None = None


def bind(runtime: Runtime) -> None:
    """Give the run methods their runtime (the `reactorflow` package does, at import).

    Args:
        runtime: the runtime operations (`reactorflow.runtime.service.RUNTIME`).
    """
    global _runtime
    _runtime = runtime


def _bound() -> Runtime:
    if _runtime is None:
        raise ConfigurationError("reactorflow's runtime is not bound: import reactorflow")
    return _runtime


class RunMethods:
    """Running, reading and steering the runs of a reactor."""

    __slots__ = ()

    def _self(self) -> Reactor:
        return cast("Reactor", self)

    async def run(self, inputs: Any = None, /, *, idempotency_key: str | None = None,
                  **fields: Any) -> Run:
        """Validate the inputs, store the run, execute it here, and return its snapshot.

        A reactor declared with `always_dispatch=True` hands the run to a worker instead (as
        `dispatch`). A second run with the same `idempotency_key` returns the first run.
        """
        return await _bound().start(self._self(), inputs, fields,
                                    idempotency_key=idempotency_key)

    async def dispatch(self, inputs: Any = None, /, *, idempotency_key: str | None = None,
                       **fields: Any) -> Run:
        """Validate the inputs here, store the run, and hand all of it to a worker.

        Returns at once with status `running`; `wait(run.id)` follows it.
        """
        return await _bound().start(self._self(), inputs, fields,
                                    idempotency_key=idempotency_key, dispatch=True)

    async def get(self, run_id: str) -> Run:
        """The run's snapshot as stored (raises `rf.RunNotFound`)."""
        return await _bound().get(self._self(), run_id)

    async def wait(self, run_id: str, *, timeout: float | None = None) -> Run:
        """Wait (notified, not polled) until the run is terminal or paused."""
        return await _bound().wait(self._self(), run_id, timeout=timeout)

    async def undo(self, run_id: str) -> Run:
        """Roll back every completed step of the run (newest first); it ends `cancelled`."""
        return await _bound().undo(self._self(), run_id)

    async def cancel(self, run_id: str, *, reason: str = "") -> Run:
        """Stop the run without rollback; a running run stops at its next step boundary."""
        return await _bound().cancel(self._self(), run_id, reason=reason)

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
        return await _bound().retry(self._self(), run_id)

    async def list_runs(self, *, status: str | None = None, limit: int = 50,
                        cursor: str | None = None) -> RunPage:
        """Runs of this reactor, newest first, a page at a time."""
        return await _bound().list_runs(self._self(), status=status, limit=limit,
                                        cursor=cursor)

    async def continue_(self, run_id: str, *, step: str | Sequence[str], payload: Any) -> Run:
        """Deliver the payload a paused run waits for at interrupt `step` (a path if nested)."""
        return await _bound().continue_run(self._self(), run_id, step=step, payload=payload)

    async def continue_by_correlation_id(self, correlation_id: str, *,
                                         step: str | Sequence[str], payload: Any) -> Run:
        """`continue_` for the run that registered this correlation id."""
        return await _bound().continue_by_correlation(self._self(), correlation_id, step=step,
                                                      payload=payload)

    async def ready_interrupts(self, run_id: str) -> list[str | tuple[str, ...]]:
        """The interrupts the run waits on: names at the root, paths inside composed children."""
        run = await self.get(run_id)
        return list(run.waiting_on)
