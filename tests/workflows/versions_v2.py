"""Version 2 of `tests.cli-versions.checkout` (see `versions_v1`), with a migration from
version 1: a fraud check before `approve` (completed by the migration), `review` gone, and
`bill` renamed `charge`. It does not declare `tests.cli-versions.retired`."""

from __future__ import annotations

import msgspec

import reactorflow as rf


class Order(msgspec.Struct):
    item: str


class Approval(msgspec.Struct):
    ok: bool


class Score(msgspec.Struct):
    value: float


checkout = rf.Reactor("tests.cli-versions.checkout", inputs=Order, version=2)


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
    if "bill" in run.steps:
        run.rename("bill", "charge")
