"""Errors about a run's state, its waits and its timeouts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from reactorflow.errors.core import (
    ArgumentError,
    ReactorflowError,
    Refused,
    StepLabel,
    _key,
    shown,
)


class RunNotFound(ReactorflowError):
    """No run with that id exists for this reactor (or at all, when `reactor` is None; or it
    expired).

    Attributes:
        reactor: The reactor that was asked, or `None` for a lookup across reactors.
        other_reactor: The reactor the run belongs to, when it is another one.
        correlation_id: The correlation id that was looked up, or `None`.
    """

    def __init__(self, run_id: str, reactor: str | None = None, *,
                 other_reactor: str | None = None,
                 correlation_id: str | None = None) -> None:
        if correlation_id is not None:
            message = (
                f"no run of reactor {reactor!r} registered correlation id {shown(correlation_id)}:"
                " the run has not reached that interrupt yet, or it expired"
            )
        elif other_reactor is not None:
            message = (
                f"run {shown(run_id)} belongs to reactor {other_reactor!r}, not {reactor!r}; use "
                "that reactor to read it"
            )
        else:
            whose = f" for reactor {reactor!r}" if reactor is not None else ""
            message = (
                f"no run {shown(run_id)}{whose}: check the id, or it may have expired after "
                "its retention period"
            )
        super().__init__(message, run_id=run_id)
        self.reactor = reactor
        self.other_reactor = other_reactor
        self.correlation_id = correlation_id


class ReactorNotDeclared(ReactorflowError):
    """A stored run's reactor is not declared in this process, so its steps cannot run here.

    Attributes:
        reactor: The stored run's reactor name.
    """

    def __init__(self, run_id: str, reactor: str) -> None:
        super().__init__(
            f"run {run_id!r} belongs to reactor {reactor!r}, which this process does not "
            "declare; import the module that declares it (the CLI's and the dashboard's --app, "
            "or REACTORFLOW_APP)",
            run_id=run_id,
        )
        self.reactor = reactor


class RunExists(Refused):
    """A run with that id is already stored."""

    def __init__(self, run_id: str) -> None:
        super().__init__(f"a run with id {run_id!r} already exists", run_id=run_id)


_ROLLED_BACK = ("It failed and its completed steps were already rolled back (run.error says "
                "why, and lists any undo that failed): there is nothing left to cancel, undo or "
                "continue. {retry} starts a new run with the same inputs.")
_ADVICE: dict[tuple[str, str], str] = {
    # What can still be done with a run of that status, for each refused operation.
    ("cancel", "completed"): "It already finished, so there is nothing to stop; {undo} "
                             "rolls back its completed steps.",
    ("cancel", "halted"): "A step halted it, so there is nothing to stop; {undo} rolls back "
                          "its completed steps.",
    ("cancel", "aborted"): "Its process stopped it mid-way and nothing will run it again; "
                           "{undo} rolls back the steps it completed.",
    ("cancel", "failed"): _ROLLED_BACK,
    ("cancel", "rolling_back"): "It is being rolled back and ends failed or cancelled by itself; "
                                "{wait} for that.",
    ("undo", "failed"): _ROLLED_BACK,
    ("undo", "running"): "Stop it first: {cancel} stops it at its next step boundary; "
                         "once {wait} shows it cancelled, {undo} rolls it back.",
    ("undo", "rolling_back"): "It is already being rolled back and ends failed or cancelled by "
                              "itself; {wait} for that.",
    ("continue", "running"): "It waits for no payload right now; {wait} until it pauses, "
                             "then continue it.",
    ("continue", "completed"): "It finished: it takes no more payloads. {undo} rolls back its "
                               "completed steps.",
    ("continue", "failed"): _ROLLED_BACK,
    ("continue", "halted"): "A step halted it: it takes no more payloads. {undo} rolls back its "
                            "completed steps.",
    ("continue", "cancelled"): "It was cancelled: it takes no more payloads. {undo} rolls back "
                               "what it completed (if it was not undone already); "
                               "{retry} starts a new run with the same inputs.",
    ("continue", "aborted"): "Its process stopped it mid-way: it takes no more payloads. {undo} "
                             "rolls back the steps it completed; {retry} starts a new "
                             "run with the same inputs.",
    ("continue", "rolling_back"): "It is being rolled back: it takes no more payloads; it "
                                  "ends failed or cancelled by itself.",
    ("retry", "running"): "It is still going: {wait} for it to end, or {cancel} "
                          "it; a failed, cancelled or aborted run can be retried.",
    ("retry", "paused"): "It waits for a payload: {continue} resumes it; or "
                         "{cancel} it, then retry it.",
    ("retry", "completed"): "It completed: there is nothing to retry. Start a new run for new "
                            "work.",
    ("retry", "halted"): "A step halted it on purpose: {undo} rolls back its completed "
                         "steps and ends it cancelled, and a cancelled run can be retried.",
    ("retry", "rolling_back"): "It is being rolled back and ends failed or cancelled by itself; "
                               "{wait} for that, then retry it.",
    ("retry", "held"): "A step failed and the run is held, its completed work kept: "
                       "{retry_step} runs the failed step again, {skip_step} supplies its "
                       "result, or {undo} rolls it back.",
    ("continue", "held"): "A step failed and the run is held: it waits for an operator, not a "
                          "payload. {retry_step} runs the failed step again, {skip_step} "
                          "supplies its result, or {undo} rolls it back.",
    ("retry_step", "running"): "Only a held run's failed step can be retried; this run is "
                               "still going: {wait} for it.",
    ("retry_step", "paused"): "Only a held run's failed step can be retried; this run waits "
                              "for a payload: {continue} resumes it.",
    ("retry_step", "failed"): "Only a held run's failed step can be retried; this run was "
                              "rolled back already. {retry} starts a new run with the same "
                              "inputs.",
    ("retry_step", "completed"): "Only a held run's failed step can be retried; this run "
                                 "completed.",
    ("rewind", "running"): "A rewind takes back a run whose work is in effect; this one is "
                           "still going: {wait} for it, or {cancel} it first.",
    ("rewind", "failed"): "It was rolled back already: nothing of it is in effect to go back "
                          "to. {retry} starts a new run with the same inputs.",
    ("rewind", "rolling_back"): "It is being rolled back; {wait} for it to end.",
    ("rewind", "halted"): "A step halted it on purpose, so there is no work in effect to go "
                          "back to; {undo} rolls back its completed steps.",
    ("skip_step", "running"): "Only a held run's failed step can be skipped; this run is still "
                              "going: {wait} for it.",
    ("skip_step", "failed"): "Only a held run's failed step can be skipped; this run was rolled "
                             "back already. {retry} starts a new run with the same inputs.",
    ("skip_step", "completed"): "Only a held run's failed step can be skipped; this run "
                                "completed.",
    # an operator's pause and resume (api.md §15): pause stops a running run only
    ("pause", "completed"): "It finished: there is nothing left to pause. {undo} rolls back "
                            "its completed steps.",
    ("pause", "failed"): _ROLLED_BACK,
    ("pause", "halted"): "A step halted it: nothing runs any more. {undo} rolls back its "
                         "completed steps.",
    ("pause", "cancelled"): "It was cancelled: nothing runs any more. {undo} rolls back what "
                            "it completed (if it was not undone already).",
    ("pause", "aborted"): "Its process stopped it mid-way and nothing will run it again; "
                          "{undo} rolls back the steps it completed.",
    ("pause", "rolling_back"): "It is being rolled back and ends failed or cancelled by itself; "
                               "{wait} for that.",
    ("pause", "held"): "A step failed and the run is held: nothing runs until an operator "
                       "acts. {retry_step} runs the failed step again, {skip_step} supplies "
                       "its result, or {undo} rolls it back.",
    ("resume", "held"): "A step failed and the run is held, not paused: {retry_step} runs the "
                        "failed step again, {skip_step} supplies its result, or {undo} rolls "
                        "it back.",
    ("resume", "running"): "It is not paused: it runs already. {pause} stops it at its next "
                           "step boundary.",
    ("resume", "completed"): "It finished: there is nothing to resume. {undo} rolls back its "
                             "completed steps.",
    ("resume", "failed"): _ROLLED_BACK,
    ("resume", "halted"): "A step halted it on purpose: it does not go on. {undo} rolls back "
                          "its completed steps.",
    ("resume", "cancelled"): "It was cancelled: it does not go on. {retry} starts a new run "
                             "with the same inputs.",
    ("resume", "aborted"): "Its process stopped it mid-way: {undo} rolls back the steps it "
                           "completed; {retry} starts a new run with the same inputs.",
    ("resume", "rolling_back"): "It is being rolled back and ends failed or cancelled by "
                                "itself; {wait} for that.",
    ("retry_step", "cancelled"): "Only a held run's failed step can be retried; this run was "
                                 "cancelled. {retry} starts a new run with the same inputs.",
    ("retry_step", "aborted"): "Only a held run's failed step can be retried; this run's "
                               "process stopped it mid-way. {undo} rolls back what it "
                               "completed; {retry} starts a new run with the same inputs.",
    ("retry_step", "halted"): "Only a held run's failed step can be retried; a step halted "
                              "this run on purpose. {undo} rolls back its completed steps.",
    ("retry_step", "rolling_back"): "Only a held run's failed step can be retried; this run "
                                    "is being rolled back and ends failed or cancelled by "
                                    "itself: {wait} for that.",
    ("skip_step", "paused"): "Only a held run's failed step can be skipped; this run waits "
                             "for a payload: {continue} resumes it.",
    ("skip_step", "cancelled"): "Only a held run's failed step can be skipped; this run was "
                                "cancelled. {retry} starts a new run with the same inputs.",
    ("skip_step", "aborted"): "Only a held run's failed step can be skipped; this run's "
                              "process stopped it mid-way. {undo} rolls back what it "
                              "completed; {retry} starts a new run with the same inputs.",
    ("skip_step", "halted"): "Only a held run's failed step can be skipped; a step halted "
                             "this run on purpose. {undo} rolls back its completed steps.",
    ("skip_step", "rolling_back"): "Only a held run's failed step can be skipped; this run "
                                   "is being rolled back and ends failed or cancelled by "
                                   "itself: {wait} for that.",
}


PYTHON_CALLS: Mapping[str, str] = {
    "undo": "undo(run_id)", "cancel": "cancel(run_id)", "retry": "retry(run_id)",
    "wait": "wait(run_id)", "continue": "continue_(run_id, ...)", "get": "get(run_id)",
    "retry_step": "retry_step(run_id, step)", "skip_step": "skip_step(run_id, step, result=...)",
    "pause": "pause(run_id)", "resume": "resume(run_id)",
}
"""How advice names the operations by default: the `Reactor` methods to call. A front end
(the CLI) passes its own phrasing to `refusal_advice` / `RunStateError.phrased`."""


def refusal_advice(operation: str, status: str,
                   calls: Mapping[str, str] = PYTHON_CALLS) -> str:
    """What is still possible for a run of `status` when `operation` is refused on it.

    Args:
        operation: The refused operation (`cancel`, `undo`, `continue`, `retry`, `pause`,
            `resume`).
        status: The run's status.
        calls: How to name each operation the advice suggests (keys `undo`, `cancel`,
            `retry`, `wait`, `continue`, `get`, `pause`, `resume`); default the Python calls,
            which also name any key `calls` leaves out.
    """
    template = _ADVICE.get((operation, str(status)),
                           "Read it with {get} to see what it is doing.")
    # an operation `calls` does not phrase is named by its Python call
    return template.format_map({**PYTHON_CALLS, **calls})


class RunStateError(Refused):
    """The run's status does not allow the requested operation; the message says what is
    possible for that status instead.

    Args:
        hint: What to do instead (default: the advice for that operation and status).

    Attributes:
        status: The run's status.
        operation: The refused operation (`cancel`, `undo`, `continue`, `retry`, ...).
        hint: The advice the message ends with.
        advised: The hint is the default advice (`refusal_advice`), not the raiser's own.
    """

    def __init__(self, run_id: str, status: str, operation: str,
                 hint: str | None = None) -> None:
        self.advised = hint is None
        hint = refusal_advice(operation, status) if hint is None else hint
        super().__init__(
            f"cannot {operation} run {run_id!r}: it is {status}. {hint}", run_id=run_id
        )
        self.status = status
        self.operation = operation
        self.hint = hint

    def phrased(self, calls: Mapping[str, str]) -> str:
        """The message with its advice naming the operations as `calls` does (the CLI's
        commands, say); a hint given by the raiser is kept as it is.

        Args:
            calls: How to name each operation (see `refusal_advice`).
        """
        hint = refusal_advice(self.operation, self.status, calls) if self.advised else self.hint
        return f"cannot {self.operation} run {self.run_id!r}: it is {self.status}. {hint}"


class StepNotFound(ReactorflowError):
    """An operation named a step the run's graph does not have: nothing was written.

    Attributes:
        steps: The steps it could have named.
    """

    def __init__(self, run_id: str, step: str, steps: Sequence[str]) -> None:
        listed = ", ".join(repr(s) for s in steps) or "none"
        super().__init__(f"run {run_id!r} has no step {step!r} to go back to; its steps: "
                         f"{listed}", run_id=run_id, step=step)
        self.steps = list(steps)


class StepNotFailed(Refused):
    """`retry_step` or `skip_step` named a step of a held run that is not its failed step:
    nothing was written.

    Attributes:
        step_status: The named step's status (`pending` when it never ran).
        failed: The held run's failed step, or `None`.

    Args:
        operation: The refused operation (`retry_step` or `skip_step`).
    """

    def __init__(self, run_id: str, step: str, step_status: str, operation: str,
                 failed: str | None) -> None:
        which = f"its failed step is {failed!r}" if failed else "it has no failed step"
        super().__init__(
            f"cannot {operation} step {step!r} of run {run_id!r}: that step is {step_status}, "
            f"and only the failed step of a held run can be retried or skipped ({which})",
            run_id=run_id, step=step)
        self.step_status = step_status
        self.failed = failed


class NotPaused(RunStateError):
    """`continue_` on a run that is not waiting for a payload.

    Attributes:
        status: The run's status.
    """

    def __init__(self, run_id: str, status: str) -> None:
        super().__init__(run_id, status, "continue")


class AlreadyResumed(Refused):
    """That interrupt of that run already accepted its one payload.

    Attributes:
        label: The interrupt's name, or its path inside composed children.
    """

    def __init__(self, run_id: str, step: StepLabel) -> None:
        super().__init__(
            f"interrupt {step!r} of run {run_id!r} was already resumed: it accepts exactly one "
            "payload. Nothing was written.",
            run_id=run_id,
            step=_key(step),
        )
        self.label = step


class InterruptNotPending(Refused):
    """The named step is not an interrupt the run is waiting on.

    Attributes:
        label: The step that was named (a name, or a path).
        pending: The interrupts the run does wait on.
    """

    def __init__(self, run_id: str, step: StepLabel, pending: Sequence[StepLabel]) -> None:
        listed = ", ".join(repr(p) for p in pending) if pending else "none"
        super().__init__(
            f"run {run_id!r} is not waiting on {step!r}; pending interrupts: {listed}. "
            "Name one of those (a nested one as a path such as ('fulfil', 'approve')).",
            run_id=run_id,
            step=_key(step),
        )
        self.label = step
        self.pending = list(pending)


class InterruptExpired(Refused):
    """The interrupt's timeout passed before a payload arrived; the run was rolled back (or,
    seen by a check that writes nothing, is due to be).

    Attributes:
        label: The interrupt's name, or its path inside composed children.
        timeout_at: The deadline that passed (seconds since the epoch).
        rolled_back: The run was rolled back and failed (False: a check saw the deadline
            pass; the next `continue_` or sweep rolls it back).
    """

    def __init__(self, run_id: str, step: StepLabel, timeout_at: float, *,
                 rolled_back: bool = True) -> None:
        outcome = ("the run was rolled back and is failed" if rolled_back else
                   "the run will be rolled back and failed (by the next continue or sweep); "
                   "nothing was sent")
        super().__init__(
            f"interrupt {step!r} of run {run_id!r} expired (deadline {timeout_at:.3f}); "
            f"{outcome}",
            run_id=run_id,
            step=_key(step),
        )
        self.label = step
        self.timeout_at = timeout_at
        self.rolled_back = rolled_back


class WaitTimeout(ReactorflowError, TimeoutError):
    """`wait` gave up before the run reached a terminal or paused status. `unclaimed`: the run
    was handed to a worker and no worker has taken it since (or, with `map` set, it is parked
    at that fanned-out map and no worker has taken any of its elements).

    Attributes:
        timeout: The seconds waited.
        status: The run's status when `wait` gave up.
        unclaimed: The run (or its map's elements) went to workers and no worker has taken it.
        map: The fanned-out map whose elements no worker has taken, else `None`.
    """

    def __init__(self, run_id: str, timeout: float, status: str, *,
                 unclaimed: bool = False, map: str | None = None) -> None:
        start = ("Start one that imports the reactor's module and shares this broker "
                 "(reactorflow worker <module>), then wait again")
        if unclaimed and map is not None:
            message = (
                f"run {run_id!r} is still {status} after waiting {timeout:g}s: it is parked at "
                f"fanned-out map {map!r}, whose elements were handed to workers, and no worker "
                f"has taken any of them. {start}"
            )
        elif unclaimed:
            message = (
                f"run {run_id!r} is still {status} after waiting {timeout:g}s: it was handed to "
                f"a worker and no worker has taken it. {start}"
            )
        else:
            message = (f"run {run_id!r} is still {status} after waiting {timeout:g}s; wait "
                       "again or raise the timeout")
        super().__init__(message, run_id=run_id)
        self.timeout = timeout
        self.status = status
        self.unclaimed = unclaimed
        self.map = map


class StepTimeout(ReactorflowError, TimeoutError):
    """A step attempt ran past its `timeout=`.

    Attributes:
        timeout: The step's `timeout=` in seconds.
    """

    def __init__(self, run_id: str, step: str, timeout: float) -> None:
        super().__init__(
            f"step {step!r} of run {run_id!r} ran past its timeout of {timeout:g}s",
            run_id=run_id,
            step=step,
        )
        self.timeout = timeout


class InvalidSleep(ReactorflowError, TypeError):
    """A sleep step's body returned what is no deadline: a naive `datetime`, a negative
    duration, or a value of another type. The step fails (a sleep is never retried).

    Attributes:
        value: A short description of what it returned.
        problem: Why that is no deadline.
    """

    def __init__(self, run_id: str, step: str, value: str, problem: str) -> None:
        super().__init__(
            f"sleep step {step!r} of run {run_id!r} returned {value}: {problem}. Return a "
            "datetime.timedelta or seconds (>= 0), or an aware datetime (with tzinfo)",
            run_id=run_id,
            step=step,
        )
        self.value = value
        self.problem = problem


class AsyncWaitTimeout(ReactorflowError, TimeoutError):
    """A step waited longer than `async_wait_timeout` for an async unit's result.

    Attributes:
        unit: The async unit waited for.
        timeout: The seconds waited (`async_wait_timeout`).
    """

    def __init__(self, run_id: str, step: str, unit: str, timeout: float) -> None:
        super().__init__(
            f"step {step!r} of run {run_id!r} waited {timeout:g}s for async unit {unit!r} and gave "
            "up; the run rolls back. Raise rf.configure(async_wait_timeout=...) or check that a "
            "worker is running (reactorflow worker ...)",
            run_id=run_id,
            step=step,
        )
        self.unit = unit
        self.timeout = timeout


class AsyncUnitFailed(ArgumentError):
    """An async unit read by a step (annotated with its plain type) failed.

    Attributes:
        unit: The async unit that failed.
        reason: Why it failed.
    """

    def __init__(self, run_id: str, step: str, unit: str, reason: str) -> None:
        super().__init__(
            f"step {step!r} of run {run_id!r} reads async unit {unit!r}, which failed: {reason}. "
            "Annotate the parameter rf.Outcome[...] to receive the failure as a value instead",
            run_id=run_id,
            step=step,
        )
        self.unit = unit
        self.reason = reason


class CorrelationConflict(ReactorflowError):
    """A correlation id is already mapped to a different run.

    Attributes:
        correlation_id: The correlation id.
        existing_run: The run that holds it.
    """

    def __init__(self, correlation_id: str, existing_run: str, run_id: str) -> None:
        super().__init__(
            f"correlation id {correlation_id!r} already belongs to run {existing_run!r}; run "
            f"{run_id!r} cannot take it. Make the template unique per run (e.g. include an id).",
            run_id=run_id,
        )
        self.correlation_id = correlation_id
        self.existing_run = existing_run


class LockTimeout(ReactorflowError):
    """The run's lock could not be taken in time: another execution holds it.

    Attributes:
        waited: The seconds waited for the lock.
        operation: The operation that needed it.
    """

    def __init__(self, run_id: str, waited: float, operation: str) -> None:
        super().__init__(
            f"cannot {operation} run {run_id!r}: another execution held it for {waited:g}s. "
            "Wait for it to pause or finish, then try again.",
            run_id=run_id,
        )
        self.waited = waited
        self.operation = operation
