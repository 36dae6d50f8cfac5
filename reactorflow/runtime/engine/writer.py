"""`RunWriter`: every write of one owned run (step checkpoints, kept completions, state saves).

An `Execution` holds one (`ex.writer`) and shares with it the run's step records and state; the
writer owns what exists only because the run is written: the step sequence, the completions
kept for a later write (`fold`, `flush`), the writes not yet confirmed, the events it knows
storage holds (`history`), the control request a write read back (`control`), the status
storage holds (`stored_status`), and the lock hold its final save releases (`hold`). Every
write is fenced by the execution's lock owner.

Its methods are the engine's inner loop (a plain step's completion is one `checkpoint`, or one
`fold` and the final `save_state`): the forward drive binds the writer once (`Runners.writer`)
and reads its slots directly.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

import anyio

from reactorflow import clock, records
from reactorflow.errors import StorageError
from reactorflow.protection import sealing
from reactorflow.protection.keys import RunKeys
from reactorflow.protection.resolve import plain_keys
from reactorflow.records import Control, Event, RunState, StepRecord
from reactorflow.runtime.engine.map_slot_keys import slot_keys
from reactorflow.status import ENDED, Status
from reactorflow.storage.contract.method_marks import INLINE, batches, is_foldable

if TYPE_CHECKING:
    from reactorflow.definition.graph import Plan
    from reactorflow.runtime.engine.lockkeeper import Hold
    from reactorflow.runtime.gates.scope import GateHolds
    from reactorflow.storage.contract.storage import Storage

log = logging.getLogger("reactorflow.run")
_encode = records.encode
_UNSHIELDED: AbstractContextManager[None] = nullcontext()  # (a final save with no completion)


class RunWriter:
    """The writes of one run while an execution owns it (see the module docstring)."""

    __slots__ = (
        "_shield_kind",
        "batches",
        "control",
        "folded",
        "folds",
        "gates",
        "history",
        "hold",
        "keys",
        "loaded_history",
        "owner",
        "plan",
        "reactor",
        "records",
        "run_id",
        "seq",
        "state",
        "storage",
        "stored_status",
        "unconfirmed",
    )

    def __init__(self, *, storage: Storage, owner: str, run_id: str, reactor: str, plan: Plan,
                 state: RunState, steps: dict[str, StepRecord], gates: GateHolds,
                 history: list[Event] | None = None,
                 loaded_history: list[bytes] | None = None, keys: RunKeys | None = None) -> None:
        self.storage = storage
        self.keys = keys if keys is not None else plain_keys(run_id)  # seals error text
        self.owner = owner
        self.run_id = run_id
        self.reactor = reactor
        self.plan = plan
        self.state = state  # the execution's own objects: written here, read there
        self.records = steps
        self.gates = gates  # the places a final save gives back
        self.seq = max([r.seq for r in steps.values()]) if steps else 0
        self.stored_status = state.status
        self.control: Control | None = None
        self.hold: Hold | None = None  # the lock hold the final save releases, while driven
        self.history = history  # events written here, when all are known...
        self.loaded_history = loaded_history  # ...after these, read when loaded
        self.unconfirmed: set[str] = set()  # step writes cut off: landed or not, unknown
        self.folded: dict[str, list[Event]] = {}  # completions the next save_state carries
        self.folds = is_foldable(storage.save_step)  # a plain run's last completion may, too
        self.batches = batches(storage)  # and completions nothing waits for, until `flush`
        self._shield_kind: type[anyio.CancelScope] | None = None  # (see `shielded`)

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
        keys = self.keys
        write = save(self.run_id, self.owner, key, _encode(sealing.step(keys, record)),
                     [_encode(sealing.event(keys, e)) for e in events], unit=unit)
        if getattr(save, INLINE, False) is True:  # awaits nothing: no cancellation reaches it
            control = await write
        else:
            with self.shielded():
                control = await write
        unconfirmed.discard(key)
        self._remember(events)
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
        keys = self.keys
        steps = {key: _encode(sealing.step(keys, self.records[key])) for key in folded}
        control = await self.storage.save_steps(  # type: ignore[attr-defined]
            self.run_id, self.owner, steps, [_encode(sealing.event(keys, e)) for e in events])
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
        keys = self.keys
        encoded_steps = (
            {key: _encode(sealing.step(keys, self.records[key])) for key in steps} if steps
            else None
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
                    state=_encode(sealing.state(keys, state)), steps=encoded_steps,
                    events=[_encode(sealing.event(keys, e)) for e in events or ()],
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
                if self.state.status in ENDED:  # a search still finds it, until it expires
                    await self.storage.remember_correlation(self.reactor, correlation,
                                                            self.run_id)
            except StorageError:
                log.warning("reactorflow.correlation.release_failed run_id=%s correlation_id=%s",
                            self.run_id, correlation, exc_info=True)
