"""Building user-facing snapshots (`rf.Run`) from stored records."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from operator import attrgetter
from typing import Any

import msgspec

from reactorflow import clock, records
from reactorflow.definition.graph import VERSION_ENTRY, Plan, waiting_label
from reactorflow.definition.redaction import NONE, Redactions
from reactorflow.errors import CorruptRecord, KeyUnavailable
from reactorflow.protection import fields
from reactorflow.protection.envelope import TEXT_PREFIX
from reactorflow.protection.errors import open_run_error, placeholder
from reactorflow.protection.keys import RunKeys
from reactorflow.protection.resolve import plain_keys
from reactorflow.records import Event, RunError, RunMeta, RunState, StepRecord
from reactorflow.redaction import masked, merge
from reactorflow.snapshot import Run, RunSummary, StepState, attach_result
from reactorflow.status import EventKind, Status, StepStatus
from reactorflow.storage.contract.decoding import reading
from reactorflow.storage.contract.values import RunHead, StoredRun

log = logging.getLogger("reactorflow.run")


def run_status(head: RunHead) -> Status:
    """The head's status (`CorruptRecord` when it is not one this version knows)."""
    try:
        return Status(head.status)
    except ValueError:
        raise CorruptRecord(head.run_id, f"its status {head.status[:40]!r} is not one this "
                                         "version of reactorflow knows") from None


def read_head(head: RunHead) -> tuple[Status, RunMeta, RunState]:
    """Status, meta and state of a run an operation will act on (all three required).

    Raises:
        CorruptRecord: any of them cannot be read.
    """
    status = run_status(head)
    meta, state = _decode_head(head)
    if meta is None:
        with reading(head.run_id, "meta"):
            records.decode_meta(head.meta)
    assert meta is not None
    return status, meta, state


def _decode_head(head: RunHead) -> tuple[RunMeta | None, RunState]:
    """The head's state (required) and meta (None when unreadable: a run marked failed for
    that reason stays readable)."""
    with reading(head.run_id, "state"):
        state = records.decode_state(head.state)
    try:
        meta: RunMeta | None = records.decode_meta(head.meta)
    except msgspec.DecodeError:
        meta = None
    return meta, state


_WITH_RESULT = frozenset({StepStatus.COMPLETED, StepStatus.UNDONE})
_PENDING, _COMPLETED = StepStatus.PENDING, StepStatus.COMPLETED  # looked up once


def redactions_of(plan: Plan | None, meta: RunMeta | None) -> Redactions:
    """What a snapshot of the run masks: what its plan marks `rf.Redacted`, and what was
    marked when the run started (stored in its meta: a reader without the reactor still masks,
    and a mark removed later still hides the values stored under it)."""
    if meta is None or not (meta.redacted_inputs or meta.redacted_results):  # none stored
        return plan.redactions if plan is not None else NONE
    stored = Redactions(meta.redacted_inputs, dict(meta.redacted_results))
    if plan is None or not stored:
        return plan.redactions if plan is not None else stored
    current = plan.redactions
    results = dict(current.results)
    for key, mask in stored.results.items():
        results[key] = merge(results.get(key), mask)
    return Redactions(merge(current.inputs, stored.inputs), results)


def _step_state(plan: Plan | None, keys: RunKeys, key: str, record: StepRecord,
                values: Mapping[str, Any] | None, mask: Any) -> StepState:
    """The step as users see it, its redacted parts masked; its result is decoded only when
    read (`StepState.result`); a sealed value without its key reads `"<encrypted>"`."""
    error = record.rollback_error or record.error
    text = (f"{error.type}: {keys.shown_text(fields.ERROR, error.message)}"
            if error is not None else None)
    status = record.status
    state = StepState(status if type(status) is StepStatus else StepStatus(status),
                      record.attempts, record.started_at, record.finished_at, text,
                      wake_at=clock.utc(record.wake_at) if record.wake_at is not None
                      and status == StepStatus.WAITING else None)
    if status not in _WITH_RESULT:
        return state
    if values is not None and key in values:  # decoded already by the execution
        value = values[key]
        return attach_result(state, value=value if mask is None else masked(value, mask))
    return attach_result(state, load=partial(_masked_result, mask, plan, keys, key, record))


def _masked_result(mask: Any, plan: Plan | None, keys: RunKeys, key: str,
                   record: StepRecord) -> Any:
    return masked(_decode_result(plan, keys, key, record), mask)


def shown(keys: RunKeys, field: str, data: bytes) -> bytes | str:
    """A stored value's clear bytes, or, without its key, the placeholder a reader shows
    (`"<encrypted>"`, `"<erased>"`).

    Raises:
        CorruptRecord: it fails authentication.
    """
    try:
        return keys.open(field, data)
    except KeyUnavailable as exc:
        return placeholder(exc)


