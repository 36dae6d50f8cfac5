"""Bulk operations (api.md §16): one operator action on every run a filter selects.

The algorithm, in order:

1. `selection(...)` checks the filter (a known status, times that parse, a whole version) and
   refuses an empty one unless `all_runs` (`BulkSelectionError`, naming the field).
2. `select` pages through the runs (`matching`: the status and reactor indexes of
   `lookup.list_runs`, or the correlation id's entry) and keeps those the rest of the filter
   admits (`admits`). Reading writes nothing: a dry run stops here.
3. `apply` acts on each selected run, WORKERS at a time (`fanout.each`): each outcome is
   reported as it comes, and a refusal is that run's outcome, never the end of the others.
   Re-running is safe: a cancelled run asked to cancel is ok as it is, a run on the newest
   version asked to migrate too, and a run that some run's `retried_from` names was retried
   already, so `retry` names that run instead of starting another.
"""

from __future__ import annotations

import enum
import re
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import msgspec

from reactorflow import clock, config, records
from reactorflow.definition import registry
from reactorflow.errors import BulkSelectionError, ReactorflowError, StorageError
from reactorflow.runtime.ops import fanout, inventory, lookup
from reactorflow.runtime.ops.snapshots import build_summaries
from reactorflow.snapshot import RunSummary
from reactorflow.status import Status

if TYPE_CHECKING:
    from reactorflow.definition.reactor import Reactor

WORKERS = 8
"""Runs acted on at a time."""
PAGE = lookup.MAX_PAGE
"""Runs read per `list_runs` call while selecting."""


class Action(enum.Enum):
    """What a bulk operation does to each selected run."""

    CANCEL = "cancel"
    UNDO = "undo"
    RETRY = "retry"
    RESUME = "resume"
    RETRY_STEP = "retry-step"
    MIGRATE = "migrate"


ACTIONS = tuple(a.value for a in Action)


@dataclass(frozen=True, slots=True)
class Selection:
    """Which runs a bulk operation acts on. Every field given must hold (None: any); `since`
    and `until` are creation times (Unix time, `since` inclusive, `until` exclusive)."""

    reactor: str | None = None
    status: Status | None = None
    since: float | None = None
    until: float | None = None
    error_type: str | None = None
    version: int | None = None
    correlation_id: str | None = None
    idempotency_key: str | None = None
    ids: frozenset[str] | None = None  # only these runs (the dashboard's selected rows)

    @property
    def empty(self) -> bool:
        return all(getattr(self, name) is None for name in self.__slots__)

    def admits(self, run: RunSummary) -> bool:
        """Whether the run (its summary) is one this selection names."""
        return ((self.reactor is None or run.reactor == self.reactor)
                and (self.status is None or run.status is self.status)
                and (self.since is None or run.created_at >= self.since)
                and (self.until is None or run.created_at < self.until)
                and (self.error_type is None
                     or (run.error is not None and run.error.type == self.error_type))
                and (self.version is None or run.version == self.version)
                and (self.ids is None or run.id in self.ids))


_RELATIVE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


def moment(text: str | float | None, field: str) -> float | None:
    """A time given to a filter as Unix time: `2h` (ago: s, m, h, d or w), an ISO 8601 time
    (a time without an offset is UTC), or a number (Unix time).

    Raises:
        BulkSelectionError: it is none of these (naming `field`).
    """
    if text is None or text == "":
        return None
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return float(text)
    if not isinstance(text, str):
        raise BulkSelectionError(f"{field}={text!r}: give a time such as 2h or "
                                 "2025-01-31T12:00:00Z", field=field)
    relative = _RELATIVE.match(text)
    if relative:
        return clock.now() - float(relative.group(1)) * _UNITS[relative.group(2)]
    try:
        at = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise BulkSelectionError(
            f"{field}={text!r}: not a time; give an age such as 30m, 2h or 7d, or an ISO 8601 "
            "time such as 2025-01-31T12:00:00Z", field=field) from None
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return at.timestamp()


