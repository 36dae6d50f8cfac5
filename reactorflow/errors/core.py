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


class Refused(ReactorflowError):
    """A grouping base: the operation was refused because of the run's state or of an earlier
    call (`NotPaused` and the other `RunStateError`s, `AlreadyResumed`, `InterruptNotPending`,
    `InterruptExpired`, `RunExists`). Catch it to treat every refusal alike; the subclass and
    its fields say which one it is."""


class ValidationFailed(ReactorflowError):
    """A grouping base: a value given to a run failed validation against its declared type
    (`InputValidationError`, `PayloadValidationError`). Catch it to treat both alike."""


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
    """A stored run was made by a graph that the current code changed incompatibly, or by a
    version of its reactor that no module of this process declares (with no migration path).

    Attributes:
        reactor: The run's reactor.
        differences: What the current graph changed (one line each; empty when the run's
            version is not declared).
        version: The stored run's version (`rf.Reactor(version=)`), or `None` when unknown.

    Args:
        declared: The versions this process declares (named in the message when the run's
            version is not among them).
    """

    def __init__(self, run_id: str, reactor: str, differences: Sequence[str], *,
                 version: int | None = None, declared: Sequence[int] = ()) -> None:
        if differences:
            listed = "; ".join(differences)
            at = "" if version is None else f" version {version}"
            message = (
                f"run {run_id!r} of reactor {reactor!r}{at} was started by a different graph "
                f"and cannot be continued by this code: {listed}. Keep the graph of a version "
                "compatible, or bump the version (rf.Reactor(..., version=N+1)) and keep the "
                "old version's module loaded while its runs are in flight (or declare a "
                "migration); else undo/cancel the run with the old code.")
        else:
            have = ", ".join(map(str, declared)) or "none"
            message = (
                f"run {run_id!r} of reactor {reactor!r} is on version {version}, which this "
                f"process does not declare (it declares version {have}), and no migration "
                f"leads from version {version}. Load the module that declares version "
                f"{version}, or declare @reactor.migrate(from_version={version}) on a newer "
                "version.")
        super().__init__(message, run_id=run_id)
        self.reactor = reactor
        self.differences = list(differences)
        self.version = version


class MigrationError(ReactorflowError):
    """A migration of a stored run onto a newer version was refused: the hook raised, or the
    run's records would not fit the new graph. The run is left as it was.

    Attributes:
        reactor: The run's reactor.
        from_version: The version the run is on.
        to_version: The version the migration leads to.
        misfits: Why the migrated run would not fit the new graph, one line each (empty when
            the hook raised).

    Args:
        hook: The hook that raised (its function and where it was declared), if one did.
    """

    def __init__(self, run_id: str, reactor: str, from_version: int, to_version: int,
                 misfits: Sequence[str], *, hook: str | None = None,
                 cause: BaseException | None = None) -> None:
        if misfits:
            why = "its records would not fit the new graph: " + "; ".join(misfits)
        else:
            why = f"the migration hook {hook} raised {type(cause).__name__}: {cause}"
        super().__init__(
            f"run {run_id!r} of reactor {reactor!r} cannot migrate from version "
            f"{from_version} to {to_version}: {why}. Nothing was written; fix the migration "
            f"(or the graph) and try again.",
            run_id=run_id, cause=cause)
        self.reactor = reactor
        self.from_version = from_version
        self.to_version = to_version
        self.misfits = list(misfits)


class SerializationError(ReactorflowError):
    """A value could not be encoded or decoded by msgspec.

    Attributes:
        type_name: The type that could not be encoded or decoded, or `None`.
    """

    def __init__(self, message: str, *, run_id: str | None = None, step: str | None = None,
                 type_name: str | None = None, cause: BaseException | None = None) -> None:
        super().__init__(message, run_id=run_id, step=step, cause=cause)
        self.type_name = type_name


class BulkSelectionError(ReactorflowError):
    """A bulk operation (`reactorflow runs cancel --status ...`, `POST /api/runs:bulk`) was
    given a bad selection: an unknown action or filter value, a malformed time, a missing step,
    or no filter at all without `all`. Nothing was changed.

    Attributes:
        field: The option or body field at fault (`action`, `status`, `since`, `filter`...).
    """

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


class ArgumentError(ReactorflowError):
    """A step's argument could not be resolved (a bad path into a result, a failing `when`)."""


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
