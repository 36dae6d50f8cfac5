"""What a worker checks of a job before it acts on it. A job comes off a broker that anything
with access to it can write to, so it is checked twice:

* `malformed`: its fields, before any storage call: ids well-formed, indexes and counts within
  range, sizes bounded (a forged index must never reach a storage script);
* `disowned`: its identity against the run's record (storage is the truth): the run exists and
  is of the job's reactor.

A job that fails either is dropped and logged (`drop`): it never fails, nor writes to, a run.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, assert_never

from reactorflow.definition.checks import REACTOR_NAME, STEP_NAME
from reactorflow.definition.specs import MAX_CHUNK
from reactorflow.errors import shown
from reactorflow.records import ElementArgs
from reactorflow.runtime.engine.job_queue import Job, JobKind
from reactorflow.storage.contract.maps import MAX_ELEMENTS

if TYPE_CHECKING:
    from reactorflow.storage.contract.storage import Storage

log = logging.getLogger("reactorflow.worker")

MAX_ID_LENGTH = 1024
"""The longest run id, reactor name or step key a job may carry."""
MAX_SNOOZES = 2**31
"""A job's snooze count is below this."""
MAX_HEADERS = 32
"""The most middleware headers a job may carry..."""
MAX_HEADER_CHARS = 8192
"""...and their names and values, in characters, all together."""


def malformed(job: Job) -> str | None:
    """What is wrong with the job's fields (naming the field), or None when they are well-formed.
    Needs no storage."""
    return (_run_id(job.run_id) or _text("reactor", job.reactor, REACTOR_NAME.match)
            or _step(job) or _whole("index", job.index, _index_limit(job.kind))
            or _count(job)
            or _whole("snoozes", job.snoozes, MAX_SNOOZES) or bad_headers(job.headers)
            or _version(job))


def _version(job: Job) -> str | None:
    if isinstance(job.version, bool) or not isinstance(job.version, int) or not (
            1 <= job.version < MAX_SNOOZES):
        return f"version {job.version!r} is not a whole number >= 1"
    if isinstance(job.refused, bool) or not isinstance(job.refused, int | float) or not (
            0 <= job.refused < 1e12):
        return f"refused {job.refused!r} is not a time"
    return None


def bad_headers(headers: object) -> str | None:
    """What is wrong with a job's middleware headers, or None (none at all is fine)."""
    if headers is None:
        return None
    if not isinstance(headers, Mapping):
        return f"headers is a {type(headers).__name__}, not a mapping"
    if len(headers) > MAX_HEADERS:
        return f"headers has {len(headers)} entries (at most {MAX_HEADERS})"
    size = 0
    for name, value in headers.items():
        if not isinstance(name, str) or not isinstance(value, str):
            return "headers holds a name or value that is not text"
        size += len(name) + len(value)
    if size > MAX_HEADER_CHARS:
        return f"headers holds {size} characters (at most {MAX_HEADER_CHARS})"
    return None


async def disowned(storage: Storage, job: Job) -> str | None:
    """Why the run's record disagrees with the job (the run is gone, or of another reactor),
    or None when it agrees. One read of the run's head.

    Raises:
        StorageError: the storage failed (a corrupt head is `CorruptRecord`).
    """
    head = await storage.load_head(job.run_id)
    if head is None:
        return "no such run (it expired, or never existed)"
    if head.reactor != job.reactor:
        return f"the run belongs to reactor {shown(head.reactor)}, not {shown(job.reactor)}"
    return None


def foreign_element(job: Job, shared: ElementArgs) -> str | None:
    """Why an element (or undo) job disagrees with its map's shared job data (written by the
    run's owner: the truth), or None: another reactor, or an index past the map's end."""
    if shared.reactor and shared.reactor != job.reactor:
        return f"the run belongs to reactor {shown(shared.reactor)}, not {_shown(job.reactor)}"
    if job.index + job.count > shared.count:
        return (f"map {_shown(job.step)} has {shared.count} elements, not "
                f"{job.index + job.count}")
    return None


def _count(job: Job) -> str | None:
    """An element job carries 1 to `MAX_CHUNK` consecutive elements within `MAX_ELEMENTS`;
    every other job carries one."""
    match job.kind:
        case JobKind.ELEMENT:
            problem = _whole("count", job.count, MAX_CHUNK + 1)
            if problem is None and job.count < 1:
                return f"count {job.count} is out of range (1 to {MAX_CHUNK})"
            if problem is None and job.index + job.count > MAX_ELEMENTS:
                return f"count {job.count} runs past the last element index ({MAX_ELEMENTS - 1})"
            return problem
        case JobKind.RUN | JobKind.UNIT | JobKind.UNDO:
            return None if job.count == 1 else f"count {_shown(job.count)} on a {job.kind} job"
        case _:
            assert_never(job.kind)


def drop(job: Job, reason: str) -> None:
    """Log that `job` was dropped, and why (the job's own fields shown quoted and cut short:
    they may be anything)."""
    log.error("reactorflow.job.dropped kind=%s run_id=%s reactor=%s step=%s index=%s: %s; "
              "the job was dropped and nothing was written", str(job.kind),
              _shown(job.run_id), _shown(job.reactor), _shown(job.step), _shown(job.index),
              reason)


def _shown(value: Any) -> str:
    return shown(value) if isinstance(value, str) else shown(repr(value))


def _run_id(value: object) -> str | None:
    problem = _text("run_id", value, None)
    if problem is None and ("{" in str(value) or "}" in str(value)):
        return f"run_id {_shown(value)} holds a brace (no run id does)"
    return problem


def _text(name: str, value: object, pattern: Any) -> str | None:
    if not isinstance(value, str):
        return f"{name} is a {type(value).__name__}, not text"
    if not value or len(value) > MAX_ID_LENGTH or not value.isprintable():
        return (f"{name} {_shown(value)} is empty, longer than {MAX_ID_LENGTH} characters or "
                "holds control characters")
    if pattern is not None and not pattern(value):
        return f"{name} {_shown(value)} is not a reactor name"
    return None


def _step(job: Job) -> str | None:
    match job.kind:
        case JobKind.RUN:
            return None if job.step == "" else f"step {_shown(job.step)} on a run job"
        case JobKind.UNIT | JobKind.ELEMENT | JobKind.UNDO:
            problem = _text("step", job.step, None)
            if problem is None and not all(STEP_NAME.match(p) for p in job.step.split(".")):
                return f"step {_shown(job.step)} is not a step key"
            return problem
        case _:
            assert_never(job.kind)


def _index_limit(kind: JobKind) -> int:
    """The bound of a job's index: an element's index for a map job, else it is always 0."""
    match kind:
        case JobKind.ELEMENT | JobKind.UNDO:
            return MAX_ELEMENTS
        case JobKind.RUN | JobKind.UNIT:
            return 1
        case _:
            assert_never(kind)


def _whole(name: str, value: object, limit: int) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return f"{name} is a {type(value).__name__}, not a whole number"
    if not 0 <= value < limit:
        return f"{name} {value} is out of range (0 to {limit - 1})"
    return None