def _decode_result(plan: Plan | None, keys: RunKeys, key: str, record: StepRecord) -> Any:
    """A step's stored result, typed by its return annotation (untyped if that fails); a
    sealed one without its key is `"<encrypted>"`.

    Raises:
        CorruptRecord: the result cannot be decoded at all, or fails authentication.
    """
    run_id = keys.run_id
    clear = shown(keys, fields.result(key), record.result)
    if isinstance(clear, str):
        return clear
    node = plan.nodes.get(key) if plan is not None else None
    try:
        if node is not None and node.spec.map is not None:  # its element count (see maps)
            return msgspec.msgpack.decode(clear)
        if node is not None:
            return node.decoder.decode(clear)
    except msgspec.DecodeError:
        log.warning("reactorflow.run.value_undecodable step=%s", key)
    try:
        return msgspec.msgpack.decode(clear)
    except msgspec.DecodeError as exc:
        raise CorruptRecord(run_id, f"the result of step {key!r} cannot be decoded: "
                                    f"{exc}") from exc


def build_run(plan: Plan | None, stored: StoredRun, history: Sequence[bytes], *,
              keys: RunKeys | None = None) -> Run:
    """The snapshot of a stored run (`keys`: the run's, resolved by the caller).

    Raises:
        CorruptRecord: its status, state or a step record cannot be read, or a sealed value
            fails authentication (a history entry that cannot be decoded only shows as a
            `history.unreadable` event).
    """
    head = stored.head
    status = run_status(head)
    meta, state = _decode_head(head)
    events = decode_history(head.run_id, history)
    steps = {}
    for key, raw in stored.steps.items():
        with reading(head.run_id, f"step {key!r}"):
            steps[key] = records.decode_step(raw)
    if keys is not None and keys.seals:
        authenticate(keys, steps)
    with reading(head.run_id, "step records"):  # (a value outside its enum)
        return assemble(plan, head.run_id, head.reactor, status, meta, state, steps, events,
                        head.created_at, keys=keys)


def authenticate(keys: RunKeys, steps: Mapping[str, StepRecord]) -> None:
    """Check every sealed step value of a run read back (results are decoded only when read):
    one that fails authentication fails the snapshot now, naming its run and field; one whose
    key is not held is left to read `"<encrypted>"`.

    Raises:
        CorruptRecord: a sealed value fails authentication.
    """
    for key, record in steps.items():
        for field, data in ((fields.result(key), record.result),
                            (fields.child_inputs(key), record.child_inputs)):
            try:
                keys.open(field, data)
            except KeyUnavailable:
                continue


def decode_history(run_id: str, history: Iterable[bytes]) -> list[Event]:
    """A run's stored events. One that cannot be decoded becomes a `history.unreadable` event
    (logged) instead of making the whole run unreadable."""
    events: list[Event] = []
    for raw in history:
        try:
            events.append(records.decode_event(raw))
        except msgspec.DecodeError as exc:
            log.warning("reactorflow.run.event_unreadable run_id=%s reason=%s", run_id, exc)
            events.append(Event(events[-1].at if events else 0.0, EventKind.HISTORY_UNREADABLE,
                                detail=str(exc)))
    return events


_when = attrgetter("at")
"""The sort key of a run's history: events in the order they happened; a stable sort keeps
events of the same instant (a fake clock stands still between advances) in the order storage
appended them, the same for every reader."""


