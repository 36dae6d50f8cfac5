"""Opening the error text of records (`ErrorRecord`, `RunError` and its `RollbackFailure`s),
sealed by `sealing` (their type and module stay clear: search filters by error type without
keys)."""

from __future__ import annotations

import msgspec

from reactorflow.errors import KeyUnavailable
from reactorflow.protection.fields import ERROR
from reactorflow.protection.keys import ENCRYPTED, ERASED, RunKeys
from reactorflow.records import ErrorRecord, RollbackFailure, RunError, StepRecord


def open_error(keys: RunKeys, record: ErrorRecord, *, shown: bool = False) -> ErrorRecord:
    """`record` with its text opened; `shown`: a text without its key reads `"<encrypted>"`.

    Raises:
        KeyUnavailable: not `shown`, and no key for it.
        CorruptRecord: its text fails authentication.
    """
    read = keys.shown_text if shown else keys.open_text
    return msgspec.structs.replace(record, message=read(ERROR, record.message),
                                   traceback=read(ERROR, record.traceback))


def open_run_error(keys: RunKeys, error: RunError, *, shown: bool = False) -> RunError:
    """A run's error with its text opened (see `open_error`).

    Raises:
        KeyUnavailable: not `shown`, and no key for it.
        CorruptRecord: its text fails authentication.
    """
    read = keys.shown_text if shown else keys.open_text
    return RunError(error.step, error.type, read(ERROR, error.message),
                    read(ERROR, error.traceback),
                    [RollbackFailure(f.step, f.kind, read(ERROR, f.message), f.type)
                     for f in error.rollback_failures])


def opened_errors(keys: RunKeys, record: StepRecord) -> StepRecord:
    """A step record read back with its error texts opened for a reader (`"<encrypted>"`
    without the key), for messages built from them (never to be written back).

    Raises:
        CorruptRecord: a text fails authentication.
    """
    if record.error is None and record.rollback_error is None:
        return record
    return msgspec.structs.replace(
        record, error=None if record.error is None else open_error(keys, record.error, shown=True),
        rollback_error=None if record.rollback_error is None
        else open_error(keys, record.rollback_error, shown=True))


def placeholder(error: KeyUnavailable) -> str:
    """What a reader shows for a value it holds no key for."""
    return ERASED if error.erased else ENCRYPTED
