"""Declaring again: a reactor re-declared from the same place replaces the earlier one (a notebook
cell run twice, a module reloaded), a clash between two places names both; the same hand-off
point may be declared again; string annotations that cannot resolve say why."""

from __future__ import annotations

import re
import textwrap
import types
from typing import Any

import msgspec
import pytest

import reactorflow as rf
from reactorflow.definition import registry
from tests.helpers import unique

CELL = textwrap.dedent("""
    import reactorflow as rf

    flow = rf.Reactor(NAME)

    @flow.step
    async def greet() -> str:
        return GREETING
""")


def run_cell(name: str, greeting: str, *, module: str = "__main__",
             filename: str = "<cell>") -> rf.Reactor:
    """What a notebook does with a cell: compile it under a new file name, run it in the
    namespace of one module."""
    namespace: dict[str, Any] = {"__name__": module, "NAME": name, "GREETING": greeting}
    exec(compile(CELL, filename, "exec"), namespace)
    flow = namespace["flow"]
    assert isinstance(flow, rf.Reactor)
    return flow


def declare(name: str) -> rf.Reactor:
    flow = rf.Reactor(name)

    @flow.step
    async def only() -> int:
        return 1

    return flow


def declare_somewhere_else(name: str) -> rf.Reactor:
    return rf.Reactor(name)


async def test_a_cell_run_again_replaces_its_reactor(storage: rf.Storage) -> None:
    name = unique("notebook")
    first = run_cell(name, "hello", filename="<ipython-input-1>")
    assert (await first.run()).value == "hello"
    second = run_cell(name, "hello again", filename="<ipython-input-2>")  # edited, run again
    assert registry.lookup(name) is second
    assert (await second.run()).value == "hello again"
    handed = await second.dispatch()  # a worker resolves the name to the new definition
    assert (await second.wait(handed.id, timeout=10)).value == "hello again"


def test_the_same_function_declaring_again_replaces_the_reactor() -> None:
    name = unique("again")
    first = declare(name)
    second = declare(name)
    assert registry.lookup(name) is second is not first


def test_a_clash_between_two_places_names_both() -> None:
    name = unique("clash")
    kept = declare(name)
    with pytest.raises(rf.DefinitionError) as info:
        declare_somewhere_else(name)
    message = str(info.value)
    assert "declared in two places" in message
    here = re.escape(__file__)
    assert re.search(rf"{here}:\d+ \(module tests\.definition\.test_declarations, in declare\)",
                     message), message
    assert re.search(rf"{here}:\d+ \(module tests\.definition\.test_declarations, in "
                     r"declare_somewhere_else\)", message), message
    assert registry.lookup(name) is kept


TWO_IN_ONE_MODULE = textwrap.dedent("""
    import reactorflow as rf

    first = rf.Reactor(NAME)
    second = rf.Reactor(NAME)
""")

TWO_LAMBDAS = textwrap.dedent("""
    import reactorflow as rf

    make_a = lambda: rf.Reactor(NAME)
    make_b = lambda: rf.Reactor(NAME)
    kept = make_a()
    make_b()
""")


@pytest.mark.parametrize(("source", "lines"), [(TWO_IN_ONE_MODULE, (4, 5)),
                                               (TWO_LAMBDAS, (4, 5))],
                         ids=["module-level", "lambdas"])
def test_two_places_of_one_module_are_a_clash(source: str, lines: tuple[int, int]) -> None:
    """Two declarations of one name in one module (its top level twice, or two functions of
    the same qualified name): a clash naming both lines, never a silent replacement."""
    name = unique("twice")
    namespace: dict[str, Any] = {"__name__": "app.shop", "NAME": name}
    with pytest.raises(rf.DefinitionError) as info:
        exec(compile(source, "app/shop.py", "exec"), namespace)
    first, second = lines
    assert f"declared in two places: app/shop.py:{first} (module app.shop" in str(info.value)
    assert f" and app/shop.py:{second} (module app.shop" in str(info.value)
    assert registry.lookup(name) is not None
    assert registry.lookup(name) is namespace.get("first", namespace.get("kept"))


def test_a_module_imported_again_replaces_its_reactors() -> None:
    """The same line of the same module run again (a reload) is the same place."""
    name = unique("reload")
    source = TWO_IN_ONE_MODULE.replace("second = rf.Reactor(NAME)\n", "")
    namespace: dict[str, Any] = {"__name__": "app.shop", "NAME": name}
    exec(compile(source, "app/shop.py", "exec"), namespace)
    again: dict[str, Any] = {"__name__": "app.shop", "NAME": name}
    exec(compile(source, "app/shop.py", "exec"), again)
    assert registry.lookup(name) is again["first"] is not namespace["first"]


def test_the_same_cell_in_another_module_is_a_clash() -> None:
    name = unique("modules")
    run_cell(name, "a", module="app.flows", filename="app/flows.py")
    with pytest.raises(rf.DefinitionError, match=r"app/flows\.py:4 \(module app\.flows\) and "
                                                 r"<cell>:4 \(module __main__\)"):
        run_cell(name, "b")


def test_the_same_background_point_may_be_declared_again() -> None:
    flow = rf.Reactor(unique("handoff"))

    @flow.step
    async def first() -> int:
        return 1

    @flow.step
    async def second(first: int) -> int:
        return 2

    flow.background(after="first")
    flow.background(after=first)  # a module reloaded: the same point again
    assert flow.handoff == ("after", "first")
    with pytest.raises(rf.DefinitionError, match="already declared"):
        flow.background(after="second")
    with pytest.raises(rf.DefinitionError, match="already declared"):
        flow.background(before="first")


def test_a_class_local_to_a_function_is_explained() -> None:
    def build() -> rf.Reactor:
        class Hotel(msgspec.Struct):
            reference: str

        flow = rf.Reactor(unique("local-class"))

        @flow.step
        async def book() -> Hotel:
            return Hotel("H1")

        return flow

    with pytest.raises(rf.DefinitionError) as info:
        build()
    message = str(info.value)
    assert "cannot resolve the annotation 'Hotel'" in message
    assert "resolve in the module's globals (tests.definition.test_declarations)" in message
    assert ("'book' is declared inside "
            "test_a_class_local_to_a_function_is_explained.<locals>.build()") in message
    assert "at module level" in message
    assert "define or import it before this decorator" not in message


def test_a_missing_module_level_name_is_explained_too() -> None:
    module = types.ModuleType("tests.definition.fake_flows")
    exec(compile("from __future__ import annotations\n"
                 "async def step() -> Missing: ...\n", "fake_flows.py", "exec"), module.__dict__)
    flow = rf.Reactor(unique("missing-name"))
    with pytest.raises(rf.DefinitionError) as info:
        flow.step(module.step)
    message = str(info.value)
    assert "'Missing'" in message and "(tests.definition.fake_flows)" in message
    assert "declared inside" not in message
