"""Every public callable reachable from `reactorflow.__all__` documents its parameters and errors.

The API reference (docs/reference.md) is generated from these docstrings (mkdocstrings, Google
style), so what this test demands is what a reader of the reference gets. The rules, checked for
each name of `rf.__all__` and, for a class, each public method and property it defines or
inherits from a reactorflow class (not from `object`, `Exception` or `msgspec.Struct`):

1. **Args**: a function or method that takes parameters (other than `self`/`cls` and the
   `*args`/`**kwargs` catch-alls, which exist only to refuse unknown names) has an `Args:`
   section naming every one of them (`name:` or `name (type):` on its own line). A class
   documents its constructor's parameters the same way, in an `Args:` or `Attributes:` section
   of the class docstring (or of `__init__`'s); a record class (msgspec Struct, dataclass)
   documents its fields so; a field a reactorflow base class documents (the `message`,
   `run_id`, `step` and `cause` every error carries) counts for its subclasses.
2. **Raises**: a function whose own body raises a reactorflow error (`raise SomeError(...)`
   where `SomeError` is `rf.ReactorflowError` or a subclass) names that error, or a base class
   of it, in a `Raises:` section. This is checked on the source (AST), so it sees the errors a
   function raises itself; errors raised by what it delegates to are documented by hand (the run
   methods, `rf.get_run` ... name the errors of the runtime they call).
3. An overriding method without a docstring of its own inherits the docstring of the next
   definition up the public class's MRO: the storage backends share the contract's docstrings.
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import reactorflow as rf
import reactorflow.web
from reactorflow import errors

OTHER_ENTRY_POINTS = {"reactorflow.web.create_app": reactorflow.web.create_app}
"""Public callables outside `rf.__all__` (documented in the reference as well)."""

SECTION = re.compile(r"^(\w[\w ]*):\s*$")
ENTRY = re.compile(r"^\s+\*{0,2}(\w+)\s*(\([^)]*\))?\s*:")
ERROR_NAMES = {name for name, value in vars(errors).items()
               if inspect.isclass(value) and issubclass(value, errors.ReactorflowError)}


def sections(doc: str) -> dict[str, str]:
    """A Google-style docstring's sections by title (`Args`, `Raises`, ...), bodies dedented."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in doc.splitlines():
        match = SECTION.match(line)
        if match is not None:
            current = found.setdefault(match[1], [])
        elif current is not None:
            if line.strip() and not line.startswith((" ", "\t")):
                current = None  # back to prose
            else:
                current.append(line)
    return {title: "\n".join(lines) for title, lines in found.items()}


def entries(body: str) -> set[str]:
    return {match[1] for line in body.splitlines() if (match := ENTRY.match(line))}


def parameters(fn: Callable[..., Any]) -> list[str]:
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return []
    return [name for name, p in signature.parameters.items()
            if name not in ("self", "cls")
            and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def raised_errors(fn: Callable[..., Any]) -> set[str]:
    """The reactorflow errors `fn`'s own body raises (`raise X(...)` / `raise X`)."""
    try:
        source = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        return set()
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Raise) and node.exc is not None:
            target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
            if name in ERROR_NAMES:
                found.add(name)
    return found


def documented_errors(raises: str) -> set[str]:
    """Errors a `Raises:` section names, with all their subclasses (naming a base covers them)."""
    named = {name.removeprefix("rf.") for name in entries(raises)}
    named |= set(re.findall(r"^\s+(?:rf\.)?(\w+)\s*:", raises, flags=re.MULTILINE))
    covered: set[str] = set()
    for name in ERROR_NAMES:
        error = getattr(errors, name)
        if any(base.__name__ in named for base in error.__mro__):
            covered.add(name)
    return covered


def _own(cls: type) -> bool:
    return cls.__module__.startswith("reactorflow")


def _documented(cls: type, member: str) -> Any:
    """`cls.member`, or the first definition up `cls`'s MRO that has a docstring (a backend's
    override inherits the contract's, even when a mixin outside the contract defines it)."""
    for klass in cls.__mro__:
        value = vars(klass).get(member)
        if isinstance(value, property):
            value = value.fget
        if inspect.isfunction(value) and value.__doc__:
            return value
    value = getattr(cls, member)
    return value.fget if isinstance(value, property) else value


