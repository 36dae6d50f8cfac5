"""Element reactors (`map_step(reactor=child)`): each element runs the child reactor as a run of
its own, with an id derived from the element (`<run>-<map>-<index>`), inline in the process that
runs the element (the run's, or a worker's for a fanned-out map).

* The map's function returns the element's child inputs (validated against the child's
  `inputs`); the element's result is the child's value. A child that fails rolled its own
  steps back: the element is failed with the child's error.
* The id is derived, so an element re-run after a crash finds its child stored and waits for
  it (the sweeper recovers a child whose execution died) instead of starting another.
* Rolling the map back undoes each completed element's child run (`undo`), highest index
  first. Async units inside a child are never rolled back, as anywhere.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reactorflow import config
from reactorflow.definition.graph import plan_for
from reactorflow.errors import RunExists
from reactorflow.records import ElementRecord, ErrorRecord
from reactorflow.runtime import operations
from reactorflow.runtime.creation import create_run
from reactorflow.runtime.execution import Execution
from reactorflow.runtime.inputs import validate_inputs
from reactorflow.runtime.maps.elements import Scope, encode
from reactorflow.runtime.ownership import new_owner
from reactorflow.status import Status, StepStatus

if TYPE_CHECKING:
    from reactorflow.definition.graph import Node
    from reactorflow.snapshot import Run


def element_run_id(run_id: str, key: str, index: int) -> str:
    return f"{run_id}-{key.replace('.', '-')}-{index}"


async def run_child(scope: Scope, node: Node, kwargs: dict[str, Any], index: int
                    ) -> tuple[ElementRecord, BaseException | None]:
    """Run one element's child reactor to its end; the element's outcome."""
    child = node.spec.child
    assert child is not None
    try:
        inputs = validate_inputs(child, await node.spec.fn(**kwargs))
    except Exception as exc:
        return ElementRecord(StepStatus.FAILED, 1, error=ErrorRecord.from_exception(exc)), exc
    storage = config.current_storage()
    child_id = element_run_id(scope.run_id, node.key, index)
    owner = new_owner()
    try:
        meta, state, started = await create_run(storage, child, plan_for(child), child_id,
                                                inputs, owner)
    except RunExists:
        run: Run = await operations.wait(child, child_id)
    else:
        ex = Execution(plan=plan_for(child), storage=storage, owner=owner, meta=meta,
                       state=state, steps={}, claims={}, hooks=operations.hooks_for(child))
        ex.history = [started]
        run = await operations.snapshot(await operations.run_owned(child, storage, child_id,
                                                                   owner, ex))
    if run.status is Status.COMPLETED:
        try:
            return ElementRecord(StepStatus.COMPLETED, 1,
                                 encode(scope, node, index, run.value)), None
        except Exception as exc:
            return ElementRecord(StepStatus.FAILED, 1,
                                 error=ErrorRecord.from_exception(exc)), exc
    error = run.error
    record = ErrorRecord(error.type if error else "ChildRunFailed",
                         f"element reactor run {child_id!r} ended {run.status}"
                         + (f": {error.message}" if error else ""))
    return ElementRecord(StepStatus.FAILED, 1, error=record), RuntimeError(record.message)


async def undo_child(scope: Scope, node: Node, index: int) -> None:
    """Roll back a completed element's child run."""
    child = node.spec.child
    assert child is not None
    await operations.undo(child, element_run_id(scope.run_id, node.key, index))
