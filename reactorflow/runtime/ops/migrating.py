"""`reactor.migrate(run_id)`: move one in-flight run onto the newest version declared, ahead
of time (api.md §14), and its dry run for `deploy-check`.

In order: read the run's head (its reactor must be the caller's); refuse a settled run; take
the run's lock (waiting up to `lock_wait`, as undo does); read it under the lock; apply its
migration path (`migrations`: hooks in memory, the fit check, one fenced write); release; and
return its snapshot. A run already on the newest version is returned as it is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from reactorflow import audit, config, records
from reactorflow.definition import registry
from reactorflow.definition.graph import compare_fingerprints, plan_for
from reactorflow.errors import LockTimeout, RunStateError
from reactorflow.runtime.engine import job_queue as queue
from reactorflow.runtime.engine.ownership import acquire, keep_alive, new_owner
from reactorflow.runtime.ops import migrations, operations
from reactorflow.runtime.ops.snapshots import run_status
from reactorflow.snapshot import Run
from reactorflow.status import Status

if TYPE_CHECKING:
    from reactorflow.definition.reactor import Reactor
    from reactorflow.storage.contract.values import StoredRun

IN_FLIGHT = frozenset({Status.RUNNING, Status.PAUSED, Status.ROLLING_BACK, Status.HELD})
"""The statuses of a run that code will still execute: the runs a migration moves (a held run
waits for an operator's `retry_step`, which runs its failed step with the code deployed)."""


async def migrate(reactor: Reactor, run_id: str) -> Run:
    """Move run `run_id` onto the newest declared version of its reactor (see the module).

    Raises:
        RunNotFound: no such run of the reactor.
        RunStateError: the run has settled (nothing is left to migrate).
        DefinitionChanged: no migration path leads from the run's version.
        MigrationError: a hook raised, or the run would not fit (nothing was written).
        LockTimeout: another execution held the run for `lock_wait` seconds.
    """
    storage = config.current_storage()
    settings = config.settings()
    newest = registry.newest(reactor)
    head = await operations.head_of(newest, storage, run_id)
    status = run_status(head)
    if status not in IN_FLIGHT:
        raise RunStateError(run_id, status, "migrate")
    if records.meta_version(head.meta) == newest.version:
        return await operations.get(newest, run_id)
    owner = new_owner()
    if not await acquire(storage, run_id, owner, settings.lock_ttl, settings.lock_wait):
        raise LockTimeout(run_id, settings.lock_wait, "migrate")
    async with keep_alive(storage, run_id, owner, settings.lock_ttl):
        stored = await storage.load_run(run_id, history=True, claims=True)
        operations.own_head(newest, run_id, None if stored is None else stored.head)
        assert stored is not None
        version = records.meta_version(stored.head.meta)
        if version != newest.version:
            hooks = migrations.path(newest.name, version)
            if not hooks:
                raise migrations.unmigratable(run_id, newest.name, version)
            result = await migrations.migrated(stored, hooks)
            result.event = msgspec.structs.replace(result.event, actor=audit.who())
            await migrations.write(storage, stored, owner, result)
    await storage.release_lock(run_id, owner)
    if status is Status.RUNNING:  # a worker goes on with it on its new version
        queue.enqueue_run(run_id, newest.name, version=newest.version)
    return await operations.get(newest, run_id)


async def own_reactor(reactor: Reactor, run_id: str, meta: bytes, *,
                      migrate_now: bool = True) -> Reactor:
    """The reactor that continues a run whose meta is `meta`: its version's when this process
    declares it; else, when a migration path leads from it, the run is migrated first
    (`migrate`; with `migrate_now=False`, for a check that writes nothing, it is not) and the
    reactor of the version it moves to is returned.

    Raises:
        DefinitionChanged: its version is not declared and no migration leads from it.
        MigrationError: its migration was refused (nothing was written).
    """
    own = migrations.declared_for(reactor, meta)
    if own is not None:
        return own
    version = records.meta_version(meta)
    hooks = migrations.path(reactor.name, version)
    if not hooks:
        raise migrations.unmigratable(run_id, reactor.name, version)
    version = ((await migrate(reactor, run_id)).version if migrate_now
               else hooks[-1].to_version)
    found = registry.lookup(reactor.name, version)
    assert found is not None  # (a hook is declared on its version's reactor)
    return found


async def dry_run(stored: StoredRun) -> tuple[str, list[str]]:
    """What the code of this process would do with an in-flight run: `("continues", [])`
    when its version is declared (and its graph matches), `("migrates", [])` when a migration
    path leads from it and its dry run fits, else `("stranded", differences)`. Writes nothing.
    """
    head = stored.head
    version = records.meta_version(head.meta)
    name = head.reactor
    own = registry.lookup(name, version)
    if own is not None:
        meta = records.decode_meta(head.meta)
        differences = compare_fingerprints(meta.fingerprint, plan_for(own).fingerprint)
        if not differences:
            return "continues", []
        return "stranded", [f"version {version}'s graph changed: {d}" for d in differences]
    hooks = migrations.path(name, version)
    if not hooks:
        declared = ", ".join(map(str, registry.versions(name))) or "none"
        return "stranded", [f"version {version} is not declared (declared: {declared}) and no "
                            f"migration leads from it"]
    try:
        await migrations.migrated(stored, hooks)
    except Exception as exc:  # (MigrationError, CorruptRecord: the verdict names it)
        misfits = getattr(exc, "misfits", None)
        return "stranded", list(misfits) if misfits else [str(exc)]
    return "migrates", []
