"""Pydantic v2 models everywhere a type is taken (reactorflow[pydantic]), on both backends:
reactor inputs (run, dispatch), interrupt payloads (inline and background resumes), step
results, map items (inline and fanned out), composed and async children's inputs; each value
round-trips to its model's type, the stored bytes stay msgspec's MessagePack of the model's
JSON form, and validation errors name the field path like msgspec's."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import msgspec
import pytest
from pydantic import BaseModel, ConfigDict, Field

import reactorflow as rf
from reactorflow import records
from reactorflow.jsonforms import run_form
from tests.helpers import unique

pytestmark = pytest.mark.usefixtures("storage")


class Address(BaseModel):
    city: str
    zip: str = Field(min_length=5)


class Order(BaseModel):
    sku: str
    qty: int = Field(ge=1)
    ship_to: Address
    tags: list[str] = []


class Receipt(BaseModel):
    total: float
    order: Order


class Approval(BaseModel):
    approver: str
    ok: bool
    address: Address | None = None


class Line(BaseModel):
    sku: str
    qty: int


class Basket(BaseModel):
    lines: list[Line]


class Priced(msgspec.Struct):  # a Struct holding a model: the hook converts it at any depth
    line: Line
    price: float


ADDRESS = {"city": "Lyon", "zip": "69001"}


def order_flow() -> rf.Reactor:
    flow = rf.Reactor(unique("pyd-order"), inputs=Order)

    @flow.step
    async def price(sku: str, qty: int, ship_to: Address) -> Receipt:
        assert type(ship_to) is Address
        return Receipt(total=qty * 2.5, order=Order(sku=sku, qty=qty, ship_to=ship_to))

    @flow.step
    async def label(price: Receipt) -> str:
        assert type(price) is Receipt and type(price.order.ship_to) is Address
        return f"{price.order.sku} to {price.order.ship_to.city}: {price.total}"

    return flow


async def test_inputs_and_results_round_trip_to_their_models(storage: rf.Storage) -> None:
    flow = order_flow()
    run = await flow.run(sku="a", qty=2, ship_to=ADDRESS)
    assert run.status is rf.Status.COMPLETED, run.error
    assert run.value == "a to Lyon: 5.0"
    stored = await flow.get(run.id)
    result = stored.steps["price"].result
    assert type(result) is Receipt and result == Receipt(
        total=5.0, order=Order(sku="a", qty=2, ship_to=Address(**ADDRESS)))
    assert type(stored.inputs) is Order and stored.inputs.ship_to == Address(**ADDRESS)
    # the stored bytes are msgspec's MessagePack of the model's JSON form (no pickle)
    step = records.decode_step(await storage.load_step(run.id, "price"))
    assert msgspec.msgpack.decode(step.result) == {
        "total": 5.0, "order": {"sku": "a", "qty": 2, "ship_to": ADDRESS, "tags": []}}
    # and the JSON forms of the CLI and the API carry it as JSON
    assert run_form(stored)["inputs"] == {"sku": "a", "qty": 2, "ship_to": ADDRESS, "tags": []}


async def test_an_instance_of_the_model_is_taken_as_inputs() -> None:
    flow = order_flow()
    run = await flow.run(Order(sku="b", qty=1, ship_to=Address(**ADDRESS)))
    assert run.value == "b to Lyon: 2.5"
    dispatched = await flow.dispatch(Order(sku="c", qty=3, ship_to=Address(**ADDRESS)))
    done = await flow.wait(dispatched.id, timeout=30)
    assert done.status is rf.Status.COMPLETED, done.error
    assert done.value == "c to Lyon: 7.5"


@pytest.mark.parametrize(("inputs", "field", "reason"), [
    ({"sku": "a", "qty": 0, "ship_to": ADDRESS}, "qty", "greater than or equal to 1"),
    ({"sku": "a", "qty": 1, "ship_to": {"city": "x", "zip": "1"}}, "ship_to.zip",
     "at least 5 characters"),
    ({"sku": "a", "qty": 1, "ship_to": {"city": "x"}}, "ship_to.zip",
     "a required field is missing"),
    ({"qty": 1, "ship_to": ADDRESS}, "sku", "a required field is missing"),
    ({"sku": "a", "qty": 1, "ship_to": ADDRESS, "tags": ["x", 2]}, "tags[1]",
     "a valid string"),
    ({"sku": "a", "qty": 1, "ship_to": {**ADDRESS, "zap": 1}}, "ship_to.zap",
     "an unknown field; the fields of Address are: city, zip"),
    ({"sku": "a", "qty": 1, "ship_to": ADDRESS, "qtty": 2}, "qtty",
     "an unknown field; the fields are: sku, qty, ship_to, tags"),
], ids=["constraint", "nested-constraint", "nested-missing", "missing", "list-item",
        "unknown-nested", "unknown"])
async def test_invalid_inputs_are_refused_naming_the_field_path(
        inputs: dict[str, Any], field: str, reason: str) -> None:
    flow = order_flow()
    for start in (flow.run, flow.dispatch):
        with pytest.raises(rf.InputValidationError) as info:
            await start(**inputs)
        assert info.value.field == field
        assert f"{field}: " in str(info.value) and reason in str(info.value)
        assert "nothing was stored" in str(info.value)
    assert (await flow.list_runs()).runs == []


def approval_flow(resume: str = "inline") -> rf.Reactor:
    flow = rf.Reactor(unique("pyd-approval"))

    @flow.step
    async def draft() -> Line:
        return Line(sku="a", qty=1)

    @flow.interrupt(max_attempts=3, resume=resume)
    async def approve(draft: Line, payload: Approval) -> Approval:
        assert type(draft) is Line and type(payload) is Approval
        return payload

    @flow.step
    async def report(approve: Approval) -> str:
        assert type(approve) is Approval
        city = approve.address.city if approve.address is not None else "-"
        return f"{approve.approver} ok={approve.ok} {city}"

    return flow


@pytest.mark.parametrize("resume", ["inline", "background"])
async def test_an_interrupt_takes_a_model_payload(resume: str) -> None:
    flow = approval_flow(resume)
    by_mapping = await flow.run()
    assert by_mapping.status is rf.Status.PAUSED
    done = await flow.continue_(by_mapping.id, step="approve",
                                payload={"approver": "ann", "ok": True, "address": ADDRESS})
    done = await flow.wait(done.id, timeout=30)
    assert done.status is rf.Status.COMPLETED, done.error
    assert done.value == "ann ok=True Lyon"
    by_value = await flow.run()
    done = await flow.wait((await flow.continue_(
        by_value.id, step="approve", payload=Approval(approver="bob", ok=False))).id, timeout=30)
    assert done.value == "bob ok=False -"
    assert type((await flow.get(by_value.id)).steps["approve"].result) is Approval


async def test_an_invalid_payload_is_refused_naming_the_field_path() -> None:
    flow = approval_flow()
    paused = await flow.run()
    with pytest.raises(rf.PayloadValidationError) as nested:
        await flow.continue_(paused.id, step="approve",
                             payload={"approver": "ann", "ok": True,
                                      "address": {"city": "x", "zip": "1"}})
    assert nested.value.field == "address.zip" and nested.value.attempts == 1
    assert "address.zip: String should have at least 5 characters" in str(nested.value)
    with pytest.raises(rf.PayloadValidationError) as missing:
        await flow.continue_(paused.id, step="approve", payload={"ok": True})
    assert missing.value.field == "approver"
    assert "approver: a required field is missing" in str(missing.value)
    with pytest.raises(rf.PayloadValidationError) as unknown:
        await flow.continue_(paused.id, step="approve",
                             payload={"approver": "ann", "ok": True, "okk": 1})
    assert unknown.value.field == "okk" and "the fields are: approver, ok, address" in str(
        unknown.value)


@pytest.mark.parametrize("fan_out", [False, True], ids=["inline", "fan-out"])
async def test_a_map_takes_model_items_and_returns_models(fan_out: bool) -> None:
    flow = rf.Reactor(unique("pyd-map"), inputs=Basket)

    @flow.map_step(over="lines", batch_size=2, fan_out=fan_out)
    async def priced(line: Line) -> Priced:
        assert type(line) is Line
        return Priced(line=line, price=line.qty * 1.5)

    @priced.undo
    async def unprice(result: Priced, line: Line) -> None:
        assert type(result.line) is Line and type(line) is Line

    @flow.step
    async def total(priced: list[Priced]) -> float:
        assert all(type(p.line) is Line for p in priced)
        return sum(p.price for p in priced)

    run = await flow.run(lines=[{"sku": str(i), "qty": i} for i in range(1, 6)])
    done = await flow.wait(run.id, timeout=30)
    assert done.status is rf.Status.COMPLETED, done.error
    assert done.value == 1.5 * (1 + 2 + 3 + 4 + 5)
    with pytest.raises(rf.InputValidationError) as info:
        await flow.run(lines=[{"sku": "a", "qty": 1}, {"sku": "b", "qty": "many"}])
    assert info.value.field == "lines[1].qty"


class Signup(BaseModel):
    email: str
    smtp_up: bool = True


def signup_flow() -> rf.Reactor:
    flow = rf.Reactor(unique("pyd-signup"), inputs=Signup)

    @flow.step
    async def send(email: str, smtp_up: bool) -> str:
        return f"{email} smtp_up={smtp_up}"

    return flow


async def test_composed_and_async_children_take_model_inputs() -> None:
    child = signup_flow()
    parent = rf.Reactor(unique("pyd-parent"))

    @parent.compose(child)
    async def as_value() -> Signup:
        return Signup(email="a@b", smtp_up=False)

    @parent.compose(child)
    async def as_mapping() -> dict[str, Any]:
        return {"email": "c@d"}

    @parent.async_reactor(child)
    async def spawned() -> Signup:
        return Signup(email="e@f")

    @parent.step
    async def both(as_value: str, as_mapping: str, spawned: str) -> str:
        return f"{as_value} / {as_mapping} / {spawned}"

    run = await parent.wait((await parent.run()).id, timeout=30)
    assert run.status is rf.Status.COMPLETED, run.error
    assert run.value == "a@b smtp_up=False / c@d smtp_up=True / e@f smtp_up=True"


async def test_a_composed_child_with_invalid_model_inputs_fails_its_step() -> None:
    child = signup_flow()
    parent = rf.Reactor(unique("pyd-parent"))

    @parent.compose(child)
    async def signup() -> dict[str, Any]:
        return {"email": ["not", "a", "string"]}

    run = await parent.run()
    assert run.status is rf.Status.FAILED
    assert run.error is not None and run.error.type == "InputValidationError"
    assert run.error.step == "signup" and "email: Input should be a valid string" in (
        run.error.message)


class Opaque:
    """No JSON form: pydantic takes it only with arbitrary_types_allowed."""


class Holder(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)
    name: str
    handle: Opaque


class Outer(BaseModel):
    holder: Holder


def test_a_model_that_cannot_round_trip_is_refused_at_declaration() -> None:
    with pytest.raises(rf.DefinitionError, match=r"inputs=Holder.*field 'handle'.*JSON"):
        rf.Reactor(unique("pyd-bad"), inputs=Holder)

    flow = rf.Reactor(unique("pyd-bad"))
    with pytest.raises(rf.DefinitionError, match=r"step 'make'.*field 'holder\.handle'"):
        @flow.step
        async def make() -> Outer:
            raise AssertionError

    with pytest.raises(rf.DefinitionError, match=r"interrupt 'wait'.*field 'handle'"):
        @flow.interrupt
        async def wait(payload: Holder) -> None:
            raise AssertionError

    @flow.step
    async def ids() -> list[int]:
        return [1]

    with pytest.raises(rf.DefinitionError, match=r"map 'each'.*field 'handle'"):
        @flow.map_step(over="ids")
        async def each(item: int) -> list[Holder]:
            raise AssertionError


def test_the_payload_schema_comes_from_pydantic() -> None:
    flow = approval_flow()
    schema = flow.interrupt_schema("approve")
    assert schema["$ref"] == "#/$defs/Approval"
    approval = schema["$defs"]["Approval"]
    assert approval["required"] == ["approver", "ok"]
    assert approval["properties"]["approver"] == {"type": "string"}  # no made-up titles
    address = approval["properties"]["address"]["anyOf"][0]
    assert address == {"$ref": "#/$defs/Address"}  # every definition at the root
    assert schema["$defs"]["Address"]["properties"]["zip"] == {"minLength": 5,
                                                               "type": "string"}


def test_reactorflow_imports_without_pydantic() -> None:
    code = ("import sys; sys.modules['pydantic'] = None; import reactorflow, reactorflow.web.api;"
            "from reactorflow import pydantic_types as p;"
            "assert not p.is_model_type(dict) and p.encode({'a': 1})")
    subprocess.run([sys.executable, "-c", code], check=True)
