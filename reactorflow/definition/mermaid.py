"""Render a reactor's graph as a Mermaid flowchart."""

from __future__ import annotations

from typing import TYPE_CHECKING

from reactorflow.definition.graph import plan_for
from reactorflow.definition.specs import StepKind

if TYPE_CHECKING:
    from reactorflow.definition.graph import Node, Plan
    from reactorflow.definition.table import Declared


def _node_id(key: str) -> str:
    return "n_" + key.replace(".", "__").replace("-", "_")


def _shape(node: Node, prefix: str = "") -> str:
    label = node.spec.name
    kind = node.kind
    key = prefix + node.key
    if kind is StepKind.INTERRUPT:
        return f'{_node_id(key)}{{{{"{label} ⏸"}}}}'
    if kind is StepKind.ASYNC_STEP:
        return f'{_node_id(key)}[/"{label} (async)"/]'
    if kind is StepKind.ASYNC_REACTOR:
        return f'{_node_id(key)}[/"{label} (async reactor)"/]'
    if kind is StepKind.SLEEP:
        return f'{_node_id(key)}(["{label} (sleep)"])'
    if kind is StepKind.MAP:
        return f'{_node_id(key)}[["{label} (map)"]]'
    if kind is StepKind.COMPOSE:
        child = node.spec.child.name if node.spec.child is not None else "?"
        return f'{_node_id(key)}[["{label} ({child})"]]'
    return f'{_node_id(key)}["{label}"]'


def render(reactor: Declared) -> str:
    """The reactor's graph as a Mermaid flowchart: a composed child, and a map's element
    reactor (its steps run once per element), as a subgraph under its step."""
    lines = ["flowchart TD"]

    def emit_level(plan: Plan, level_key: str, prefix: str, indent: str) -> None:
        level = plan.levels[level_key]
        for key in level.node_keys:
            node = plan.nodes[key]
            lines.append(indent + _shape(node, prefix))
            child = (plan.levels[key].reactor.name if node.kind is StepKind.COMPOSE
                     else node.spec.child.name if node.kind is StepKind.MAP
                     and node.spec.child is not None else None)
            if child is None:
                continue
            every = " (each element)" if node.kind is StepKind.MAP else ""
            box = _node_id(prefix + key)
            lines.append(f'{indent}subgraph {box}_child["{level.reactor.name}.'
                         f'{node.spec.name}: {child}{every}"]')
            if node.kind is StepKind.COMPOSE:
                emit_level(plan, key, prefix, indent + "  ")
            else:
                emit_level(plan.elements[key], "", f"{prefix}{key}.", indent + "  ")
            lines.append(f"{indent}end")
            lines.append(f"{indent}{box} -.- {box}_child")
        for key in level.node_keys:
            node = plan.nodes[key]
            after = {f"{level_key}.{a}" if level_key else a for a in node.spec.after}
            for dep in node.deps:
                arrow = "-.->" if dep in after else "-->"
                lines.append(f"{indent}{_node_id(prefix + dep)} {arrow} {_node_id(prefix + key)}")

    emit_level(plan_for(reactor), "", "", "  ")
    return "\n".join(lines) + "\n"
