"""JSON responses (msgspec) and the mapping of errors to `{"error", "message"}` with a status."""

from __future__ import annotations

import logging
from typing import Any

from starlette.responses import Response

from reactorflow.errors import (
    AlreadyResumed,
    CorrelationConflict,
    InputValidationError,
    InterruptExpired,
    InterruptNotPending,
    LockLost,
    LockTimeout,
    PayloadValidationError,
    ReactorflowError,
    ReactorNotDeclared,
    RunNotFound,
    RunStateError,
    StorageError,
)
from reactorflow.jsonforms import dumps
from reactorflow.web.auth import Unauthorized

log = logging.getLogger("reactorflow.web")

STATUS_OF: tuple[tuple[type[Exception], int], ...] = (
    (Unauthorized, 401),
    (RunNotFound, 404),
    (RunStateError, 409), (AlreadyResumed, 409), (InterruptNotPending, 409),
    (InterruptExpired, 409), (LockTimeout, 409), (CorrelationConflict, 409),
    (ReactorNotDeclared, 409), (LockLost, 409),
    (PayloadValidationError, 422), (InputValidationError, 422),
    (StorageError, 503),  # the server's storage failed (unreachable, full, refusing ...)
)
"""The status of each error, first match wins (an unlisted `ReactorflowError` is 422)."""


class BadRequest(ReactorflowError):
    """The request itself is malformed: a body that is not the expected JSON, a bad query."""


class JSON(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return dumps(content)


def error_response(exc: Exception) -> JSON:
    """`{"error": type, "message": ...}` with the status code the error maps to."""
    code = next((code for kind, code in STATUS_OF if isinstance(exc, kind)), None)
    if code is None:
        if isinstance(exc, ReactorflowError):
            code = 422  # a bad body or bad options (a status, a limit, a cursor), named
        else:
            log.exception("reactorflow.web.error")
            return JSON({"error": "InternalError", "message": "internal error; see the server "
                         "log"}, status_code=500)
    headers = {"WWW-Authenticate": "Bearer"} if code == 401 else None
    return JSON({"error": type(exc).__name__, "message": str(exc)}, status_code=code,
                headers=headers)
