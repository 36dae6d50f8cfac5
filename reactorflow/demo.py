"""`python -m reactorflow demo`: an order saga on the embedded default, start to finish.

It runs one order that succeeds and one whose shipping fails, and prints each run's timeline
(independent steps overlap; `ship` is a map step, one parcel per item; the failed run's
compensation and undos appear newest first) and the reactor's Mermaid graph. Nothing to set
up: storage is in memory, in this process.
"""

from __future__ import annotations

import random

import anyio
import msgspec

import reactorflow as rf


class Order(msgspec.Struct):
    order_id: str
    amount: float
    items: list[str]
    address: str


class Charge(msgspec.Struct):
    charge_id: str
    amount: float


class Shipment(msgspec.Struct):
    tracking: str
    carrier: str


checkout = rf.Reactor("demo.checkout", inputs=Order)


async def _work(low: float, high: float) -> None:
    await anyio.sleep(random.uniform(low, high))


@checkout.step(retries=rf.Retry(attempts=3, backoff=0.01))
async def reserve_stock(order_id: str, items: list[str]) -> str:
    await _work(0.02, 0.04)
    return f"rsv-{order_id}-{len(items)}"


@reserve_stock.undo
async def release_stock(reservation: str) -> None:
    await _work(0.005, 0.01)


@checkout.step
async def screen_fraud(order_id: str, amount: float) -> float:
    await _work(0.02, 0.04)
    return 0.02 if amount < 500 else 0.4


@checkout.step
async def quote_shipping(address: str, items: list[str]) -> float:
    await _work(0.01, 0.03)
    return 4.5 + len(items)


@checkout.step
async def charge_card(amount: float, reserve_stock: str, screen_fraud: float,
                      quote_shipping: float) -> Charge:
    if screen_fraud > 0.3:
        raise rf.Halt("flagged for manual review")
    await _work(0.02, 0.03)
    return Charge(charge_id=f"ch-{reserve_stock}", amount=amount + quote_shipping)


@charge_card.undo
async def refund(charge: Charge) -> None:
    await _work(0.005, 0.01)


@checkout.map_step(over="items", batch_size=4)
async def ship(item: str, order_id: str, address: str, charge_card: Charge) -> Shipment:
    """One parcel per item, shipped concurrently (an inline map: at most 4 at a time)."""
    await _work(0.01, 0.02)
    if address.startswith("Nowhere"):
        raise RuntimeError(f"no carrier delivers to {address!r}")
    return Shipment(tracking=f"TRK-{order_id}-{item}", carrier="Parcelway")


@ship.undo
async def recall_parcel(shipment: Shipment) -> None:
    await _work(0.005, 0.01)


@ship.compensate
async def cancel_label(error: Exception, item: str) -> None:
    await _work(0.005, 0.01)


BAR = 32


def timeline(run: rf.Run) -> str:
    """A readable timeline: each step, undo and compensation with its start, duration and a bar
    over the run's span (overlapping bars ran at the same time)."""
    history = run.history
    start = history[0].at if history else run.created_at
    span = max((history[-1].at - start) if history else 0.0, 1e-6)
    lines = [f"run {run.id}  {run.reactor}  ->  {run.status.value.upper()}",
             f"  {'start':>9}  {'took':>9}  {'':{BAR}}  what"]
    opened: dict[tuple[str, str], float] = {}
    for entry in history:
        family, _, outcome = entry.kind.partition(".")
        if outcome == "started" and entry.step:
            opened[(family, entry.step)] = entry.at
            continue
        began = opened.pop((family, entry.step), entry.at)
        first = int((began - start) / span * (BAR - 1))
        last = max(first, int((entry.at - start) / span * (BAR - 1)))
        bar = " " * first + "#" * (last - first + 1)
        label = {"undo": "undo ", "compensate": "compensate "}.get(family, "")
        what = f"{label}{entry.step} {outcome}" if entry.step else f"run {outcome}"
        if entry.detail and outcome not in ("completed", "started"):
            what += f"  ({entry.detail})"
        lines.append(f"  {(began - start) * 1000:6.1f} ms  {(entry.at - began) * 1000:6.1f} ms"
                     f"  {bar:<{BAR}}  {what}")
    if run.status is rf.Status.COMPLETED:
        lines.append(f"  value: {run.value!r}")
    if run.error is not None:
        lines.append(f"  error: {run.error}")
    return "\n".join(lines)


async def main() -> int:
    happy = await checkout.run(order_id="A-1001", amount=42.0, items=["mug", "tea"],
                               address="1 Harbour Street, Leith")
    print(timeline(happy), end="\n\n")
    broken = await checkout.run(order_id="A-1002", amount=42.0, items=["lamp"],
                                address="Nowhere Lane 9")
    print(timeline(broken), end="\n\n")
    print("mermaid graph of", checkout.name)
    print(checkout.to_mermaid())
    ok = happy.status is rf.Status.COMPLETED and broken.status is rf.Status.FAILED
    return 0 if ok else 1


def run_demo() -> int:
    return anyio.run(main)