def public_callables() -> Iterator[tuple[str, Any, bool]]:
    """(qualified name, object, is a class) for everything the rules apply to."""
    for name in rf.__all__:
        obj = getattr(rf, name)
        if inspect.isclass(obj):
            yield f"rf.{name}", obj, True
            seen: set[str] = set()
            for klass in obj.__mro__:
                if not _own(klass):
                    continue
                for member, value in vars(klass).items():
                    if member.startswith("_") or member in seen:
                        continue
                    seen.add(member)
                    if isinstance(value, property) or inspect.isfunction(value):
                        yield f"rf.{name}.{member}", _documented(obj, member), False
                    elif isinstance(value, (staticmethod, classmethod)):
                        yield f"rf.{name}.{member}", value.__func__, False
        elif inspect.isfunction(obj):
            yield f"rf.{name}", obj, False
    for qualname, obj in OTHER_ENTRY_POINTS.items():
        yield qualname, obj, False


def constructor(cls: type) -> Callable[..., Any] | None:
    if not _own(cls):
        return None
    if hasattr(cls, "__struct_fields__"):  # a msgspec Struct: its fields are its parameters
        return cls
    init = cls.__init__  # type: ignore[misc]
    return None if init is object.__init__ else init


def problems(qualname: str, obj: Any, is_class: bool) -> list[str]:
    found: list[str] = []
    if is_class:
        doc = "\n".join(filter(None, [inspect.getdoc(obj), inspect.getdoc(obj.__init__)
                                      if obj.__init__ is not object.__init__ else None]))
        init = constructor(obj)
        wanted = parameters(init) if init is not None else []
        titles = sections(doc)
        documented = entries(titles.get("Args", "")) | entries(titles.get("Attributes", ""))
        for klass in filter(_own, obj.__mro__):  # a base documents the fields it passes on
            inherited = sections(inspect.getdoc(klass) or "")
            documented |= entries(inherited.get("Args", "")) | entries(
                inherited.get("Attributes", ""))
        fn = obj.__init__ if init is not None and not hasattr(obj, "__struct_fields__") else None
    else:
        doc = inspect.getdoc(obj) or ""
        wanted = parameters(obj)
        titles = sections(doc)
        documented = entries(titles.get("Args", ""))
        fn = obj
    if not doc.strip():
        return [f"{qualname}: no docstring"]
    missing = [name for name in wanted if name not in documented]
    if missing:
        where = "Args:/Attributes:" if is_class else "Args:"
        found.append(f"{qualname}: {where} does not name {missing}")
    if fn is not None:
        undocumented = raised_errors(fn) - documented_errors(titles.get("Raises", ""))
        if undocumented:
            found.append(f"{qualname}: raises {sorted(undocumented)} without a Raises: entry")
    return found


def test_the_rules_see_the_public_surface() -> None:
    names = {qualname for qualname, _, _ in public_callables()}
    for expected in ("rf.Reactor", "rf.Reactor.step", "rf.Reactor.run", "rf.Reactor.continue_",
                     "rf.configure", "rf.get_run", "rf.list_runs", "rf.sweep_once",
                     "rf.RedisStorage", "rf.MemoryStorage.load_run", "rf.RunNotFound",
                     "reactorflow.web.create_app"):
        assert expected in names


def test_the_reference_documents_the_other_entry_points() -> None:
    text = (Path(__file__).resolve().parent.parent / "docs" / "reference.md").read_text("utf-8")
    for qualname in OTHER_ENTRY_POINTS:
        assert f"::: {qualname}\n" in text


def test_the_section_parser() -> None:
    doc = inspect.cleandoc("""Summary.

        Args:
            run_id: the run.
            step (str): the step,
                on two lines.

        Raises:
            RunNotFound: no such run.
        """)
    titles = sections(doc)
    assert entries(titles["Args"]) == {"run_id", "step"}
    assert "RunNotFound" in documented_errors(titles["Raises"])
    assert "ReactorNotDeclared" not in documented_errors(titles["Raises"])
    assert "RunNotFound" in documented_errors("    ReactorflowError: anything.")


@pytest.mark.parametrize("item", list(public_callables()), ids=lambda item: item[0])
def test_public_docstrings_have_args_and_raises(item: tuple[str, Any, bool]) -> None:
    qualname, obj, is_class = item
    assert not problems(qualname, obj, is_class)