def selection(*, reactor: str | None = None, status: str | None = None,
              since: str | float | None = None, until: str | float | None = None,
              error_type: str | None = None, version: int | str | None = None,
              correlation_id: str | None = None, idempotency_key: str | None = None,
              ids: Sequence[str] | None = None, all_runs: bool = False) -> Selection:
    """The checked selection of a bulk operation (see the module).

    Args:
        reactor: Only runs of this reactor.
        status: Only runs in this status (an `rf.Status` value).
        since: Only runs created at or after this time (`moment`).
        until: Only runs created before this time (`moment`).
        error_type: Only runs whose error is of this type (its class name).
        version: Only runs on this version of their reactor.
        correlation_id: Only the run this correlation id names.
        idempotency_key: Only the run started with this idempotency key.
        ids: Only these runs (by id).
        all_runs: Allow a selection with no filter: every run.

    Raises:
        BulkSelectionError: a bad value, or no filter without `all_runs` (naming the field).
    """
    for name, text in (("reactor", reactor), ("error_type", error_type),
                       ("correlation_id", correlation_id), ("idempotency_key", idempotency_key)):
        if text is not None and (not isinstance(text, str) or not text):
            raise BulkSelectionError(f"{name}={text!r}: give a non-empty string", field=name)
    wanted: Status | None = None
    if status is not None:
        try:
            wanted = Status(status)
        except ValueError:
            raise BulkSelectionError(
                f"status={status!r}: not a status; use one of "
                f"{', '.join(s.value for s in Status)}", field="status") from None
    number: int | None = None
    if version is not None:
        try:
            number = int(version)
        except (TypeError, ValueError):
            number = 0
        if isinstance(version, bool) or number < 1 or str(number) != str(version).strip():
            raise BulkSelectionError(f"version={version!r}: give a whole number from 1",
                                     field="version")
    if ids is not None and (isinstance(ids, str) or not isinstance(ids, Sequence) or not all(
            isinstance(i, str) and i for i in ids)):
        raise BulkSelectionError(f"ids={ids!r}: give a list of run ids", field="ids")
    chosen = Selection(reactor or None, wanted, moment(since, "since"), moment(until, "until"),
                       error_type or None, number, correlation_id or None,
                       idempotency_key or None, None if ids is None else frozenset(ids))
    if chosen.empty and not all_runs:
        raise BulkSelectionError(
            "a bulk operation needs a filter (reactor, status, since, until, error type, "
            "version, correlation id, idempotency key or run ids); to act on every stored "
            'run, say so with --all (the API: "all": true)', field="filter")
    return chosen


async def matching(chosen: Selection) -> AsyncGenerator[list[RunSummary], None]:
    """The runs `chosen` names, a page at a time. Writes nothing.

    Raises:
        StorageError: the storage failed (`StorageConnectionError`: it cannot be reached).
    """
    storage = config.current_storage()
    if chosen.ids is not None:
        heads = [head for run_id in sorted(chosen.ids)
                 if (head := await storage.load_head(run_id)) is not None]
        yield [run for run in build_summaries(heads) if chosen.admits(run)]
        return
    cursor: str | None = None
    while True:  # (the indexes of `list_runs`; `admits` checks each row again)
        page = await lookup.list_runs(
            reactor=chosen.reactor, status=chosen.status, limit=PAGE, cursor=cursor,
            since=_aware(chosen.since), until=_aware(chosen.until),
            correlation_id=chosen.correlation_id, idempotency_key=chosen.idempotency_key,
            version=chosen.version, error_type=chosen.error_type)
        yield [run for run in page.runs if chosen.admits(run)]
        if page.next_cursor is None:
            return
        cursor = page.next_cursor


def _aware(at: float | None) -> datetime | None:
    return None if at is None else datetime.fromtimestamp(at, UTC)


async def select(chosen: Selection,
                 progress: Callable[[int], None] | None = None) -> list[RunSummary]:
    """Every run `chosen` names, newest first. Writes nothing.

    Args:
        chosen: The selection (`selection`).
        progress: Called with the number of runs found so far, after each page.

    Raises:
        StorageError: the storage failed (`StorageConnectionError`: it cannot be reached).
    """
    found: list[RunSummary] = []
    async with aclosing(matching(chosen)) as pages:
        async for page in pages:
            found += page
            if progress is not None:
                progress(len(found))
    return found


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a bulk operation did with one run: `ok`, the run's `status` as it was left (a
    retry: the new run's), the refusal's one-line `error` and type, and for a retry the new
    run's id (`retried_as`; a run retried before names the run that retry started)."""

    id: str
    ok: bool
    status: str
    error: str | None = None
    error_type: str | None = None
    retried_as: str | None = None
    note: str | None = None

    def form(self) -> dict[str, object]:
        """The outcome as JSON (`{"id", "ok", "status", "error", ...}`)."""
        shown: dict[str, object] = {"id": self.id, "ok": self.ok, "status": self.status,
                                    "error": self.error}
        if self.error_type is not None:
            shown["error_type"] = self.error_type
        if self.retried_as is not None:
            shown["retried_as"] = self.retried_as
        if self.note is not None:
            shown["note"] = self.note
        return shown


