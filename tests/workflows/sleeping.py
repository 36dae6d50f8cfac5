"""Reactors that sleep, run by `reactorflow worker tests.workflows.sleeping` subprocesses (the
background module's import configures their storage and broker) and by the tests."""

from __future__ import annotations

import msgspec

import reactorflow as rf
from tests.workflows import background as bg


class Nap(msgspec.Struct):
    n: int
    seconds: float = 2.0


naps = rf.Reactor("tests.sleep.naps", inputs=Nap)


@naps.step
async def before(n: int) -> int:
    return n


@naps.sleep
async def nap(before: int, seconds: float) -> float:
    return seconds


@naps.step
async def after(nap: object, n: int) -> int:
    bg.note(f"woke {n}")  # the ledger: once per run, however many fire
    return n * 2
