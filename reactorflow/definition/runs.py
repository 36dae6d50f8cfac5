"""The run methods of `rf.Reactor`, kept apart from its declarations: each delegates to the
runtime bound here by the `reactorflow` package at import (`bind`). The declaration layer never
imports the runtime (the runtime is the layer above it), so importing a module of reactors
never starts anything."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, cast

from reactorflow import audit
from reactorflow.errors import ConfigurationError

if TYPE_CHECKING:
    from reactorflow.snapshot import Run, RunPage


Front = TypeVar("Front")
"""The front whose run methods these are (`rf.Reactor`): this module never names it."""
Front_contra = TypeVar("Front_contra", contravariant=True)


class Runtime(Protocol[Front_contra]):
    """What the run methods need of the runtime (`reactorflow.runtime.ops.service`), given the
    front (`rf.Reactor`) they run."""

    async def start(self, reactor: Front_contra, inputs: Any, fields: Mapping[str, Any], *,
                    idempotency_key: str | None = None, dispatch: bool = False) -> Run: ...

    async def get(self, reactor: Front_contra, run_id: str) -> Run: ...

    async def wait(self, reactor: Front_contra, run_id: str, *, timeout: float | None = None
                   ) -> Run: ...

    async def undo(self, reactor: Front_contra, run_id: str) -> Run: ...

    async def cancel(self, reactor: Front_contra, run_id: str, *, reason: str = "") -> Run: ...

    async def retry(self, reactor: Front_contra, run_id: str) -> Run: ...

    async def pause(self, reactor: Front_contra, run_id: str, *, reason: str = "",
                    by: str | None = None) -> Run: ...

    async def resume(self, reactor: Front_contra, run_id: str) -> Run: ...

    async def list_runs(self, reactor: Front_contra, *, status: str | None, limit: int,
                        cursor: str | None, since: datetime | None = None,
                        until: datetime | None = None, correlation_id: str | None = None,
                        idempotency_key: str | None = None, version: int | None = None,
                        error_type: str | None = None) -> RunPage: ...

    async def continue_run(self, reactor: Front_contra, run_id: str, *, step: str | Sequence[str],
                           payload: Any) -> Run: ...

    async def migrate(self, reactor: Front_contra, run_id: str) -> Run: ...

    async def retry_step(self, reactor: Front_contra, run_id: str,
                         step: str | Sequence[str]) -> Run: ...

    async def skip_step(self, reactor: Front_contra, run_id: str, step: str | Sequence[str], *,
                        result: Any) -> Run: ...

    async def rewind(self, reactor: Front_contra, run_id: str, *, to: str,
                     inputs: Mapping[str, Any] | None = None) -> Run: ...

    async def continue_by_correlation(self, reactor: Front_contra, correlation_id: str, *,
                                      step: str | Sequence[str], payload: Any) -> Run: ...


_runtime: Runtime[Any] | None = None


def bind(runtime: Runtime[Any]) -> None:
    """Give the run methods their runtime (the `reactorflow` package does, at import).

    Args:
        runtime: the runtime operations (`reactorflow.runtime.ops.service.RUNTIME`).
    """
    global _runtime
    _runtime = runtime


def _bound() -> Runtime[Any]:
    if _runtime is None:
        raise ConfigurationError("reactorflow's runtime is not bound: import reactorflow")
    return _runtime


def _acting(actor: str | None, operation: str, run_id: str) -> AbstractContextManager[None]:
    """The block of an operator's action, done by `actor` (see reactorflow.audit).

    Raises:
        ReactorflowError: `actor` is not a non-empty `str` (nothing was changed).
    """
    return audit.acting(audit.checked(actor, f"{operation}(run {run_id!r})"))


class RunMethods(Generic[Front]):
    """Running, reading and steering the runs of a reactor (`Front`: the class that inherits
    them, `rf.Reactor`)."""

    __slots__ = ()

    def _self(self) -> Front:
        return cast("Front", self)

    async def run(self, inputs: Any = None, /, *, idempotency_key: str | None = None,
                  **fields: Any) -> Run:
        """Validate the inputs, store the run, execute it here, and return its snapshot.

        A reactor declared with `always_dispatch=True`, or a run that reaches the `background`
        hand-off point, returns with status `running` while a worker goes on. With an
        `idempotency_key`, a second `run` with the same key waits while the first start is still
        storing its run; if that start died first, the key is taken over once its liveness lock
        has lapsed, so a key never names a run that does not exist.

        Args:
            inputs: One instance of the reactor's inputs type (or `None`).
            idempotency_key: A second start of this reactor with the same key returns the first
                run (its snapshot has `replayed=True`) instead of starting another.
            **fields: The inputs as keyword arguments, instead of `inputs`.

        Raises:
            InputValidationError: The inputs do not match the inputs type (nothing is stored).
            DefinitionError: The reactor's graph is invalid.
            ReactorflowError: A non-`str` `idempotency_key`.
        """
        return await _bound().start(self._self(), inputs, fields,
                                    idempotency_key=idempotency_key)

    async def dispatch(self, inputs: Any = None, /, *, idempotency_key: str | None = None,
                       **fields: Any) -> Run:
        """Validate the inputs here, store the run, and hand all of it to a worker.

        Returns at once with status `running`; `wait(run.id)` follows it. See
        [Workers](workers.md#dispatching-a-whole-run).

        Args:
            inputs: One instance of the reactor's inputs type (or `None`).
            idempotency_key: A second start of this reactor with the same key returns the first
                run (its snapshot has `replayed=True`) instead of starting another.
            **fields: The inputs as keyword arguments, instead of `inputs`.

        Raises:
            InputValidationError: The inputs do not match the inputs type (nothing is stored).
            DefinitionError: The reactor's graph is invalid.
        """
        return await _bound().start(self._self(), inputs, fields,
                                    idempotency_key=idempotency_key, dispatch=True)

    async def _migrate_run(self, run_id: str, actor: str | None = None) -> Run:
        """`await reactor.migrate(run_id)` (documented there)."""
        with _acting(actor, "migrate", run_id):
            return await _bound().migrate(self._self(), run_id)

    async def get(self, run_id: str) -> Run:
        """The run's snapshot as stored.

        Args:
            run_id: The id of a run of this reactor.

        Raises:
            RunNotFound: No such run of this reactor.
        """
        return await _bound().get(self._self(), run_id)

    async def wait(self, run_id: str, *, timeout: float | None = None) -> Run:
        """Wait until the run is terminal or paused (notified, with a fallback re-check).

        Args:
            run_id: The id of a run of this reactor.
            timeout: Seconds to wait at most (`None`: no limit).

        Raises:
            RunNotFound: No such run of this reactor.
            WaitTimeout: The run was still running after `timeout` seconds.
        """
        return await _bound().wait(self._self(), run_id, timeout=timeout)

    async def undo(self, run_id: str, *, actor: str | None = None) -> Run:
        """Roll back every completed step of the run, newest first; it ends `cancelled`.

        Finishes an aborted run's compensations too.

        Args:
            run_id: The id of a run of this reactor.
            actor: Who does it, recorded on the event it writes to the run's history
                (`rf.Event.actor`; default: the actor the caller acts as, else this
                process's `user@host`). See [Operating runs](operating.md#audit).

        Raises:
            RunNotFound: No such run of this reactor.
            RunStateError: The run cannot be undone in its status (running, or already
                cancelled).
            LockTimeout: Another process held the run for longer than `lock_wait`.
        """
        with _acting(actor, "undo", run_id):
            return await _bound().undo(self._self(), run_id)

    async def cancel(self, run_id: str, *, reason: str = "",
                     actor: str | None = None) -> Run:
        """Stop a running or paused run without rollback.

        A running run stops at its next step boundary.

        Args:
            run_id: The id of a run of this reactor.
            reason: Why, recorded in the run's history (a `str`).
            actor: Who does it, recorded on the event it writes to the run's history
                (`rf.Event.actor`; default: the actor the caller acts as, else this
                process's `user@host`). See [Operating runs](operating.md#audit).

        Raises:
            RunNotFound: No such run of this reactor.
            RunStateError: The run is already terminal.
            ReactorflowError: A non-`str` `reason` (nothing changes).
        """
        with _acting(actor, "cancel", run_id):
            return await _bound().cancel(self._self(), run_id, reason=reason)

    async def retry_step(self, run_id: str, step: str | Sequence[str], *,
                         actor: str | None = None) -> Run:
        """Run the failed step of a held run again, with the code now deployed, then go on
        (see [Repairing runs](repairing.md)). Runs here, as `continue_` does (in a worker for an
        `always_dispatch` reactor); the step keeps its `ctx.idempotency_key`.

        Args:
            run_id: The id of a `held` run of this reactor.
            step: The failed step: its name, or its path inside composed children.
            actor: Who does it, recorded on the event it writes to the run's history
                (`rf.Event.actor`; default: the actor the caller acts as, else this
                process's `user@host`). See [Operating runs](operating.md#audit).

        Raises:
            RunNotFound: No such run of this reactor.
            RunStateError: The run is not held (the message says what its status allows).
            StepNotFailed: `step` is not the run's failed step (nothing is written).
            LockTimeout: Another process held the run for longer than `lock_wait`.
        """
        with _acting(actor, "retry_step", run_id):
            return await _bound().retry_step(self._self(), run_id, step)

    async def skip_step(self, run_id: str, step: str | Sequence[str], *, result: Any,
                        actor: str | None = None) -> Run:
        """Record `result` as what the failed step of a held run returned, then go on (see
        [Repairing runs](repairing.md)). The step's compensate never runs; on a later rollback
        the step is undone like any completed step.

        Args:
            run_id: The id of a `held` run of this reactor.
            step: The failed step: its name, or its path inside composed children.
            result: The step's result: a value of its return type (or one that converts to it,
                such as a dict for a record type).
            actor: Who does it, recorded on the event it writes to the run's history
                (`rf.Event.actor`; default: the actor the caller acts as, else this
                process's `user@host`). See [Operating runs](operating.md#audit).

        Raises:
            RunNotFound: No such run of this reactor.
            RunStateError: The run is not held.
            StepNotFailed: `step` is not the run's failed step.
            ResultValidationError: `result` does not fit the step's return type (nothing is
                written).
            LockTimeout: Another process held the run for longer than `lock_wait`.
        """
        with _acting(actor, "skip_step", run_id):
            return await _bound().skip_step(self._self(), run_id, step, result=result)

    async def rewind(self, run_id: str, *, to: str,
                     inputs: Mapping[str, Any] | None = None,
                     actor: str | None = None) -> Run:
        """Undo step `to` and every step that depends on it, newest first (their undo handlers
        run), then run them again, in the same run (see [Repairing runs](repairing.md)). Steps
        that do not depend on `to` keep their results; an interrupt among the rewound steps
        waits for a new payload; each rewound step gets a new `ctx.idempotency_key`. Runs here
        (in a worker for an `always_dispatch` reactor); a crash mid-way is resumed by the
        sweeper to the same end.

        Args:
            run_id: The id of a `completed`, `paused`, `held`, `cancelled` or `aborted` run.
            to: The step to go back to (a step of the run's own graph).
            inputs: Changed input fields, merged into the run's inputs and validated (`None`:
                the inputs stay).
            actor: Who does it, recorded on the event it writes to the run's history
                (`rf.Event.actor`; default: the actor the caller acts as, else this
                process's `user@host`). See [Operating runs](operating.md#audit).

        Raises:
            RunNotFound: No such run of this reactor.
            RunStateError: The run's status does not allow it (running, rolling back, failed),
                or a fanned-out map or async reactor would have to run again.
            StepNotFound: `to` is not a step of the run.
            InputValidationError: The merged inputs do not fit (nothing is written).
            LockTimeout: Another process held the run for longer than `lock_wait`.
        """
        with _acting(actor, "rewind", run_id):
            return await _bound().rewind(self._self(), run_id, to=to, inputs=inputs)

    async def pause(self, run_id: str, *, reason: str = "", by: str | None = None,
                    actor: str | None = None) -> Run:
        """Stop a running run at its next step boundary: it ends `paused`, waiting on nothing,
        with `run.paused_by` set, until `resume`.

        Steps in flight finish (and are checkpointed); nothing new starts. A run no execution
        holds (parked at a sleep, an async unit or a fanned-out map, waiting for a gate or a
        worker) is paused at once without being woken: a sleep's timer stays armed, finds the
        run paused and does nothing; the sleep is honoured after `resume`. When an execution
        holds the run, this waits up to `lock_wait` seconds for it to stop, then returns the
        run as it is (still `running` if its steps in flight take longer; it pauses at its
        next step boundary, and `wait` returns then). See [Repairing runs](repairing.md).

        Args:
            run_id: The id of a run of this reactor.
            reason: Why, recorded in `run.paused_by` and the history (a `str`).
            by: Who pauses it, recorded likewise (default: this process's `user@host`).
            actor: Who does it, recorded on the event it writes to the run's history
                (`rf.Event.actor`; default: the actor the caller acts as, else this
                process's `user@host`). See [Operating runs](operating.md#audit).

        Raises:
            RunNotFound: No such run of this reactor.
            RunStateError: The run is not running (ended, rolling back, paused already, or
                paused at an interrupt), or another request for it is pending; nothing is
                written.
            ReactorflowError: A non-`str` or blank `reason` or `by` (nothing changes).
        """
        with _acting(actor, "pause", run_id):
            return await _bound().pause(self._self(), run_id, reason=reason, by=by)

    async def resume(self, run_id: str, *, actor: str | None = None) -> Run:
        """Take on again a run an operator paused (`pause`): it is `running` again.

        A run whose work was handed to workers (dispatched, `always_dispatch`, past its
        `background` point, an async reactor's child run) is enqueued for a worker and this
        returns it `running`; any other is driven here, as `continue_` drives it, and this
        returns it as it settles (a sleep still to come leaves it `running` for its timer; a
        sleep whose deadline passed while paused completes now).

        Args:
            run_id: The id of a run of this reactor.
            actor: Who does it, recorded on the event it writes to the run's history
                (`rf.Event.actor`; default: the actor the caller acts as, else this
                process's `user@host`). See [Operating runs](operating.md#audit).

        Raises:
            RunNotFound: No such run of this reactor.
            RunStateError: The run is not paused by an operator (a run paused at an interrupt
                is taken on by `continue_`); nothing is written.
            LockTimeout: Another process held the run for longer than `lock_wait`.
        """
        with _acting(actor, "resume", run_id):
            return await _bound().resume(self._self(), run_id)

    async def retry(self, run_id: str, *, actor: str | None = None) -> Run:
        """Start a new run with the inputs of a failed, cancelled or aborted run.

        The new run executes like `run` (or `dispatch` for an `always_dispatch` reactor) and
        records `retried_from=run_id`; the old run is left untouched.

        Args:
            run_id: The id of a run of this reactor that is failed, cancelled or aborted.
            actor: Who does it, recorded on the event it writes to the run's history
                (`rf.Event.actor`; default: the actor the caller acts as, else this
                process's `user@host`). See [Operating runs](operating.md#audit).

        Raises:
            RunNotFound: No such run of this reactor.
            RunStateError: The run is not failed, cancelled or aborted.
            InputValidationError: The current inputs type refuses the stored inputs.
        """
        with _acting(actor, "retry", run_id):
            return await _bound().retry(self._self(), run_id)

    async def list_runs(self, *, status: str | None = None, limit: int = 50,
                        cursor: str | None = None, since: datetime | None = None,
                        until: datetime | None = None, correlation_id: str | None = None,
                        idempotency_key: str | None = None, version: int | None = None,
                        error_type: str | None = None) -> RunPage:
        """Runs of this reactor, newest first, a page at a time (`rf.list_runs`: all reactors).

        Args:
            status: Only runs of this status (an `rf.Status` or its value).
            limit: Runs per page, from 1 to 1000.
            cursor: The previous page's `next_cursor`, for the next page.
            since: Only runs created at or after this aware datetime (inclusive).
            until: Only runs created before this aware datetime (exclusive).
            correlation_id: Only the run this interrupt correlation id leads to (indexed).
            idempotency_key: Only the run started with this idempotency key (indexed).
            version: Only runs on this version (filters the rows read; not indexed).
            error_type: Only failed runs whose error has this type (filters the rows read).

        Raises:
            ReactorflowError: An unknown status, a limit out of range, or a bad cursor.
        """
        return await _bound().list_runs(
            self._self(), status=status, limit=limit, cursor=cursor, since=since, until=until,
            correlation_id=correlation_id, idempotency_key=idempotency_key, version=version,
            error_type=error_type)

    async def continue_(self, run_id: str, *, step: str | Sequence[str], payload: Any,
                        actor: str | None = None) -> Run:
        """Deliver the payload a paused run waits for at an interrupt.

        For an interrupt declared `resume="background"` the payload is validated here and the
        rest of the run goes to a worker: the call returns the run `running`.

        Args:
            run_id: The id of a run of this reactor.
            step: The interrupt's name, or its path (a tuple or list) inside composed children.
            payload: The payload, validated against the interrupt's `payload` annotation.
            actor: Who does it, recorded on the event it writes to the run's history
                (`rf.Event.actor`; default: the actor the caller acts as, else this
                process's `user@host`). See [Operating runs](operating.md#audit).

        Raises:
            RunNotFound: No such run of this reactor.
            NotPaused: The run is not paused.
            InterruptNotPending: The run does not wait at `step`.
            AlreadyResumed: Another caller delivered that interrupt's payload first.
            InterruptExpired: The interrupt's timeout has passed (never for an interrupt with
                `on_timeout=`: its deadline resumes it, and a later call gets `AlreadyResumed`).
            PayloadValidationError: The payload does not match the schema.
        """
        with _acting(actor, "continue_", run_id):
            return await _bound().continue_run(self._self(), run_id, step=step, payload=payload)

    async def continue_by_correlation_id(self, correlation_id: str, *,
                                         step: str | Sequence[str], payload: Any,
                                         actor: str | None = None) -> Run:
        """`continue_` for the run that registered this correlation id.

        Args:
            correlation_id: The id the interrupt registered (its `correlation_id` option).
            step: The interrupt's name, or its path (a tuple or list) inside composed children.
            payload: The payload, validated against the interrupt's `payload` annotation.
            actor: Who does it, recorded on the event it writes to the run's history
                (`rf.Event.actor`; default: the actor the caller acts as, else this
                process's `user@host`). See [Operating runs](operating.md#audit).

        Raises:
            RunNotFound: No run registered that correlation id.
            ReactorflowError: As for `continue_`.
        """
        with _acting(actor, "continue_by_correlation_id", correlation_id):
            return await _bound().continue_by_correlation(self._self(), correlation_id,
                                                          step=step, payload=payload)

    async def ready_interrupts(self, run_id: str) -> list[str | tuple[str, ...]]:
        """The interrupts the run waits on: names at the root, paths inside composed children.

        Args:
            run_id: The id of a run of this reactor.

        Raises:
            RunNotFound: No such run of this reactor.
        """
        run = await self.get(run_id)
        return list(run.waiting_on)
