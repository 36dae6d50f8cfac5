"""A migration under a codec (api.md §14 and §17): the hooks and the checks see clear values,
and what the migration writes is sealed again for its new place, so a renamed step (and its
composed child's steps) reads back on the new version; the migrated inputs are sealed too."""

from __future__ import annotations

import msgspec
import pytest

import reactorflow as rf
from reactorflow import records
from reactorflow.protection.envelope import key_id_of
from reactorflow.testing import Environment
from tests.helpers import unique
from tests.protection.flows import MARKER, codec


class Approval(msgspec.Struct):
    ok: bool


class In(msgspec.Struct):
    customer: str


@pytest.fixture(params=["rf_env", "rf_redis_env"])
def env(request: pytest.FixtureRequest) -> Environment:
    return request.getfixturevalue(request.param)  # type: ignore[no-any-return]


async def test_a_renamed_step_is_sealed_again_for_its_new_key(env: Environment) -> None:
    rf.configure(codec=codec("k1"))
    child = rf.Reactor(unique("pack"), inputs=In)

    @child.step
    async def pack(customer: str) -> str:
        return f"box for {customer}"

    name = unique("ship")
    v1 = rf.Reactor(name, version=1, inputs=In)

    @v1.compose(child)
    async def ship(customer: str) -> In:
        return In(customer)

    @v1.interrupt
    async def approve(ship: str, payload: Approval) -> bool:
        return payload.ok

    run = await v1.run(customer=f"{MARKER}-c")
    assert run.status is rf.Status.PAUSED

    v2 = rf.Reactor(name, version=2, inputs=In)

    @v2.compose(child)
    async def delivery(customer: str) -> In:
        return In(customer)

    @v2.interrupt(name="approve")
    async def approve_v2(delivery: str, payload: Approval) -> bool:
        return payload.ok

    @v2.step
    async def notify(approve: bool, delivery: str, customer: str) -> str:
        return f"sent {delivery} to {customer}"

    @v2.migrate(from_version=1)
    def moved(migration: rf.Migration) -> None:
        assert migration.inputs == {"customer": f"{MARKER}-c"}  # the hook sees clear values
        assert migration.steps["ship"].result == f"box for {MARKER}-c"
        migration.rename("ship", "delivery")

    with env.undeclared(v1):
        done = await v2.continue_(run.id, step="approve", payload={"ok": True})
    assert done.status is rf.Status.COMPLETED and done.version == 2, done.error
    assert done.value == f"sent box for {MARKER}-c to {MARKER}-c"
    got = await rf.get_run(run.id)
    assert got.steps["delivery.pack"].result == f"box for {MARKER}-c"
    stored = await env.storage.load_run(run.id)
    assert stored is not None
    assert key_id_of(records.decode_meta(stored.head.meta).inputs) == "k1"
    for key in ("delivery", "delivery.pack"):
        assert key_id_of(records.decode_step(stored.steps[key]).result) == "k1"
