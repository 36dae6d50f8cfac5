"""The compiled plan of a reactor: every step of the tree (composed children flattened in).

A node's key is its path from the root joined with dots: `charge`, `fulfil.approve`. The plan is
built on first use and rebuilt when any declaration changes; it is immutable.

An element reactor (`map_step(reactor=child)`) is a flattened child too, one per element: its
steps are the child's own plan (`Plan.elements[map key]`), run for each element inside the run
(runtime.maps.children). They are part of the run's graph under the map — in its fingerprint
as `<map>.<child step>` (a changed child is a changed graph) and in its Mermaid chart — but not
nodes of the run's drive: the run's step records hold the map, its element slots the rest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec

from reactorflow import pydantic_types
from reactorflow.definition import naming
from reactorflow.definition.params import Source
from reactorflow.definition.redaction import Redactions, mask_of
from reactorflow.definition.specs import UNIT_KINDS, StepKind
from reactorflow.errors import DefinitionError
from reactorflow.markers import Outcome

if TYPE_CHECKING:
    from reactorflow.definition.table import Declared, StepSpec

_PLAIN_KINDS = frozenset({StepKind.STEP, StepKind.INTERRUPT})  # kinds `Node.plain` may be

SEP = "."


def join(level: str, name: str) -> str:
    return f"{level}{SEP}{name}" if level else name


def split(key: str) -> tuple[str, ...]:
    return tuple(key.split(SEP))


_SCALARS: frozenset[type] = frozenset({int, str, float, bool, type(None)})


def self_decoding(result_type: Any) -> frozenset[type]:
    """The types of result that decode back from storage, under `result_type`, as an equal
    value of the same type (exact types: a subclass, a bool for an int, an int for a float
    decode as something else). A step that returns one keeps its value instead of decoding
    the bytes it just encoded."""
    if result_type is Any:
        return _SCALARS
    if result_type is None or result_type is type(None):
        return frozenset({type(None)})
    if isinstance(result_type, type) and result_type in _SCALARS:
        return frozenset({result_type})
    return frozenset()


@dataclass(frozen=True, slots=True)
class Node:
    key: str
    level: str
    spec: StepSpec
    deps: tuple[str, ...]  # full keys, same level
    dependents: tuple[str, ...]
    result_type: Any
    decoder: msgspec.msgpack.Decoder[Any]  # of its result (of one element's, for a map)
    context_name: str | None  # the parameter that receives rf.StepContext, if any
    kind: StepKind
    unit_deps: tuple[str, ...]  # dependencies that are async units (their results are awaited)
    reads_maps: bool  # a parameter reads a map step's results (loaded before the step runs)
    plain: bool  # a step or interrupt without gates, timeout, when=, map or async-unit reads
    # (the fast path, `Forward._plain`)
    same_types: frozenset[type]  # result types that decode back unchanged (see self_decoding)
    # (a dependency's full key, why the step is skipped when that one was): `skip_reason`
    skip_checks: tuple[tuple[str, str], ...]

    @property
    def path(self) -> tuple[str, ...]:
        return split(self.key)


@dataclass(frozen=True, slots=True)
class Level:
    key: str  # "" for the root, else the compose node's key
    reactor: Declared
    node_keys: tuple[str, ...]
    value_key: str | None
    inputs_decoder: msgspec.msgpack.Decoder[Any]


class Plan:
    """Everything the executor needs to know about a reactor tree, precomputed."""

    def __init__(self, reactor: Declared) -> None:
        self.reactor = reactor
        self.nodes: dict[str, Node] = {}
        self.levels: dict[str, Level] = {}
        self.value_type: Any = self._build_level(reactor, "", ())
        self.elements: dict[str, Plan] = {  # map key -> its element reactor's plan
            key: plan_for(node.spec.child) for key, node in self.nodes.items()
            if node.kind is StepKind.MAP and node.spec.child is not None}
        self.fingerprint: dict[str, list[str]] = {
            key: [_kind_label(node.spec), *sorted(node.deps)] for key, node in self.nodes.items()
        }
        for key, child in self.elements.items():
            self.fingerprint.update({join(key, k): [entry[0], *(join(key, d) for d in entry[1:])]
                                     for k, entry in child.fingerprint.items()
                                     if k != VERSION_ENTRY})
        if reactor.version != 1:  # a version's graph is its own (version 1's stays as it was)
            self.fingerprint[VERSION_ENTRY] = [str(reactor.version)]
        self.redactions = self._redactions()
        self.map_keys: tuple[str, ...] = tuple(  # its maps (in composed children too)
            key for key, node in self.nodes.items() if node.spec.map is not None)

    def _build_level(self, reactor: Declared, level: str, stack: tuple[Declared, ...]) -> Any:
        if reactor in stack:
            raise DefinitionError(f"reactor {reactor.name!r} composes itself", reactor=reactor.name)
        value_step = reactor.value_step
        returns = reactor.table.returns
        if returns is not None and returns not in reactor.steps:
            raise DefinitionError(
                f"reactor {reactor.name!r}: returns={returns!r} names no step (steps: "
                f"{', '.join(reactor.steps) or 'none'})",
                reactor=reactor.name,
            )
        if value_step is not None and reactor.steps[value_step].kind in UNIT_KINDS:
            raise DefinitionError(
                f"reactor {reactor.name!r}: returns={value_step!r} names an async unit, which "
                "may still be running when the run ends; read it in a plain step and return "
                "that one",
                reactor=reactor.name,
            )
        dependents: dict[str, list[str]] = {name: [] for name in reactor.steps}
        for spec in reactor.steps.values():
            for dep in spec.deps:
                dependents[dep].append(spec.name)
        keys: list[str] = []
        value_type: Any = None
        for spec in reactor.steps.values():
            key = join(level, spec.name)
            keys.append(key)
            self.nodes[key] = None  # type: ignore[assignment]  # keep declaration order
            result_type = spec.return_type
            if spec.kind is StepKind.COMPOSE:
                assert spec.child is not None
                result_type = self._build_level(spec.child, key, (*stack, reactor))
            elif spec.kind is StepKind.MAP:
                assert spec.map is not None
                element: Any = spec.map.element_type
                result_type = list[element] if spec.map.atomic else list[Outcome[element]]
            elif spec.kind is StepKind.ASYNC_REACTOR:
                assert spec.child is not None
                result_type = plan_for(spec.child).value_type
            self.nodes[key] = Node(
                key=key,
                level=level,
                spec=spec,
                deps=tuple(join(level, d) for d in spec.deps),
                dependents=tuple(join(level, d) for d in dependents[spec.name]),
                result_type=result_type,
                decoder=pydantic_types.decoder(
                    spec.map.element_type if spec.map is not None else result_type),
                context_name=next((p.name for p in spec.params if p.source is Source.CONTEXT),
                                  None),
                kind=spec.kind,
                unit_deps=tuple(join(level, d) for d in spec.deps
                                if reactor.steps[d].kind in UNIT_KINDS),
                reads_maps=any(p.map_read is not None and p.source is Source.RESULT
                               for p in spec.params),
                plain=(spec.kind in _PLAIN_KINDS and not spec.gates and spec.timeout is None
                       and spec.when is None and not any(
                           reactor.steps[d].kind in UNIT_KINDS for d in spec.deps)
                       and not any(p.map_read is not None for p in spec.params)),
                same_types=self_decoding(result_type),
                skip_checks=_skip_checks(spec, level),
            )
            if spec.name == value_step:
                value_type = result_type
        self.levels[level] = Level(
            key=level,
            reactor=reactor,
            node_keys=tuple(keys),
            value_key=join(level, value_step) if value_step is not None else None,
            inputs_decoder=pydantic_types.decoder(
                reactor.inputs if reactor.inputs is not None else Any
            ),
        )
        return value_type if value_step is not None else Any

    def _redactions(self) -> Redactions:
        """Where the tree's declared types mark values `rf.Redacted` (see definition.redaction)."""
        def found(pairs: Any) -> dict[str, Any]:
            return {key: mask for key, tp in pairs if (mask := mask_of(tp)) is not None}

        nodes = self.nodes.values()
        return Redactions(
            inputs=mask_of(self.reactor.inputs),
            results=found((n.key, n.result_type) for n in nodes),
            levels=found((key, level.reactor.inputs) for key, level in self.levels.items()
                         if key),
            payloads=found((n.key, n.spec.interrupt.payload_type) for n in nodes
                           if n.spec.interrupt is not None),
            elements=found((n.key, n.spec.map.element_type) for n in nodes
                           if n.spec.map is not None),
        )

    # -- lookups -------------------------------------------------------------------------------

    def node_for_path(self, path: Sequence[str]) -> Node | None:
        return self.nodes.get(SEP.join(path))

    def interrupt_spec(self, step: str | Sequence[str]) -> StepSpec:
        path = (step,) if isinstance(step, str) else tuple(step)
        node = self.node_for_path(path)
        if node is None or node.kind is not StepKind.INTERRUPT:
            known = [display_path(k) for k, n in self.nodes.items()
                     if n.kind is StepKind.INTERRUPT]
            raise DefinitionError(
                f"reactor {self.reactor.name!r} has no interrupt {display_path(SEP.join(path))} "
                f"(interrupts: {', '.join(known) or 'none'})",
                reactor=self.reactor.name,
            )
        return node.spec


