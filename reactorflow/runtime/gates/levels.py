"""The gates of a composed child: the compose step's own `gates=` and the child reactor's.

Both are taken together when the child opens (scope: the compose step's key; a lock the run
already holds is re-entered), held while the child's steps run, and given back when the compose
step completes. Like the run's own gates they are let go when the execution stops at a pause
or a snooze, kept while the run is parked (`gates.parked`), and taken again by the next
execution (`retake`). A used period skips the
compose step; a busy gate fails it in a caller, or snoozes the run in a worker.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

import anyio

from reactorflow.errors import GateKeyError
from reactorflow.runtime.engine.stepcall import arguments
from reactorflow.runtime.gates.run_gates import run_needs
from reactorflow.runtime.gates.scope import Entry, Need, enter, leave
from reactorflow.runtime.gates.step_gates import step_needs
from reactorflow.status import StepStatus

if TYPE_CHECKING:
    from reactorflow.definition.graph import Node, Plan
    from reactorflow.runtime.engine.execution import Execution


def has_gates(node: Node) -> bool:
    child = node.spec.child
    return bool(node.spec.gates) or (child is not None and bool(child.gates))


def level_needs(ex: Execution, node: Node, kwargs: dict[str, Any], inputs: Any) -> list[Need]:
    child = node.spec.child
    assert child is not None
    return [*step_needs(ex, node, kwargs), *run_needs(child, inputs, ex.run_id)]


async def open_level(ex: Execution, node: Node, kwargs: dict[str, Any],
                     inputs: Any) -> Entry:
    """Take the child's gates as it opens (`GateKeyError` when a key cannot be built); the
    entry says whether it was admitted. An admitted entry is kept until `close_level`."""
    needs = level_needs(ex, node, kwargs, inputs)
    entry = await enter(ex.gates, needs, ex.step_prefix + node.key, wait=not ex.mode.in_worker,
                        keep_turn=ex.mode.in_worker, step=node.key, element=ex.element)
    if entry.admitted:
        ex.level_entries[node.key] = entry
    return entry


async def close_level(ex: Execution, key: str, *, completed: bool) -> None:
    entry = ex.level_entries.pop(key, None)
    if entry is not None:
        with anyio.CancelScope(shield=True):
            await leave(ex.gates, entry, completed=completed)


def gated(plan: Plan) -> tuple[Node, ...]:
    """The plan's steps with gates of their own or of their child (looked at once per plan)."""
    found = _GATED.get(plan)
    if found is None:
        found = _GATED[plan] = tuple(n for n in plan.nodes.values() if has_gates(n))
    return found


_GATED: weakref.WeakKeyDictionary[Plan, tuple[Node, ...]] = weakref.WeakKeyDictionary()


async def retake(ex: Execution) -> Entry | None:
    """Take again the gates of every child still open; the first refused entry, if any."""
    for node in gated(ex.plan):
        key = node.key
        record = ex.records.get(key)
        if (record is None or record.status != StepStatus.RUNNING or not record.child_started
                or key in ex.level_entries):
            continue
        try:
            needs = level_needs(ex, node, await arguments(ex, node), ex.level_inputs[key])
        except GateKeyError:
            continue  # it opened with these keys: they are built the same way again
        entry = await enter(ex.gates, needs, key, wait=not ex.mode.in_worker, keep_turn=True,
                            charge_rate=False, check_period=False, step=key)
        if not entry.admitted:
            return entry
        ex.level_entries[key] = entry
    return None


async def release_all(ex: Execution) -> None:
    """The execution stops: give back every open child's places (their turns are kept)."""
    for key in list(ex.level_entries):
        entry = ex.level_entries.pop(key)
        await leave(ex.gates, entry, completed=False, keep_turn=True)
