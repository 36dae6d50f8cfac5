"""Composition: a child reactor runs inside a parent's step, and its interrupt pauses the
whole run. The paused root is resumed by the interrupt's path, ("pack", "inspect").

A second order is undone while paused: the child's completed steps are undone first, then the
parent's. Run it with `python examples/composition.py`.
"""

from __future__ import annotations

import sys

import anyio
import msgspec

import reactorflow as rf

TRAIL: list[str] = []


class Parcel(msgspec.Struct):
    order_id: str
    items: list[str]


class Inspection(msgspec.Struct):
    passed: bool
    inspector: str


# -- the child: pick the items, wait for a quality inspection, seal the box ---------------------

packing = rf.Reactor("examples.composition.packing", inputs=Parcel)


@packing.step
async def pick(order_id: str, items: list[str]) -> list[str]:
    TRAIL.append(f"pick {len(items)} item(s) for {order_id}")
    return [f"bin-{item}" for item in items]


@pick.undo
async def restock(bins: list[str]) -> None:
    TRAIL.append(f"restock {', '.join(bins)}")


@packing.interrupt(correlation_id="inspection:{order_id}")
async def inspect(payload: Inspection, pick: list[str]) -> Inspection:
    return payload


@packing.step
async def seal(inspect: Inspection, pick: list[str]) -> str:
    if not inspect.passed:
        raise RuntimeError(f"{inspect.inspector} failed the inspection")
    TRAIL.append("seal the box")
    return f"box of {len(pick)} checked by {inspect.inspector}"


# -- the parent: charge, pack (the child), ship ---------------------------------------------------


class Order(msgspec.Struct):
    order_id: str
    items: list[str]


shop = rf.Reactor("examples.composition.shop", inputs=Order)


@shop.step
async def charge(order_id: str) -> str:
    TRAIL.append(f"charge {order_id}")
    return f"ch-{order_id}"


@charge.undo
async def refund(charge_id: str) -> None:
    TRAIL.append(f"refund {charge_id}")


@shop.compose(packing)
async def pack(order_id: str, items: list[str], charge: str) -> Parcel:
    return Parcel(order_id=order_id, items=items)  # the child's inputs


@shop.step
async def ship(pack: str) -> str:
    TRAIL.append("ship")
    return f"shipped: {pack}"


def show(title: str, run: rf.Run) -> None:
    print(f"{title}: status={run.status.value} waiting_on={run.waiting_on}")
    for key, state in run.steps.items():
        print(f"  {key:<13} {state.status.value}")
    print("  trail: " + " | ".join(TRAIL))


async def main() -> int:
    run = await shop.run(order_id="O-1", items=["kettle", "tea"])
    show("paused inside the child", run)

    done = await shop.continue_(run.id, step=("pack", "inspect"),
                                payload={"passed": True, "inspector": "ida"})
    show("resumed by path", done)
    print(f"  value: {done.value!r}")

    TRAIL.clear()
    other = await shop.run(order_id="O-2", items=["lamp"])
    same = await shop.continue_by_correlation_id(
        "inspection:O-2", step=["pack", "inspect"], payload={"passed": False, "inspector": "ida"})
    show("failed inspection: the child rolls back first, then the parent", same)

    TRAIL.clear()
    third = await shop.run(order_id="O-3", items=["cup"])
    undone = await shop.undo(third.id)
    show("undone while paused in the child", undone)

    print()
    print(shop.to_mermaid())
    ok = (done.status is rf.Status.COMPLETED and same.id == other.id
          and same.status is rf.Status.FAILED and undone.status is rf.Status.CANCELLED
          and TRAIL[-2:] == ["restock bin-cup", "refund ch-O-3"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(anyio.run(main))
