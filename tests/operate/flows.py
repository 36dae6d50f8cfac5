"""Reactors the CLI, HTTP API and browser tests operate on (imported by their subprocesses)."""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from typing import Annotated, Literal

import msgspec

import reactorflow as rf
from tests.workflows import background  # noqa: F401 - in a subprocess given

# REACTORFLOW_TEST_NAMESPACE, it confines storage and broker to the test's namespace


class Order(msgspec.Struct):
    item: str
    qty: int = 1
    fail: bool = False


class Address(msgspec.Struct):
    city: str
    zip: Annotated[str, msgspec.Meta(min_length=3, max_length=10)]


class Approval(msgspec.Struct):
    approved: bool
    level: Literal["low", "high"]
    amount: Annotated[int, msgspec.Meta(ge=1, le=100)]
    ship_to: Address
    note: str = ""


orders = rf.Reactor("ops.orders", inputs=Order)


@orders.step
async def reserve(item: str, qty: int, fail: bool) -> str:
    if fail:
        raise ValueError(f"no stock for {item}")
    return f"{qty}x{item}"


@reserve.undo
async def release(result: str) -> None:
    return None


@orders.interrupt
async def approve(payload: Approval, reserve: str) -> Approval:
    return payload


@orders.step
async def ship(reserve: str, approve: Approval) -> str:
    return f"{reserve} to {approve.ship_to.city}" if approve.approved else "held"


def approval(**changes: object) -> dict[str, object]:
    """A valid payload for `approve`, with changes."""
    payload: dict[str, object] = {"approved": True, "level": "high", "amount": 5,
                                  "ship_to": {"city": "Lyon", "zip": "69001"}}
    payload.update(changes)
    return payload


class Payment(msgspec.Struct):
    note: str
    amount: int = 10


payments = rf.Reactor("ops.payments", inputs=Payment)


@payments.step
async def charge(note: str, amount: int) -> str:
    return f"charged {amount} for {note}"


@charge.undo
async def refund(result: str) -> None:
    raise RuntimeError(f"refund failed for {result}")


@payments.step
async def deliver(charge: str, note: str) -> str:
    raise ValueError(f"courier lost {note}")


XSS = '<script>window.__xss = 1</script><img src=x onerror="window.__xss = 2">'
"""A value that runs script wherever a page inserts it as HTML instead of text."""


class Signoff(msgspec.Struct):
    approved: bool
    by: str
    tags: list[str] = []


signoffs = rf.Reactor("ops.signoffs")


@signoffs.interrupt(max_attempts=2)
async def sign(payload: Signoff) -> Signoff:
    return payload


@signoffs.step
async def record(sign: Signoff) -> str:
    return f"{'approved' if sign.approved else 'rejected'} by {sign.by}"


class Shipment(msgspec.Struct):
    order_id: str


reminders = rf.Reactor("ops.reminders", inputs=Shipment)
SLEEPS = timedelta(days=2, hours=3)
"""How long `reminders` sleeps after shipping before it reminds."""


@reminders.step
async def dispatch_parcel(order_id: str) -> str:
    return f"parcel-{order_id}"


@reminders.sleep
async def cool_off(dispatch_parcel: str) -> timedelta:
    return SLEEPS


@reminders.step
async def remind(cool_off: datetime, order_id: str) -> str:
    return f"reminded {order_id} at {cool_off.isoformat()}"


class Invoice(msgspec.Struct):
    customer: str
    amount: float = 12.5


class Bill(msgspec.Struct):
    ref: str
    amount: Annotated[float, msgspec.Meta(gt=0)]
    paid: bool = True


BILLING_FIXED_ENV = "OPS_BILLING_FIXED"
"""Set to "1" in a process, `bill` works there: a test "deploys the fix" by setting it (in its
own process, or in the environment of the CLI's subprocess)."""

invoices = rf.Reactor("ops.invoices", inputs=Invoice, on_failure="hold")


@invoices.step
async def draft(customer: str, amount: float) -> str:
    return f"draft for {customer}"


@invoices.step
async def bill(draft: str, amount: float) -> Bill:
    if os.environ.get(BILLING_FIXED_ENV) != "1":
        raise ConnectionError("the card processor rejected the request format")
    return Bill("B-1", amount)


@invoices.step
async def mail(bill: Bill) -> str:
    return f"receipt {bill.ref} for {bill.amount}" + ("" if bill.paid else " (unpaid)")
