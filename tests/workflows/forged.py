"""Reactors a forged job names (issue 22, item 7), declared in the `reactorflow worker
tests.workflows.forged` subprocesses and the tests (the background module's import configures
the subprocesses' storage and broker).

`healthy` is the run the forged jobs aim at; `other` is another declared reactor with a
fanned-out map of the same shape, whose bodies note it if they ever run.
"""

from __future__ import annotations

import reactorflow as rf
from tests.workflows.background import note

healthy = rf.Reactor("tests.forged.healthy")


@healthy.step
async def first() -> list[int]:
    note("first")
    return [1, 2]


@healthy.map_step(over="first", fan_out=True)
async def double(item: int) -> int:
    note(f"double {item}")
    return 2 * item


@healthy.interrupt
async def gate(payload: str, double: list[int]) -> str:
    note("gate")
    return f"{payload}:{sum(double)}"


other = rf.Reactor("tests.forged.other")


@other.step
async def first_other() -> list[int]:
    note("other ran")
    return [7]


@other.map_step(over="first_other", fan_out=True)
async def double_other(item: int) -> int:
    note("other ran")
    return item