def _skip_checks(spec: StepSpec, level: str) -> tuple[tuple[str, str], ...]:
    """What `stepcall.skip_reason` looks at, in order: each dependency whose being skipped
    skips the step (an `after=` one, a result parameter without a default, the step a map maps
    over), by its full key, with the reason it gives."""
    checks = [(join(level, after), f"after-dependency {after!r} was skipped")
              for after in spec.after]
    checks += [(join(level, p.ref), f"its input {p.ref!r} was skipped") for p in spec.params
               if p.source is Source.RESULT and not p.has_default]
    if spec.map is not None and spec.map.over_is_step:  # the list it maps over
        checks.append((join(level, spec.map.over),
                       f"the step it maps over, {spec.map.over!r}, was skipped"))
    return tuple(checks)


def display_path(key: str) -> str:
    parts = split(key)
    return repr(parts[0]) if len(parts) == 1 else repr(parts)


def waiting_label(key: str) -> str | tuple[str, ...]:
    """How `waiting_on` shows a key: a bare name at the root, a tuple path when nested."""
    parts = split(key)
    return parts[0] if len(parts) == 1 else parts


def _kind_label(spec: StepSpec) -> str:
    if spec.kind is StepKind.COMPOSE and spec.child is not None:
        return f"compose:{spec.child.name}"
    if spec.kind is StepKind.MAP and spec.child is not None:
        return f"map:{spec.child.name}"
    return spec.kind.value


