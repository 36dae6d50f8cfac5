"""The error hierarchy: every error reactorflow raises derives from `ReactorflowError`.

Each error carries structured fields (`run_id`, `step`, `cause` and its own extras) and a message
that says what went wrong and what to do about it. `Halt` is not an error: it is the signal a
step raises to stop its run cleanly.

The classes live in small modules by concern (`core`, `inputs`, `runs`, `storage`, `gates`,
`sync`) and are all imported from here, where they report their module as `reactorflow.errors`
(the name stored in error records and shown in tracebacks).
"""

from __future__ import annotations

from reactorflow.errors.core import (
    SHOWN_ID_LIMIT,
    ArgumentError,
    BulkSelectionError,
    ConfigurationError,
    DefinitionChanged,
    DefinitionError,
    Halt,
    MigrationError,
    ReactorflowError,
    RecordedError,
    Refused,
    SerializationError,
    StepLabel,
    ValidationFailed,
    halt_text,
    shown,
)
from reactorflow.errors.gates import (
    GateBusy,
    GateDeadlock,
    GateKeyError,
    NotInLine,
)
from reactorflow.errors.inputs import (
    InputValidationError,
    PayloadValidationError,
    ResultValidationError,
    UnknownInterrupt,
)
from reactorflow.errors.protection import KeyUnavailable
from reactorflow.errors.runs import (
    AlreadyResumed,
    AsyncUnitFailed,
    AsyncWaitTimeout,
    CorrelationConflict,
    InterruptExpired,
    InterruptNotPending,
    InvalidSleep,
    LockTimeout,
    NotPaused,
    ReactorNotDeclared,
    RunExists,
    RunNotFound,
    RunStateError,
    StepNotFailed,
    StepNotFound,
    StepTimeout,
    WaitTimeout,
    refusal_advice,
)
from reactorflow.errors.storage import (
    CorruptRecord,
    LockLost,
    RunRecordGone,
    StorageConnectionError,
    StorageError,
    StorageNotReady,
    StoragePoolExhausted,
    StorageReplyError,
)
from reactorflow.errors.sync import SyncInEventLoop

__all__ = [
    "AlreadyResumed",
    "ArgumentError",
    "BulkSelectionError",
    "AsyncUnitFailed",
    "AsyncWaitTimeout",
    "ConfigurationError",
    "CorrelationConflict",
    "CorruptRecord",
    "DefinitionChanged",
    "MigrationError",
    "DefinitionError",
    "GateBusy",
    "GateDeadlock",
    "GateKeyError",
    "Halt",
    "InputValidationError",
    "InterruptExpired",
    "InvalidSleep",
    "KeyUnavailable",
    "InterruptNotPending",
    "LockLost",
    "LockTimeout",
    "NotInLine",
    "NotPaused",
    "PayloadValidationError",
    "ReactorNotDeclared",
    "ReactorflowError",
    "RecordedError",
    "Refused",
    "RunExists",
    "RunRecordGone",
    "RunNotFound",
    "RunStateError",
    "ResultValidationError",
    "StepNotFailed",
    "StepNotFound",
    "SHOWN_ID_LIMIT",
    "SerializationError",
    "StepLabel",
    "StepTimeout",
    "StorageConnectionError",
    "StorageError",
    "StorageNotReady",
    "StoragePoolExhausted",
    "StorageReplyError",
    "SyncInEventLoop",
    "UnknownInterrupt",
    "ValidationFailed",
    "WaitTimeout",
    "halt_text",
    "refusal_advice",
    "shown",
]

for _name in __all__:
    _value = globals()[_name]
    if isinstance(_value, type) or callable(_value):
        _value.__module__ = __name__
del _name, _value
