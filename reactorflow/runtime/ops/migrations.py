"""Moving a stored run onto a newer version of its reactor (api.md §14), and finding the
version a stored run continues on.

A stored run continues on the version it started with (`RunMeta.version`). When this process
does not declare that version, a migration moves it, in order:

1. The path (`path`): from the run's version, the hook that the highest declared version
   declares for it (`@reactor.migrate(from_version=N)`), then from that hook's version on, until
   no hook leads further.
2. Each hook runs on an `rf.Migration` of the run's records, in memory; a hook that raises
   refuses the whole migration (`rf.MigrationError` naming the hook and the run).
3. The records are checked against the graph of the version the path ends on (`misfits`);
   every misfit is listed, and any refuses the migration.
4. One fenced, atomic write (`Storage.migrate_run`), made while the caller holds the run's
   lock, stores the new meta (version, graph, inputs), the state, the step records written and
   removed, and a `run.migrated` event saying what the hooks did. Nothing is written before
   this step, so a refusal leaves the run as it was.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import msgspec

from reactorflow import clock, config, records
from reactorflow.definition import registry
from reactorflow.definition.graph import SEP, Plan, plan_for
from reactorflow.definition.migrations import MigrationHook
from reactorflow.definition.specs import StepKind
from reactorflow.errors import ArgumentError, CorruptRecord, DefinitionChanged, MigrationError
from reactorflow.protection import fields, sealing
from reactorflow.protection.errors import opened_errors
from reactorflow.protection.keys import RunKeys
from reactorflow.protection.resolve import run_keys
from reactorflow.records import NIL, Event, RunMeta, RunState, StepRecord
from reactorflow.snapshot import StepState
from reactorflow.status import EventKind, StepStatus

if TYPE_CHECKING:
    from reactorflow.definition.reactor import Reactor
    from reactorflow.storage.contract.storage import Storage
    from reactorflow.storage.contract.values import StoredRun

log = logging.getLogger("reactorflow.versions")

_DONE = frozenset({StepStatus.COMPLETED, StepStatus.SKIPPED})
_IN_FLIGHT = frozenset({StepStatus.RUNNING, StepStatus.WAITING})


def path(name: str, version: int) -> list[MigrationHook]:
    """The migration hooks that lead a run of reactor `name` from `version` onwards, in the
    order they apply (empty: none leads from it)."""
    hooks: list[MigrationHook] = []
    current = version
    while True:
        found = [hook for v in registry.versions(name) if v > current
                 for hook in _hook_of(name, v, current)]
        if not found:
            return hooks
        best = max(found, key=lambda hook: hook.to_version)
        hooks.append(best)
        current = best.to_version


def _hook_of(name: str, version: int, source: int) -> Iterator[MigrationHook]:
    reactor = registry.lookup(name, version)
    if reactor is not None and source in reactor.migrations:
        yield reactor.migrations[source]


class Migration:
    """What a migration hook (`@reactor.migrate(from_version=N)`) receives: one stored run's
    records, to fit them to the new version's graph. Nothing is written until every hook of
    the path returned and the result fits; see [Deploying changes](deploying.md).

    Attributes:
        run_id: The run's id.
        reactor: The reactor's name.
        from_version: The version the run is on.
        to_version: The version this hook moves it onto.

    Args:
        steps: The run's step records by key (the migration edits them in place).
        inputs: The run's inputs, as plain data.
        kinds: Each step's kind label in the run's stored graph.
    """

    def __init__(self, run_id: str, reactor: str, from_version: int, to_version: int,
                 steps: dict[str, StepRecord], inputs: Any,
                 kinds: Mapping[str, str] | None = None) -> None:
        self.run_id = run_id
        self._kinds = kinds or {}  # step key -> its kind label in the run's stored graph
        self.reactor = reactor
        self.from_version = from_version
        self.to_version = to_version
        self._records = steps
        self._inputs = inputs
        self.actions: list[str] = []
        self.dropped: list[str] = []

    @property
    def steps(self) -> Mapping[str, StepState]:
        """The run's steps by key as they stand (read-only): status, attempts and, once
        completed, `result` (decoded as plain data: dicts, lists, strings, numbers)."""
        return MappingProxyType({key: _state(record) for key, record in self._records.items()})

    @property
    def inputs(self) -> Any:
        """The run's inputs, as plain data (a dict for a record type); assign to replace them
        (checked against the new version's inputs type before anything is written)."""
        return self._inputs

    @inputs.setter
    def inputs(self, value: Any) -> None:
        self._inputs = value
        self.actions.append("replaced the inputs")

    def rename(self, old: str, new: str) -> None:
        """The step the run knows as `old` is the new version's `new` (its record moves; a
        composed step's child steps move with it, `old.x` to `new.x`).

        Args:
            old: The step's key in the run (its old version's).
            new: Its key in the new version.

        Raises:
            ArgumentError: the run has no step `old`, has a step `new` already, or `old` is a
                map step the run has started (its elements are stored under its key).
        """
        where = f"migration of run {self.run_id!r}: rename({old!r}, {new!r})"
        if old not in self._records:
            self._take(old, "rename")  # (raises, naming the run's steps)
        if new in self._records:
            raise ArgumentError(f"{where}: the run has a step {new!r} already")
        if self._kinds.get(old, "").startswith("map:") or self._kinds.get(old) == "map":
            raise ArgumentError(f"{where}: {old!r} is a map step the run has started, and its "
                                "elements are stored under its key: keep its name")
        prefix = old + SEP
        for key in [k for k in self._records if k == old or k.startswith(prefix)]:
            self._records[new + key[len(old):]] = self._records.pop(key)
        self.actions.append(f"renamed {old} -> {new}")

    def complete(self, step: str, *, result: Any = None) -> None:
        """Mark `step` completed with `result`, as if it had run (a new step the old version
        never had). On a rollback its undo handler runs as any completed step's would.

        Args:
            step: The step's key in the new version.
            result: Its result (of its return type, or plain data that converts to it).

        Raises:
            ArgumentError: `result` cannot be stored (msgspec cannot encode it).
        """
        try:
            raw = records.raw(result)
        except TypeError as exc:
            raise ArgumentError(f"migration of run {self.run_id!r}: complete({step!r}): the "
                                f"result cannot be stored: {exc}") from exc
        seq = max((r.seq for r in self._records.values()), default=0) + 1
        now = clock.now()
        self._records[step] = StepRecord(StepStatus.COMPLETED, 0, now, now, raw, seq=seq)
        self.actions.append(f"completed {step}")

    def skip(self, step: str) -> None:
        """Mark `step` skipped (its dependents follow the skip rules of a `when=` step).

        Args:
            step: The step's key in the new version.
        """
        now = clock.now()
        self._records[step] = StepRecord(StepStatus.SKIPPED, 0, now, now)
        self.actions.append(f"skipped {step}")

    def drop(self, step: str) -> None:
        """Forget the record of `step`, a step the new version no longer has; a completed one's
        undo is given up (listed in the run's history).

        Args:
            step: The step's key in the run.

        Raises:
            ArgumentError: the run has no step `step`.
        """
        record = self._take(step, "drop")
        if record.status is StepStatus.COMPLETED:
            self.dropped.append(step)
            self.actions.append(f"dropped {step} (its undo given up)")
        else:
            self.actions.append(f"dropped {step}")

    def _take(self, key: str, what: str) -> StepRecord:
        record = self._records.pop(key, None)
        if record is None:
            known = ", ".join(sorted(self._records)) or "none"
            raise ArgumentError(f"migration of run {self.run_id!r}: {what}({key!r}): the run "
                                f"has no step {key!r} (its steps: {known})")
        return record


def _state(record: StepRecord) -> StepState:
    state = StepState(record.status, record.attempts, record.started_at, record.finished_at,
                      f"{record.error.type}: {record.error.message}" if record.error else None)
    if record.status is StepStatus.COMPLETED:
        state.__dict__["_result"] = msgspec.msgpack.decode(record.result)
    return state


@dataclass(slots=True)
class Migrated:
    """The records of a run after its migration path, checked and encoded, not yet written."""

    to: Reactor
    meta: RunMeta
    state: RunState
    steps: dict[str, bytes]
    removed: list[str]
    event: Event
    hops: list[str] = field(default_factory=list)


async def migrated(stored: StoredRun, hooks: Sequence[MigrationHook]) -> Migrated:
    """Run the hooks of `hooks` on the run's records, in memory, and check the result against
    the graph of the last one's version (steps 2 and 3 of the module): nothing is written.

    Raises:
        MigrationError: a hook raised, or the records would not fit (every misfit listed).
        CorruptRecord: a record of the run does not decode.
    """
    head = stored.head
    try:
        meta = records.decode_meta(head.meta)
        state = records.decode_state(head.state)
    except ValueError as exc:
        raise CorruptRecord(head.run_id, str(exc)) from exc
    # the hooks and the checks see clear values; what is written is sealed again (a renamed
    # step's result is bound to its new key)
    keys = await run_keys(config.current_storage(), meta, head.run_id)
    try:
        steps = {key: _opened(keys, key, records.decode_step(raw))
                 for key, raw in stored.steps.items()}
        inputs = msgspec.msgpack.decode(keys.open(fields.INPUTS, meta.inputs))
    except ValueError as exc:
        raise CorruptRecord(head.run_id, str(exc)) from exc
    before = dict(steps)
    kinds = {key: entry[0] for key, entry in meta.fingerprint.items() if entry}
    dropped: list[str] = []
    actions: list[str] = []
    version = meta.version
    target: Reactor | None = None
    for hook in hooks:
        target = registry.lookup(head.reactor, hook.to_version)
        assert target is not None  # (a hook is declared on the reactor of its version)
        run = Migration(head.run_id, head.reactor, version, hook.to_version, steps, inputs,
                        kinds)
        try:
            outcome = hook.fn(run)
            if inspect.isawaitable(outcome):
                await outcome
        except Exception as exc:
            raise MigrationError(head.run_id, head.reactor, meta.version, hook.to_version, [],
                                 hook=hook.label, cause=exc) from exc
        steps, inputs = run._records, run._inputs
        dropped += run.dropped
        actions.append(f"{version} -> {hook.to_version}: " + (", ".join(run.actions)
                                                             or "no change"))
        version = hook.to_version
    assert target is not None
    plan = plan_for(target)
    problems, encoded_inputs = misfits(plan, meta, state, steps, inputs)
    if problems:
        raise MigrationError(head.run_id, head.reactor, meta.version, version, problems)
    new_meta = msgspec.structs.replace(
        meta, version=version, fingerprint=plan.fingerprint,
        inputs=keys.seal_raw(fields.INPUTS, encoded_inputs),
        redacted_inputs=plan.redactions.inputs, redacted_results=plan.redactions.results)
    written = {key: records.encode(sealing.step(keys, _sealed(keys, key, record)))
               for key, record in steps.items() if before.get(key) is not record}
    state = sealing.state(keys, state)
    removed = [key for key in before if key not in steps]
    detail = "; ".join(actions)
    if dropped:
        detail += f"; undo given up: {', '.join(dropped)}"
    return Migrated(target, new_meta, state, written, removed,
                    Event(clock.now(), EventKind.RUN_MIGRATED, detail=detail), actions)


def _opened(keys: RunKeys, key: str, record: StepRecord) -> StepRecord:
    """A step record with its sealed values opened (for the hooks and the checks; error text
    is sealed again by `sealing.step` when it is written)."""
    record = opened_errors(keys, record)
    if record.result == NIL and record.child_inputs == NIL:
        return record
    return msgspec.structs.replace(
        record, result=msgspec.Raw(keys.open(fields.result(key), record.result)),
        child_inputs=msgspec.Raw(keys.open(fields.child_inputs(key), record.child_inputs)))


def _sealed(keys: RunKeys, key: str, record: StepRecord) -> StepRecord:
    """A step record to write: its values sealed for its (new) key (a nil child input stays
    nil: it tells that no child inputs were stored)."""
    if record.result == NIL and record.child_inputs == NIL:
        return record
    child = record.child_inputs
    return msgspec.structs.replace(
        record, result=keys.seal_raw(fields.result(key), record.result),
        child_inputs=child if child == NIL else keys.seal_raw(fields.child_inputs(key), child))


def misfits(plan: Plan, meta: RunMeta, state: RunState, steps: Mapping[str, StepRecord],
            inputs: Any) -> tuple[list[str], msgspec.Raw]:
    """Why a run's records (after its hooks) would not fit `plan`'s graph, one line each,
    and its inputs encoded for the new meta."""
    version = plan.reactor.version
    problems: list[str] = []
    encoded = msgspec.Raw(b"")
    try:
        encoded = records.raw(inputs)
        plan.levels[""].inputs_decoder.decode(encoded)
    except (TypeError, msgspec.DecodeError) as exc:
        problems.append(f"the run's inputs do not fit version {version}'s inputs type: {exc} "
                        "(set run.inputs)")
    old_kinds = {key: entry[0] for key, entry in meta.fingerprint.items()}
    new_kinds = {key: entry[0] for key, entry in plan.fingerprint.items()}
    for key, record in steps.items():
        node = plan.nodes.get(key)
        status = str(record.status)
        if node is None:
            problems.append(f"step {key!r} ({status}) is not in version {version}'s graph: "
                            "rename it to one of its steps, or drop it")
            continue
        if record.status in _IN_FLIGHT and old_kinds.get(key) not in (None, new_kinds[key]):
            problems.append(f"step {key!r} is {status} as a {old_kinds[key]}, and version "
                            f"{version} declares it a {new_kinds[key]}")
        if record.status is StepStatus.COMPLETED and node.kind is not StepKind.MAP:
            try:
                node.decoder.decode(record.result)
            except msgspec.DecodeError as exc:
                problems.append(f"step {key!r}'s result does not decode to version {version}'s "
                                f"type: {exc} (complete it with a result of the new type)")
        if record.status in _DONE or record.status in _IN_FLIGHT:  # reached: after its deps
            for dep in node.deps:
                found = steps.get(dep)
                if found is None or found.status not in _DONE:
                    problems.append(f"step {key!r} is {status}, but its dependency {dep!r} in "
                                    f"version {version} has not run: complete or skip {dep!r}")
    for key in state.waiting_on:
        node = plan.nodes.get(key)
        if node is None or node.kind is not StepKind.INTERRUPT:
            problems.append(f"the run waits on interrupt {key!r}, which version {version} "
                            "does not declare: rename it to one of its interrupts")
    return problems, encoded


async def write(storage: Storage, stored: StoredRun, owner: str, result: Migrated) -> None:
    """Store a migration (step 4 of the module) while `owner` holds the run's lock.

    Raises:
        LockLost: `owner` does not hold the lock (nothing was written).
        MigrationError: another migration of the run landed first (nothing was written).
    """
    head = stored.head
    if not await storage.migrate_run(
            head.run_id, owner, expected_meta=head.meta, meta=records.encode(result.meta),
            state=records.encode(result.state), steps=result.steps, removed=result.removed,
            events=[records.encode(result.event)]):
        raise MigrationError(head.run_id, head.reactor, records.meta_version(head.meta),
                             result.meta.version,
                             ["another migration of the run landed first: read it again"])
    log.info("reactorflow.run.migrated run_id=%s reactor=%s to=%d %s", head.run_id,
             head.reactor, result.meta.version, result.event.detail)


def unmigratable(run_id: str, name: str, version: int) -> DefinitionChanged:
    """The error of a run whose version is not declared here, with no migration from it."""
    return DefinitionChanged(run_id, name, [], version=version,
                             declared=registry.versions(name))


async def on_version(reactor: Reactor, storage: Storage, stored: StoredRun,
                     owner: str) -> tuple[Reactor, StoredRun]:
    """The reactor a stored run continues on, read while `owner` holds its lock: `reactor`
    when the run is on its version, else the run's own version's; when this process does not
    declare it, the run is migrated first (see the module) and read again.

    Raises:
        DefinitionChanged: the run's version is not declared and no migration leads from it.
        MigrationError: the migration was refused (nothing was written).
    """
    version = records.meta_version(stored.head.meta)
    if version == reactor.version:
        return reactor, stored
    own = registry.lookup(reactor.name, version)
    if own is not None:
        return own, stored
    hooks = path(reactor.name, version)
    if not hooks:
        raise unmigratable(stored.head.run_id, reactor.name, version)
    result = await migrated(stored, hooks)
    await write(storage, stored, owner, result)
    again = await storage.load_run(stored.head.run_id, history=stored.history is not None,
                                   claims=stored.claims is not None)
    assert again is not None  # (held under its lock: it cannot have been deleted)
    return result.to, again


def declared_for(reactor: Reactor, meta: bytes) -> Reactor | None:
    """The reactor of the version a run's `meta` is on, when this process declares it."""
    version = records.meta_version(meta)
    return reactor if version == reactor.version else registry.lookup(reactor.name, version)
