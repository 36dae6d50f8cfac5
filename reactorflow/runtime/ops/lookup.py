"""Reading runs without their `Reactor` object: `rf.get_run` and `rf.list_runs`.

A run's reactor is named in its stored head, its version in its meta. When that version of the
reactor is declared in this process its plan decodes the inputs and the value into their
declared types; otherwise the snapshot is built from the records alone (inputs as plain data,
every step of the graph stored with the run listed, no value), so any run stays readable by
tools that do not import the application's modules, or not that version's.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from reactorflow import config, records
from reactorflow.definition import registry
from reactorflow.definition.graph import Plan, plan_for
from reactorflow.errors import ReactorflowError, ReactorNotDeclared, RunNotFound
from reactorflow.protection.resolve import stored_keys
from reactorflow.runtime.engine.map_reads import with_map_value
from reactorflow.runtime.ops import search
from reactorflow.runtime.ops.snapshots import build_run
from reactorflow.snapshot import Run, RunPage
from reactorflow.status import Status

if TYPE_CHECKING:
    from reactorflow.definition.reactor import Reactor

MAX_PAGE = search.MAX_PAGE


def plan_or_none(reactor: Reactor | None) -> Plan | None:
    """The reactor's compiled plan; None when there is no reactor or its graph is invalid."""
    if reactor is None:
        return None
    try:
        return plan_for(reactor)
    except ReactorflowError:
        return None


def run_reactor(name: str, meta: bytes) -> Reactor | None:
    """The reactor of the version a stored run is on (its `meta`'s), when this process declares
    that version: a run is read with its own version's graph and types, never the newest's (a
    version no module declares is read from the graph stored with the run)."""
    return run_reactor_version(name, records.meta_version(meta))


def run_reactor_version(name: str, version: int) -> Reactor | None:
    """Reactor `name` at `version` (a run's), when this process declares it."""
    return registry.lookup(name, version)


async def get_run(run_id: str) -> Run:
    """The snapshot of any run, whatever its reactor.

    Args:
        run_id: the run's id (`run.id`).

    Raises:
        RunNotFound: no such run (a wrong id, or it expired after its retention period).
        CorruptRecord: the run's stored state cannot be decoded.
    """
    if not isinstance(run_id, str) or not run_id:
        raise RunNotFound(str(run_id))
    storage = config.current_storage()
    stored = await storage.load_run(run_id, history=True)
    if stored is None:
        raise RunNotFound(run_id)
    plan = plan_or_none(run_reactor(stored.head.reactor, stored.head.meta))
    keys = await stored_keys(storage, run_id, stored.head.meta)
    return await with_map_value(build_run(plan, stored, stored.history or [], keys=keys), plan,
                                storage, keys=keys)


async def declared_reactor(run_id: str) -> Reactor:
    """The reactor of a stored run, declared in this process (to steer the run).

    Raises:
        RunNotFound: no such run.
        ReactorNotDeclared: the run's reactor is not declared in this process.
    """
    head = await config.current_storage().load_head(run_id)
    if head is None:
        raise RunNotFound(run_id)
    reactor = registry.lookup(head.reactor)
    if reactor is None:
        raise ReactorNotDeclared(run_id, head.reactor)
    return reactor


async def list_runs(*, reactor: str | None = None, status: str | Status | None = None,
                    limit: int = 50, cursor: str | None = None,
                    since: datetime | None = None, until: datetime | None = None,
                    correlation_id: str | None = None, idempotency_key: str | None = None,
                    version: int | None = None, error_type: str | None = None) -> RunPage:
    """Runs newest first, a page at a time, across every reactor unless `reactor` names one.

    Read from the storage's indexes (never a scan), so the first page costs the same however
    many runs are stored: the creation-ordered indexes for `reactor`, `status` and
    `since`/`until`; the first-wins mappings for `correlation_id` and `idempotency_key` (a
    correlation id leads to its run from its interrupt until the run ends; an idempotency key
    as long as the run lives). `version` and `error_type` filter the rows read (not indexed:
    such a page may hold fewer than `limit` runs while `next_cursor` is not None).

    Args:
        reactor: only the runs of the reactor with this name (None: every reactor).
        status: only runs in this status (an `rf.Status` or its value).
        limit: runs per page, 1 to 1000.
        cursor: the `next_cursor` of the previous page (None for the first page).
        since: only runs created at or after this aware datetime.
        until: only runs created before this aware datetime.
        correlation_id: only the run this interrupt correlation id leads to.
        idempotency_key: only the run started with this idempotency key.
        version: only runs on this version of their reactor.
        error_type: only failed runs whose error is of this type (its class name).

    Raises:
        ReactorflowError: an unknown status, a naive or misordered `since`/`until`, a filter of
            the wrong type, a limit out of range, or a cursor this library did not return.
    """
    wanted = search.run_filter(
        reactor=reactor, status=status, since=since, until=until,
        correlation_id=correlation_id, idempotency_key=idempotency_key, version=version,
        error_type=error_type)
    search.check_page(limit)
    return await search.find_runs(wanted, limit, cursor)
