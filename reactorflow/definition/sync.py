"""`reactor.sync`: the run methods for sync callers (a Flask or Django view, a management
command, a Celery task), each blocking until its async twin is done.

The work runs on one private event-loop thread per process. That thread belongs to the runtime:
the `reactorflow` package binds it here at import (`bind`), as it binds the run methods'
runtime, so the declaration layer never starts a thread or imports the runtime.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from reactorflow.errors import ConfigurationError

if TYPE_CHECKING:
    from reactorflow.definition.runs import RunMethods
    from reactorflow.snapshot import Run, RunPage

T = TypeVar("T")


class Blocking(Protocol):
    """Runs `work` to its end on the process's event-loop thread and returns its result
    (`reactorflow.runtime.services.portal.call`); refuses inside a running event loop."""

    def __call__(self, work: Callable[[], Awaitable[T]], *, called: str, instead: str,
                 reactor: str | None = None) -> T: ...


_blocking: Blocking | None = None


def bind(blocking: Blocking) -> None:
    """Give the sync methods their event-loop thread (the `reactorflow` package does, at import).

    Args:
        blocking: `reactorflow.runtime.services.portal.call`.
    """
    global _blocking
    _blocking = blocking


def _bound() -> Blocking:
    if _blocking is None:
        raise ConfigurationError("reactorflow's sync facade is not bound: import reactorflow")
    return _blocking


class SyncRunMethods:
    """A reactor's run methods for sync code: `reactor.sync.run(...)` is `await
    reactor.run(...)`, blocking the calling thread until it returns (and raising what it raises).

    The coroutines run on one private event-loop thread per process (anyio's blocking portal),
    started on first use, shut down at interpreter exit, and started afresh in a forked child.
    Safe from any number of threads at once. Inside a running event loop every method raises
    `rf.SyncInEventLoop` instead: there, await the async method. See
    [From sync code](sync.md).
    """

    __slots__ = ("_reactor",)

    def __init__(self, reactor: RunMethods[Any]) -> None:
        self._reactor = reactor

    def __repr__(self) -> str:
        return f"<sync run methods of {self._reactor!r}>"

    def _call(self, method: str, work: Callable[[], Awaitable[T]]) -> T:
        name = getattr(self._reactor, "name", None)
        return _bound()(work, called=f"sync.{method}", instead=method,
                        reactor=name if isinstance(name, str) else None)

    def run(self, inputs: Any = None, /, *, idempotency_key: str | None = None,
            **fields: Any) -> Run:
        """`await reactor.run(...)` from sync code: validate, store and execute the run here.

        Args:
            inputs: One instance of the reactor's inputs type (or `None`).
            idempotency_key: A second start of this reactor with the same key returns the first
                run (its snapshot has `replayed=True`) instead of starting another.
            **fields: The inputs as keyword arguments, instead of `inputs`.

        Raises:
            SyncInEventLoop: Called inside a running event loop (await `reactor.run`).
            InputValidationError: The inputs do not match the inputs type (nothing is stored).
            ReactorflowError: As for `rf.Reactor.run`.
        """
        return self._call("run", partial(self._reactor.run, inputs,
                                         idempotency_key=idempotency_key, **fields))

    def dispatch(self, inputs: Any = None, /, *, idempotency_key: str | None = None,
                 **fields: Any) -> Run:
        """`await reactor.dispatch(...)` from sync code: store the run and hand it to a worker.

        Args:
            inputs: One instance of the reactor's inputs type (or `None`).
            idempotency_key: A second start of this reactor with the same key returns the first
                run (its snapshot has `replayed=True`) instead of starting another.
            **fields: The inputs as keyword arguments, instead of `inputs`.

        Raises:
            SyncInEventLoop: Called inside a running event loop (await `reactor.dispatch`).
            InputValidationError: The inputs do not match the inputs type (nothing is stored).
            ReactorflowError: As for `rf.Reactor.dispatch`.
        """
        return self._call("dispatch", partial(self._reactor.dispatch, inputs,
                                              idempotency_key=idempotency_key, **fields))

    def get(self, run_id: str) -> Run:
        """`await reactor.get(run_id)` from sync code: the run's snapshot as stored.

        Args:
            run_id: The id of a run of this reactor.

        Raises:
            SyncInEventLoop: Called inside a running event loop (await `reactor.get`).
            RunNotFound: No such run of this reactor.
        """
        return self._call("get", partial(self._reactor.get, run_id))

    def wait(self, run_id: str, *, timeout: float | None = None) -> Run:
        """`await reactor.wait(run_id)` from sync code: block until the run is terminal or
        paused.

        Args:
            run_id: The id of a run of this reactor.
            timeout: Seconds to wait at most (`None`: no limit).

        Raises:
            SyncInEventLoop: Called inside a running event loop (await `reactor.wait`).
            RunNotFound: No such run of this reactor.
            WaitTimeout: The run was still running after `timeout` seconds.
        """
        return self._call("wait", partial(self._reactor.wait, run_id, timeout=timeout))

    def undo(self, run_id: str, *, actor: str | None = None) -> Run:
        """`await reactor.undo(run_id)` from sync code: roll back every completed step.

        Args:
            run_id: The id of a run of this reactor.
            actor: Who does it, recorded in the run's history (default: `user@host`).

        Raises:
            SyncInEventLoop: Called inside a running event loop (await `reactor.undo`).
            RunNotFound: No such run of this reactor.
            RunStateError: The run cannot be undone in its status.
            LockTimeout: Another process held the run for longer than `lock_wait`.
        """
        return self._call("undo", partial(self._reactor.undo, run_id, actor=actor))

    def cancel(self, run_id: str, *, reason: str = "", actor: str | None = None) -> Run:
        """`await reactor.cancel(run_id)` from sync code: stop the run without rollback.

        Args:
            run_id: The id of a run of this reactor.
            reason: Why, recorded in the run's history (a `str`).
            actor: Who does it, recorded in the run's history (default: `user@host`).

        Raises:
            SyncInEventLoop: Called inside a running event loop (await `reactor.cancel`).
            RunNotFound: No such run of this reactor.
            RunStateError: The run is already terminal.
        """
        return self._call("cancel", partial(self._reactor.cancel, run_id, reason=reason,
                                                       actor=actor))

    def retry_step(self, run_id: str, step: str | Sequence[str], *,
                   actor: str | None = None) -> Run:
        """`await reactor.retry_step(...)`, blocking (see `Reactor.retry_step`).

        Args:
            run_id: The id of a held run of this reactor.
            step: Its failed step.
            actor: Who does it, recorded in the run's history (default: `user@host`).

        Raises:
            RunStateError: The run is not held.
            StepNotFailed: `step` is not its failed step.
        """
        return self._call("retry_step", partial(self._reactor.retry_step, run_id, step,
                                                           actor=actor))

    def skip_step(self, run_id: str, step: str | Sequence[str], *, result: Any,
                  actor: str | None = None) -> Run:
        """`await reactor.skip_step(...)`, blocking (see `Reactor.skip_step`).

        Args:
            run_id: The id of a held run of this reactor.
            step: Its failed step.
            result: The step's result.
            actor: Who does it, recorded in the run's history (default: `user@host`).

        Raises:
            RunStateError: The run is not held.
            ResultValidationError: `result` does not fit the step's return type.
        """
        return self._call("skip_step", partial(self._reactor.skip_step, run_id, step,
                                               result=result, actor=actor))

    def rewind(self, run_id: str, *, to: str, inputs: Mapping[str, Any] | None = None,
               actor: str | None = None) -> Run:
        """`await reactor.rewind(...)`, blocking (see `Reactor.rewind`).

        Args:
            run_id: The run to rewind.
            to: The step to go back to.
            inputs: Changed input fields.
            actor: Who does it, recorded in the run's history (default: `user@host`).

        Raises:
            RunStateError: The run's status does not allow it.
            StepNotFound: `to` is not a step of the run.
        """
        return self._call("rewind", partial(self._reactor.rewind, run_id, to=to, inputs=inputs,
                                                       actor=actor))

    def pause(self, run_id: str, *, reason: str = "", by: str | None = None,
              actor: str | None = None) -> Run:
        """`await reactor.pause(run_id)` from sync code: stop a running run at its next step
        boundary, `paused` until `resume`.

        Args:
            run_id: The id of a run of this reactor.
            reason: Why, recorded in `run.paused_by` and the history (a `str`).
            by: Who pauses it (default: this process's `user@host`).
            actor: Who does it, recorded in the run's history (default: `user@host`).

        Raises:
            SyncInEventLoop: Called inside a running event loop (await `reactor.pause`).
            RunNotFound: No such run of this reactor.
            RunStateError: The run is not running.
        """
        return self._call("pause", partial(self._reactor.pause, run_id, reason=reason, by=by,
                                                      actor=actor))

    def resume(self, run_id: str, *, actor: str | None = None) -> Run:
        """`await reactor.resume(run_id)` from sync code: take an operator-paused run on.

        Args:
            run_id: The id of a run of this reactor.
            actor: Who does it, recorded in the run's history (default: `user@host`).

        Raises:
            SyncInEventLoop: Called inside a running event loop (await `reactor.resume`).
            RunNotFound: No such run of this reactor.
            RunStateError: The run is not paused by an operator (one paused at an interrupt
                is continued with `continue_`).
            LockTimeout: Another process held the run for longer than `lock_wait`.
        """
        return self._call("resume", partial(self._reactor.resume, run_id, actor=actor))

    def retry(self, run_id: str, *, actor: str | None = None) -> Run:
        """`await reactor.retry(run_id)` from sync code: a new run with the old run's inputs.

        Args:
            run_id: The id of a run of this reactor that is failed, cancelled or aborted.
            actor: Who does it, recorded in the run's history (default: `user@host`).

        Raises:
            SyncInEventLoop: Called inside a running event loop (await `reactor.retry`).
            RunNotFound: No such run of this reactor.
            RunStateError: The run is not failed, cancelled or aborted.
        """
        return self._call("retry", partial(self._reactor.retry, run_id, actor=actor))

    def list_runs(self, *, status: str | None = None, limit: int = 50,
                  cursor: str | None = None, since: datetime | None = None,
                  until: datetime | None = None, correlation_id: str | None = None,
                  idempotency_key: str | None = None, version: int | None = None,
                  error_type: str | None = None) -> RunPage:
        """`await reactor.list_runs(...)` from sync code: this reactor's runs, newest first.

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
            SyncInEventLoop: Called inside a running event loop (await `reactor.list_runs`).
            ReactorflowError: An unknown status, a limit out of range, or a bad cursor.
        """
        return self._call("list_runs", partial(
            self._reactor.list_runs, status=status, limit=limit, cursor=cursor, since=since,
            until=until, correlation_id=correlation_id, idempotency_key=idempotency_key,
            version=version, error_type=error_type))

    def continue_(self, run_id: str, *, step: str | Sequence[str], payload: Any,
                  actor: str | None = None) -> Run:
        """`await reactor.continue_(...)` from sync code: deliver an interrupt's payload.

        Args:
            run_id: The id of a run of this reactor.
            step: The interrupt's name, or its path (a tuple or list) inside composed children.
            payload: The payload, validated against the interrupt's `payload` annotation.
            actor: Who does it, recorded in the run's history (default: `user@host`).

        Raises:
            SyncInEventLoop: Called inside a running event loop (await `reactor.continue_`).
            RunNotFound: No such run of this reactor.
            NotPaused: The run is not paused.
            PayloadValidationError: The payload does not match the schema.
            ReactorflowError: As for `rf.Reactor.continue_`.
        """
        return self._call("continue_", partial(self._reactor.continue_, run_id, step=step,
                                               payload=payload, actor=actor))

    def continue_by_correlation_id(self, correlation_id: str, *, step: str | Sequence[str],
                                   payload: Any, actor: str | None = None) -> Run:
        """`await reactor.continue_by_correlation_id(...)` from sync code.

        Args:
            correlation_id: The id the interrupt registered (its `correlation_id` option).
            step: The interrupt's name, or its path (a tuple or list) inside composed children.
            payload: The payload, validated against the interrupt's `payload` annotation.
            actor: Who does it, recorded in the run's history (default: `user@host`).

        Raises:
            SyncInEventLoop: Called inside a running event loop (await
                `reactor.continue_by_correlation_id`).
            RunNotFound: No run registered that correlation id.
            ReactorflowError: As for `rf.Reactor.continue_`.
        """
        return self._call("continue_by_correlation_id", partial(
            self._reactor.continue_by_correlation_id, correlation_id, step=step,
            payload=payload, actor=actor))

    def ready_interrupts(self, run_id: str) -> list[str | tuple[str, ...]]:
        """`await reactor.ready_interrupts(run_id)` from sync code: what the run waits on.

        Args:
            run_id: The id of a run of this reactor.

        Raises:
            SyncInEventLoop: Called inside a running event loop (await
                `reactor.ready_interrupts`).
            RunNotFound: No such run of this reactor.
        """
        return self._call("ready_interrupts", partial(self._reactor.ready_interrupts, run_id))
