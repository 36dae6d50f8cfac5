"""Crash injection and overrides reach a composed child's step by its key (issue 22, item 12):
`env.crash(checkout, "ship.book_courier")`, `env.override(checkout, "ship.book_courier", fn)`,
and a crash armed on the child reactor itself."""

from __future__ import annotations

import pytest

import reactorflow as rf
from reactorflow.testing import Environment, executed
from tests.workflows import shop

pytestmark = pytest.mark.timeout(30)

ORDER = {"customer": "ada", "amount": 10.0, "items": ["pen", "ink"]}


async def approved(env: Environment, order_id: str) -> rf.Run:
    """Run the shop's checkout up to its approval and approve it (the crash, if armed, fires
    in the worker job that goes on after the approval)."""
    run = await shop.checkout.run(order_id=order_id, **ORDER)
    await env.drain()
    await shop.checkout.continue_(run.id, step="approve", payload={"approved": True, "by": "g"})
    await env.drain()
    return await shop.checkout.get(run.id)


@pytest.mark.parametrize("when", ["before", "after"])
@pytest.mark.parametrize("armed_on", ["path", "child"])
async def test_a_crash_at_a_composed_childs_step_and_recovery(rf_env: Environment, when: str,
                                                              armed_on: str) -> None:
    shop.TRAIL.clear()
    reactor, step = ((shop.checkout, "ship.book_courier") if armed_on == "path"
                     else (shop.shipping, "book_courier"))
    with rf_env.crash(reactor, step, when=when) as point:  # type: ignore[arg-type]
        run = await approved(rf_env, f"C-{when}-{armed_on}")
    assert point.fired == [run.id]
    assert run.status is rf.Status.RUNNING  # the process "died" in the child
    booked = [f"book {run.inputs.order_id}"]
    assert shop.TRAIL.count(booked[0]) == (1 if when == "after" else 0)
    assert run.steps["ship.book_courier"].status == ("completed" if when == "after"
                                                     else "pending")
    [recovered] = await rf_env.recover()
    assert recovered.status is rf.Status.COMPLETED, recovered.error
    assert shop.TRAIL.count(booked[0]) == 1  # booked once, whatever the crash point
    assert "ship.book_courier" in executed(recovered)


async def test_a_crash_armed_on_a_path_fires_only_in_the_reactor_it_names(
        rf_env: Environment) -> None:
    """Armed as checkout's `ship.book_courier`, a standalone run of the child goes through."""
    with pytest.raises(AssertionError, match=r"no run of reactor 'tests\.shop\.checkout'"), \
            rf_env.crash(shop.checkout, "ship.book_courier", when="before"):
        run = await shop.shipping.run(order_id="S1", address="here", boxes=["b"])
        assert run.status is rf.Status.COMPLETED


async def test_override_of_a_composed_childs_step_by_its_path(rf_env: Environment) -> None:
    async def no_courier(order_id: str, address: str) -> str:
        return f"pigeon for {order_id}"

    with rf_env.override(shop.checkout, "ship.book_courier", no_courier):
        run = await approved(rf_env, "O1")
        alone = await shop.shipping.run(order_id="S1", address="here", boxes=["b"])
    assert run.status is rf.Status.COMPLETED
    assert run.value == "O1: 2 label(s), pigeon for O1"
    assert alone.value == "1 label(s), courier for S1 to here"  # only checkout's use of it


@pytest.mark.parametrize("path, said", [
    ("ship.nope", "reactor 'tests.shop.shipping' has no step 'nope' (steps: book_courier, "
                  "label)"),
    ("charge.book_courier", "'charge' (in the reactor itself, reactor 'tests.shop.checkout') "
                            "is not a composed step (composed steps: ship)"),
    ("nope", "reactor 'tests.shop.checkout' has no step 'nope'"),
])
async def test_a_path_that_matches_no_step_is_refused_naming_it(rf_env: Environment, path: str,
                                                                said: str) -> None:
    async def fn(order_id: str, address: str) -> str:
        return ""

    for arm in (lambda: rf_env.crash(shop.checkout, path),
                lambda: rf_env.override(shop.checkout, path, fn)):
        with pytest.raises(rf.DefinitionError) as error, arm():
            pass
        assert repr(path) in str(error.value) and said in str(error.value)
