"""Maps: one step run once per element of a list, inline and fanned out over workers, rolled
back as one step of the saga; and an element reactor (a whole child reactor per element, run
inside the run like a composed child).

Run it with `python examples/maps.py` (no setup: storage is in memory and the Dramatiq worker
runs inside this process, the embedded default). In production the same code runs with
REACTORFLOW_REDIS_URL set and `reactorflow worker examples.maps` started on as many machines as
you like: the fanned-out map's elements spread over all of them.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator

import anyio
import msgspec

import reactorflow as rf


class Order(msgspec.Struct):
    order_id: str
    items: list[str]
    refuse: str = ""  # an item the carrier refuses (to show the rollback)


class Label(msgspec.Struct):
    item: str
    code: str


class Parcel(msgspec.Struct):
    item: str


LOG: list[str] = []
packing = rf.Reactor("examples.maps.packing", inputs=Parcel)


@packing.step
async def pick(item: str) -> str:
    return f"picked {item}"


@pick.undo
async def put_back(picked: str, item: str) -> None:
    LOG.append(f"put back {item}")


@packing.step
async def wrap(pick: str) -> str:
    return pick.replace("picked", "wrapped")


orders = rf.Reactor("examples.maps", inputs=Order)


@orders.map_step(over="items", reactor=packing, batch_size=3)
async def pack(item: str) -> Parcel:
    """An element reactor: each element runs `packing`'s steps inside this run (no run of its
    own per element); the saga's rollback undoes each element's steps, newest first."""
    return Parcel(item)


@orders.map_step(over="items", batch_size=3, retries=rf.Retry(2, backoff=0))
async def price(item: str) -> float:
    """Inline: elements run concurrently in the run's process, at most 3 at a time."""
    await anyio.sleep(0.01)
    return 2.5 * len(item)


@orders.map_step(over="items", fan_out=True, batch_size=4)
async def label(item: str, order_id: str, refuse: str, ctx: rf.StepContext) -> Label:
    """Fanned out: one worker job per element; the run parks until they all settled."""
    if item == refuse:
        await anyio.sleep(0.2)  # the others were already under way: they complete
        raise RuntimeError(f"the carrier refuses {item!r}")
    return Label(item, f"{order_id}/{ctx.idempotency_key.rsplit(':', 1)[-1]}")


@label.undo_all
async def void_labels(labels: AsyncIterator[Label], order_id: str) -> None:
    """Called once, with the completed labels in element order, when the saga rolls back."""
    LOG.append(f"void {order_id}: {[lb.code async for lb in labels]}")


@orders.step
async def summary(price: list[float], pack: list[str], label: rf.MapResults[Label]) -> str:
    codes = [outcome.value.code async for outcome in label if outcome.value is not None]
    return (f"{len(label)} parcels ({len(pack)} wrapped), total {sum(price):.2f}: "
            f"{', '.join(codes)}")


async def main() -> int:
    run = await orders.run(order_id="M-1", items=["mug", "tea", "spoon", "pot", "lid"])
    print("returned while the labels are made:", run.status)
    run = await orders.wait(run.id, timeout=60)
    print(run.status, "->", run.value)

    failed = await orders.run(order_id="M-2", items=["mug", "anvil", "tea"], refuse="anvil")
    failed = await orders.wait(failed.id, timeout=60)
    print(failed.status, "->", failed.error)
    print("rolled back:", LOG)
    ok = (run.status is rf.Status.COMPLETED and failed.status is rf.Status.FAILED
          and sum(entry.startswith("void") for entry in LOG) == 1
          and sorted(entry for entry in LOG if entry.startswith("put back")) == [
              "put back anvil", "put back mug", "put back tea"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(anyio.run(main))
