"""Building user-facing snapshots (`rf.Run`) from stored records."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import msgspec

from reactorflow import records
from reactorflow.definition.graph import Plan, waiting_label
from reactorflow.errors import CorruptRecord
from reactorflow.records import Event, RunMeta, RunState, StepRecord
from reactorflow.snapshot import Run, RunSummary, StepState
from reactorflow.status import Status, StepStatus
from reactorflow.storage.base import RunHead, StoredRun

log = logging.getLogger("reactorflow.run")


def _decode_head(head: RunHead) -> tuple[RunMeta | None, RunState]:
    """The head's state (required) and meta (None when unreadable: a run marked failed for
    that reason stays readable)."""
    try:
        state = records.decode_state(head.state)
    except msgspec.DecodeError as exc:
        raise CorruptRecord(head.run_id, str(exc)) from exc
    try:
        meta: RunMeta | None = records.decode_meta(head.meta)
    except msgspec.DecodeError:
        meta = None
    return meta, state


def _step_state(record: StepRecord) -> StepState:
    error = record.rollback_error or record.error
    text = f"{error.type}: {error.message}" if error is not None else None
    return StepState(StepStatus(record.status), record.attempts, record.started_at,
                     record.finished_at, text)


def _decode_value(plan: Plan | None, key: str | None, record: StepRecord | None) -> Any:
    if key is None or record is None or record.status != StepStatus.COMPLETED:
        return None
    node = plan.nodes.get(key) if plan is not None else None
    try:
        if node is not None:
            return node.decoder.decode(record.result)
    except msgspec.DecodeError:
        log.warning("reactorflow.run.value_undecodable step=%s", key)
    return msgspec.msgpack.decode(record.result)


def build_run(plan: Plan | None, stored: StoredRun, history: list[bytes]) -> Run:
    head = stored.head
    meta, state = _decode_head(head)
    try:
        steps = {key: records.decode_step(raw) for key, raw in stored.steps.items()}
        events = [records.decode_event(raw) for raw in history]
    except msgspec.DecodeError as exc:
        raise CorruptRecord(head.run_id, str(exc)) from exc
    return assemble(plan, head.run_id, head.reactor, Status(head.status), meta, state, steps,
                    events, head.created_at)


def _when(event: Event) -> float:
    return event.at


def assemble(plan: Plan | None, run_id: str, reactor: str, status: Status,
             meta: RunMeta | None, state: RunState, steps: Mapping[str, StepRecord],
             events: list[Event], created_at: float, *,
             values: Mapping[str, Any] | None = None) -> Run:
    """A `Run` from decoded records (read back from storage, or held by an execution).

    History is in the order events happened: concurrent steps checkpoint over different
    connections, so the order in which storage appended their events may differ from it."""
    states: dict[str, StepState] = {}
    if plan is not None:
        for key in plan.nodes:
            record = steps.get(key)
            states[key] = _step_state(record) if record is not None else StepState(
                StepStatus.PENDING)
    for key, record in steps.items():
        if key not in states:
            states[key] = _step_state(record)
    value = None
    if status is Status.COMPLETED and plan is not None:
        value_key = plan.levels[""].value_key
        if values is not None and value_key is not None and value_key in values:
            value = values[value_key]
        else:
            value = _decode_value(plan, value_key, steps.get(value_key or ""))
    inputs: Any = None
    if meta is not None:
        try:
            inputs = (plan.levels[""].inputs_decoder.decode(meta.inputs) if plan is not None
                      else msgspec.msgpack.decode(meta.inputs))
        except msgspec.DecodeError:
            inputs = msgspec.msgpack.decode(meta.inputs)
    return Run(
        id=run_id, reactor=reactor, status=status, value=value, error=state.error,
        waiting_on=[waiting_label(k) for k in state.waiting_on] if status in (
            Status.PAUSED, Status.RUNNING) else [],
        steps=states, history=sorted(events, key=_when),
        created_at=meta.created_at if meta is not None else created_at,
        updated_at=state.updated_at,
        timeout_at=state.timeout_at, halt_reason=state.halt_reason,
        cancel_reason=state.cancel_reason, inputs=inputs,
        retried_from=meta.retried_from if meta is not None else None,
    )


def build_summary(head: RunHead) -> RunSummary:
    meta, state = _decode_head(head)
    return RunSummary(
        id=head.run_id, reactor=head.reactor, status=Status(head.status),
        created_at=meta.created_at if meta is not None else head.created_at,
        updated_at=state.updated_at, error=state.error,
        waiting_on=[waiting_label(k) for k in state.waiting_on] if head.status in (
            Status.PAUSED, Status.RUNNING) else [],
    )
