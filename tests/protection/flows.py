"""Reactors that put a distinctive marker in every kind of user value reactorflow stores: run
inputs, step results, an interrupt's payload, a composed child's inputs, a map's items, shared
arguments and outcomes (inline, fanned out, an element reactor's), an async step's result, and
the message and traceback of errors (a failed step, a failed element, a failed undo)."""

from __future__ import annotations

import os

import msgspec

import reactorflow as rf
from tests.helpers import unique

MARKER = "ZQX-secret-7f3a"
"""A text that appears in no reactorflow structure, only in the user values below."""


def codec(*ids: str, current: str | None = None) -> rf.EncryptionCodec:
    """A codec with fresh random keys under `ids` (the first is current unless told)."""
    keys = {key_id: os.urandom(32) for key_id in ids or ("k1",)}
    return rf.EncryptionCodec(keys=keys, current=current or next(iter(keys)))


class Order(msgspec.Struct):
    customer: str
    items: list[str]
    note: str = ""


class Approval(msgspec.Struct):
    by: str
    comment: str


class ChildIn(msgspec.Struct):
    address: str


class Ship(msgspec.Struct):
    label: str


def everything(*, fail_late: bool = False, fan_out: bool = True) -> rf.Reactor:
    """One reactor that stores every kind of value (see the module): inputs, results, a
    payload, child inputs, map items/arguments/outcomes (a failed element too), an element
    reactor's inputs and steps, an async step's result; `fail_late`: its last step raises with
    the marker in its message (and the undo of `card` raises too), so error text is stored."""
    child = rf.Reactor(unique("child"), inputs=ChildIn)

    @child.step
    async def label(address: str) -> str:
        return f"label for {address}"

    per_item = rf.Reactor(unique("item"), inputs=ChildIn)

    @per_item.step
    async def pack(address: str) -> Ship:
        return Ship(f"packed {address}")

    @pack.undo
    async def unpack(result: Ship) -> None:
        return None

    flow = rf.Reactor(unique("protected"), inputs=Order)

    @flow.step
    async def card(customer: str) -> dict[str, str]:
        return {"token": f"tok-{customer}"}

    @card.undo
    async def uncard(result: dict[str, str]) -> None:
        raise RuntimeError(f"undo could not release {result['token']}")

    @flow.interrupt
    async def approve(payload: Approval, card: dict[str, str]) -> Approval:
        return payload

    @flow.compose(child)
    async def address(customer: str, approve: Approval) -> ChildIn:
        return ChildIn(f"{customer} at {approve.comment}")

    @flow.map_step(over="items", fan_out=fan_out, atomic=False, batch_size=2, after=["approve"])
    async def ship(item: str, note: str) -> Ship:
        if item.endswith("!"):
            raise ValueError(f"cannot ship {item} ({note})")
        return Ship(f"{item} / {note}")

    @flow.map_step(over="items", reactor=per_item, atomic=False, after=["approve"])
    async def pack_each(item: str) -> ChildIn:
        return ChildIn(f"to {item}")

    @flow.async_step(after=["approve"])
    async def receipt(customer: str) -> str:
        return f"receipt for {customer}"

    @flow.step
    async def finish(ship: list[rf.Outcome[Ship]], address: str, receipt: str,
                     pack_each: list[rf.Outcome[Ship]]) -> str:
        if fail_late:
            raise LookupError(f"finish failed for {address}")
        return f"{len(ship)} shipped, {receipt}"

    return flow


def order(tag: str = "") -> Order:
    """Inputs carrying the marker everywhere (and one item that fails)."""
    return Order(customer=f"{MARKER}-customer{tag}",
                 items=[f"{MARKER}-a", f"{MARKER}-b", f"{MARKER}-bad!"],
                 note=f"{MARKER}-note")


def approval() -> dict[str, str]:
    return {"by": f"{MARKER}-ann", "comment": f"{MARKER}-street"}


async def finished(flow: rf.Reactor, tag: str = "") -> rf.Run:
    """A run of an `everything` reactor, given its approval, at its end."""
    run = await flow.run(order(tag))
    assert run.status is rf.Status.PAUSED, run.error
    await flow.continue_(run.id, step="approve", payload=approval())
    return await flow.wait(run.id, timeout=60)
