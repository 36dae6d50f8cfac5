"""An order saga used across the suite: parallel steps, undo and compensate handlers."""

from __future__ import annotations

import msgspec

import reactorflow as rf
from tests.helpers import completed_elsewhere


class Order(msgspec.Struct):
    order_id: str
    amount: float
    items: list[str]
    fail_at: str = ""  # name of a step that should raise
    reserve_last: bool = False  # `reserve` completes only after `fraud_check` has (stored)


class Charge(msgspec.Struct):
    charge_id: str
    amount: float


class Receipt(msgspec.Struct):
    order_id: str
    charge_id: str
    reservation: str


LOG: list[str] = []

checkout = rf.Reactor("tests.checkout", inputs=Order)


def _maybe_fail(step: str, fail_at: str) -> None:
    if fail_at == step:
        raise RuntimeError(f"{step} exploded")


@checkout.step
async def reserve(order_id: str, items: list[str], fail_at: str, reserve_last: bool = False,
                  ctx: rf.StepContext = None) -> str:  # type: ignore[assignment]  # unit tests
    LOG.append("reserve")
    if reserve_last:  # completion order then differs from declaration order
        await completed_elsewhere(checkout, ctx.run_id, "fraud_check")
    _maybe_fail("reserve", fail_at)
    return f"res-{order_id}-{len(items)}"


@reserve.undo
async def release(result: str, order_id: str) -> None:
    LOG.append(f"release:{result}")


@checkout.step
async def fraud_check(order_id: str, amount: float, fail_at: str) -> bool:
    LOG.append("fraud_check")
    _maybe_fail("fraud_check", fail_at)
    return amount < 10_000


@fraud_check.undo
async def forget_check(result: bool) -> None:
    LOG.append("forget_check")


@checkout.step
async def charge(amount: float, reserve: str, fraud_check: bool, fail_at: str) -> Charge:
    LOG.append("charge")
    _maybe_fail("charge", fail_at)
    return Charge(charge_id=f"ch-{reserve}", amount=amount)


@charge.undo
async def refund(result: Charge) -> None:
    LOG.append(f"refund:{result.charge_id}")


@charge.compensate
async def void_charge(error: Exception, amount: float) -> None:
    LOG.append(f"void:{error}")


@checkout.step
async def receipt(order_id: str, charge: Charge, reserve: str, fail_at: str) -> Receipt:
    LOG.append("receipt")
    _maybe_fail("receipt", fail_at)
    return Receipt(order_id, charge.charge_id, reserve)