VERSION_ENTRY = "@version"
"""The fingerprint entry of a reactor version >= 2 (`[str(version)]`; no step is named so): a
run's stored graph says which version made it, and the bytes of two versions' graphs differ
even when their steps are the same (the `continue_` check finds them in a run's meta)."""


def compare_fingerprints(stored: Mapping[str, Sequence[str]],
                         current: Mapping[str, Sequence[str]]) -> list[str]:
    """Incompatible differences between a run's stored graph and the current one."""
    differences: list[str] = []
    mine = stored.get(VERSION_ENTRY, ["1"])[0]
    theirs = current.get(VERSION_ENTRY, ["1"])[0]
    if mine != theirs:
        differences.append(f"the run is on version {mine}, the code is version {theirs}")
    for key, entry in stored.items():
        if key == VERSION_ENTRY:
            continue
        now = current.get(key)
        if now is None:
            differences.append(f"step {key!r} was removed or renamed")
            continue
        if now[0] != entry[0]:
            differences.append(f"step {key!r} changed from {entry[0]} to {now[0]}")
        if list(now[1:]) != list(entry[1:]):
            differences.append(
                f"step {key!r} now depends on {list(now[1:])} instead of {list(entry[1:])}"
            )
    return differences


def plan_for(reactor: Declared) -> Plan:
    """The reactor's compiled plan (kept in its step table until any declaration changes).

    Args:
        reactor: The reactor (a `rf.Reactor`, or a child seen through `Declared`).

    Raises:
        DefinitionError: The reactor's graph is invalid.
    """
    generation = naming.generation()
    table = reactor.table
    cached = table.plan_cache
    if cached is not None and cached[0] == generation and isinstance(cached[1], Plan):
        return cached[1]
    plan = Plan(reactor)
    table.plan_cache = (generation, plan)
    return plan
