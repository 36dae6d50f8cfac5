"""A parameter whose annotation contradicts its source's type is refused at the decorator line,
naming both types (nothing converts a value to the parameter's annotation); annotations that
may hold the source's value pass."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Annotated, Any, Literal, TypedDict

import msgspec
import pytest

import reactorflow as rf
from tests.helpers import unique


class Address(msgspec.Struct):
    city: str
    zip: str


class Order(msgspec.Struct):
    order_id: str
    amount: float
    qty: int
    urgent: bool
    items: list[str]
    address: Address
    tags: dict[str, int]
    placed: datetime.datetime
    note: str | None = None


class Charge(msgspec.Struct):
    charge_id: str
    amount: float


class PremiumCharge(Charge):
    tier: str = "gold"


class Receipt(msgspec.Struct):
    number: str


@dataclasses.dataclass
class Box:
    size: int


class Point(TypedDict):
    x: int


def _flow() -> rf.Reactor:
    flow = rf.Reactor(unique("types"), inputs=Order)

    @flow.step
    async def charge(amount: float) -> Charge:
        return Charge("c1", amount)

    @flow.step
    async def premium(amount: float) -> PremiumCharge:
        return PremiumCharge("c2", amount)

    @flow.step
    async def count() -> int:
        return 1

    return flow


async def _str_amount(amount: str) -> str:
    return amount.upper()


async def _int_list(items: list[int]) -> int:
    return sum(items)


async def _wrong_struct(charge: Receipt) -> str:
    return charge.number


async def _str_path(amount: Annotated[str, rf.Result("charge", "amount")]) -> str:
    return amount


async def _nested(city: Annotated[int, rf.Input("address", "city")]) -> int:
    return city


async def _record_as_dict(charge: dict[str, Any]) -> str:
    return str(charge)


async def _text_as_number(order_id: int) -> int:
    return order_id


async def _date_as_str(placed: str) -> str:
    return placed


async def _dict_values(tags: dict[str, str]) -> str:
    return ""


@pytest.mark.parametrize(("fn", "shown"), [
    (_str_amount, "parameter 'amount' is annotated str but receives input 'amount', a float"),
    (_int_list, "parameter 'items' is annotated list[int] but receives input 'items', a "
                "list[str]"),
    (_wrong_struct, "parameter 'charge' is annotated Receipt but receives the result of step "
                    "'charge', a Charge"),
    (_str_path, "parameter 'amount' is annotated str but receives 'charge.amount' in the result "
                "of step 'charge', a float"),
    (_nested, "parameter 'city' is annotated int but receives input 'address.city', a str"),
    (_record_as_dict, "parameter 'charge' is annotated dict[str, typing.Any] but receives the "
                      "result of step 'charge', a Charge"),
    (_text_as_number, "parameter 'order_id' is annotated int but receives input 'order_id', a "
                      "str"),
    (_date_as_str, "parameter 'placed' is annotated str but receives input 'placed', a "
                   "datetime"),
    (_dict_values, "parameter 'tags' is annotated dict[str, str] but receives input 'tags', a "
                   "dict[str, int]"),
])
def test_a_contradicting_annotation_is_refused_naming_both_types(fn: Any, shown: str) -> None:
    flow = _flow()
    with pytest.raises(rf.DefinitionError) as info:
        flow.step(fn)
    message = str(info.value)
    assert shown in message, message
    assert "nothing converts it" in message and info.value.step == fn.__name__


def test_a_map_element_annotation_must_fit_the_items() -> None:
    flow = _flow()
    with pytest.raises(rf.DefinitionError, match="parameter 'item' is annotated int but "
                                                 "receives an element of input 'items', a str"):
        @flow.map_step(over="items")
        async def pack(item: int) -> int:
            return item

    @flow.map_step(over="items")
    async def label(item: str) -> str:
        return item


def test_an_interrupts_result_is_typed_by_its_return_annotation() -> None:
    flow = _flow()

    @flow.interrupt
    async def approve(payload: bool) -> bool:
        return payload

    with pytest.raises(rf.DefinitionError, match="annotated str but receives the result of "
                                                 "interrupt 'approve', a bool"):
        @flow.step
        async def ship(approve: str) -> str:
            return approve


def test_annotations_that_may_hold_the_value_pass() -> None:
    flow = _flow()

    @flow.step
    async def compatible(
        amount: float | None,          # a union with the source's type
        qty: float,                    # an int where a float is annotated
        urgent: int,                   # a bool is an int
        items: tuple[str, ...],        # a list where a tuple is annotated
        charge: Charge,                # the exact class
        premium: Charge,               # a subclass where its base is annotated
        note: str,                     # an optional source: one member fits
        placed: datetime.date,         # a datetime is a date
        address: Any,                  # Any, explicitly
        count: Literal[1, 2],          # a Literal of the source's kind
        tags,                          # unannotated  # type: ignore[no-untyped-def]
    ) -> str:
        return ""

    @flow.step
    async def loose(order_id: object, box: Box | None = None, point: Point | None = None
                    ) -> str:
        return ""

    assert set(flow.steps) >= {"compatible", "loose"}


def test_a_contradiction_the_runtime_would_hit_fails_at_declaration_not_in_the_run() -> None:
    """The issue's case: an `AttributeError` at run time before; the decorator refuses now."""
    flow = _flow()
    with pytest.raises(rf.DefinitionError, match="annotated str but receives input 'amount', "
                                                 "a float"):
        @flow.step
        async def shout(amount: str) -> str:
            return amount.upper()
    assert "shout" not in flow.steps
