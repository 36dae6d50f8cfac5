"""No import cycles anywhere in the package (docs/architecture.md, "Imports go one way").

Checked on the import graph of every module of `reactorflow`: every `import` statement at any
depth (inside functions and `TYPE_CHECKING` blocks too: an import made only for a type hint
ties two modules as much as any other, so it may only point the way the other imports do).
`from package import module` is an edge to that module; `from module import name` to the
module. The strongly connected components of that graph with more than one module (or a module
importing itself) are the cycles.

`KNOWN` lists the cycles that are still being removed, each with the branch that removes it;
the test fails on a cycle not listed and on a listed cycle that is gone, so the list can only
shrink, and must shrink as the branches land (then it is emptied).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import reactorflow

PACKAGE = Path(reactorflow.__file__).resolve().parent

KNOWN: dict[frozenset[str], str] = {}
"""Cycles still to remove -> the branch that removes them (emptied once they are merged)."""


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _resolve(named: str) -> str | None:
    """The package module that `named` (a module, or a name inside one) is in."""
    while named and named not in MODULES:
        named = named.rpartition(".")[0]
    return named or None


def _targets(name: str, node: ast.AST) -> Iterator[str]:
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            anchor = name.split(".") if MODULES[name].name == "__init__.py" else (
                name.split(".")[:-1])
            anchor = anchor[: len(anchor) - (node.level - 1)]
            base = ".".join([*anchor, base] if base else anchor)
        for alias in node.names:
            sub = f"{base}.{alias.name}"
            yield sub if sub in MODULES else base


def imports(name: str) -> set[str]:
    """The package modules `name` imports, by any import statement anywhere in it."""
    tree = ast.parse(MODULES[name].read_text(), str(MODULES[name]))
    found = {_resolve(t) for node in ast.walk(tree) for t in _targets(name, node)}
    return {t for t in found if t is not None and t.startswith("reactorflow")}


def cycles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """The strongly connected components of `graph` that are cycles (Tarjan's algorithm,
    iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[frozenset[str]] = set()
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for target in edges:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph.get(target, ())))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component: set[str] = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1 or node in graph.get(node, ()):
                        found.add(frozenset(component))
    return found


def _shown(cycle: frozenset[str]) -> str:
    return ", ".join(sorted(cycle))


def test_the_cycle_finder_finds_a_cycle_through_any_edge() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}, "f": {"d"}}
    assert cycles(graph) == {frozenset({"a", "b", "c"}), frozenset({"e"})}
    assert cycles({"a": {"b"}, "b": set()}) == set()


def test_the_package_has_no_import_cycle_but_the_known_ones() -> None:
    graph = {name: imports(name) for name in MODULES}
    found = cycles(graph)
    new = [c for c in found if c not in KNOWN]
    gone = [f"{_shown(c)} (removed by {branch})" for c, branch in KNOWN.items()
            if c not in found]
    assert not new, ("import cycles (an import inside a function or under TYPE_CHECKING counts "
                     "too; cut the tie, do not hide it):\n"
                     + "\n".join(_shown(c) for c in new))
    assert not gone, ("these known cycles are gone (or changed): take them out of KNOWN:\n"
                      + "\n".join(gone))


def test_imports_inside_functions_and_for_type_hints_are_edges() -> None:
    """The finder reads every import statement, wherever it stands."""
    assert "reactorflow.definition.table" in imports("reactorflow.definition.graph")
    assert "reactorflow.middleware" in imports("reactorflow.definition.table")  # TYPE_CHECKING