async def retried(reactors: Sequence[str]) -> dict[str, str]:
    """Every run of these reactors that a retry started, by the id of the run it retried (the
    `retried_from` of each stored run's meta). Writes nothing.

    Raises:
        StorageError: the storage failed (`StorageConnectionError`: it cannot be reached).
    """
    storage = config.current_storage()
    found: dict[str, str] = {}
    for name in reactors:
        cursor: str | None = None
        while True:
            page = await storage.list_runs(name, None, PAGE, cursor)
            for head in page.heads:
                try:
                    origin = records.decode_meta(head.meta).retried_from
                except (msgspec.DecodeError, msgspec.ValidationError, ReactorflowError):
                    continue
                if origin is not None:
                    found.setdefault(origin, head.run_id)
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
    return found


async def _act(action: Action, reactor: Reactor, run: RunSummary, step: str | None,
               retries: dict[str, str]) -> Outcome:
    """One run's action (a refusal raises, `apply` reports it)."""
    run_id = run.id
    match action:
        case Action.CANCEL:
            if run.status is Status.CANCELLED:
                return Outcome(run_id, True, run.status.value, note="cancelled already")
            return _done(run_id, await reactor.cancel(run_id))
        case Action.UNDO:
            return _done(run_id, await reactor.undo(run_id))
        case Action.RESUME:
            return _done(run_id, await reactor.resume(run_id))
        case Action.RETRY_STEP:
            assert step is not None  # (checked by `apply`)
            return _done(run_id, await reactor.retry_step(
                run_id, tuple(step.split("/")) if "/" in step else step))
        case Action.RETRY:
            before = retries.get(run_id)
            if before is not None:
                return Outcome(run_id, True, run.status.value, retried_as=before,
                               note=f"retried already, as {before}")
            new = await reactor.retry(run_id)
            retries[run_id] = new.id
            return Outcome(run_id, True, new.status.value, retried_as=new.id)
        case Action.MIGRATE:
            moved = await inventory.migrate_one(reactor, run_id)
            if moved.error is not None:
                raise moved.error
            return Outcome(run_id, True, run.status.value,
                           note=(f"on version {moved.version} already" if moved.already
                                 else f"migrated to version {moved.version}"))


def _done(run_id: str, after: object) -> Outcome:
    status = getattr(after, "status", None)
    return Outcome(run_id, True, status.value if isinstance(status, Status) else str(status))


async def apply(action: Action | str, runs: Sequence[RunSummary],
                report: Callable[[Outcome], None], *, step: str | None = None) -> None:
    """Act on each run, WORKERS at a time; `report` gets each outcome as it comes. A refusal
    (the run's status does not allow it, its reactor is not declared here, a corrupt record...)
    is that run's outcome and the others go on.

    Args:
        action: An `Action` (or its value).
        runs: The runs (`select`).
        report: Called with each run's `Outcome`.
        step: The step of `retry-step` (a nested one as `a/b`).

    Raises:
        BulkSelectionError: an unknown action, or `retry-step` without a step.
        StorageError: the storage cannot be reached; the runs not reported were left as they
            were.
    """
    chosen = action_of(action)
    if chosen is Action.RETRY_STEP and not step:
        raise BulkSelectionError("retry-step needs the step to run again (--step STEP; the "
                                 'API: "step")', field="step")
    retries = (await retried(sorted({run.reactor for run in runs}))
               if chosen is Action.RETRY else {})

    async def one(run: RunSummary) -> Outcome:
        try:
            reactor = (registry.lookup(run.reactor) if chosen is Action.MIGRATE
                       else await lookup.declared_reactor(run.id))
            if reactor is None:
                raise BulkSelectionError(
                    f"run {run.id}: no module loaded declares reactor {run.reactor!r}",
                    field="reactor")
            return await _act(chosen, reactor, run, step, retries)
        except StorageError as exc:
            if exc.transient:
                raise
            return _refused(run, exc)
        except ReactorflowError as exc:
            return _refused(run, exc)

    await fanout.each(runs, one, report, WORKERS)


def _refused(run: RunSummary, exc: ReactorflowError) -> Outcome:
    status = getattr(exc, "status", None)
    shown = status.value if isinstance(status, Status) else (
        status if isinstance(status, str) else run.status.value)
    return Outcome(run.id, False, shown, error=str(exc).splitlines()[0] if str(exc) else
                   type(exc).__name__, error_type=type(exc).__name__)


def action_of(action: Action | str) -> Action:
    """The `Action` named (`cancel`, `undo`, `retry`, `resume`, `retry-step`, `migrate`).

    Raises:
        BulkSelectionError: no such action.
    """
    if isinstance(action, Action):
        return action
    try:
        return Action(action)
    except ValueError:
        raise BulkSelectionError(f"action={action!r}: use one of {', '.join(ACTIONS)}",
                                 field="action") from None
