"""Finding runs by filter: the page behind `rf.list_runs` (and `reactor.list_runs`).

What is indexed is read from the indexes, never a scan:

- `reactor`, `status`, `since`/`until`: the creation-ordered run indexes (`Storage.list_runs`);
- `correlation_id`, `idempotency_key`: the first-wins mappings (`Storage.find_by_key`), which
  lead to at most one run per reactor, read whatever the number of stored runs.

`version` and `error_type` are not indexed: they filter the rows read from the indexes. A page
read with them reads at most `FILTER_READS` pages of the indexes, so it may hold fewer than
`limit` runs while `next_cursor` is not None (the next page goes on where the reading stopped).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from reactorflow import config
from reactorflow.errors import ReactorflowError
from reactorflow.runtime.ops.snapshots import build_summaries
from reactorflow.snapshot import RunPage, RunSummary
from reactorflow.status import Status
from reactorflow.storage.contract.cursors import decode_cursor, encode_cursor
from reactorflow.storage.contract.storage import Storage
from reactorflow.storage.contract.values import RunHead, RunKey

MAX_PAGE = 1000
HALF_MICROSECOND = 0.5e-6
FILTER_READS = 10
"""Index pages one `list_runs` call reads at most when `version`/`error_type` filter rows."""


@dataclass(frozen=True, slots=True)
class RunFilter:
    """The checked filters of one `list_runs` call (times as Unix seconds)."""

    reactor: str | None = None
    status: Status | None = None
    since: float | None = None
    until: float | None = None
    correlation_id: str | None = None
    idempotency_key: str | None = None
    version: int | None = None
    error_type: str | None = None

    @property
    def by_key(self) -> bool:
        return self.correlation_id is not None or self.idempotency_key is not None

    def keeps(self, row: RunSummary) -> bool:
        """Whether a summary passes the filters the indexes do not apply."""
        if self.status is not None and row.status is not self.status:
            return False
        if self.since is not None and row.created_at < self.since:
            return False
        if self.until is not None and row.created_at >= self.until:
            return False
        if self.version is not None and row.version != self.version:
            return False
        return self.error_type is None or (
            row.error is not None and row.error.type == self.error_type)


def _refuse(field: str, value: object, what: str) -> ReactorflowError:
    return ReactorflowError(f"list_runs({field}={value!r}): {what}")


def _status(status: str | Status | None) -> Status | None:
    if status is None:
        return None
    try:
        return Status(status)
    except ValueError:
        raise _refuse("status", status, "not a status; use one of "
                      + ", ".join(s.value for s in Status)) from None


def _moment(field: str, value: datetime | None) -> float | None:
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise _refuse(field, value, "give an aware datetime (with a time zone), or None")
    if value.tzinfo is None or value.utcoffset() is None:
        raise _refuse(field, value, "a naive datetime; give an aware one (with a time zone, "
                      "e.g. datetime(2026, 5, 1, tzinfo=timezone.utc))")
    # a datetime has microsecond resolution, a stored creation time more: compare them to the
    # microsecond (the creation time rounded), so a run's own `created_at` as a datetime bounds
    # it as written (since inclusive, until exclusive)
    return value.timestamp() - HALF_MICROSECOND


def _text(field: str, value: str | None) -> str | None:
    if value is not None and (not isinstance(value, str) or not value):
        raise _refuse(field, value, "give a non-empty string, or None")
    return value


def run_filter(*, reactor: str | None = None, status: str | Status | None = None,
               since: datetime | None = None, until: datetime | None = None,
               correlation_id: str | None = None, idempotency_key: str | None = None,
               version: int | None = None, error_type: str | None = None) -> RunFilter:
    """Check the filters of a `list_runs` call.

    Raises:
        ReactorflowError: a filter of the wrong type or value (the message names it).
    """
    if reactor is not None and (not isinstance(reactor, str) or not reactor):
        raise _refuse("reactor", reactor, "give a reactor's name, or None")
    if version is not None and (isinstance(version, bool) or not isinstance(version, int)
                                or version < 1):
        raise _refuse("version", version, "give a version number (a whole number from 1)")
    start, end = _moment("since", since), _moment("until", until)
    if start is not None and end is not None and start >= end:
        raise _refuse("until", until, f"not after since={since!r}; no run can match")
    return RunFilter(reactor, _status(status), start, end,
                     _text("correlation_id", correlation_id),
                     _text("idempotency_key", idempotency_key), version,
                     _text("error_type", error_type))


def check_page(limit: int) -> None:
    """Raises `ReactorflowError` for a page size out of range."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise _refuse("limit", limit, f"use a whole number from 1 to {MAX_PAGE}")


