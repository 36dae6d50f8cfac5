"""The layers import one way (docs/architecture.md): `definition` imports nothing of the runtime
or the workers, and `runtime` nothing of the workers, not even inside a function.

Checked on the import graph: every `import` statement of every module of a layer (at any
depth, including inside functions and `TYPE_CHECKING` blocks), resolved to the module it names,
and followed transitively through reactorflow's own modules; plus a fresh interpreter that
imports the lower layer and looks at `sys.modules`.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import reactorflow

PACKAGE = Path(reactorflow.__file__).resolve().parent


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PACKAGE.rglob("*.py")}


MODULES = _modules()


def _imports(name: str) -> set[str]:
    """The reactorflow modules `name` imports (every import statement, wherever it is)."""
    path = MODULES[name]
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(), str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_package else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            # `from package import module` imports the module too
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for named in targets:
            target = named
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            # the package itself (its __init__ wires the layers together, from the top) is
            # not an edge: every submodule import runs it, whichever layer imports
            if target.startswith("reactorflow."):
                found.add(target)
    return found


def _reachable(start: str) -> dict[str, str]:
    """Modules reachable from `start` through imports -> the module that imported each."""
    seen: dict[str, str] = {start: ""}
    todo = [start]
    while todo:
        current = todo.pop()
        for target in _imports(current):
            if target not in seen:
                seen[target] = current
                todo.append(target)
    return seen


def _chain(seen: dict[str, str], module: str) -> str:
    chain = [module]
    while seen[chain[-1]]:
        chain.append(seen[chain[-1]])
    return " <- ".join(chain)


def _layer(prefix: str) -> list[str]:
    return sorted(m for m in MODULES if m == prefix or m.startswith(prefix + "."))


@pytest.mark.parametrize(("lower", "above"), [
    ("reactorflow.definition", ("reactorflow.runtime", "reactorflow.workers")),
    ("reactorflow.runtime", ("reactorflow.workers",)),
    ("reactorflow.storage", ("reactorflow.definition", "reactorflow.runtime",
                             "reactorflow.workers")),
])
def test_a_layer_never_imports_the_layers_above_it(lower: str, above: tuple[str, ...]) -> None:
    problems = []
    for module in _layer(lower):
        seen = _reachable(module)
        problems += [_chain(seen, m) for m in seen if m.startswith(above)]
    assert problems == []


def test_the_graph_walk_sees_imports_inside_functions() -> None:
    """The checker itself: an import inside a function body is an edge of the graph."""
    sweeper = _imports("reactorflow.runtime.services.sweeper")
    assert "reactorflow.runtime.services.job_handling" in sweeper
    assert "reactorflow.runtime.engine.job_queue" in _imports("reactorflow.workers.queue")
    assert "reactorflow.workers.broker" in _imports("reactorflow.workers.queue")  # in a method


@pytest.mark.parametrize(("lower", "above"), [
    ("reactorflow.definition.reactor", ("reactorflow.runtime", "reactorflow.workers")),
    ("reactorflow.runtime.ops.operations", ("reactorflow.workers",)),
])
def test_importing_a_layer_loads_nothing_above_it(lower: str, above: tuple[str, ...]) -> None:
    """In a fresh interpreter, with the package's wiring (its __init__) left out."""
    code = (
        "import sys, types, pathlib\n"
        f"root = pathlib.Path({str(PACKAGE)!r})\n"
        "pkg = types.ModuleType('reactorflow'); pkg.__path__ = [str(root)]\n"
        "sys.modules['reactorflow'] = pkg\n"
        f"import {lower}\n"
        f"print('\\n'.join(m for m in sys.modules if m.startswith({above!r})))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True).stdout.split()
    assert out == []


def test_the_command_line_imports_dramatiq_only_when_a_worker_starts() -> None:
    """`reactorflow worker` sets Dramatiq's idle poll bound in the environment, which Dramatiq
    reads when imported (its forked workers inherit it): importing the CLI must not import
    Dramatiq, nor must `import reactorflow`."""
    code = ("import sys, reactorflow, reactorflow.cli\n"
            "print('dramatiq' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True).stdout.split()
    assert out == ["False"]
