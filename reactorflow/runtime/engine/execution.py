"""`Execution`: the runtime state of one run while an execution owns it.

It holds what storage holds (meta, state, step records) decoded, plus decoded results. It never
lives on a definition. Every write goes through `checkpoint` / `save_state`, which are fenced by
the execution's lock owner.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

import anyio
import msgspec

from reactorflow import clock, config, records
from reactorflow.definition.graph import Node, Plan, compare_fingerprints
from reactorflow.definition.params import MapRead
from reactorflow.definition.specs import UNIT_KINDS
from reactorflow.errors import CorruptRecord, DefinitionChanged, StorageError
from reactorflow.middleware import Hooks
from reactorflow.records import Control, Event, RunMeta, RunState, StepRecord
from reactorflow.redaction import secrets_in, watch
from reactorflow.runtime.engine.lockkeeper import Hold
from reactorflow.runtime.engine.map_slot_keys import slot_keys
from reactorflow.runtime.gates.scope import Entry, GateHolds
from reactorflow.status import Status, StepStatus
from reactorflow.storage.contract.maps import Slots
from reactorflow.storage.contract.method_marks import INLINE, batches, is_foldable
from reactorflow.storage.contract.storage import Storage
from reactorflow.storage.contract.values import StoredRun

if TYPE_CHECKING:
    from reactorflow.definition.table import Declared

log = logging.getLogger("reactorflow.run")
_encode = records.encode
_WITH_RESULT = frozenset({StepStatus.COMPLETED, StepStatus.UNDONE})
_UNSHIELDED: AbstractContextManager[None] = nullcontext()  # (a final save with no completion)


class Execution:
    """One run, as seen by the execution that holds its lock."""

    __slots__ = (
        "__weakref__",
        "_shield_kind",
        "batches",
        "claims",
        "control",
        "element",
        "enqueue_after_release",
        "enqueue_delay",
        "folded",
        "folds",
        "gates",
        "history",
        "hold",
        "hooks",
        "lease",
        "level_entries",
        "level_inputs",
        "loaded_history",
        "map_lists",
        "maps_inline",
        "meta",
        "never_waits",
        "owner",
        "parked_since",
        "parks",
        "plan",
        "reactor",
        "records",
        "run_entry",
        "run_id",
        "seq",
        "slots",
        "state",
        "step_prefix",
        "storage",
        "stored_status",
        "unconfirmed",
        "values",
        "waits_for_throws",
    )

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
    ) -> None:
        self.plan = plan
        self.storage = storage
        self.owner = owner
        self.meta = meta
        self.state = state
        self.run_id = meta.id
        self.reactor = meta.reactor
        self.records = steps
        self.claims = dict(claims)
        self.hooks = hooks
        self.values: dict[str, Any] = {}
        self.map_lists: dict[tuple[str, MapRead], list[Any]] = {}  # map readers' lists, loaded
        self.level_inputs: dict[str, Any] = {"": plan.levels[""].inputs_decoder.decode(meta.inputs)}
        self.seq = max([r.seq for r in steps.values()]) if steps else 0
        self.stored_status = state.status
        self.control: Control | None = None
        self.enqueue_after_release = False  # set by a background hand-off, or a snooze
        self.enqueue_delay: float | None = None  # ...after this many seconds
        self.gates = (gates if gates is not None  # the start's, which took the run's gates
                      else GateHolds(storage, meta.id, hooks=hooks, reactor=meta.reactor))
        self.run_entry: Entry | None = None  # the reactor's own gates, while held
        self.level_entries: dict[str, Entry] = {}  # open composed children's gates
        self.parks = False  # in a worker: wait for async units parked, not holding the run
        self.never_waits = False  # an async unit in a worker: a busy gate snoozes the unit
        # a manual undo, an interrupt's expiry, an in-process recovery: a fanned-out map's
        # undo throws are waited for here; every other execution parks the run at them
        self.waits_for_throws = False
        self.parked_since: dict[str, float] = {}  # unit key -> since when (when it parked)
        self.hold: Hold | None = None  # the lock hold of the owning execution, when it drives
        # the hold that proves it may still start work (`lockkeeper.ensure_live`): the run's
        # lock while an owner holds it; an element's child: its map's (the run's, or its job's)
        self.lease: Hold | None = None
        self.history: list[Event] | None = None  # events written here, when all are known...
        self.loaded_history: list[bytes] | None = None  # ...after these, read when loaded
        self.unconfirmed: set[str] = set()  # step writes cut off: landed or not, unknown
        # an element reactor's element (runtime.maps.children), "<map>:<index>", else "": its
        # steps are named "<element>.<step>" in step contexts, idempotency keys and gate scopes
        self.element = ""
        self.step_prefix = ""
        self.folded: dict[str, list[Event]] = {}  # completions the next save_state carries
        self.slots: Slots = storage  # its maps' element slots (an element's: in memory)
        self.maps_inline = False  # an element's maps run inline, fan_out=True too
        self.folds = is_foldable(storage.save_step)  # a plain run's last completion may, too
        self.batches = batches(storage)  # and completions nothing waits for, until `flush`
        self._shield_kind: type[anyio.CancelScope] | None = None  # (see `shielded`)
        if len(plan.levels) > 1:  # composed children: the inputs of those that started
            for key, record in steps.items():
                if record.child_started and key in plan.levels:
                    self.level_inputs[key] = plan.levels[key].inputs_decoder.decode(
                        record.child_inputs)
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
    ) -> Execution:
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
        if check_graph:
            differences = compare_fingerprints(meta.fingerprint, plan.fingerprint)
            if differences:
                raise DefinitionChanged(head.run_id, head.reactor, differences)
        try:
            return cls(plan=plan, storage=storage, owner=owner, meta=meta, state=state,
                       steps=steps, claims=claims, hooks=hooks)
        except msgspec.DecodeError as exc:
            raise CorruptRecord(head.run_id, f"stored inputs cannot be decoded: {exc}") from exc

    # -- reading -------------------------------------------------------------------------------

    @property
    def in_worker(self) -> bool:
        """Runs in a worker: a busy gate snoozes (the job is put back), never waits."""
        return self.parks or self.never_waits

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
        value = node.decoder.decode(record.result)
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
                found.update(secrets_in(msgspec.msgpack.decode(self.claims[key]), mask))
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
        """Interrupts still waiting when the run stops waiting (cancel, undo, failure): they
        become skipped (they never got a payload). Returns their keys, to be saved."""
        keys = [k for k in self.state.waiting_on if self.status_of(k) == StepStatus.WAITING]
        for key in keys:
            record = self.records[key]
            self.records[key] = StepRecord(StepStatus.SKIPPED, 0, record.started_at,
                                           clock.now(), deadline=record.deadline,
                                           correlation_id=record.correlation_id)
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
        return keys, [Event(now, "step.failed", key, self.records[key].attempts,
                            f"no further attempt: {why}") for key in keys]

    # -- writing -------------------------------------------------------------------------------

    def _remember(self, events: Iterable[Event]) -> None:
        """Note events this execution wrote, while it knows exactly what storage holds.

        Past `history_limit` events it no longer does: storage kept the newest in the order it
        appended them, and concurrent checkpoints reach it in an order this execution cannot
        know. The snapshot then reads the history back (`history` becomes None)."""
        if self.history is not None:
            self.history.extend(events)
            if len(self.loaded_history or ()) + len(self.history) > self.storage.history_limit:
                self.history = self.loaded_history = None

    def next_seq(self) -> int:
        self.seq += 1
        return self.seq

    async def checkpoint(self, key: str, record: StepRecord, events: list[Event], *,
                         unit: bool = False) -> None:
        """Persist one step record (fenced); notes any control request that came back.

        The write is shielded from cancellation: once sent it is waited for, so an abort never
        leaves a record (and its events) in storage that this execution does not know landed.
        A write by a method marked `@inline` (`MemoryStorage.save_step`) awaits nothing, so no
        cancellation can reach it: it runs without the shield, which costs more than it.
        Only another interruption (`KeyboardInterrupt` inside the write) leaves the key in
        `unconfirmed`: whether that write landed is then unknown (`driver._abort` reads it
        back). `unit=True` marks the dispatch of an async unit (indexed so a lost one is
        found)."""
        if self.folded:  # kept completions are written first (see `flush`)
            await self.flush()
        self.records[key] = record
        unconfirmed = self.unconfirmed
        unconfirmed.add(key)
        save = self.storage.save_step
        write = save(self.run_id, self.owner, key, _encode(record), list(map(_encode, events)),
                     unit=unit)
        if getattr(save, INLINE, False) is True:  # awaits nothing: no cancellation reaches it
            control = await write
        else:
            with self.shielded():
                control = await write
        unconfirmed.discard(key)
        history = self.history
        if history is not None:  # (as `_remember`, inline)
            history.extend(events)
            if len(history) + len(self.loaded_history or ()) > self.storage.history_limit:
                self.history = self.loaded_history = None
        if unit:  # the unit's worker appends events of its own, unseen here
            self.history = self.loaded_history = None
        if control is not None and self.control is None:
            self.control = records.decode_control(control)

    def shielded(self) -> anyio.CancelScope:
        """A cancel scope with `shield=True`. `anyio.CancelScope()` looks up the running
        backend on every call, which costs more than the scope itself: the backend's class is
        noted at the first call and built directly after that (an execution runs in one event
        loop, on one backend)."""
        kind = self._shield_kind
        if kind is None:
            scope = anyio.CancelScope(shield=True)
            self._shield_kind = type(scope)
            return scope
        return kind(shield=True)

    def fold(self, key: str, record: StepRecord, events: list[Event]) -> None:
        """Keep a step's completion for the run's next `save_state` (the final save of a run
        that this completion completes) instead of a checkpoint of its own."""
        self.records[key] = record
        self.folded[key] = events

    async def flush(self) -> None:
        """Write the completions kept by `fold` now, before the execution's task may suspend.

        Where storage `batches` (`MemoryStorage`), the forward drive keeps the completions of
        steps that nothing waits for while its task does not suspend, and writes them here in
        one fenced, atomic write (`save_steps`, which awaits nothing): before the task suspends
        (a step body that awaits, a runner that ends), and before any other checkpoint, so no
        other task ever sees storage without them, storage holds them in the order they
        completed, and a control request is read back at the next step boundary as before.
        Elsewhere each is checkpointed on its own."""
        folded = self.folded
        if not folded:
            return
        self.folded = {}
        if not self.batches:
            for key, pending in folded.items():
                await self.checkpoint(key, self.records[key], pending)
            return
        events = [e for pending in folded.values() for e in pending]
        steps = {key: _encode(self.records[key]) for key in folded}
        control = await self.storage.save_steps(  # type: ignore[attr-defined]
            self.run_id, self.owner, steps, list(map(_encode, events)))
        self._remember(events)
        if control is not None and self.control is None:
            self.control = records.decode_control(control)

    async def save_state(
        self,
        status: Status,
        *,
        events: list[Event] | None = None,
        steps: list[str] | None = None,
        clear_control: bool = False,
        publish: bool = False,
        final: bool = False,
        unless_control: bool = False,
        **changes: Any,
    ) -> bool:
        """Persist the run's status and state (fenced), with the named step records and the
        completions kept by `fold` (with their events, first; the write is then shielded from
        cancellation, as a checkpoint is).

        `final=True` marks the last write of the owning execution: when it holds the lock
        through `hold`, the same atomic write releases it (save before release, in one trip).
        Once a terminal status is saved, the run's correlation ids are released. With
        `unless_control`, a pending control request refuses the write (nothing written): the
        folded completions are then checkpointed on their own, the request is kept in
        `control`, and False is returned (else True).
        """
        state = self.state
        state.status = status
        state.updated_at = clock.now()
        for name, value in changes.items():
            setattr(state, name, value)
        folded = self.folded
        if folded:
            steps = [*folded, *(steps or ())]
            events = [e for pending in folded.values() for e in pending] + (events or [])
        encoded_steps = (
            {key: records.encode(self.records[key]) for key in steps} if steps else None
        )
        hold = self.hold if final and self.hold is not None and not self.hold.released else None
        places = self.gates.places_to_release() if final else []
        if hold is not None:
            hold.releasing = True  # the keeper's extensions may now find the lock released
        write = self.storage.save_state
        # a completion is shielded as in `checkpoint` (unless the write awaits nothing: @inline)
        shield = folded and getattr(write, INLINE, False) is not True
        try:
            with self.shielded() if shield else _UNSHIELDED:
                control = await write(
                    self.run_id, self.owner, status=status, previous_status=self.stored_status,
                    state=records.encode(state), steps=encoded_steps,
                    events=[records.encode(e) for e in events or ()],
                    clear_control=clear_control, publish=publish, release=hold is not None,
                    gates=places, unless_control=unless_control,
                )
            if unless_control and control is not None:  # refused: nothing was written
                self.folded = {}
                for key, pending in folded.items():
                    await self.checkpoint(key, self.records[key], pending)
                self.control = self.control or records.decode_control(control)
                if hold is not None:
                    hold.releasing = False
                return False
        except BaseException:
            if hold is not None:
                hold.releasing = False  # not released: a refused extension is a loss again
            raise
        self.folded = {}
        if hold is not None:
            hold.released = True
        self.gates.released_by_save(places)
        self._remember(events or ())
        self.stored_status = status
        if clear_control:
            self.control = None
        elif control is not None and self.control is None:
            self.control = records.decode_control(control)
        if (final or status.is_ended) and self.plan.map_keys:
            await self.refresh_maps()
        if status.is_terminal and any(r.correlation_id is not None
                                      for r in self.records.values()):
            await self.release_correlations()
        return True

    async def refresh_maps(self) -> None:
        """After the execution's last write: give the slots of the run's maps that started the
        run's expiry (api.md §13: none while it lives, its retention once it has ended), so
        they expire with the run and never before it (the slots are keys of their own). The
        status write did so already for every slot the storage recorded with the run (see
        `save_elements`); this covers slots an earlier version wrote. Best effort."""
        maps = [key for key in self.plan.map_keys if key in self.records]
        if maps:
            try:
                await self.storage.refresh_elements(
                    self.run_id, [k for key in maps for k in slot_keys(key)])
            except StorageError:
                log.warning("reactorflow.map.refresh_failed run_id=%s", self.run_id,
                            exc_info=True)

    async def release_correlations(self) -> None:
        """Free the correlation ids this run's interrupts registered (it waits for no payload
        any more). Best effort: a mapping left behind by a failure here names a run that has
        ended, and the next run that wants the id takes it over (see `interrupts`)."""
        for correlation in sorted({r.correlation_id for r in self.records.values()
                                   if r.correlation_id is not None}):
            try:
                await self.storage.release_correlation(self.reactor, correlation, self.run_id)
            except StorageError:
                log.warning("reactorflow.correlation.release_failed run_id=%s correlation_id=%s",
                            self.run_id, correlation, exc_info=True)


_NO_HOOKS = Hooks(())


def hooks_for(reactor: Declared) -> Hooks:
    """The middleware hooks of an execution of `reactor`: the configured middleware, then the
    reactor's own."""
    middleware = config.settings().middleware
    if not middleware and not reactor.middleware:
        return _NO_HOOKS  # (stateless: one for every execution without middleware)
    return Hooks([*middleware, *reactor.middleware])


def event(kind: str, step: str = "", attempt: int = 0, detail: str = "") -> Event:
    return Event(clock.now(), kind, step, attempt, detail)


def new_state(status: Status) -> RunState:
    return RunState(status=status, updated_at=clock.now())
