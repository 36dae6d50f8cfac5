"""Which step completion rides in the run's final save instead of a checkpoint of its own
(`Execution.fold`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from reactorflow.definition.graph import Node
    from reactorflow.runtime.engine.forward import Forward


def completes_run(forward: Forward, node: Node) -> bool:
    """Whether the completion of `node` completes the run: the last unsettled step of the root,
    nothing else in flight, queued, waiting, parked or retrying, no stop, control request,
    hand-off after it, or composed child's gates open. Its record and events are then written by
    the run's final save (`Execution.fold`), which a control request that came meanwhile
    refuses (`unless_control`): the step is then checkpointed on its own and the request
    honoured, as at any step boundary. The reactor's own gates ride in that save as in any
    final save: `unless_control` drops them only if the write landed, so a refused save keeps
    them held through the rollback the request may start.

    Always for a run that got a payload (the tail of a `continue_`); for any other run where
    the storage's `save_step` is its own (`@foldable`, `Execution.folds`): a `save_step`
    replaced on the storage object (fault injection, a test's slow write, which may watch every
    checkpoint: `tests/runtime/test_checkpoint_shield.py`) or a subclass's override gets every
    step's checkpoint, the last one included.

    Args:
        forward: The drive the step completed in.
        node: The step.
    """
    ex = forward.ex
    return ((ex.folds or bool(ex.claims)) and not node.level and forward.unsettled[""] == 1
            and len(forward.in_flight) == 1 and not forward.queue and not forward.stopping
            and not forward.waiting and not forward.parked and not forward.retrying
            and ex.control is None and forward.handoff != ("after", node.key)
            and not ex.level_entries)
