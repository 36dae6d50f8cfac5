"""Definition errors are raised at the decorator line and say what is available."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
import pytest

import reactorflow as rf
from tests.helpers import unique


class Inputs(msgspec.Struct):
    order_id: str
    amount: float
    address: dict[str, str] = {}


class Opaque:
    pass


def make() -> rf.Reactor:
    return rf.Reactor(unique("wiring"), inputs=Inputs)


def test_parameters_wire_to_inputs_and_earlier_steps() -> None:
    flow = make()

    @flow.step
    async def reserve(order_id: str) -> str:
        return order_id

    @flow.step
    async def charge(amount: float, reserve: str, ctx: rf.StepContext, note: str = "n") -> str:
        return reserve

    spec = flow.steps["charge"]
    assert [(p.name, p.source.value, p.ref) for p in spec.params] == [
        ("amount", "input", "amount"), ("reserve", "result", "reserve"),
        ("ctx", "context", ""), ("note", "default", ""),
    ]
    assert spec.deps == ("reserve",)


def test_unknown_parameter_lists_what_is_available() -> None:
    flow = make()

    @flow.step
    async def reserve(order_id: str) -> str:
        return order_id

    with pytest.raises(rf.DefinitionError) as info:
        @flow.step
        async def charge(amuont: float) -> str:
            return ""
    message = str(info.value)
    assert "'amuont'" in message
    assert "order_id, amount, address" in message
    assert "reserve" in message
    assert info.value.step == "charge"
    assert "charge" not in flow.steps


def test_later_step_is_not_available_to_an_earlier_one() -> None:
    flow = make()
    with pytest.raises(rf.DefinitionError, match="'later' matches no input"):
        @flow.step
        async def early(later: str) -> str:
            return later


def test_ambiguous_name_is_refused_with_the_fix() -> None:
    flow = make()
    with pytest.raises(rf.DefinitionError, match="is also an input field"):
        @flow.step
        async def amount() -> float:
            return 1.0


def test_duplicate_step_name_is_refused() -> None:
    flow = make()

    @flow.step
    async def one() -> int:
        return 1

    with pytest.raises(rf.DefinitionError, match="already has a step named 'one'"):
        @flow.step(name="one")
        async def another() -> int:
            return 2


def test_explicit_sources_with_paths() -> None:
    flow = make()

    @flow.step
    async def data() -> dict[str, Any]:
        return {"card": {"last4": "4242"}}

    @flow.step
    async def use(
        last4: Annotated[str, rf.Result("data", "card.last4")],
        ident: Annotated[str, rf.Input("order_id")],
    ) -> str:
        return ident + last4

    params = {p.name: (p.source.value, p.ref, p.path) for p in flow.steps["use"].params}
    assert params == {"last4": ("result", "data", ("card", "last4")),
                      "ident": ("input", "order_id", ())}
    with pytest.raises(rf.DefinitionError, match=r"rf.Input\('nope'\)"):
        @flow.step
        async def bad_input(x: Annotated[str, rf.Input("nope")]) -> str:
            return x
    with pytest.raises(rf.DefinitionError, match=r"rf.Result\('nope'\)"):
        @flow.step
        async def bad_result(x: Annotated[str, rf.Result("nope")]) -> str:
            return x


@pytest.mark.parametrize("options, fragment", [
    (dict(retries=3), "rf.Retry"),
    (dict(timeout=-1), "timeout"),
    (dict(timeout=True), "timeout"),
    (dict(when="yes"), "must be callable"),
    (dict(after=["ghost"]), "after='ghost'"),
    (dict(name="has space"), "step name"),
    (dict(name="dotted.name"), "step name"),
])
def test_bad_options_are_definition_errors(options: dict[str, Any], fragment: str) -> None:
    flow = make()
    with pytest.raises(rf.DefinitionError, match=fragment.replace("(", r"\(")):
        @flow.step(**options)
        async def step(order_id: str) -> str:
            return order_id


def test_when_may_only_take_step_arguments() -> None:
    flow = make()
    with pytest.raises(rf.DefinitionError, match="'surprise' is not one of the step's arguments"):
        @flow.step(when=lambda amount, surprise: True)
        async def step(amount: float) -> float:
            return amount


def test_sync_functions_are_refused() -> None:
    flow = make()
    with pytest.raises(rf.DefinitionError, match="async def"):
        flow.step(lambda: 1)


def test_unstorable_return_annotation_is_refused() -> None:
    flow = make()
    with pytest.raises(rf.DefinitionError, match="cannot be stored"):
        @flow.step
        async def weird() -> Opaque:
            return Opaque()


def test_undo_and_compensate_signatures_are_checked() -> None:
    flow = make()

    @flow.step
    async def charge(amount: float, order_id: str) -> str:
        return order_id

    with pytest.raises(rf.DefinitionError, match="'customer' is not a parameter of step"):
        @charge.undo
        async def refund(result: str, customer: str) -> None:
            pass

    with pytest.raises(rf.DefinitionError, match="first parameter must be positional"):
        @charge.compensate
        async def void() -> None:
            pass

    @charge.undo
    async def good_undo(result: str, amount: float, ctx: rf.StepContext) -> None:
        pass

    with pytest.raises(rf.DefinitionError, match="already has a undo handler"):
        @charge.undo
        async def second_undo(result: str) -> None:
            pass
    assert flow.steps["charge"].undo is not None
    assert flow.steps["charge"].undo.names == ("amount",)


def test_reactor_options_are_checked() -> None:
    with pytest.raises(rf.DefinitionError, match="max_concurrency"):
        rf.Reactor(unique("bad"), max_concurrency=0)
    with pytest.raises(rf.DefinitionError, match="reactor name"):
        rf.Reactor("")
    with pytest.raises(rf.DefinitionError, match=r"must be a msgspec\.Struct"):
        rf.Reactor(unique("bad"), inputs=Opaque)
    name = unique("twice")
    keep = rf.Reactor(name)
    with pytest.raises(rf.DefinitionError, match="declared in two places"):
        _declare_elsewhere(name)  # a real clash: another place (see test_declarations.py)
    assert keep.name == name


def _declare_elsewhere(name: str) -> rf.Reactor:
    return rf.Reactor(name)


async def test_returns_naming_no_step_fails_at_first_use(memory: rf.Storage) -> None:
    flow = rf.Reactor(unique("returns"), returns="ghost")

    @flow.step
    async def real() -> int:
        return 1

    with pytest.raises(rf.DefinitionError, match="returns='ghost' names no step"):
        await flow.run()


class Approval(msgspec.Struct):
    approved: bool
    by: str


def test_an_interrupt_without_payload_says_so_not_that_a_name_matches_nothing() -> None:
    flow = make()
    with pytest.raises(rf.DefinitionError) as info:
        @flow.interrupt
        async def approve(approval: Approval, amount: float) -> Approval:
            return approval
    message = str(info.value)
    assert "an interrupt needs a `payload` parameter" in message
    assert "its parameters are: approval, amount" in message
    assert "parameter 'approval' matches no input and no earlier step: if it is meant to " \
           "receive the payload, rename it `payload`" in message
    assert "Rename it, give it a default" not in message  # not the generic wiring message
    with pytest.raises(rf.DefinitionError) as bare:
        @flow.interrupt
        async def confirm(ctx: rf.StepContext) -> bool:
            return True
    assert "needs a `payload` parameter" in str(bare.value)
    assert "rename it" not in str(bare.value)  # no parameter to suggest


def test_compose_refuses_retries_and_itself() -> None:
    child = rf.Reactor(unique("child"))
    parent = make()
    with pytest.raises(rf.DefinitionError, match="never retried as a whole"):
        parent.compose(child, retries=rf.Retry(2))
    with pytest.raises(rf.DefinitionError, match="inside itself"):
        parent.compose(parent)


def test_interrupt_needs_a_payload_schema() -> None:
    flow = make()
    with pytest.raises(rf.DefinitionError, match="needs a `payload` parameter"):
        @flow.interrupt
        async def approve(order_id: str) -> bool:
            return True
    with pytest.raises(rf.DefinitionError, match="correlation_id template"):
        @flow.interrupt(correlation_id="approval:{nope}")
        async def approve2(payload: bool) -> bool:
            return payload
    with pytest.raises(rf.DefinitionError, match="resume="):
        @flow.interrupt(resume="later")  # type: ignore[arg-type]
        async def approve3(payload: bool) -> bool:
            return payload
    with pytest.raises(rf.DefinitionError, match="max_attempts"):
        @flow.interrupt(max_attempts=0)
        async def approve4(payload: bool) -> bool:
            return payload


def test_mermaid_renders_nodes_and_edges() -> None:
    flow = make()

    @flow.step
    async def a(order_id: str) -> str:
        return order_id

    @flow.step(after=["a"])
    async def b() -> str:
        return "b"

    @flow.step
    async def c(a: str, b: str) -> str:
        return a + b

    chart = flow.to_mermaid()
    assert chart.startswith("flowchart TD")
    assert 'n_a["a"]' in chart
    assert "n_a -.-> n_b" in chart
    assert "n_a --> n_c" in chart and "n_b --> n_c" in chart


async def test_decorated_step_is_awaitable_as_plain_function() -> None:
    flow = make()

    @flow.step
    async def double(amount: float) -> float:
        return amount * 2

    assert await double(4.0) == 8.0
    assert double.__name__ == "double"
    assert double.spec.name == "double"
