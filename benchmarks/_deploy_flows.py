"""The reactors of the `deploy_check` benchmark: version 1 of a checkout (two approvals in turn)
and version 2 (a fraud check before the first, no second one), with a migration from 1 that
fits a run waiting on the first approval and not one waiting on the second."""

from __future__ import annotations

import msgspec

import reactorflow as rf


class Order(msgspec.Struct):
    item: str
    qty: int = 1


class Approval(msgspec.Struct):
    ok: bool


class Score(msgspec.Struct):
    value: float


checkout_v1 = rf.Reactor("bench.deploy.checkout", inputs=Order, version=1)


@checkout_v1.step(name="reserve")
async def reserve_v1(item: str) -> str:
    return f"R-{item}"


@checkout_v1.interrupt(name="approve")
async def approve_v1(reserve: str, payload: Approval) -> bool:
    return payload.ok


@checkout_v1.interrupt
async def review(approve: bool, payload: Approval) -> bool:
    return payload.ok


@checkout_v1.step
async def bill(review: bool) -> str:
    return "billed"


checkout = rf.Reactor("bench.deploy.checkout", inputs=Order, version=2)


@checkout.step
async def reserve(item: str) -> str:
    return f"R-{item}"


@checkout.step
async def fraud_check(reserve: str) -> Score:
    return Score(0.5)


@checkout.interrupt
async def approve(fraud_check: Score, payload: Approval) -> bool:
    return payload.ok


@checkout.step
async def charge(approve: bool) -> str:
    return "charged"


@checkout.migrate(from_version=1)
def from_v1(run: rf.Migration) -> None:
    run.complete("fraud_check", result=Score(0.0))
