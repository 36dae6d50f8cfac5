"""In-flight runs read in bulk, for the operator's commands around a deploy (api.md §14):
`reactorflow versions` counts them per reactor and stored version, `deploy-check` says of
each what the code of this process would do with it, `runs migrate` moves those of one reactor
and version onto its newest.

The runs are found through the status indexes (`Storage.list_runs`, PAGE heads a call, each
in-flight status in turn; a run that moves to another in-flight status meanwhile is counted
once), and `deploy-check` reads their records PAGE at a time (`Storage.load_runs`, a batch of
runs per round trip on Redis) to classify each with `migrating.dry_run`. Reading writes nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import msgspec

from reactorflow import config, records
from reactorflow.definition import registry
from reactorflow.errors import CorruptRecord, MigrationError, ReactorflowError, StorageError
from reactorflow.runtime.ops import fanout, migrating, migrations
from reactorflow.status import Status

if TYPE_CHECKING:
    from reactorflow.definition.reactor import Reactor
    from reactorflow.storage.contract.storage import Storage
    from reactorflow.storage.contract.values import RunHead, StoredRun

PAGE = 1000
"""Runs a call of `list_runs` (and of `load_runs`) reads."""
STATUSES = tuple(s.value for s in Status if s in migrating.IN_FLIGHT)
"""The statuses of an in-flight run (`migrating.IN_FLIGHT`): running, paused (a sleeping run
too), rolling back, held."""
MIGRATE_WORKERS = 8
"""Runs `migrate_runs` migrates at a time."""

CONTINUES, MIGRATES, STRANDED = "continues", "migrates", "stranded"
VERDICTS = (CONTINUES, MIGRATES, STRANDED)
"""What `deploy-check` says of a run (`migrating.dry_run`'s verdicts)."""
UNREADABLE = ("its record cannot be read ('reactorflow runs show RUN_ID' says why), so no "
              "code can continue it")


@dataclass(frozen=True, slots=True)
class Page:
    """In-flight runs found by one `list_runs` call: their heads, and the ids of those whose
    record cannot be read."""

    heads: list[RunHead]
    unreadable: list[str]


async def in_flight(storage: Storage, reactor: str | None = None) -> AsyncGenerator[Page, None]:
    """Every in-flight run (of `reactor`, or of every reactor), a page at a time; each once.

    Raises:
        StorageError: the storage failed (`StorageConnectionError`: it cannot be reached).
    """
    seen: set[str] = set()
    for status in STATUSES:
        cursor: str | None = None
        while True:
            data = await storage.list_runs(reactor, status, PAGE, cursor)
            heads = [head for head in data.heads if head.run_id not in seen]
            unreadable = [run_id for run_id in data.unreadable if run_id not in seen]
            seen.update(head.run_id for head in heads)
            seen.update(unreadable)
            yield Page(heads, unreadable)
            if data.next_cursor is None:
                break
            cursor = data.next_cursor


# -- reactorflow versions ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StoredVersion:
    """One version of a reactor: its in-flight runs, and whether no loaded module declares it
    while runs of it are in flight (`stranded`)."""

    version: int
    in_flight: int
    stranded: bool
    migrates_to: int | None = None  # stranded, but a declared migration leads on to this


@dataclass(frozen=True, slots=True)
class ReactorVersions:
    """A reactor's declared versions, and each version declared or with runs in flight."""

    reactor: str
    declared: list[int]
    versions: list[StoredVersion]

    @property
    def stranded(self) -> int:
        return sum(v.in_flight for v in self.versions if v.stranded)


@dataclass(frozen=True, slots=True)
class VersionsReport:
    """What `reactorflow versions` shows: every reactor with runs in flight or declared."""

    reactors: list[ReactorVersions]
    unreadable: list[str] = field(default_factory=list)


async def versions(progress: Callable[[int], None] | None = None) -> VersionsReport:
    """Count the in-flight runs of every reactor per stored version (of the current storage),
    beside the versions this process declares. Writes nothing.

    Args:
        progress: called with the number of runs read so far, after each page.

    Raises:
        StorageError: the storage failed (`StorageConnectionError`: it cannot be reached).
    """
    counts: dict[str, Counter[int]] = {}
    unreadable: list[str] = []
    read = 0
    async with aclosing(in_flight(config.current_storage())) as pages:
        async for page in pages:
            for head in page.heads:
                counts.setdefault(head.reactor, Counter())[records.meta_version(head.meta)] += 1
            unreadable += page.unreadable
            read += len(page.heads) + len(page.unreadable)
            if progress is not None:
                progress(read)
    reactors = []
    for name in sorted(set(counts) | set(registry.names())):
        declared = registry.versions(name)
        stored = counts.get(name, Counter())
        rows = []
        for version in sorted(set(declared) | set(stored)):
            stranded = version not in declared and stored[version] > 0
            hooks = migrations.path(name, version) if stranded else []
            rows.append(StoredVersion(version, stored[version], stranded,
                                      hooks[-1].to_version if hooks else None))
        reactors.append(ReactorVersions(name, declared, rows))
    return VersionsReport(reactors, unreadable)


# -- reactorflow deploy-check --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the code of this process would do with one in-flight run (`VERDICTS`), with the
    differences that strand it. `reactor` and `version` are None for a run whose record cannot
    be read."""

    run_id: str
    reactor: str | None
    version: int | None
    verdict: str
    differences: list[str]


async def verdict_of(stored: StoredRun) -> Verdict:
    """`migrating.dry_run` of one stored run, saying so when this process does not declare
    its reactor at all, or cannot read its records. Writes nothing."""
    head = stored.head
    version = records.meta_version(head.meta)
    if not registry.versions(head.reactor):
        return Verdict(head.run_id, head.reactor, version, STRANDED, [
            f"reactor {head.reactor!r} is declared by none of the modules loaded: keep the "
            "module that declares it, or let its runs finish first"])
    try:
        verdict, differences = await migrating.dry_run(stored)
    except (ReactorflowError, msgspec.DecodeError) as exc:  # (its meta, or its graph)
        verdict, differences = STRANDED, [f"its records cannot be read: {exc}"]
    return Verdict(head.run_id, head.reactor, version, verdict, differences)


async def deploy_check(progress: Callable[[int], None] | None = None) -> list[Verdict]:
    """The verdict of every in-flight run of the current storage (see the module): what the
    reactors declared in this process would do with it. Writes nothing.

    Args:
        progress: called with the number of runs classified so far, after each page.

    Raises:
        StorageError: the storage failed (`StorageConnectionError`: it cannot be reached).
    """
    storage = config.current_storage()
    verdicts: list[Verdict] = []
    async with aclosing(in_flight(storage)) as pages:
        async for page in pages:
            verdicts += [Verdict(run_id, None, None, STRANDED, [UNREADABLE])
                         for run_id in page.unreadable]
            verdicts += await classify(page.heads)
            if progress is not None:
                progress(len(verdicts))
    return verdicts


async def classify(heads: Sequence[RunHead],
                   judge: Callable[[StoredRun], Awaitable[Verdict]] = verdict_of
                   ) -> list[Verdict]:
    """`judge` (`verdict_of`: what this process would do) of each of these runs, their
    records read in one `load_runs` call (when one cannot be read, the others one by one: that
    one is stranded, saying why); a run that ended or went since its head was read is left out.
    Writes nothing.

    Raises:
        StorageError: the storage failed (`StorageConnectionError`: it cannot be reached).
    """
    verdicts: list[Verdict] = []
    for head, stored in zip(heads, await _records(heads), strict=True):
        if isinstance(stored, CorruptRecord):
            verdicts.append(Verdict(head.run_id, head.reactor, records.meta_version(head.meta),
                                    STRANDED, [f"its records cannot be read: {stored}"]))
        elif stored is not None and stored.head.status in STATUSES:
            verdicts.append(await judge(stored))
    return verdicts


async def _records(heads: Sequence[RunHead]) -> list[StoredRun | CorruptRecord | None]:
    """The records of each run (one `load_runs` read); when one cannot be read, the others
    are read one by one, and that one's error stands in its place."""
    storage = config.current_storage()
    ids = [head.run_id for head in heads]
    try:
        return list(await storage.load_runs(ids))
    except CorruptRecord:
        found: list[StoredRun | CorruptRecord | None] = []
        for run_id in ids:
            try:
                found.append(await storage.load_run(run_id))
            except CorruptRecord as exc:
                found.append(exc)
        return found


# -- reactorflow runs migrate ---------------------------------------------------------------------


async def on_version(reactor: str, version: int) -> list[RunHead]:
    """The in-flight runs of `reactor` on `version` (of the current storage), oldest listed
    last. Writes nothing.

    Raises:
        StorageError: the storage failed (`StorageConnectionError`: it cannot be reached).
    """
    found: list[RunHead] = []
    async with aclosing(in_flight(config.current_storage(), reactor)) as pages:
        async for page in pages:
            found += [h for h in page.heads if records.meta_version(h.meta) == version]
    return found


async def would_migrate(stored: StoredRun) -> Verdict:
    """What `reactor.migrate` would do with this run, whatever versions this process declares:
    `migrates` (its migration path's dry run fits) or `stranded` (no path leads from its
    version, or the dry run refuses it: the misfits). Writes nothing (`classify` takes it as
    its `judge`)."""
    head = stored.head
    version = records.meta_version(head.meta)
    hooks = migrations.path(head.reactor, version)
    if not hooks:
        return Verdict(head.run_id, head.reactor, version, STRANDED,
                       [f"no migration leads from version {version}"])
    try:
        await migrations.migrated(stored, hooks)
    except MigrationError as exc:
        return Verdict(head.run_id, head.reactor, version, STRANDED,
                       exc.misfits or [str(exc)])
    except CorruptRecord as exc:
        return Verdict(head.run_id, head.reactor, version, STRANDED,
                       [f"its records cannot be read: {exc}"])
    return Verdict(head.run_id, head.reactor, version, MIGRATES, [])


@dataclass(frozen=True, slots=True)
class Outcome:
    """What `migrate_runs` did with one run: `version` is the version it is on now (None when
    refused); `already` when it was on it before (another migration moved it); `error` the
    refusal (`MigrationError`, `DefinitionChanged`, `LockTimeout`, `RunStateError`...)."""

    run_id: str
    version: int | None
    already: bool = False
    error: ReactorflowError | None = None


async def migrate_one(reactor: Reactor, run_id: str) -> Outcome:
    """`reactor.migrate(run_id)` of one run onto the newest declared version of `reactor`:
    `already` when it is on it; a refusal is the outcome's `error`.

    Raises:
        StorageError: the storage failed (`StorageConnectionError`: it cannot be reached).
    """
    newest = registry.newest(reactor)
    head = await config.current_storage().load_head(run_id)
    if head is not None and records.meta_version(head.meta) == newest.version:
        return Outcome(run_id, newest.version, already=True)
    try:
        run = await migrating.migrate(newest, run_id)
    except StorageError:
        raise
    except ReactorflowError as exc:
        return Outcome(run_id, None, error=exc)
    return Outcome(run_id, run.version)


async def migrate_runs(reactor: Reactor, run_ids: Sequence[str],
                       report: Callable[[Outcome], None]) -> None:
    """`await reactor.migrate(run_id)` of each run, MIGRATE_WORKERS at a time; `report` gets
    each outcome as it comes. A refusal is reported and the others go on.

    Raises:
        StorageError: the storage failed (`StorageConnectionError`: it cannot be reached);
            the runs not reported yet were left as they were.
    """
    await fanout.each(run_ids, lambda run_id: migrate_one(reactor, run_id), report,
                      MIGRATE_WORKERS)
