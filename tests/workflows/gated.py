"""Reactors with gates, run by real `reactorflow worker tests.workflows.gated` subprocesses
(the background module's import configures their storage and broker) and by the tests."""

from __future__ import annotations

import anyio
import msgspec

import reactorflow as rf
from tests.workflows import background as bg

POISON_PILL_TIMEOUT = 2.0


class Contender(msgspec.Struct):
    n: int
    hold: bool = False


contended = rf.Reactor("tests.gated.contended", inputs=Contender)


@contended.step(gates=[rf.Lock("tests.gated:shared", wait=60)])  # a reactor lock would refuse
async def work(n: int, hold: bool) -> int:
    bg.note(f"start {n}")
    if hold:
        await bg.wait_for_gate("release")
    await anyio.sleep(0.02)
    bg.note(f"end {n}")
    return n


class Entry(msgspec.Struct):
    lane: str
    n: int


ordered = rf.Reactor("tests.gated.ordered", inputs=Entry,
                     gates=[rf.OrderedLock("tests.gated:line:{lane}",
                                           poison_pill_timeout=POISON_PILL_TIMEOUT)])


@ordered.step
async def apply(lane: str, n: int) -> int:
    bg.note(f"apply {lane} {n}")
    return n
