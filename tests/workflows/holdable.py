"""A dispatched reactor whose failing step holds the run, repaired by an operator while its
steps run in a `reactorflow worker` subprocess (tests/workers/test_hold_workers.py). The gate
file "fixed" stands for the deploy of a fix. Steps note what they do, with their pid."""

from __future__ import annotations

import os
from pathlib import Path

import reactorflow as rf
from tests.workflows import background as bg

held_flow = rf.Reactor("workers.holdable", always_dispatch=True, on_failure="hold")


def _fixed() -> bool:
    return (Path(os.environ.get(bg.GATE_ENV, "/nonexistent")) / "fixed").exists()


@held_flow.step
async def draft() -> str:
    bg.note("draft")
    return "D"


@draft.undo
async def scrap(result: str) -> None:
    bg.note("scrap draft")


@held_flow.step
async def charge(draft: str) -> str:
    bg.note("charge")
    if not _fixed():
        raise RuntimeError("the charge has a bug")
    return f"{draft}+charged"


@charge.undo
async def refund(result: str) -> None:
    bg.note("refund")


@held_flow.step
async def receipt(charge: str) -> str:
    bg.note("receipt")
    return f"{charge}+receipt"
