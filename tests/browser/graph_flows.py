"""A 40-step reactor for the graph layout's browser test: parallel checks, a composed child
(drawn as a group around its 6 steps), an inline map whose elements can be held in flight, and
a long tail. Its steps take no results (wired by `after=`), so they are declared in loops."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import msgspec

import reactorflow as rf


class Batch(msgspec.Struct):
    items: list[str]


GATE = {"open": anyio.Event()}
"""Elements named "wait" block until this event is set (a fresh one per test)."""


def _noop() -> Callable[[], Awaitable[None]]:
    async def body() -> None:
        return None

    return body


kyc = rf.Reactor("graph.kyc")
for name, after in (("fetch_identity", ()), ("match_sanctions_lists", ("fetch_identity",)),
                    ("match_pep_lists", ("fetch_identity",)),
                    ("score_identity", ("match_sanctions_lists", "match_pep_lists")),
                    ("file_report", ("score_identity",)), ("notify", ("file_report",))):
    kyc.step(name=name, after=after)(_noop())

big = rf.Reactor("graph.big", inputs=Batch)
big.step(name="intake")(_noop())
CHECKS = [f"check_{n}" for n in ("address", "credit", "fraud", "stock", "a_step_with_a_rather_"
                                 "long_name_that_cannot_fit_in_its_box", "tax")]
for name in CHECKS:
    big.step(name=name, after=("intake",))(_noop())
big.step(name="score", after=tuple(CHECKS))(_noop())


@big.compose(kyc, after=("score",))
async def verify() -> dict[str, Any]:
    return {}


PREPS = [f"prep_{n}" for n in range(8)]
for index, name in enumerate(PREPS):
    big.step(name=name, after=("verify",) if index < 4 else (PREPS[index - 4],))(_noop())


@big.map_step(over="items", batch_size=2, atomic=False, after=tuple(PREPS[4:]))
async def ship(item: str) -> str:
    if item == "bad":
        raise RuntimeError("the parcel fell off the truck")
    if item == "wait":
        await GATE["open"].wait()
    return item


TAIL = [f"tail_{n:02d}" for n in range(16)]
for index, name in enumerate(TAIL):
    big.step(name=name, after=("ship",) if index < 4 else (TAIL[index - 4],))(_noop())

STEPS = 1 + len(CHECKS) + 1 + 1 + 6 + len(PREPS) + 1 + len(TAIL)
"""40 steps: the composed step (drawn as the group around its child's 6), 38 more and the map."""
ITEMS = ["a", "b", "bad", "wait", "wait", "c"]
"""Elements: 2 done, 1 failed, then 2 held in flight (the window is 2), 1 not started."""
