"""A fanned-out map whose elements hang in a `reactorflow worker tests.workflows.inflight`
subprocess until the test opens their gate (issue 22, item 3: a run cancelled and undone while
elements are in flight). Each body and undo notes itself in the notes file (a ledger that
survives the worker), so a test can tell which elements started and how often each was
undone. The background module's import configures the subprocesses' storage and broker."""

from __future__ import annotations

import msgspec

import reactorflow as rf
from tests.workflows.background import note, wait_for_gate

CHARGE_GATE = "charge"


class Items(msgspec.Struct):
    items: list[int]


charges = rf.Reactor("tests.inflight.charges", inputs=Items)


@charges.map_step(over="items", fan_out=True, batch_size=2)
async def charge(item: int) -> int:
    note(f"charge {item}")
    await wait_for_gate(CHARGE_GATE)
    note(f"charged {item}")
    return item


@charge.undo
async def refund(result: int, item: int) -> None:
    note(f"refund {item}")
