"""A gate key template may not format an `rf.Redacted` value: the key is stored and shown
(`rf.GateBusy.key`, logs, `run.steps`), so the declaration is refused."""

from __future__ import annotations

from typing import Annotated

import msgspec
import pytest

import reactorflow as rf
from tests.helpers import unique


class Card(msgspec.Struct):
    number: Annotated[str, rf.Redacted]
    brand: str


class Payment(msgspec.Struct):
    account_id: str
    token: Annotated[str, rf.Redacted]
    card: Card


def _refused(make: object) -> str:
    with pytest.raises(rf.DefinitionError) as caught:
        make()  # type: ignore[operator]
    return str(caught.value)


def test_a_reactor_gate_formatting_a_redacted_input_is_refused() -> None:
    message = _refused(lambda: rf.Reactor(unique("pay"), inputs=Payment,
                                          gates=[rf.Lock("pay:{token}")]))
    assert "rf.Lock('pay:{token}')" in message  # the gate and its template
    assert "'token'" in message and "Redacted" in message  # the field


def test_a_redacted_nested_field_or_a_whole_value_containing_one_is_refused() -> None:
    message = _refused(lambda: rf.Reactor(unique("pay"), inputs=Payment,
                                          gates=[rf.Semaphore("card:{card.number}", limit=2)]))
    assert "rf.Semaphore('card:{card.number}')" in message and "'card.number'" in message
    message = _refused(lambda: rf.Reactor(unique("pay"), inputs=Payment,
                                          gates=[rf.OrderedLock("card:{card}")]))
    assert "'card'" in message


def test_fields_that_are_not_secret_and_callable_keys_are_accepted() -> None:
    flow = rf.Reactor(unique("pay"), inputs=Payment,
                      gates=[rf.Lock("pay:{account_id}:{card.brand}"),
                             rf.RateLimit(lambda token: f"t:{len(token)}", second=5)])
    assert len(flow.gates) == 2


def test_a_step_gate_formatting_a_redacted_value_is_refused() -> None:
    flow = rf.Reactor(unique("pay"), inputs=Payment)

    @flow.step
    async def secret() -> Annotated[str, rf.Redacted]:
        return "s3cr3t"

    for template, field in (("tok:{token}", "token"), ("sec:{secret}", "secret")):
        def declare(template: str = template) -> None:
            @flow.step(name=unique("use"), gates=[rf.Lock(template)])
            async def use(token: str, secret: str) -> str:
                return token + secret

        message = _refused(declare)
        assert f"rf.Lock({template!r})" in message and f"{field!r}" in message
        assert "step" in message or "use" in message

