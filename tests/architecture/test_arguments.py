"""A step's arguments are resolved one way wherever it runs (issue 22, item 21): through
`stepcall.arguments`, which loads what its map readers take from storage before resolving.
Resolving them directly (`resolve_arguments`) from a place that did not load them first gave an
async unit in its worker, and a rollback in a later execution, a `KeyError` for every map they
read. Checked on the source: a direct call anywhere else fails this test, unless the place is
listed below with the reason it may."""

from __future__ import annotations

import ast
from pathlib import Path

import reactorflow

PACKAGE = Path(reactorflow.__file__).resolve().parent

# (path relative to the package, enclosing function) -> why it may resolve directly
ALLOWED: dict[tuple[str, str], str] = {
    ("runtime/engine/stepcall.py", "arguments"):
        "the one way: it loads the map readers' lists first",
    ("runtime/engine/forward.py", "_plain"): "the fast path of a plain step, which reads no map "
                                      "(`Node.plain` is false for a map reader)",
}


def _direct_calls() -> set[tuple[str, str]]:
    found: set[tuple[str, str]] = set()
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(fn):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                        and node.func.id == "resolve_arguments"):
                    found.add((path.relative_to(PACKAGE).as_posix(), fn.name))
    return found


def test_step_arguments_are_resolved_through_stepcall_arguments() -> None:
    unexpected = _direct_calls() - set(ALLOWED)
    assert not unexpected, (
        f"resolve_arguments called directly in {sorted(unexpected)}: call "
        "`await stepcall.arguments(ex, node)`, which loads what map readers take first")


def test_every_allowed_place_still_calls_it() -> None:
    assert set(ALLOWED) <= _direct_calls()  # a stale entry would allow a place silently
