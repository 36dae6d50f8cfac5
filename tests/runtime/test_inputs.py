"""Declared types everywhere a type is taken (run, dispatch, composed and async children,
interrupt payloads): a msgspec.Struct, a dataclass and a TypedDict alike; an unknown field is
refused naming it and listing the fields; a missing field is named."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict

import msgspec
import pytest

import reactorflow as rf
from tests.helpers import unique


class SignupStruct(msgspec.Struct):
    email: str
    smtp_up: bool = True


@dataclass
class SignupData:
    email: str
    smtp_up: bool = True


class SignupDict(TypedDict):
    email: str
    smtp_up: NotRequired[bool]


class ApprovalStruct(msgspec.Struct):
    approver: str
    ok: bool


@dataclass
class ApprovalData:
    approver: str
    ok: bool


class ApprovalDict(TypedDict):
    approver: str
    ok: bool


SIGNUPS = [SignupStruct, SignupData, SignupDict]
APPROVALS = [ApprovalStruct, ApprovalData, ApprovalDict]
FIELDS = "the fields are: email, smtp_up"

pytestmark = pytest.mark.usefixtures("storage")


def signup_flow(inputs: type) -> rf.Reactor:
    flow = rf.Reactor(unique(f"signup-{inputs.__name__}"), inputs=inputs)

    @flow.step
    async def send(email: str, smtp_up: bool = True) -> str:
        return f"{email} smtp_up={smtp_up}"

    return flow


def approval_flow(payload_type: type, **options: Any) -> rf.Reactor:
    flow = rf.Reactor(unique(f"approval-{payload_type.__name__}"))

    @flow.step
    async def draft() -> str:
        return "draft"

    async def approve(draft: str, payload: Any) -> str:
        fields = payload if isinstance(payload, dict) else msgspec.structs.asdict(
            payload) if isinstance(payload, msgspec.Struct) else vars(payload)
        assert type(payload) is (dict if payload_type is ApprovalDict else payload_type)
        return f"{draft} by {fields['approver']} ok={fields['ok']}"

    approve.__annotations__ = {"draft": str, "payload": payload_type, "return": str}
    flow.interrupt(max_attempts=2)(approve)
    return flow


@pytest.mark.parametrize("inputs", SIGNUPS, ids=lambda t: t.__name__)
async def test_run_takes_each_kind_of_inputs_type(inputs: type) -> None:
    flow = signup_flow(inputs)
    by_keywords = await flow.run(email="a@b", smtp_up=False)
    assert by_keywords.value == "a@b smtp_up=False"
    as_value = await flow.run(inputs(email="c@d", smtp_up=False))
    assert as_value.value == "c@d smtp_up=False"
    defaulted = await flow.run(email="e@f")
    assert defaulted.value == "e@f smtp_up=True"
    again = await flow.get(as_value.id)
    expected = {"email": "c@d", "smtp_up": False}
    assert again.inputs == (expected if inputs is SignupDict else inputs(**expected))


@pytest.mark.parametrize("inputs", SIGNUPS, ids=lambda t: t.__name__)
async def test_dispatch_takes_each_kind_of_inputs_type(inputs: type) -> None:
    flow = signup_flow(inputs)
    handed = await flow.dispatch(inputs(email="a@b", smtp_up=False))
    assert handed.status is rf.Status.RUNNING
    done = await flow.wait(handed.id, timeout=10)
    assert done.value == "a@b smtp_up=False"
    with pytest.raises(rf.InputValidationError) as unknown:
        await flow.dispatch(email="a@b", smtp_upp=False)
    assert unknown.value.field == "smtp_upp" and FIELDS in str(unknown.value)
    with pytest.raises(rf.InputValidationError) as missing:
        await flow.dispatch(smtp_up=False)
    assert missing.value.field == "email"
    assert [r.id for r in (await flow.list_runs()).runs] == [handed.id]  # nothing else stored


@pytest.mark.parametrize("inputs", SIGNUPS, ids=lambda t: t.__name__)
async def test_unknown_input_keyword_is_refused_naming_it(inputs: type) -> None:
    flow = signup_flow(inputs)
    with pytest.raises(rf.InputValidationError) as info:
        await flow.run(email="a@b", smtp_upp=False)
    assert info.value.field == "smtp_upp"
    assert "smtp_upp" in str(info.value) and FIELDS in str(info.value)
    assert "nothing was stored" in str(info.value)
    with pytest.raises(rf.InputValidationError, match="unknown fields; the fields are") as many:
        await flow.run({"email": "a@b", "colour": "red", "size": 3})
    assert many.value.field == "colour, size"
    assert (await flow.list_runs()).runs == []


@pytest.mark.parametrize("inputs", SIGNUPS, ids=lambda t: t.__name__)
async def test_missing_input_field_is_named(inputs: type) -> None:
    flow = signup_flow(inputs)
    with pytest.raises(rf.InputValidationError) as info:
        await flow.run(smtp_up=False)
    assert info.value.field == "email"
    assert "email: a required field is missing" in str(info.value)
    assert "whole value" not in str(info.value)


class Line(msgspec.Struct):
    sku: str
    qty: int


class Basket(msgspec.Struct):
    lines: list[Line]


async def test_missing_nested_field_is_named_by_its_path() -> None:
    flow = rf.Reactor(unique("basket"), inputs=Basket)

    @flow.step
    async def count(lines: list[Line]) -> int:
        return len(lines)

    with pytest.raises(rf.InputValidationError) as info:
        await flow.run(lines=[{"sku": "x"}])
    assert info.value.field == "lines[0].qty"


class Address(msgspec.Struct):
    street: str
    city: str = "Leith"


class Delivery(TypedDict):
    lines: list[Line]
    by_sku: dict[str, Line]
    address: Address | None


async def test_an_unknown_nested_field_is_refused_by_its_path() -> None:
    flow = rf.Reactor(unique("delivery"), inputs=Delivery)

    @flow.step
    async def count(lines: list[Line], by_sku: dict[str, Line]) -> int:
        return len(lines) + len(by_sku)

    good: dict[str, Any] = {"lines": [{"sku": "a", "qty": 1}], "by_sku": {},
                            "address": {"street": "Shore"}}
    assert (await flow.run(good)).value == 1
    cases = {
        "lines[1].qtty": {**good, "lines": [{"sku": "a", "qty": 1},
                                            {"sku": "b", "qty": 2, "qtty": 3}]},
        "by_sku['b'].colour": {**good, "by_sku": {"b": {"sku": "b", "qty": 1, "colour": "x"}}},
        "address.town": {**good, "address": {"street": "Shore", "town": "Leith"}},
    }
    for field, inputs in cases.items():
        with pytest.raises(rf.InputValidationError) as info:
            await flow.run(inputs)
        assert info.value.field == field
        owner = "Address" if field.startswith("address") else "Line"
        assert f"an unknown field; the fields of {owner} are:" in info.value.reason
    assert len((await flow.list_runs()).runs) == 1


class Review(msgspec.Struct):
    approver: str
    notes: list[Line] = []


async def test_a_payload_with_an_unknown_nested_field_is_refused() -> None:
    flow = approval_flow(Review)
    paused = await flow.run()
    with pytest.raises(rf.PayloadValidationError) as info:
        await flow.continue_(paused.id, step="approve",
                             payload={"approver": "ann", "notes": [{"sku": "a", "qty": 1,
                                                                    "why": "?"}]})
    assert info.value.field == "notes[0].why" and info.value.attempts == 1


@pytest.mark.parametrize("inputs", SIGNUPS, ids=lambda t: t.__name__)
async def test_composed_child_takes_each_kind_of_inputs_type(inputs: type) -> None:
    child = signup_flow(inputs)
    parent = rf.Reactor(unique("parent"))

    @parent.compose(child)
    async def as_value() -> Any:
        return inputs(email="a@b", smtp_up=False)

    @parent.compose(child)
    async def as_mapping() -> dict[str, Any]:
        return {"email": "c@d"}

    @parent.step
    async def both(as_value: str, as_mapping: str) -> str:
        return f"{as_value} / {as_mapping}"

    run = await parent.run()
    assert run.status is rf.Status.COMPLETED, run.error
    assert run.value == "a@b smtp_up=False / c@d smtp_up=True"


@pytest.mark.parametrize("inputs", SIGNUPS, ids=lambda t: t.__name__)
async def test_composed_child_with_an_unknown_field_fails_its_step(inputs: type) -> None:
    child = signup_flow(inputs)
    parent = rf.Reactor(unique("parent"))
    undone: list[str] = []

    @parent.step
    async def prepare() -> str:
        return "ready"

    @prepare.undo
    async def unprepare(result: str) -> None:
        undone.append(result)

    @parent.compose(child)
    async def signup(prepare: str) -> dict[str, Any]:
        return {"email": "a@b", "smtp_upp": False}

    run = await parent.run()
    assert run.status is rf.Status.FAILED
    assert undone == ["ready"]
    assert run.error is not None and run.error.type == "InputValidationError"
    assert run.error.step == "signup"
    message = run.error.message
    assert "smtp_upp" in message and FIELDS in message
    assert "step 'signup'" in message and "rolls back" in message
    assert "nothing was stored" not in message  # the parent run was stored, and rolled back
    assert (await parent.get(run.id)).status is rf.Status.FAILED


async def test_async_reactor_child_with_a_missing_field_fails_its_step() -> None:
    child = signup_flow(SignupDict)
    parent = rf.Reactor(unique("parent"))

    @parent.async_reactor(child)
    async def spawn() -> dict[str, Any]:
        return {"smtp_up": True}

    @parent.step
    async def after(spawn: rf.Outcome[str]) -> str:
        return "never"

    run = await parent.run()
    assert run.status is rf.Status.FAILED
    assert run.error is not None and run.error.type == "InputValidationError"
    assert "email: a required field is missing" in run.error.message
    assert "nothing was stored" not in run.error.message


@pytest.mark.parametrize("payload_type", APPROVALS, ids=lambda t: t.__name__)
async def test_interrupt_takes_each_kind_of_payload_type(payload_type: type) -> None:
    flow = approval_flow(payload_type)
    by_value = await flow.run()
    done = await flow.continue_(by_value.id, step="approve",
                                payload=payload_type(approver="ann", ok=True))
    assert done.status is rf.Status.COMPLETED, done.error
    assert done.value == "draft by ann ok=True"
    by_mapping = await flow.run()
    done = await flow.continue_(by_mapping.id, step="approve",
                                payload={"approver": "bob", "ok": False})
    assert done.value == "draft by bob ok=False"


@pytest.mark.parametrize("payload_type", APPROVALS, ids=lambda t: t.__name__)
async def test_payload_with_an_unknown_or_missing_field_counts_one_attempt(
        payload_type: type) -> None:
    flow = approval_flow(payload_type)
    paused = await flow.run()
    with pytest.raises(rf.PayloadValidationError) as unknown:
        await flow.continue_(paused.id, step="approve",
                             payload={"approver": "ann", "ok": True, "okk": True})
    assert unknown.value.field == "okk" and unknown.value.attempts == 1
    assert "the fields are: approver, ok" in str(unknown.value)
    with pytest.raises(rf.PayloadValidationError) as missing:
        await flow.continue_(paused.id, step="approve", payload={"ok": True})
    assert missing.value.field == "approver"
    assert "approver: a required field is missing" in str(missing.value)
    assert missing.value.attempts == 2 and missing.value.exhausted
    assert (await flow.get(paused.id)).status is rf.Status.FAILED


@pytest.mark.parametrize("payload_type", APPROVALS, ids=lambda t: t.__name__)
async def test_valid_payload_counts_no_attempt(payload_type: type) -> None:
    flow = approval_flow(payload_type)
    paused = await flow.run()
    with pytest.raises(rf.PayloadValidationError):
        await flow.continue_(paused.id, step="approve", payload={"approver": "ann"})
    # max_attempts=2: one attempt is left, and a valid payload must not use it up
    done = await flow.continue_(paused.id, step="approve",
                                payload=payload_type(approver="ann", ok=True))
    assert done.status is rf.Status.COMPLETED, done.error
