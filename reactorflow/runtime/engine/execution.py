"""`Execution`: the state of one run while an execution owns it.

It holds what storage holds (meta, state, step records) decoded, plus decoded results, the
claimed payloads, the gates it holds and the lease that proves it may start work. It never
lives on a definition. Two things beside it, each with one job:

* `writer` (`writer.RunWriter`): every write of the run (checkpoints, kept completions, state
  saves), fenced by the execution's lock owner, on the same step records and state;
* `mode` (`mode.DriveMode`): how it waits (parks in a worker, waits for undo throws, ...),
  frozen, given to `driver.drive` by the caller that owns the run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import msgspec

from reactorflow import clock, config, records
from reactorflow.definition.graph import Node, Plan, compare_fingerprints
from reactorflow.definition.params import MapRead
from reactorflow.definition.specs import UNIT_KINDS
from reactorflow.errors import CorruptRecord, DefinitionChanged
from reactorflow.middleware import Hooks
from reactorflow.protection import fields
from reactorflow.protection.keys import RunKeys
from reactorflow.protection.resolve import plain_keys
from reactorflow.records import Event, RunMeta, RunState, StepRecord
from reactorflow.redaction import secrets_in, watch
from reactorflow.runtime.engine.lockkeeper import Hold
from reactorflow.runtime.engine.mode import CALLER, DriveMode
from reactorflow.runtime.engine.writer import RunWriter
from reactorflow.runtime.gates.scope import Entry, GateHolds
from reactorflow.status import EventKind, Status, StepStatus
from reactorflow.storage.contract.decoding import reading
from reactorflow.storage.contract.maps import Slots
from reactorflow.storage.contract.storage import Storage
from reactorflow.storage.contract.values import StoredRun

if TYPE_CHECKING:
    from reactorflow.definition.table import Declared

_WITH_RESULT = frozenset({StepStatus.COMPLETED, StepStatus.UNDONE})


class Execution:
    """One run, as seen by the execution that holds its lock."""

    __slots__ = (
        "__weakref__",
        "claims",
        "element",
        "enqueue_after_release",
        "enqueue_delay",
        "gates",
        "hooks",
        "keys",
        "lease",
        "level_entries",
        "level_inputs",
        "map_lists",
        "meta",
        "mode",
        "owner",
        "parked_since",
        "plan",
        "reactor",
        "records",
        "run_entry",
        "run_id",
        "slots",
        "state",
        "step_prefix",
        "storage",
        "timer_at",
        "values",
        "writer",
    )

    writer_kind: ClassVar[type[RunWriter]] = RunWriter
    """The writer an execution of this class builds (an element's keeps its checkpoints)."""

    def __init__(
        self,
        *,
        plan: Plan,
        storage: Storage,
        owner: str,
        meta: RunMeta,
        state: RunState,
        steps: dict[str, StepRecord],
        claims: Mapping[str, bytes],
        hooks: Hooks,
        gates: GateHolds | None = None,
        mode: DriveMode = CALLER,
        history: list[Event] | None = None,
        loaded_history: list[bytes] | None = None,
        keys: RunKeys | None = None,
    ) -> None:
        self.plan = plan
        # the keys its values are sealed and opened with, resolved once by whoever loaded or
        # created the run (`protection.resolve.run_keys`)
        self.keys = keys if keys is not None else plain_keys(meta.id)
        self.storage = storage
        self.owner = owner
        self.meta = meta
        self.state = state
        self.run_id = meta.id
        self.reactor = meta.reactor
        self.records = steps
        self.claims = dict(claims)
        self.hooks = hooks
        self.mode = mode  # how it waits: its caller's, or the one `drive` is given
        self.values: dict[str, Any] = {}
        self.map_lists: dict[tuple[str, MapRead], list[Any]] = {}  # map readers' lists, loaded
        self.level_inputs: dict[str, Any] = {"": plan.levels[""].inputs_decoder.decode(
            self.keys.open(fields.INPUTS, meta.inputs))}
        self.enqueue_after_release = False  # set by a background hand-off, or a snooze
        self.enqueue_delay: float | None = None  # ...after this many seconds
        self.timer_at: float | None = None  # the timer its park armed (`parking.park`)
        self.gates = (gates if gates is not None  # the start's, which took the run's gates
                      else GateHolds(storage, meta.id, hooks=hooks, reactor=meta.reactor))
        self.run_entry: Entry | None = None  # the reactor's own gates, while held
        self.level_entries: dict[str, Entry] = {}  # open composed children's gates
        self.parked_since: dict[str, float] = {}  # unit key -> since when (when it parked)
        # the hold that proves it may still start work (`lockkeeper.ensure_live`): the run's
        # lock while an owner holds it; an element's child: its map's (the run's, or its job's)
        self.lease: Hold | None = None
        # an element reactor's element (runtime.maps.children), "<map>:<index>", else "": its
        # steps are named "<element>.<step>" in step contexts, idempotency keys and gate scopes
        self.element = ""
        self.step_prefix = ""
        self.slots: Slots = storage  # its maps' element slots (an element's: in memory)
        # its writes (checkpoints, kept completions, state saves), on the same records and state
        self.writer = self.writer_kind(storage=storage, owner=owner, run_id=meta.id,
                                       reactor=meta.reactor, plan=plan, state=state, steps=steps,
                                       gates=self.gates, history=history,
                                       loaded_history=loaded_history, keys=self.keys)
        if len(plan.levels) > 1:  # composed children: the inputs of those that started
            for key, record in steps.items():
                if record.child_started and key in plan.levels:
                    self.level_inputs[key] = plan.levels[key].inputs_decoder.decode(
                        self.keys.open(fields.child_inputs(key), record.child_inputs))
        if plan.redactions:
            watch(self)  # error text recorded or logged in this context is scrubbed of secrets

    # -- construction --------------------------------------------------------------------------

    @classmethod
    def from_stored(
        cls,
        stored: StoredRun,
        *,
        plan: Plan,
        storage: Storage,
        owner: str,
        claims: Mapping[str, bytes],
        hooks: Hooks,
        check_graph: bool = True,
        gates: GateHolds | None = None,
        mode: DriveMode = CALLER,
        keys: RunKeys | None = None,
    ) -> Execution:
        """The execution of a run as read from storage; when its history was read too, it
        knows every event from here on (no reading back for a snapshot). `gates`: the places
        it takes are held as these (an async unit's, as its own lock); `mode`: how it waits;
        `keys`: the run's keys (resolved by the caller, `protection.resolve.run_keys`). Every
        sealed value is opened here once (and then again when it is decoded), so a value that
        fails authentication stops the caller before it writes anything.

        Raises:
            CorruptRecord: a record does not decode, or has another schema version, or a
                value of it fails authentication.
            KeyUnavailable: a value is sealed under a key this process does not hold.
            DefinitionChanged: `check_graph` and the run's graph is not the plan's.
        """
        head = stored.head
        try:
            meta = records.decode_meta(head.meta)
            if meta.v != records.SCHEMA_VERSION:
                raise CorruptRecord(
                    head.run_id,
                    f"schema version {meta.v} is not {records.SCHEMA_VERSION}, the one this "
                    "version of reactorflow reads",
                )
            state = records.decode_state(head.state)
            steps = {key: records.decode_step(raw) for key, raw in stored.steps.items()}
        except ValueError as exc:  # msgspec.DecodeError, or a value outside its enum
            raise CorruptRecord(head.run_id, str(exc)) from exc
        if meta.version != plan.reactor.version:  # (callers pick the run's version's plan)
            raise DefinitionChanged(head.run_id, head.reactor,
                                    [f"the run is on version {meta.version}, the code given "
                                     f"is version {plan.reactor.version}"],
                                    version=meta.version)
        if check_graph:
            differences = compare_fingerprints(meta.fingerprint, plan.fingerprint)
            if differences:
                raise DefinitionChanged(head.run_id, head.reactor, differences,
                                        version=meta.version)
        run_keys = keys if keys is not None else plain_keys(head.run_id)
        if not run_keys.seals:  # (holding no key, it names the inputs first, as verify_stored)
            run_keys.open(fields.INPUTS, meta.inputs)
        # (in a process holding no key too: a run stored clear at first whose later values are
        # sealed stops here, not midway through its drive)
        verify(run_keys, steps, claims)
        try:
            return cls(plan=plan, storage=storage, owner=owner, meta=meta, state=state,
                       steps=steps, claims=claims, hooks=hooks, gates=gates, mode=mode,
                       history=None if stored.history is None else [],
                       loaded_history=stored.history, keys=run_keys)
        except msgspec.DecodeError as exc:
            raise CorruptRecord(head.run_id, f"stored inputs cannot be decoded: {exc}") from exc

    # -- reading -------------------------------------------------------------------------------

    def status_of(self, key: str) -> StepStatus:
        record = self.records.get(key)
        return StepStatus.PENDING if record is None else record.status

    def value_of(self, key: str) -> Any:
        """The decoded result of a completed step (decoded once, then cached)."""
        try:
            return self.values[key]
        except KeyError:
            pass
        record = self.records[key]
        node = self.plan.nodes[key]
        value = node.decoder.decode(self.keys.open(fields.result(key), record.result))
        self.values[key] = value
        return value

    def secrets(self) -> set[str]:
        """The text forms of this run's redacted values known here: the inputs of every level,
        completed results, claimed payloads and loaded map results (see reactorflow.redaction)."""
        masks = self.plan.redactions
        found: set[str] = set()
        for level, inputs in self.level_inputs.items():
            found.update(secrets_in(inputs, masks.levels.get(level) if level else masks.inputs))
        for key, mask in masks.results.items():
            node = self.plan.nodes[key]
            if node.spec.map is None and node.kind not in UNIT_KINDS and (
                    key in self.values or self.status_of(key) in _WITH_RESULT):
                try:
                    found.update(secrets_in(self.value_of(key), mask))
                except (msgspec.DecodeError, KeyError):  # unreadable: it says nothing
                    continue
        for key, mask in masks.payloads.items():
            if key in self.claims:
                found.update(secrets_in(msgspec.msgpack.decode(
                    self.keys.open(fields.claim(key), self.claims[key])), mask))
        for (key, read), items in self.map_lists.items():
            element = masks.elements.get(key)
            for item in items if element is not None else ():
                found.update(secrets_in(item.value if read is MapRead.OUTCOMES else item,
                                        element))
        return found

    def record(self, key: str) -> StepRecord:
        record = self.records.get(key)
        if record is None:
            record = StepRecord(status=StepStatus.PENDING)
            self.records[key] = record
        return record

    def node(self, key: str) -> Node:
        return self.plan.nodes[key]

    def close_waiting(self) -> list[str]:
        """Interrupts still waiting, and sleeps still sleeping, when the run stops waiting
        (cancel, undo, failure): they become skipped (an interrupt never got its payload, a
        sleep never woke; its timer is void). Returns their keys, to be saved."""
        keys = [k for k in self.state.waiting_on if self.status_of(k) == StepStatus.WAITING]
        keys += [k for k, r in self.records.items()
                 if r.wake_at is not None and r.status == StepStatus.WAITING and k not in keys]
        for key in keys:
            record = self.records[key]
            self.records[key] = StepRecord(StepStatus.SKIPPED, record.attempts if record.wake_at
                                           is not None else 0, record.started_at,
                                           clock.now(), deadline=record.deadline,
                                           correlation_id=record.correlation_id,
                                           wake_at=record.wake_at)
        return keys

    def close_retrying(self, why: str) -> tuple[list[str], list[Event]]:
        """Steps parked between retry attempts (`running` with a `retry_at`) when the run stops
        without going on (cancelled, halted, failed): their bodies started and failed, and no
        attempt follows, so they become `failed` with their compensation outstanding (a
        rollback compensates them). Returns their keys and `step.failed` events, to be saved
        together."""
        keys = sorted(k for k, r in self.records.items()
                      if r.status == StepStatus.RUNNING and r.retry_at is not None)
        now = clock.now()
        for key in keys:
            self.records[key] = msgspec.structs.replace(
                self.records[key], status=StepStatus.FAILED, finished_at=now, retry_at=None,
                compensate_pending=self.plan.nodes[key].spec.compensate is not None)
        return keys, [Event(now, EventKind.STEP_FAILED, key, self.records[key].attempts,
                            f"no further attempt: {why}") for key in keys]

def verify(keys: RunKeys, steps: Mapping[str, StepRecord], claims: Mapping[str, bytes]) -> None:
    """Open every sealed value of a loaded run's step records and claims (and drop the clear
    bytes): one that fails authentication, or needs a key not held, raises before anything is
    written.

    Raises:
        CorruptRecord: a value fails authentication.
        KeyUnavailable: a value needs a key this process does not hold.
    """
    for key, record in steps.items():
        if record.result is not records.NIL:
            keys.open(fields.result(key), record.result)
        if record.child_inputs is not records.NIL:
            keys.open(fields.child_inputs(key), record.child_inputs)
        for error in (record.error, record.rollback_error):
            if error is not None:
                keys.open_text(fields.ERROR, error.message)
    for key, payload in claims.items():
        keys.open(fields.claim(key), payload)


def verify_stored(keys: RunKeys, stored: StoredRun) -> None:
    """`verify` for a run as read from storage, its inputs too (before an operation that
    writes first, such as `continue_`'s claim).

    Raises:
        CorruptRecord: a record does not decode, or a value fails authentication.
        KeyUnavailable: a value needs a key this process does not hold.
    """
    run_id = stored.head.run_id
    with reading(run_id, "meta"):
        keys.open(fields.INPUTS, records.decode_meta(stored.head.meta).inputs)
    steps = {}
    for key, raw in stored.steps.items():
        with reading(run_id, f"step {key!r}"):
            steps[key] = records.decode_step(raw)
    verify(keys, steps, stored.claims or {})


_NO_HOOKS = Hooks(())


def hooks_for(reactor: Declared) -> Hooks:
    """The middleware hooks of an execution of `reactor`: the configured middleware, then the
    reactor's own."""
    middleware = config.settings().middleware
    if not middleware and not reactor.middleware:
        return _NO_HOOKS  # (stateless: one for every execution without middleware)
    return Hooks([*middleware, *reactor.middleware])


def event(kind: EventKind, step: str = "", attempt: int = 0, detail: str = "", *,
          actor: str = "") -> Event:
    return Event(clock.now(), kind, step, attempt, detail, actor)


def new_state(status: Status) -> RunState:
    return RunState(status=status, updated_at=clock.now())
