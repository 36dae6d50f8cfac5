"""Gate declarations: every option checked, keys checked against what is available."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
import pytest

import reactorflow as rf
from tests.helpers import unique


class Invoice(msgspec.Struct):
    account_id: str
    warehouse_id: str = "w1"
    amount: float = 1.0


@pytest.mark.parametrize(("make", "names"), [
    (lambda: rf.Semaphore("k", limit=0), ["Semaphore", "limit=0"]),
    (lambda: rf.Semaphore("k", limit=True), ["Semaphore", "limit=True"]),
    (lambda: rf.Lock("k", wait=-1), ["Lock", "wait=-1"]),
    (lambda: rf.Lock("k", ttl=-5), ["Lock", "ttl=-5"]),
    (lambda: rf.Lock("k", ttl=0), ["Lock", "ttl=0"]),
    (lambda: rf.RateLimit("stripe"), ["RateLimit", "'stripe'", "window"]),
    (lambda: rf.RateLimit("stripe", second=0), ["RateLimit", "second=0"]),
    (lambda: rf.RateLimit("stripe", minute=5, wait=-1), ["RateLimit", "wait=-1"]),
    (lambda: rf.Period("inv", every="fortnight"), ["Period", "every='fortnight'"]),
    (lambda: rf.Period("inv", every=-3), ["Period", "every=-3"]),
    (lambda: rf.OrderedLock("l", poison_pill_timeout=0), ["OrderedLock",
                                                          "poison_pill_timeout=0"]),
    (lambda: rf.Lock(""), ["Lock", "empty"]),
    (lambda: rf.Lock(42), ["Lock", "template"]),  # type: ignore[arg-type]
    (lambda: rf.Lock("acct:{"), ["Lock", "template"]),
])
def test_bad_options_name_the_gate_and_the_value(make: Callable[[], Any],
                                                 names: list[str]) -> None:
    with pytest.raises(rf.DefinitionError) as caught:
        make()
    for name in names:
        assert name in str(caught.value)


def test_gates_are_small_immutable_values() -> None:
    lock = rf.Lock("account:{account_id}", ttl=30, wait=5)
    assert (lock.key, lock.ttl, lock.wait) == ("account:{account_id}", 30.0, 5.0)
    assert lock == rf.Lock("account:{account_id}", ttl=30, wait=5)
    with pytest.raises(AttributeError):
        lock.ttl = 1  # type: ignore[misc]
    limit = rf.RateLimit("stripe", second=25, minute=1000)
    assert limit.windows == (("second", 1, 25), ("minute", 60, 1000))
    assert rf.Period("p", every=90).every == 90.0


def test_a_reactor_template_naming_no_input_is_refused_at_the_reactor() -> None:
    with pytest.raises(rf.DefinitionError) as caught:
        rf.Reactor(unique("bad"), inputs=Invoice, gates=[rf.Lock("acct:{acount_id}")])
    message = str(caught.value)
    assert "'acount_id'" in message and "account_id" in message and "rf.Lock" in message


def test_a_step_template_is_checked_against_the_steps_parameters() -> None:
    flow = rf.Reactor(unique("steps"), inputs=Invoice)
    with pytest.raises(rf.DefinitionError) as caught:
        @flow.step(gates=[rf.Semaphore("wh:{warehouse_id}", limit=2)])
        async def charge(account_id: str) -> str:  # warehouse_id is an input, not a parameter
            return account_id
    assert "'warehouse_id'" in str(caught.value) and "charge" in str(caught.value)


def test_a_callable_key_may_take_a_subset_and_nothing_else() -> None:
    flow = rf.Reactor(unique("calls"), inputs=Invoice,
                      gates=[rf.Lock(lambda account_id: f"acct:{account_id}")])
    assert flow.gates[0].names == ("account_id",)
    with pytest.raises(rf.DefinitionError) as caught:
        rf.Reactor(unique("calls"), inputs=Invoice, gates=[rf.Lock(lambda nope: nope)])
    assert "'nope'" in str(caught.value)


def test_gates_on_every_kind_of_step_but_interrupts() -> None:
    child = rf.Reactor(unique("child"), inputs=Invoice)

    @child.step
    async def inner(account_id: str) -> str:
        return account_id

    flow = rf.Reactor(unique("kinds"), inputs=Invoice)
    lock = rf.Lock("acct:{account_id}")

    @flow.step(gates=[lock])
    async def plain(account_id: str) -> str:
        return account_id

    @flow.async_step(gates=[lock])
    async def later(account_id: str) -> str:
        return account_id

    @flow.compose(child, gates=[lock])
    async def nested(account_id: str) -> dict[str, str]:
        return {"account_id": account_id}

    @flow.async_reactor(child, gates=[lock])
    async def detached(account_id: str) -> dict[str, str]:
        return {"account_id": account_id}

    for name in ("plain", "later", "nested", "detached"):
        assert [b.gate for b in flow.steps[name].gates] == [lock]
    with pytest.raises(rf.DefinitionError) as caught:
        @flow.interrupt(gates=[lock])
        async def approve(payload: str) -> str:
            return payload
    assert "interrupt" in str(caught.value)


def test_gates_must_be_gates() -> None:
    with pytest.raises(rf.DefinitionError) as caught:
        rf.Reactor(unique("junk"), inputs=Invoice, gates=["account"])
    assert "gates[0]='account'" in str(caught.value)


def test_reactor_gates_are_taken_in_ruby_reactors_order() -> None:
    gates = [rf.Semaphore("s", limit=2), rf.Lock("l"), rf.RateLimit("r", second=1),
             rf.Period("p", every="day"), rf.OrderedLock("o")]
    flow = rf.Reactor(unique("order"), gates=gates)
    assert [b.kind for b in flow.gates] == ["ordered_lock", "period", "rate_limit", "lock",
                                            "semaphore"]

    @flow.step(gates=gates)
    async def step() -> None:
        return None

    assert [b.kind for b in flow.steps["step"].gates] == [
        "ordered_lock", "period", "lock", "semaphore", "rate_limit"]
