"""An order saga: independent steps run concurrently; when a late step fails, the failing step
is compensated and every completed step is undone, newest first.

Run it with `python examples/order_saga.py` (no setup: storage is in memory).
"""

from __future__ import annotations

import sys

import anyio
import msgspec

import reactorflow as rf


class Order(msgspec.Struct):
    order_id: str
    items: list[str]
    amount: float
    address: str


class Charge(msgspec.Struct):
    charge_id: str
    amount: float


class Shipment(msgspec.Struct):
    tracking: str
    carrier: str


SUPPLIERS: list[str] = []  # what our pretend services were asked to do, in order

orders = rf.Reactor("examples.order_saga", inputs=Order)


@orders.step
async def reserve_stock(order_id: str, items: list[str]) -> str:
    await anyio.sleep(0.02)
    SUPPLIERS.append(f"stock: reserve {len(items)} item(s)")
    return f"rsv-{order_id}"


@reserve_stock.undo
async def release_stock(reservation: str) -> None:
    SUPPLIERS.append(f"stock: release {reservation}")


@orders.step
async def quote_shipping(address: str, items: list[str]) -> float:
    await anyio.sleep(0.01)  # runs at the same time as reserve_stock
    SUPPLIERS.append("shipping: quote")
    return 4.5 + len(items)


@orders.step
async def charge_card(order_id: str, amount: float, reserve_stock: str,
                      quote_shipping: float) -> Charge:
    SUPPLIERS.append(f"payments: charge {amount + quote_shipping:.2f}")
    return Charge(charge_id=f"ch-{order_id}", amount=amount + quote_shipping)


@charge_card.undo
async def refund(charge: Charge) -> None:
    SUPPLIERS.append(f"payments: refund {charge.charge_id} ({charge.amount:.2f})")


@orders.step
async def book_courier(order_id: str, address: str, charge_card: Charge) -> Shipment:
    if address.startswith("Nowhere"):
        raise RuntimeError(f"no courier delivers to {address!r}")
    SUPPLIERS.append("courier: book")
    return Shipment(tracking=f"TRK-{order_id}", carrier="Parcelway")


@book_courier.compensate
async def cancel_label(error: Exception, order_id: str) -> None:
    SUPPLIERS.append(f"courier: cancel any label for {order_id} ({type(error).__name__})")


def report(run: rf.Run) -> None:
    print(f"run {run.id}: {run.status.value.upper()}")
    for name, state in run.steps.items():
        print(f"  {name:<15} {state.status.value:<12} attempts={state.attempts}")
    if run.status is rf.Status.COMPLETED:
        print(f"  value: {run.value}")
    if run.error is not None:
        print(f"  error: {run.error}")
    print("  what the suppliers saw:")
    for line in SUPPLIERS:
        print(f"    {line}")
    print()


async def main() -> int:
    happy = await orders.run(order_id="A-1", items=["mug", "tea"], amount=12.0,
                             address="1 Harbour Street")
    report(happy)

    SUPPLIERS.clear()
    broken = await orders.run(order_id="A-2", items=["lamp"], amount=30.0,
                              address="Nowhere Lane 9")
    report(broken)

    # Reading a run back later: results come back with their declared types.
    again = await orders.get(happy.id)
    print(f"reloaded from storage: {again.value!r}")
    print()
    print(orders.to_mermaid())

    rolled_back = SUPPLIERS[-2:] == ["payments: refund ch-A-2 (35.50)", "stock: release rsv-A-2"]
    ok = (happy.status is rf.Status.COMPLETED and isinstance(again.value, Shipment)
          and broken.status is rf.Status.FAILED and rolled_back)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(anyio.run(main))