async def find_runs(wanted: RunFilter, limit: int, cursor: str | None) -> RunPage:
    """A page of the runs that pass `wanted`, newest first (see the module).

    Raises:
        ReactorflowError: a cursor this library did not return.
        StorageError: the backend failed.
    """
    storage = config.current_storage()
    if wanted.by_key:
        return await _by_key(storage, wanted, limit, cursor)
    status = None if wanted.status is None else wanted.status.value
    rows: list[RunSummary] = []
    unreadable: list[str] = []
    for _ in range(FILTER_READS):
        page = await storage.list_runs(wanted.reactor, status, limit - len(rows), cursor,
                                       since=wanted.since, until=wanted.until)
        summaries = build_summaries(page.heads)
        shown = {summary.id for summary in summaries}
        unreadable += [*page.unreadable,
                       *(head.run_id for head in page.heads if head.run_id not in shown)]
        rows += [row for row in summaries if wanted.keeps(row)]
        cursor = page.next_cursor
        if cursor is None or len(rows) >= limit:
            break
    return RunPage(rows, cursor, unreadable=unreadable)


async def _by_key(storage: Storage, wanted: RunFilter, limit: int,
                  cursor: str | None) -> RunPage:
    """The runs the keys lead to (one per reactor at most), filtered, in one page."""
    found: dict[str, str] | None = None
    for kind, key in ((RunKey.CORRELATION_ID, wanted.correlation_id),
                      (RunKey.IDEMPOTENCY_KEY, wanted.idempotency_key)):
        if key is not None:
            leads = await storage.find_by_key(kind, key, wanted.reactor)
            found = leads if found is None else {
                reactor: run_id for reactor, run_id in found.items()
                if leads.get(reactor) == run_id}
    after = decode_cursor(cursor)
    heads: list[RunHead] = []
    for reactor, run_id in sorted((found or {}).items()):
        head = await storage.load_head(run_id)
        if head is not None and head.reactor == reactor and (
                after is None or (head.created_at, head.run_id) < after):
            heads.append(head)  # else a claim whose claimer died, or a run that expired
    heads.sort(key=lambda head: (head.created_at, head.run_id), reverse=True)
    summaries = build_summaries(heads)
    shown = {summary.id for summary in summaries}
    rows = [row for row in summaries if wanted.keeps(row)]
    more = len(rows) > limit
    rows = rows[:limit]
    return RunPage(rows, encode_cursor(rows[-1].created_at, rows[-1].id) if more else None,
                   unreadable=[head.run_id for head in heads if head.run_id not in shown])


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_RELATIVE = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")


def parse_moment(field: str, text: str, now: datetime) -> datetime:
    """A `--since`/`--until` (or query) value: a duration back from `now` (`30s`, `30m`,
    `2h`, `7d`, `1w`) or an ISO 8601 datetime with a time zone (`2026-05-01T10:00:00Z`).

    Args:
        field: the option or query field the text came from (named in the error).
        text: what the user wrote.
        now: the aware datetime a duration counts back from.

    Raises:
        ReactorflowError: neither form, or an ISO datetime without a time zone.
    """
    spoken = text.strip()
    relative = _RELATIVE.fullmatch(spoken)
    if relative is not None:
        return now - timedelta(seconds=float(relative[1]) * _UNITS[relative[2]])
    try:
        moment = datetime.fromisoformat(spoken.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ReactorflowError(
            f"{field}={text!r}: not a time; give a duration back from now (30m, 2h, 7d) or an "
            "ISO 8601 datetime with a time zone (2026-05-01T10:00:00Z)") from None
    if moment.tzinfo is None:
        raise ReactorflowError(
            f"{field}={text!r}: an ISO datetime without a time zone; add one "
            "(2026-05-01T10:00:00Z or +02:00)")
    return moment