def assemble(plan: Plan | None, run_id: str, reactor: str, status: Status,
             meta: RunMeta | None, state: RunState, steps: Mapping[str, StepRecord],
             events: list[Event], created_at: float, *,
             values: Mapping[str, Any] | None = None, keys: RunKeys | None = None) -> Run:
    """A `Run` from decoded records (read back from storage, or held by an execution).

    History is in the order events happened: concurrent steps checkpoint over different
    connections, so the order in which storage appended their events may differ from it.
    Redacted inputs and results are masked (see `redactions_of`). Sealed values are opened
    with `keys` (the run's; default: the codec's); one without its key reads `"<encrypted>"`
    (`"<erased>"` for an erased subject's).

    Raises:
        CorruptRecord: a sealed value fails authentication.
    """
    keys = keys if keys is not None else plain_keys(run_id)
    redactions = redactions_of(plan, meta)
    masks = redactions.results
    states: dict[str, StepState] = {}
    if plan is not None:
        known = values if values is not None else {}
        for key in plan.nodes:
            record = steps.get(key)
            if record is None:
                states[key] = StepState(_PENDING)
            elif (record.status is _COMPLETED and key in known and record.error is None
                  and record.rollback_error is None and key not in masks):
                # the common case (as `_step_state`, inline): completed, its value at hand
                done = StepState(_COMPLETED, record.attempts, record.started_at,
                                 record.finished_at)
                done.__dict__["_result"] = known[key]
                states[key] = done
            else:
                states[key] = _step_state(plan, keys, key, record, values, masks.get(key))
    elif meta is not None:  # no reactor: the graph stored with the run gives order and steps
        for key in run_steps(meta.fingerprint):
            record = steps.get(key)
            states[key] = (StepState(_PENDING) if record is None else
                           _step_state(None, keys, key, record, values, masks.get(key)))
    for key, record in steps.items():
        if key not in states:
            states[key] = _step_state(plan, keys, key, record, values, masks.get(key))
    for key, gate in state.gate_waits.items():  # steps a worker put back for a busy gate
        pending = states.get(key)
        if pending is not None and pending.status == StepStatus.PENDING:
            states[key] = msgspec.structs.replace(pending, gate=gate)
    value = None
    if status is Status.COMPLETED and plan is not None:
        value_state = states.get(plan.levels[""].value_key or "")
        if value_state is not None and value_state.status == StepStatus.COMPLETED:
            value = value_state.result
    inputs: Any = None
    if meta is not None:
        clear = shown(keys, fields.INPUTS, meta.inputs)
        if isinstance(clear, str):
            inputs = clear
        else:
            try:
                inputs = (plan.levels[""].inputs_decoder.decode(clear) if plan is not None
                          else msgspec.msgpack.decode(clear))
            except msgspec.DecodeError:
                inputs = msgspec.msgpack.decode(clear)
            inputs = masked(inputs, redactions.inputs)
    waiting = state.waiting_on if status in (Status.PAUSED, Status.RUNNING) else []
    error = state.error
    if error is not None and _sealed(error):
        error = open_run_error(keys, error, shown=True)
    return Run(
        id=run_id, reactor=reactor, status=status, value=value, error=error,
        waiting_on=[waiting_label(k) for k in waiting],
        steps=states, history=sorted(opened_history(keys, events), key=_when),
        created_at=meta.created_at if meta is not None else created_at,
        updated_at=state.updated_at,
        timeout_at=earliest_deadline(state, waiting), halt_reason=state.halt_reason,
        cancel_reason=state.cancel_reason, inputs=inputs,
        retried_from=meta.retried_from if meta is not None else None,
        version=meta.version if meta is not None else 1,
        paused_by=state.paused_by if status is Status.PAUSED else None,
    )


def _sealed(error: RunError) -> bool:
    return error.message.startswith(TEXT_PREFIX) or error.traceback.startswith(TEXT_PREFIX)


def opened_history(keys: RunKeys, events: Iterable[Event]) -> list[Event]:
    """A run's events with the error text of their details opened (or `"<encrypted>"`)."""
    return [msgspec.structs.replace(e, detail=keys.shown_text(fields.ERROR, e.detail))
            if e.detail.startswith(TEXT_PREFIX) else e for e in events]


def run_steps(fingerprint: Mapping[str, Sequence[str]]) -> list[str]:
    """The keys of a run's steps in graph order, from the graph stored with it (its meta's
    `fingerprint`: the plan's nodes in declaration order, each after its dependencies, then
    the steps of its element reactors under `<map>.`, which are no steps of the run's own)."""
    element_maps = [f"{key}." for key, entry in fingerprint.items()
                    if entry and entry[0].startswith("map:")]
    return [key for key in fingerprint if key != VERSION_ENTRY
            and not any(key.startswith(prefix) for prefix in element_maps)]


def earliest_deadline(state: RunState, waiting: Iterable[str]) -> float | None:
    """The earliest deadline of the interrupts the run still waits on (`waiting`): one already
    answered, or a run no longer waiting, shows none (the stored `timeout_at` is written when a
    run pauses, and a resumed run keeps it until it pauses or ends)."""
    deadlines = [d for k in waiting if (d := state.deadlines.get(k)) is not None]
    return min(deadlines) if deadlines else None


def build_summaries(heads: Iterable[RunHead]) -> list[RunSummary]:
    """One summary per head; a corrupt one is marked (its `error` a `CorruptRecord`), or left
    out (logged) when even its status is unknown — never failing the whole page."""
    found: list[RunSummary] = []
    for head in heads:
        try:
            found.append(build_summary(head))
        except CorruptRecord as exc:
            log.warning("reactorflow.run.unreadable run_id=%s reason=%s", head.run_id,
                        exc.reason)
            if head.status in Status.__members__.values():
                found.append(RunSummary(
                    id=head.run_id, reactor=head.reactor, status=Status(head.status),
                    created_at=head.created_at, updated_at=head.touched_at,
                    error=RunError(None, "CorruptRecord", exc.message)))
    return found


def build_summary(head: RunHead) -> RunSummary:
    status = run_status(head)
    meta, state = _decode_head(head)
    error = state.error
    if error is not None and _sealed(error):  # (a listing resolves no data key: codec keys)
        error = open_run_error(plain_keys(head.run_id), error, shown=True)
    return RunSummary(
        id=head.run_id, reactor=head.reactor, status=status,
        created_at=meta.created_at if meta is not None else head.created_at,
        updated_at=state.updated_at, error=error,
        waiting_on=[waiting_label(k) for k in state.waiting_on] if head.status in (
            Status.PAUSED, Status.RUNNING) else [],
        version=meta.version if meta is not None else 1,
    )
