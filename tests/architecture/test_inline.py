"""A storage method marked `@inline` (`reactorflow.storage.contract.method_marks`) runs without the
cancellation shield of a step checkpoint, which is sound only while its body awaits nothing: checked
on the source of every marked method. And the mark stays on the function it was put on."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import reactorflow as rf
import reactorflow.storage.memory.storage
from reactorflow.storage.contract.method_marks import is_inline

PACKAGE = Path(reactorflow.__file__).resolve().parent
SUSPENDING = (ast.Await, ast.AsyncWith, ast.AsyncFor)


def _marked() -> list[tuple[str, ast.AsyncFunctionDef]]:
    found: list[tuple[str, ast.AsyncFunctionDef]] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.AsyncFunctionDef) and any(
                    isinstance(d, ast.Name) and d.id == "inline" for d in node.decorator_list):
                found.append((f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name}", node))
    return found


def test_every_inline_method_awaits_nothing() -> None:
    marked = _marked()
    assert any(name.startswith("storage/memory/storage.py") for name, _ in marked)
    suspending = [name for name, fn in marked
                  if any(isinstance(n, SUSPENDING) for n in ast.walk(fn))]
    assert suspending == [], f"marked @inline but may suspend: {suspending}"


def test_memory_save_step_is_inline_but_not_a_replacement_or_an_override() -> None:
    storage = rf.MemoryStorage()
    assert is_inline(storage.save_step)

    class Slower(rf.MemoryStorage):
        async def save_step(self, *args: Any, **kwargs: Any) -> bytes | None:
            return await super().save_step(*args, **kwargs)

    assert not is_inline(Slower().save_step)

    async def replaced(*args: Any, **kwargs: Any) -> None:
        return None

    storage.save_step = replaced  # type: ignore[method-assign]
    assert not is_inline(storage.save_step)
