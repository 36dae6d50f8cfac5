"""The error hierarchy: every error reactorflow raises derives from `ReactorflowError`.

Each error carries structured fields (`run_id`, `step`, `cause` and its own extras) and a message
that says what went wrong and what to do about it. `Halt` is not an error: it is the signal a
step raises to stop its run cleanly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reactorflow.redaction import scrub

StepLabel = str | tuple[str, ...]
"""How an interrupt is named: a bare name at the root, a path tuple inside composed children."""


SHOWN_ID_LIMIT = 80
"""Characters of a caller-supplied id a message shows (the error's field keeps it whole)."""


def _key(label: StepLabel) -> str:
    return label if isinstance(label, str) else ".".join(label)


def shown(value: str) -> str:
    """`value` quoted for a message, cut to `SHOWN_ID_LIMIT` characters (saying how long)."""
    if len(value) <= SHOWN_ID_LIMIT:
        return repr(value)
    return f"{value[:SHOWN_ID_LIMIT]!r}... ({len(value)} characters)"


class ReactorflowError(Exception):
    """Root of every error raised by reactorflow.

    Attributes:
        message: What went wrong and what to do about it (also `str(error)`).
        run_id: The run concerned, or `None`.
        step: The step concerned (a nested interrupt's path joined with `.`), or `None`.
        cause: The underlying exception (also `__cause__`), or `None`.
    """

    def __init__(
        self,
        message: str,
        *,
        run_id: str | None = None,
        step: str | None = None,
        cause: BaseException | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.run_id = run_id
        self.step = step
        self.cause = cause
        if cause is not None:
            self.__cause__ = cause

    def __reduce__(self) -> tuple[Any, ...]:  # keep errors picklable across processes
        return (_rebuild, (type(self), self.message, dict(self.__dict__)))


def _rebuild(cls: type[ReactorflowError], message: str, state: dict[str, Any]) -> ReactorflowError:
    error = cls.__new__(cls)
    Exception.__init__(error, message)
    error.__dict__.update(state)
    return error


class DefinitionError(ReactorflowError):
    """A reactor, step or handler was declared wrongly (raised at the decorator line).

    Attributes:
        reactor: The reactor being declared, or `None`.
    """

    def __init__(self, message: str, *, reactor: str | None = None,
                 step: str | None = None) -> None:
        super().__init__(message, step=step)
        self.reactor = reactor


class ConfigurationError(ReactorflowError):
    """`rf.configure` (or the environment) named an unknown option or a bad value.

    Attributes:
        option: The option at fault, or `None`.
    """

    def __init__(self, message: str, *, option: str | None = None) -> None:
        super().__init__(message)
        self.option = option


class DefinitionChanged(ReactorflowError):
    """A stored run was made by a graph that the current code changed incompatibly.

    Attributes:
        reactor: The run's reactor.
        differences: What the current graph changed (one line each).
    """

    def __init__(self, run_id: str, reactor: str, differences: Sequence[str]) -> None:
        listed = "; ".join(differences)
        super().__init__(
            f"run {run_id!r} of reactor {reactor!r} was started by a different graph and cannot "
            f"be continued by this code: {listed}. Deploy code whose graph keeps every step the "
            "run has, or undo/cancel the run with the old code.",
            run_id=run_id,
        )
        self.reactor = reactor
        self.differences = list(differences)


class InputValidationError(ReactorflowError):
    """The inputs of a run failed validation: nothing was stored. For a child's inputs mapped by
    a step (`step` is set), that step failed and its run rolls back.

    Attributes:
        reactor: The reactor whose inputs were refused.
        field: The field at fault (a dotted path for nested fields).
        reason: Why it was refused.
    """

    def __init__(self, reactor: str, field: str, reason: str, *,
                 step: str | None = None) -> None:
        if step is None:
            message = (f"invalid input for reactor {reactor!r}: {field}: {reason}. Fix that "
                       "field and run again (nothing was stored).")
        else:
            message = (f"invalid input for child reactor {reactor!r}, as returned by step "
                       f"{step!r}: {field}: {reason}. Make that step's function return valid "
                       "inputs; the step failed, so its run rolls back (the child was not "
                       "started).")
        super().__init__(message, step=step)
        self.reactor = reactor
        self.field = field
        self.reason = reason


class PayloadValidationError(ReactorflowError):
    """An interrupt payload failed validation; the attempt was counted.

    Attributes:
        label: The interrupt's name, or its path inside composed children (`step` is the
            path joined with `.`).
        field: The payload field at fault.
        reason: Why it was refused.
        attempts: The attempts counted so far, this one included.
        max_attempts: The interrupt's `max_attempts` (`None`: no limit).
        exhausted: This was the last attempt: the run was rolled back and is failed.
    """

    def __init__(
        self,
        run_id: str,
        step: StepLabel,
        field: str,
        reason: str,
        *,
        attempts: int,
        max_attempts: int | None,
        exhausted: bool,
    ) -> None:
        if exhausted:
            tail = (
                f"this was attempt {attempts} of {max_attempts}, the last one: the run was rolled "
                "back and is now failed"
            )
        elif max_attempts is not None:
            tail = (
                f"attempt {attempts} of {max_attempts}; the run is still paused, send a corrected "
                "payload"
            )
        else:
            tail = f"attempt {attempts}; the run is still paused, send a corrected payload"
        super().__init__(
            f"invalid payload for interrupt {step!r} of run {run_id!r}: {field}: {reason} ({tail})",
            run_id=run_id,
            step=_key(step),
        )
        self.label = step
        self.field = field
        self.reason = reason
        self.attempts = attempts
        self.max_attempts = max_attempts
        self.exhausted = exhausted


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


class RunExists(ReactorflowError):
    """A run with that id is already stored."""

    def __init__(self, run_id: str) -> None:
        super().__init__(f"a run with id {run_id!r} already exists", run_id=run_id)


_ROLLED_BACK = ("It failed and its completed steps were already rolled back (run.error says "
                "why, and lists any undo that failed): there is nothing left to cancel, undo or "
                "continue. retry(run_id) starts a new run with the same inputs.")
_NO_PAYLOAD = "it takes no more payloads"
_ADVICE: dict[tuple[str, str], str] = {
    # What can still be done with a run of that status, for each refused operation.
    ("cancel", "completed"): "It already finished, so there is nothing to stop; undo(run_id) "
                             "rolls back its completed steps.",
    ("cancel", "halted"): "A step halted it, so there is nothing to stop; undo(run_id) rolls back "
                          "its completed steps.",
    ("cancel", "aborted"): "Its process stopped it mid-way and nothing will run it again; "
                           "undo(run_id) rolls back the steps it completed.",
    ("cancel", "failed"): _ROLLED_BACK,
    ("cancel", "rolling_back"): "It is being rolled back and ends failed or cancelled by itself; "
                                "wait(run_id) for that.",
    ("undo", "failed"): _ROLLED_BACK,
    ("undo", "running"): "Stop it first: cancel(run_id) stops it at its next step boundary; "
                         "once wait(run_id) shows it cancelled, undo(run_id) rolls it back.",
    ("undo", "rolling_back"): "It is already being rolled back and ends failed or cancelled by "
                              "itself; wait(run_id) for that.",
    ("continue", "running"): "It waits for no payload right now; wait(run_id) until it pauses, "
                             "then continue it.",
    ("continue", "completed"): f"It finished: {_NO_PAYLOAD}. undo(run_id) rolls back its "
                               "completed steps.",
    ("continue", "failed"): _ROLLED_BACK,
    ("continue", "halted"): f"A step halted it: {_NO_PAYLOAD}. undo(run_id) rolls back its "
                            "completed steps.",
    ("continue", "cancelled"): f"It was cancelled: {_NO_PAYLOAD}. undo(run_id) rolls back "
                               "what it completed (if it was not undone already); "
                               "retry(run_id) starts a new run with the same inputs.",
    ("continue", "aborted"): f"Its process stopped it mid-way: {_NO_PAYLOAD}. undo(run_id) "
                             "rolls back the steps it completed; retry(run_id) starts a new "
                             "run with the same inputs.",
    ("continue", "rolling_back"): f"It is being rolled back: {_NO_PAYLOAD}; it ends failed or "
                                  "cancelled by itself.",
    ("retry", "running"): "It is still going: wait(run_id) for it to end, or cancel(run_id) "
                          "it; a failed, cancelled or aborted run can be retried.",
    ("retry", "paused"): "It waits for a payload: continue_(run_id, ...) resumes it; or "
                         "cancel(run_id) it, then retry it.",
    ("retry", "completed"): "It completed: there is nothing to retry. Start a new run for new "
                            "work.",
    ("retry", "halted"): "A step halted it on purpose: undo(run_id) rolls back its completed "
                         "steps and ends it cancelled, and a cancelled run can be retried.",
    ("retry", "rolling_back"): "It is being rolled back and ends failed or cancelled by itself; "
                               "wait(run_id) for that, then retry it.",
}


def refusal_advice(operation: str, status: str) -> str:
    """What is still possible for a run of `status` when `operation` is refused on it."""
    return _ADVICE.get((operation, str(status)),
                       "Read it with get(run_id) to see what it is doing.")


class RunStateError(ReactorflowError):
    """The run's status does not allow the requested operation; the message says what is
    possible for that status instead.

    Args:
        hint: What to do instead (default: the advice for that operation and status).

    Attributes:
        status: The run's status.
        operation: The refused operation (`cancel`, `undo`, `continue`, `retry`, ...).
    """

    def __init__(self, run_id: str, status: str, operation: str,
                 hint: str | None = None) -> None:
        hint = refusal_advice(operation, status) if hint is None else hint
        super().__init__(
            f"cannot {operation} run {run_id!r}: it is {status}. {hint}", run_id=run_id
        )
        self.status = status
        self.operation = operation


class NotPaused(RunStateError):
    """`continue_` on a run that is not waiting for a payload.

    Attributes:
        status: The run's status.
    """

    def __init__(self, run_id: str, status: str) -> None:
        super().__init__(run_id, status, "continue")


class AlreadyResumed(ReactorflowError):
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


class InterruptNotPending(ReactorflowError):
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


class InterruptExpired(ReactorflowError):
    """The interrupt's timeout passed before a payload arrived; the run was rolled back.

    Attributes:
        label: The interrupt's name, or its path inside composed children.
        timeout_at: The deadline that passed (seconds since the epoch).
    """

    def __init__(self, run_id: str, step: StepLabel, timeout_at: float) -> None:
        super().__init__(
            f"interrupt {step!r} of run {run_id!r} expired (deadline {timeout_at:.3f}); the run "
            "was rolled back and is failed",
            run_id=run_id,
            step=_key(step),
        )
        self.label = step
        self.timeout_at = timeout_at


class WaitTimeout(ReactorflowError, TimeoutError):
    """`wait` gave up before the run reached a terminal or paused status. `unclaimed`: the run
    was handed to a worker and no worker has taken it since.

    Attributes:
        timeout: The seconds waited.
        status: The run's status when `wait` gave up.
        unclaimed: The run was handed to a worker and no worker has taken it.
    """

    def __init__(self, run_id: str, timeout: float, status: str, *,
                 unclaimed: bool = False) -> None:
        if unclaimed:
            message = (
                f"run {run_id!r} is still {status} after waiting {timeout:g}s: it was handed to "
                "a worker and no worker has taken it. Start one that imports the reactor's "
                "module and shares this broker (reactorflow worker <module>), then wait again"
            )
        else:
            message = (f"run {run_id!r} is still {status} after waiting {timeout:g}s; wait "
                       "again or raise the timeout")
        super().__init__(message, run_id=run_id)
        self.timeout = timeout
        self.status = status
        self.unclaimed = unclaimed


class SerializationError(ReactorflowError):
    """A value could not be encoded or decoded by msgspec.

    Attributes:
        type_name: The type that could not be encoded or decoded, or `None`.
    """

    def __init__(self, message: str, *, run_id: str | None = None, step: str | None = None,
                 type_name: str | None = None, cause: BaseException | None = None) -> None:
        super().__init__(message, run_id=run_id, step=step, cause=cause)
        self.type_name = type_name


class ArgumentError(ReactorflowError):
    """A step's argument could not be resolved (a bad path into a result, a failing `when`)."""


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


class StorageError(ReactorflowError):
    """The storage backend failed."""


class StorageConnectionError(StorageError):
    """The storage server could not be reached (the URL is named, never its credentials).

    Raised while starting a run, it says whether that run was stored: `run_id` is the id the
    run has (or would have had), and `stored` is True (it is stored: the sweeper finishes it
    once storage is back; do not start it again), False (nothing of it was stored) or None (the
    store was sent but its answer was lost: `get(run_id)` tells once storage is back).

    Attributes:
        url: The storage URL (without credentials).
        reason: Why it could not be reached.
        stored: Whether the run being started was stored (see above), or `None`.
    """

    def __init__(self, url: str, reason: str, *, cause: BaseException | None = None,
                 run_id: str | None = None, stored: bool | None = None) -> None:
        message = (f"cannot reach storage at {url}: {reason.rstrip('. ')}. Check that the server "
                   "is running and the URL is right.")
        if run_id is not None:
            message += " " + _stored_note(run_id, stored)
        super().__init__(message, run_id=run_id, cause=cause)
        self.url = url
        self.reason = reason
        self.stored = stored

    def starting(self, run_id: str, *, stored: bool | None) -> StorageConnectionError:
        """This error, raised while starting run `run_id`: says whether the run was stored.

        Args:
            run_id: The run being started.
            stored: Whether it was stored (`None`: unknown, the answer was lost).
        """
        return StorageConnectionError(self.url, self.reason, cause=self.cause or self,
                                      run_id=run_id, stored=stored)


def _stored_note(run_id: str, stored: bool | None) -> str:
    if stored:
        return (f"Run {run_id!r} was stored: it goes on (the sweeper finishes it) once storage "
                f"is reachable. Do not start it again; follow it with wait({run_id!r}).")
    if stored is None:
        return (f"Run {run_id!r} may or may not have been stored (the answer was lost): "
                f"get({run_id!r}) tells once storage is reachable; if it exists the sweeper "
                "finishes it, so start it again only if it does not.")
    return f"Run {run_id!r} was not stored: starting it again is safe."


class StoragePoolExhausted(StorageError):
    """Every connection of this process's pool to the storage server stayed busy for the pool
    timeout: more storage calls at once than connections (the server itself is reachable).

    Attributes:
        url: The storage URL (without credentials).
        max_connections: The pool's size.
        waited: The seconds waited for a connection.
    """

    def __init__(self, url: str, max_connections: int, waited: float, *,
                 cause: BaseException | None = None) -> None:
        super().__init__(
            f"all {max_connections} connections of this process's pool to {url} (one pool per "
            f"event loop) were busy for {waited:g}s: more storage calls at once than "
            "connections. Pass a larger max_connections= (or pool_timeout=) to the storage, or "
            "make fewer calls at once. (Waiting for runs costs no pool connection.)",
            cause=cause,
        )
        self.url = url
        self.max_connections = max_connections
        self.waited = waited


class LockLost(StorageError):
    """A fenced write was refused: this execution no longer owns the run.

    Attributes:
        owner: The lock owner this execution wrote as.
    """

    def __init__(self, run_id: str, owner: str) -> None:
        super().__init__(
            f"this execution ({owner}) no longer holds run {run_id!r}'s lock: it expired and "
            "another execution took the run over (its keeper could not extend it for lock_ttl "
            "seconds: storage unreachable, or the process suspended). Nothing more was written "
            "by this one.",
            run_id=run_id,
        )
        self.owner = owner


class CorruptRecord(StorageError):
    """A stored record could not be decoded (corrupt, or an unknown schema version).

    Attributes:
        reason: Why the record cannot be read.
    """

    def __init__(self, run_id: str, reason: str) -> None:
        super().__init__(f"stored record of run {run_id!r} cannot be read: {reason}", run_id=run_id)
        self.reason = reason


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


class GateBusy(ReactorflowError):
    """A gate (lock, semaphore, rate limit, period, ordered lock) stayed busy past its `wait`.

    `gate` is its kind (`"lock"`, `"semaphore"`, `"rate_limit"`, `"period"`,
    `"ordered_lock"`), `key` the key as the template rendered it, `retry_after` the seconds
    until a rate-limit window frees (`None` for the other gates).

    Attributes:
        gate: What gate (`"lock"`, `"semaphore"`, `"rate_limit"`, `"period"`,
            `"ordered_lock"`).
        key: The key as built.
        waited: The seconds waited.
        retry_after: Seconds until a rate-limit window frees (`None` for the other gates).
    """

    def __init__(self, gate: str, key: str, *, waited: float = 0.0,
                 retry_after: float | None = None, run_id: str | None = None,
                 step: str | None = None) -> None:
        where = f" for step {step!r}" if step else ""
        hint = (f"; a window frees in {retry_after:.3g}s" if retry_after is not None
                else "; another run holds it")
        super().__init__(
            f"{gate} {shown(key)}{where} stayed busy for {waited:g}s{hint}. Raise its wait= "
            "to queue longer, or try again later.", run_id=run_id, step=step)
        self.gate = gate
        self.key = key
        self.waited = waited
        self.retry_after = retry_after


class GateKeyError(ArgumentError):
    """A gate's key could not be built at run time (it rendered empty, named a missing value,
    or its callable raised or returned something other than text).

    Attributes:
        gate: What gate.
        template: The key's template (or the callable's name).
        reason: Why the key could not be built.
    """

    def __init__(self, gate: str, template: str, reason: str, *, run_id: str | None = None,
                 step: str | None = None) -> None:
        where = f"step {step!r}" if step else "the reactor"
        super().__init__(f"gate {gate} of {where}: key {template!r} {reason}", run_id=run_id,
                         step=step)
        self.gate = gate
        self.template = template


class GateDeadlock(ReactorflowError):
    """An async unit would need an exclusive gate that its dispatching run holds: it could
    never run while the run waits for it, so the dispatching step fails before enqueueing.

    Attributes:
        gate: What gate.
        key: The key the dispatching run holds.
    """

    def __init__(self, gate: str, key: str, *, run_id: str, step: str) -> None:
        super().__init__(
            f"step {step!r} of run {run_id!r} would dispatch work that needs {gate} "
            f"{shown(key)}, which this run holds: it could never run. Declare the gate on the "
            "dispatching step only, or use another key.", run_id=run_id, step=step)
        self.gate = gate
        self.key = key


class RecordedError(ReactorflowError):
    """A failure rebuilt from storage, handed to a compensate that runs in another process.

    Attributes:
        type: The original exception's type name.
        message: The original exception's message.
    """

    def __init__(self, type: str, message: str, *, step: str | None = None) -> None:
        super().__init__(f"{type}: {message}", step=step)
        self.type = type
        self.message = message  # the original exception's message (str() adds its type)


class Halt(Exception):
    """Raise from a step to stop the run cleanly: status `halted`, nothing rolled back.

    The reason is stored as text: a non-`str` reason is converted with `str()` (`Halt(404)` has
    the reason `"404"`).

    Attributes:
        reason: Why the run was halted (stored with the run).
    """

    def __init__(self, reason: str = "") -> None:
        reason = halt_text(reason)
        super().__init__(reason)
        self.reason = reason


def halt_text(reason: object) -> str:
    """A halt reason as the text stored with the run (`str()` of a non-str), scrubbed of the
    redacted values of the runs executing here (see reactorflow.redaction); never raises."""
    if isinstance(reason, str):
        return scrub(reason)
    try:
        return scrub(str(reason))
    except Exception:
        return f"<{type(reason).__name__} reason that cannot be converted to text>"
