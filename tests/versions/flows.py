"""Two versions of a checkout for the surfaces' tests (API, CLI, dashboard): version 1 reserves,
waits for approval and bills; version 2 adds a fraud check before approval and renamed `bill`
to `charge`. `migrated_run` leaves a run that started on version 1 and was migrated onto 2."""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

import reactorflow as rf
from tests.helpers import redeploy


class Order(msgspec.Struct):
    item: str


class Approval(msgspec.Struct):
    ok: bool


class Score(msgspec.Struct):
    value: float


V1_STEPS = ["reserve", "approve", "bill"]
V2_STEPS = ["reserve", "fraud_check", "approve", "charge"]


def version_1(name: str, *, review: bool = False) -> rf.Reactor:
    """Version 1: `reserve`, the interrupt `approve`, then `bill` (with `review`: a second
    interrupt `review` between `approve` and `bill`, which version 2 does not have)."""
    flow = rf.Reactor(name, inputs=Order, version=1)

    @flow.step
    async def reserve(item: str) -> str:
        return f"R-{item}"

    @flow.interrupt
    async def approve(reserve: str, payload: Approval) -> bool:
        return payload.ok

    if review:
        @flow.interrupt(name="review")
        async def second_approval(approve: bool, payload: Approval) -> bool:
            return payload.ok

        @flow.step(name="bill")
        async def bill_after_review(review: bool) -> str:
            return "billed"
    else:
        @flow.step
        async def bill(approve: bool) -> str:
            return "billed"

    return flow


def version_2(name: str, *, migration: bool = True, rename_bill: bool = False) -> rf.Reactor:
    """Version 2: a fraud check before `approve`, and `bill` renamed `charge`; with
    `migration`, a migration from 1 that completes the fraud check (and with `rename_bill`,
    carries a completed `bill` over as `charge`)."""
    flow = rf.Reactor(name, inputs=Order, version=2)

    @flow.step
    async def reserve(item: str) -> str:
        return f"R-{item}"

    @flow.step
    async def fraud_check(reserve: str) -> Score:
        return Score(0.5)

    @flow.interrupt
    async def approve(fraud_check: Score, payload: Approval) -> bool:
        return payload.ok

    @flow.step
    async def charge(approve: bool) -> str:
        return "charged"

    if migration:
        @flow.migrate(from_version=1)
        def from_v1(run: rf.Migration) -> None:
            run.complete("fraud_check", result=Score(0.0))
            if rename_bill and "bill" in run.steps:
                run.rename("bill", "charge")

    return flow


@dataclass
class Deployed:
    v2: rf.Reactor
    v1_run: str  # a paused run of version 1 (not migrated)
    migrated: str  # a paused run that started on version 1 and was migrated onto 2
    v2_run: str  # a paused run that started on version 2


async def migrated_run(name: str) -> Deployed:
    """Two version 1 runs paused at approval; then version 1 is undeployed, version 2 (with its
    migration from 1) declared, one of them migrated ahead of time and a version 2 run
    started."""
    v1 = version_1(name)
    old = await v1.run(Order("tea"))
    moved = await v1.run(Order("gin"))
    redeploy(v1)
    v2 = version_2(name)
    done = await v2.migrate(moved.id)
    assert done.version == 2
    fresh = await v2.run(Order("rum"))
    return Deployed(v2, old.id, moved.id, fresh.id)
