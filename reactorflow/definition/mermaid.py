"""Render a reactor's graph as a Mermaid flowchart."""

from __future__ import annotations

from typing import TYPE_CHECKING

from reactorflow.definition.graph import plan_for
from reactorflow.definition.specs import StepKind

if TYPE_CHECKING:
    from reactorflow.definition.graph import Node
    from reactorflow.definition.reactor import Reactor


def _node_id(key: str) -> str:
    return "n_" + key.replace(".", "__").replace("-", "_")


def _shape(node: Node) -> str:
    label = node.spec.name
    kind = node.kind
    if kind is StepKind.INTERRUPT:
        return f'{_node_id(node.key)}{{{{"{label} ⏸"}}}}'
    if kind is StepKind.ASYNC_STEP:
        return f'{_node_id(node.key)}[/"{label} (async)"/]'
    if kind is StepKind.ASYNC_REACTOR:
        return f'{_node_id(node.key)}[/"{label} (async reactor)"/]'
    if kind is StepKind.MAP:
        return f'{_node_id(node.key)}[["{label} (map)"]]'
    if kind is StepKind.COMPOSE:
        child = node.spec.child.name if node.spec.child is not None else "?"
        return f'{_node_id(node.key)}[["{label} ({child})"]]'
    return f'{_node_id(node.key)}["{label}"]'


def render(reactor: Reactor) -> str:
    plan = plan_for(reactor)
    lines = ["flowchart TD"]

    def emit_level(level_key: str, indent: str) -> None:
        level = plan.levels[level_key]
        for key in level.node_keys:
            node = plan.nodes[key]
            lines.append(indent + _shape(node))
            if node.kind is StepKind.COMPOSE:
                lines.append(f'{indent}subgraph {_node_id(key)}_child["{level.reactor.name}.'
                             f'{node.spec.name}: {plan.levels[key].reactor.name}"]')
                emit_level(key, indent + "  ")
                lines.append(f"{indent}end")
                lines.append(f"{indent}{_node_id(key)} -.- {_node_id(key)}_child")
        for key in level.node_keys:
            node = plan.nodes[key]
            after = {f"{level_key}.{a}" if level_key else a for a in node.spec.after}
            for dep in node.deps:
                arrow = "-.->" if dep in after else "-->"
                lines.append(f"{indent}{_node_id(dep)} {arrow} {_node_id(key)}")

    emit_level("", "  ")
    return "\n".join(lines) + "\n"
