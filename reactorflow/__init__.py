"""reactorflow: durable, saga-style workflows on asyncio.

`import reactorflow as rf`; every public name is re-exported here.

What you may import (the public surface; `PUBLIC_MODULES`): `reactorflow` itself,
`reactorflow.sync` (`rf.sync`: the top-level coroutines for sync code), `reactorflow.testing`
(the test kit), `reactorflow.web` (the dashboard and HTTP API, the `web`
extra) and `reactorflow.otel` (tracing, the `otel` extra). Every other module
(`reactorflow.definition.*`, `reactorflow.runtime.*`, `reactorflow.storage.*`,
`reactorflow.workers.*`, `reactorflow.cli.*`, ...) is internal: it may move or change in any
release; reach its public names through `reactorflow`.
"""

from reactorflow import sync
from reactorflow.blockers import Blocker, BlockerKind
from reactorflow.config import Settings, configure
from reactorflow.definition import runs as _runs
from reactorflow.definition import sync as _sync
from reactorflow.definition.gates import Lock, OrderedLock, Period, RateLimit, Semaphore
from reactorflow.definition.handles import MapStep, Step
from reactorflow.definition.reactor import Reactor
from reactorflow.definition.schedules import Schedule
from reactorflow.errors import (
    AlreadyResumed,
    ArgumentError,
    AsyncUnitFailed,
    AsyncWaitTimeout,
    BrokerError,
    ConfigurationError,
    CorrelationConflict,
    CorruptRecord,
    DefinitionChanged,
    DefinitionError,
    GateBusy,
    GateDeadlock,
    GateKeyError,
    Halt,
    InputValidationError,
    InterruptExpired,
    InterruptNotPending,
    InvalidSleep,
    KeyUnavailable,
    LockLost,
    LockTimeout,
    MigrationError,
    NotInLine,
    NotPaused,
    PayloadValidationError,
    ReactorflowError,
    ReactorNotDeclared,
    RecordedError,
    Refused,
    ResultValidationError,
    RunNotFound,
    RunRecordGone,
    RunStateError,
    SerializationError,
    StepNotFailed,
    StepNotFound,
    StepTimeout,
    StorageConnectionError,
    StorageError,
    StorageNotReady,
    StoragePoolExhausted,
    StorageReplyError,
    SyncInEventLoop,
    UnknownInterrupt,
    ValidationFailed,
    WaitTimeout,
)
from reactorflow.mapresults import MapResults
from reactorflow.markers import Input, Outcome, Redacted, Result, StepContext
from reactorflow.middleware import GateEvent, Middleware, RunEvent, StepEvent, TimerEvent
from reactorflow.protection import EncryptionCodec
from reactorflow.protection import resolve as _resolve
from reactorflow.records import Erasure, Event, PausedBy, RollbackFailure, RunError, WorkerInfo
from reactorflow.retry import Retry
from reactorflow.runtime.engine import job_queue as _queue
from reactorflow.runtime.gates.operate import ordered_peek, ordered_reset, ordered_skip
from reactorflow.runtime.ops.explain import explain
from reactorflow.runtime.ops.lookup import get_run, list_runs
from reactorflow.runtime.ops.migrations import Migration
from reactorflow.runtime.ops.payloads import validate_payload
from reactorflow.runtime.ops.service import RUNTIME as _RUNTIME
from reactorflow.runtime.services import portal as _portal
from reactorflow.runtime.services.heartbeats import list_workers
from reactorflow.runtime.services.scheduler import schedule_once
from reactorflow.runtime.services.sweeper import SweepReport, sweep_once
from reactorflow.runtime.services.timers import fire_timers
from reactorflow.runtime.subjects import data_keys as _data_keys
from reactorflow.runtime.subjects.forget import forget_subject, list_erasures
from reactorflow.snapshot import Run, RunPage, RunSummary, StepState
from reactorflow.status import EventKind, HaltReason, HandlerKind, Status, StepStatus
from reactorflow.storage.contract.storage import Storage
from reactorflow.storage.contract.values import OrderedLine
from reactorflow.storage.memory.storage import MemoryStorage
from reactorflow.storage.redis.storage import RedisStorage
from reactorflow.workers.queue import current_queue as _current_queue

# The wiring of the layers, from above: the declarations' run methods use the runtime, and the
# runtime's job queue is the Dramatiq layer's; their sync twins (`reactor.sync`) block on the
# runtime's event-loop thread; a run's keys come from the subjects layer (its data key).
_runs.bind(_RUNTIME)
_resolve.set_resolver(_data_keys.resolve)  # a run of a subject: its subject's data key
_sync.bind(_portal.call)
_queue.register(_current_queue)

__version__ = "0.1.0"

PUBLIC_MODULES = ("reactorflow", "reactorflow.otel", "reactorflow.sync", "reactorflow.testing",
                  "reactorflow.web")
"""The modules users may import; every other module of the package is internal."""

__all__ = [
    "AlreadyResumed",
    "ArgumentError",
    "AsyncUnitFailed",
    "AsyncWaitTimeout",
    "BrokerError",
    "Blocker",
    "BlockerKind",
    "ConfigurationError",
    "CorrelationConflict",
    "CorruptRecord",
    "DefinitionChanged",
    "Migration",
    "MigrationError",
    "DefinitionError",
    "EncryptionCodec",
    "Event",
    "EventKind",
    "GateBusy",
    "GateDeadlock",
    "GateEvent",
    "GateKeyError",
    "Halt",
    "HaltReason",
    "HandlerKind",
    "Input",
    "InputValidationError",
    "InterruptExpired",
    "InvalidSleep",
    "KeyUnavailable",
    "InterruptNotPending",
    "Lock",
    "LockLost",
    "LockTimeout",
    "MapResults",
    "MapStep",
    "MemoryStorage",
    "Middleware",
    "NotInLine",
    "NotPaused",
    "OrderedLine",
    "OrderedLock",
    "Outcome",
    "PausedBy",
    "PayloadValidationError",
    "Period",
    "RateLimit",
    "Reactor",
    "ReactorNotDeclared",
    "ReactorflowError",
    "Refused",
    "RecordedError",
    "Redacted",
    "RedisStorage",
    "Result",
    "Retry",
    "RollbackFailure",
    "Run",
    "RunError",
    "RunEvent",
    "RunNotFound",
    "RunRecordGone",
    "RunPage",
    "RunStateError",
    "ResultValidationError",
    "StepNotFailed",
    "StepNotFound",
    "RunSummary",
    "Schedule",
    "Semaphore",
    "SerializationError",
    "Settings",
    "Status",
    "Step",
    "StepContext",
    "StepEvent",
    "StepState",
    "StepStatus",
    "StepTimeout",
    "Storage",
    "StorageConnectionError",
    "StorageError",
    "StorageNotReady",
    "StoragePoolExhausted",
    "StorageReplyError",
    "SweepReport",
    "SyncInEventLoop",
    "TimerEvent",
    "UnknownInterrupt",
    "ValidationFailed",
    "WaitTimeout",
    "WorkerInfo",
    "__version__",
    "configure",
    "explain",
    "get_run",
    "list_runs",
    "list_workers",
    "list_erasures",
    "forget_subject",
    "Erasure",
    "ordered_peek",
    "ordered_reset",
    "ordered_skip",
    "schedule_once",
    "sweep_once",
    "fire_timers",
    "sync",
    "validate_payload",
]
