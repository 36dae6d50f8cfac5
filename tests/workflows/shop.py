"""A shop built from the docs alone, as a new user would build it (issue 22): a checkout saga
with a customer `Lock` and a payments `RateLimit`, an approval interrupt, an inline and a
fanned-out map, a composed shipping child, a fire-and-forget background email, a hand-off and a
nightly schedule. The test kit's tests drive it end to end under `rf_env` and `rf_redis_env`.
"""

from __future__ import annotations

import anyio
import msgspec

import reactorflow as rf

TRAIL: list[str] = []  # what the steps did, in order (tests clear it)


class Order(msgspec.Struct):
    order_id: str
    customer: str
    amount: float
    items: list[str]
    address: str = "1 Harbour Street"


class Approval(msgspec.Struct):
    approved: bool
    by: str


class Parcel(msgspec.Struct):
    order_id: str
    address: str
    boxes: list[str]


PAYMENTS = rf.RateLimit("shop.payments", second=50)

# -- the shipping child, composed into checkout ------------------------------------------------

shipping = rf.Reactor("tests.shop.shipping", inputs=Parcel)


@shipping.step
async def book_courier(order_id: str, address: str) -> str:
    TRAIL.append(f"book {order_id}")
    return f"courier for {order_id} to {address}"


@book_courier.undo
async def cancel_courier(book_courier: str) -> None:
    TRAIL.append(f"cancel {book_courier}")


@shipping.step
async def label(book_courier: str, boxes: list[str]) -> str:
    return f"{len(boxes)} label(s), {book_courier}"


# -- the checkout saga ---------------------------------------------------------------------------

checkout = rf.Reactor("tests.shop.checkout", inputs=Order,
                      gates=[rf.Lock("customer:{customer}")])


@checkout.map_step(over="items")  # inline
async def price(item: str) -> float:
    return float(len(item))


@checkout.step(gates=[PAYMENTS])
async def charge(order_id: str, amount: float, price: list[float]) -> str:
    TRAIL.append(f"charge {order_id}")
    return f"ch-{order_id}-{amount + sum(price):g}"


@charge.undo
async def refund(charge: str) -> None:
    TRAIL.append(f"refund {charge}")


@checkout.interrupt(timeout=86_400)
async def approve(payload: Approval, charge: str) -> Approval:
    return payload


@checkout.map_step(over="items", fan_out=True, batch_size=2)
async def pack(item: str, approve: Approval) -> str:
    return f"box:{item}"


@checkout.compose(shipping, name="ship")
async def ship(order_id: str, address: str, pack: list[str]) -> Parcel:
    return Parcel(order_id=order_id, address=address, boxes=pack)


@checkout.async_step  # fire and forget: no step reads it
async def email(order_id: str, ship: str) -> str:
    TRAIL.append(f"email {order_id}")
    return f"mailed {order_id}"


@checkout.step
async def done(order_id: str, ship: str) -> str:
    await anyio.sleep(0.01)  # real I/O (a receipt to the accounting service): the email runs
    return f"{order_id}: {ship}"


checkout.background(after="charge")  # the rest of the run goes on in a worker

# -- a nightly report ----------------------------------------------------------------------------

nightly = rf.Reactor("tests.shop.nightly", schedules=[rf.Schedule("0 2 * * *", name="nightly")])


@nightly.step
async def report() -> str:
    return "nightly report"
