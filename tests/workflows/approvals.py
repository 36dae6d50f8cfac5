"""Interrupts and composition: a fulfilment child with an approval, nested in an order."""

from __future__ import annotations

import msgspec

import reactorflow as rf

LOG: list[str] = []


class Approval(msgspec.Struct):
    approved: bool
    by: str


class OrderIn(msgspec.Struct):
    order_id: str
    amount: float = 10.0


class FulfilIn(msgspec.Struct):
    order_id: str


# -- a root-level interrupt ----------------------------------------------------------------------

approval_flow = rf.Reactor("tests.approval", inputs=OrderIn)


@approval_flow.step
async def prepare(order_id: str) -> str:
    LOG.append("prepare")
    return f"prep-{order_id}"


@prepare.undo
async def unprepare(result: str) -> None:
    LOG.append("undo prepare")


@approval_flow.step
async def side(order_id: str) -> str:
    LOG.append("side")
    return "side"


@side.undo
async def unside(result: str) -> None:
    LOG.append("undo side")


@approval_flow.interrupt(correlation_id="approval:{order_id}", max_attempts=3)
async def approve(payload: Approval, prepare: str) -> Approval:
    LOG.append(f"approve by {payload.by}")
    return payload


@approval_flow.step
async def ship(approve: Approval, prepare: str) -> str:
    LOG.append("ship")
    return f"shipped {prepare} ok={approve.approved}"


# -- a child with an interrupt, composed into a root ---------------------------------------------

fulfilment = rf.Reactor("tests.fulfilment", inputs=FulfilIn)


@fulfilment.step
async def c1(order_id: str) -> str:
    LOG.append("c1")
    return f"c1-{order_id}"


@c1.undo
async def undo_c1(result: str) -> None:
    LOG.append("undo c1")


@fulfilment.interrupt(correlation_id="fulfil:{order_id}", max_attempts=1)
async def approve_child(payload: Approval, c1: str) -> Approval:
    LOG.append("child approved")
    return payload


@fulfilment.step
async def c2(approve_child: Approval, c1: str) -> str:
    LOG.append("c2")
    return f"{c1}+c2({approve_child.by})"


@c2.undo
async def undo_c2(result: str) -> None:
    LOG.append("undo c2")


order = rf.Reactor("tests.order", inputs=OrderIn)


@order.step
async def r1(order_id: str) -> str:
    LOG.append("r1")
    return "r1"


@r1.undo
async def undo_r1(result: str) -> None:
    LOG.append("undo r1")


@order.compose(fulfilment)
async def fulfil(order_id: str, r1: str) -> FulfilIn:
    return FulfilIn(order_id=order_id)


@order.step
async def r2(fulfil: str) -> str:
    LOG.append("r2")
    return f"done: {fulfil}"


@r2.undo
async def undo_r2(result: str) -> None:
    LOG.append("undo r2")


# -- two levels deep -----------------------------------------------------------------------------

outer = rf.Reactor("tests.outer", inputs=OrderIn)


@outer.step
async def o1(order_id: str) -> str:
    LOG.append("o1")
    return "o1"


@o1.undo
async def undo_o1(result: str) -> None:
    LOG.append("undo o1")


@outer.compose(order)
async def inner(order_id: str, o1: str) -> dict[str, object]:
    return {"order_id": order_id}


@outer.step
async def o2(inner: str) -> str:
    LOG.append("o2")
    return f"outer: {inner}"


# -- a child that pauses twice -------------------------------------------------------------------

twice_child = rf.Reactor("tests.twice_child", inputs=FulfilIn)


@twice_child.interrupt
async def first_ok(payload: Approval) -> str:
    return payload.by


@twice_child.interrupt
async def second_ok(payload: Approval, first_ok: str) -> str:
    return f"{first_ok}+{payload.by}"


twice = rf.Reactor("tests.twice", inputs=OrderIn)


@twice.compose(twice_child)
async def checks(order_id: str) -> FulfilIn:
    return FulfilIn(order_id)


@twice.step
async def finish(checks: str) -> str:
    return f"finished {checks}"
