"""Checking an interrupt's payload against its schema without delivering it.

`validate_payload` (public: `rf.validate_payload`) needs no run and touches no storage: an
operator checks a payload before sending it, so that a typo never counts one of the interrupt's
`max_attempts`. `resume.check_continue` adds the checks of the run itself (still writing
nothing) for `reactorflow continue --check` and the dashboard's form.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from reactorflow.definition.conformance import Rejected, conform
from reactorflow.definition.graph import SEP, Node, Plan, plan_for, waiting_label
from reactorflow.definition.specs import StepKind
from reactorflow.errors import PayloadValidationError, UnknownInterrupt

if TYPE_CHECKING:
    from reactorflow.definition.reactor import Reactor


def step_key(step: str | Sequence[str]) -> str:
    """A bare name means a root step; a sequence (tuple, or a list from JSON) is a path."""
    if isinstance(step, str):
        return step
    return SEP.join(str(part) for part in step)


def interrupt_node(plan: Plan, key: str) -> Node | None:
    """The node of interrupt `key` in `plan`, or None when `key` names no interrupt."""
    node = plan.nodes.get(key)
    if node is None or node.spec.interrupt is None or node.kind is not StepKind.INTERRUPT:
        return None
    return node


def checked_payload(node: Node, payload: Any, *, run_id: str | None, reactor: str) -> Any:
    """`payload` conformed to the schema of interrupt `node`; nothing is counted.

    Raises:
        PayloadValidationError: it does not conform (`counted` False), naming the field.
    """
    options = node.spec.interrupt
    assert options is not None
    try:
        return conform(payload, options.payload_type)
    except Rejected as exc:
        raise PayloadValidationError(run_id, waiting_label(node.key), exc.field, exc.reason,
                                     attempts=0, max_attempts=options.max_attempts,
                                     exhausted=False, counted=False, reactor=reactor) from None


def validate_payload(reactor: Reactor, step: str | Sequence[str], payload: Any) -> Any:
    """Check `payload` against the schema of interrupt `step` of `reactor`, without sending it.

    Nothing is stored, read or counted: a payload refused here never uses up one of the
    interrupt's `max_attempts` (only `continue_` counts them). The run itself is not checked
    (whether it is paused, waiting on `step`, before the deadline); `reactorflow continue
    --check` and the dashboard's form check that too, still writing nothing.

    Args:
        reactor: The reactor that declares the interrupt.
        step: The interrupt's name, or its path (a tuple or list) inside composed children.
        payload: The payload, as it would be given to `continue_`.

    Returns:
        The payload converted to the interrupt's `payload` annotation, as its body would
        receive it.

    Raises:
        UnknownInterrupt: `step` is not an interrupt of `reactor` (the message lists them).
        PayloadValidationError: The payload does not match the schema (`counted` is False),
            naming the field and the reason.
        DefinitionError: The reactor's graph cannot be built.
    """
    plan = plan_for(reactor)
    key = step_key(step)
    node = interrupt_node(plan, key)
    if node is None:
        raise UnknownInterrupt(reactor.name, waiting_label(key),
                               [waiting_label(k) for k in plan.nodes
                                if interrupt_node(plan, k) is not None])
    return checked_payload(node, payload, run_id=None, reactor=reactor.name)
