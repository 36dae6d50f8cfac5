"""An interrupt whose deadline resumes it with `on_timeout=`, declared at import so that other
processes (the two firers of `tests/interrupts/test_on_timeout_processes.py`) see the same
reactor and graph."""

from __future__ import annotations

import msgspec

import reactorflow as rf


class Approval(msgspec.Struct):
    approved: bool
    by: str


class Order(msgspec.Struct):
    order_id: str


reminder = rf.Reactor("tests.deadlines.reminder", inputs=Order)


@reminder.step
async def prepare(order_id: str) -> str:
    return f"prep-{order_id}"


@reminder.interrupt(timeout=0.3, on_timeout=lambda order_id: Approval(False, f"timer:{order_id}"))
async def approve(payload: Approval, order_id: str) -> Approval:
    return payload


@reminder.step
async def ship(approve: Approval, prepare: str) -> str:
    return f"{prepare} by {approve.by}"
