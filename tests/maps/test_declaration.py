"""Every definition error of a map declaration fails at the decorator line (api.md §4 "Maps")."""

from __future__ import annotations

from collections.abc import AsyncIterator

import msgspec
import pytest

import reactorflow as rf
from tests.helpers import unique


class Order(msgspec.Struct):
    order_id: str
    items: list[str]
    count: int = 0


def flow() -> rf.Reactor:
    return rf.Reactor(unique("maps"), inputs=Order)


def test_a_map_over_an_input_records_its_options() -> None:
    f = flow()

    @f.map_step(over="items", batch_size=7, fan_out=True, atomic=False,
                retries=rf.Retry(2, backoff=0))
    async def ship(item: str, order_id: str) -> int:
        return len(item)

    options = f.steps["ship"].map
    assert options is not None
    assert (options.over, options.batch_size, options.fan_out, options.atomic) == (
        "items", 7, True, False)
    assert options.element == "item"
    assert isinstance(ship, rf.MapStep)


def test_a_map_over_an_earlier_step_depends_on_it() -> None:
    f = flow()

    @f.step
    async def skus(items: list[str]) -> list[str]:
        return items

    @f.map_step(over=skus)
    async def ship(sku: str) -> str:
        return sku

    assert f.steps["ship"].deps == ("skus",)


@pytest.mark.parametrize("over", ["nope", "count"])
def test_unknown_or_non_list_over_is_refused(over: str) -> None:
    f = flow()
    with pytest.raises(rf.DefinitionError, match=f"over={over!r}"):
        @f.map_step(over=over)
        async def ship(item: str) -> str:
            return item


def test_over_a_step_whose_result_is_not_a_list_is_refused() -> None:
    f = flow()

    @f.step
    async def one() -> int:
        return 1

    with pytest.raises(rf.DefinitionError, match="not a list or tuple"):
        @f.map_step(over="one")
        async def ship(item: int) -> int:
            return item


def test_a_map_over_an_async_unit_or_an_interrupt_is_accepted() -> None:
    """A map may go over any earlier step's list (issue 22, item 22: units and interrupts were
    refused)."""
    f = flow()
    child = rf.Reactor(unique("child"))

    @child.step
    async def listed() -> list[str]:
        return ["a"]

    @f.async_step
    async def fetched(items: list[str]) -> list[str]:
        return items

    @f.async_reactor(child)
    async def started() -> dict[str, object]:
        return {}

    @f.interrupt
    async def approved(payload: list[str]) -> list[str]:
        return payload

    for source in ("fetched", "started", "approved"):
        @f.map_step(over=source, name=f"each_{source}")
        async def each(item: str) -> str:
            return item

        assert f.steps[f"each_{source}"].deps == (source,)


def test_a_map_over_a_unit_checks_the_unit_s_type() -> None:
    """The list check applies to every kind `over` may name now: an async step's annotation,
    an async reactor's child's value."""
    f = flow()
    child = rf.Reactor(unique("child"))

    @child.step
    async def one() -> int:
        return 1

    @f.async_step
    async def counted(items: list[str]) -> int:
        return len(items)

    @f.async_reactor(child)
    async def started() -> dict[str, object]:
        return {}

    for over in ("counted", "started"):
        with pytest.raises(rf.DefinitionError, match=f"over={over!r} names step {over!r}, "
                                                     r"whose result \(<class 'int'>\) is not a "
                                                     "list or tuple"):
            @f.map_step(over=over)
            async def each(item: int) -> int:
                return item


@pytest.mark.parametrize("size", [0, -1, 1.5, True, "10"])
def test_batch_size_must_be_a_positive_whole_number(size: object) -> None:
    f = flow()
    with pytest.raises(rf.DefinitionError, match="batch_size"):
        @f.map_step(over="items", batch_size=size)  # type: ignore[arg-type]
        async def ship(item: str) -> str:
            return item


def test_a_map_needs_an_element_parameter() -> None:
    f = flow()
    with pytest.raises(rf.DefinitionError, match="first parameter"):
        @f.map_step(over="items")
        async def ship() -> str:
            return ""


def test_a_plain_list_reader_of_a_non_atomic_map_is_refused() -> None:
    f = flow()

    @f.map_step(over="items", atomic=False)
    async def ship(item: str) -> str:
        return item

    with pytest.raises(rf.DefinitionError, match="non-atomic map 'ship'"):
        @f.step
        async def report(ship: list[str]) -> int:
            return len(ship)

    @f.step
    async def outcomes(ship: list[rf.Outcome[str]]) -> int:
        return len(ship)

    @f.step
    async def lazy(ship: rf.MapResults[str]) -> int:
        return len(ship)


def test_undo_and_undo_all_are_exclusive_either_way() -> None:
    f = flow()

    @f.map_step(over="items")
    async def ship(item: str) -> str:
        return item

    @ship.undo
    async def unship(result: str) -> None: ...

    with pytest.raises(rf.DefinitionError, match="not both"):
        @ship.undo_all
        async def unship_all(results: AsyncIterator[str]) -> None: ...

    g = flow()

    @g.map_step(over="items")
    async def ship2(item: str, order_id: str) -> str:
        return item

    @ship2.undo_all
    async def all2(results: AsyncIterator[str], order_id: str) -> None: ...

    with pytest.raises(rf.DefinitionError, match="not both"):
        @ship2.undo
        async def one2(result: str) -> None: ...


def test_undo_all_cannot_take_the_element() -> None:
    f = flow()

    @f.map_step(over="items")
    async def ship(item: str, order_id: str) -> str:
        return item

    with pytest.raises(rf.DefinitionError, match="'item' is not a parameter"):
        @ship.undo_all
        async def all_(results: AsyncIterator[str], item: str) -> None: ...


def test_an_interrupt_anywhere_in_an_element_reactor_is_refused() -> None:
    inner = rf.Reactor(unique("inner"))

    @inner.interrupt
    async def approve(payload: bool) -> bool:
        return payload

    middle = rf.Reactor(unique("middle"))

    @middle.compose(inner)
    async def nested() -> dict[str, object]:
        return {}

    f = flow()
    with pytest.raises(rf.DefinitionError, match="interrupt"):
        @f.map_step(over="items", reactor=middle)
        async def each(item: str) -> dict[str, object]:
            return {}


def test_reactor_must_be_a_reactor() -> None:
    f = flow()
    with pytest.raises(rf.DefinitionError, match=r"must be a rf\.Reactor"):
        @f.map_step(over="items", reactor="child")  # type: ignore[arg-type]
        async def each(item: str) -> dict[str, object]:
            return {}


def test_a_map_of_a_non_storable_result_is_refused() -> None:
    f = flow()
    with pytest.raises(rf.DefinitionError, match="cannot be stored"):
        @f.map_step(over="items")
        async def ship(item: str) -> object.__class__:  # type: ignore[valid-type]
            return item


def test_mermaid_shows_a_map() -> None:
    f = flow()

    @f.map_step(over="items")
    async def ship(item: str) -> str:
        return item

    assert "ship (map)" in f.to_mermaid()
