"""JSON responses (msgspec) and the mapping of errors to `{"error", "message", "fields"}` with a
status."""

from __future__ import annotations

import logging
from typing import Any

from starlette.responses import Response

from reactorflow.errors import (
    AlreadyResumed,
    BulkSelectionError,
    CorrelationConflict,
    InputValidationError,
    InterruptExpired,
    InterruptNotPending,
    LockLost,
    LockTimeout,
    PayloadValidationError,
    ReactorflowError,
    ReactorNotDeclared,
    ResultValidationError,
    RunNotFound,
    RunStateError,
    StepNotFailed,
    StorageError,
)
from reactorflow.jsonforms import dumps
from reactorflow.web.auth import Forbidden, Unauthorized

log = logging.getLogger("reactorflow.web")


class NoSuchReactor(ReactorflowError):
    """`GET /api/reactors/{name}` names a reactor, or a version of one, that this process does
    not declare (HTTP 404).

    Attributes:
        reactor: The name asked for.
        version: The version asked for (`None`: the newest).
        declared: The versions of that name this process declares (empty: none).
    """

    def __init__(self, reactor: str, version: int | None, declared: list[int]) -> None:
        if not declared:
            message = (f"no reactor named {reactor!r} is declared in this process; import the "
                       "module that declares it (the dashboard's --app, or REACTORFLOW_APP)")
        else:
            listed = ", ".join(str(v) for v in declared)
            message = (f"reactor {reactor!r} has no version {version} in this process (it "
                       f"declares version(s) {listed}); import the module that declares "
                       f"version {version}, or ask for one of these")
        super().__init__(message)
        self.reactor = reactor
        self.version = version
        self.declared = declared


class NoSuchStep(ReactorflowError):
    """A route names a step that the run's reactor does not have (HTTP 404).

    Attributes:
        reactor: The run's reactor.
    """

    def __init__(self, run_id: str, step: str, reactor: str) -> None:
        super().__init__(f"run {run_id!r} (reactor {reactor!r}) has no step {step!r}: name a "
                         "key of the run's steps (a nested one as outer.inner)",
                         run_id=run_id, step=step)
        self.reactor = reactor


class BadRequest(ReactorflowError):
    """The request itself is malformed: a body that is not the expected JSON, a bad query."""


class BadFilter(BadRequest):
    """A filter of a run listing the server cannot read (an unknown status, a malformed
    `since`, a version that is not a number): HTTP 400, nothing read or changed."""


STATUS_OF: tuple[tuple[type[Exception], int], ...] = (
    (Unauthorized, 401), (Forbidden, 403), (BadFilter, 400), (BulkSelectionError, 400),
    (RunNotFound, 404), (NoSuchReactor, 404), (NoSuchStep, 404),
    (RunStateError, 409), (StepNotFailed, 409), (AlreadyResumed, 409),
    (InterruptNotPending, 409), (InterruptExpired, 409), (LockTimeout, 409),
    (CorrelationConflict, 409),
    (ReactorNotDeclared, 409), (LockLost, 409),
    (PayloadValidationError, 422), (InputValidationError, 422), (ResultValidationError, 422),
)
"""The status of each error, first match wins. Any other `rf.StorageError` is the server's
storage failing: 503 when it is `transient` (unreachable, not ready, full, a pool busy: the
request may be made again), else 500 (a reply refusing the command for good, a corrupt
record: someone must act); both with the error's message (`storage_status`). An unlisted
`ReactorflowError` is 422."""

FIELDS = ("run_id", "step", "status", "operation", "step_status", "failed", "field", "reactor",
          "attempts", "max_attempts", "exhausted", "counted", "steps")
"""The structured fields of an error that an error response carries (`fields`), when the error has
them: identifiers, statuses, counts and step names, never a user value (a payload, a result, an
input)."""


class JSON(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return dumps(content)


def storage_status(exc: StorageError) -> int:
    """The status of a storage failure that `STATUS_OF` does not list: by its `transient`
    flag (a subclass declares its own), 503 or 500.

    Args:
        exc: The storage failure.
    """
    return 503 if exc.transient else 500


def error_response(exc: Exception) -> JSON:
    """`{"error": type, "message": ..., "fields": {...}}` with the status code the error maps
    to (`fields`, the error's structured fields, only when it has some: see `FIELDS`)."""
    code = next((code for kind, code in STATUS_OF if isinstance(exc, kind)), None)
    if code is None and isinstance(exc, StorageError):
        code = storage_status(exc)
        if code == 500:  # not the client's doing and not passing: the operator must see it
            log.error("reactorflow.web.storage_failed error=%s", exc, exc_info=exc)
    if code is None:
        if isinstance(exc, ReactorflowError):
            code = 422  # a bad body or bad options (a status, a limit, a cursor), named
        else:
            log.exception("reactorflow.web.error")
            return JSON({"error": "InternalError", "message": "internal error; see the server "
                         "log"}, status_code=500)
    headers = {"WWW-Authenticate": "Bearer"} if code == 401 else None
    body: dict[str, Any] = {"error": type(exc).__name__, "message": str(exc)}
    fields = fields_of(exc)
    if fields:
        body["fields"] = fields
    return JSON(body, status_code=code, headers=headers)


def fields_of(exc: Exception) -> dict[str, Any]:
    """The error's structured fields among `FIELDS` that are set (a script or the dashboard
    reads `status`, `operation`, `failed`, `field` instead of parsing the message).

    Args:
        exc: The error answered.
    """
    found: dict[str, Any] = {}
    for name in FIELDS:
        value = getattr(exc, name, None)
        if isinstance(value, str | int | float | bool):  # (a str enum is a str)
            found[name] = value
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            found[name] = list(value)  # names: the steps a rewind could go back to
    return found
