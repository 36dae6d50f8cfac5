"""The reactor of the timers benchmark, importable by a `reactorflow worker` subprocess."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec

import reactorflow as rf


class Until(msgspec.Struct):
    at: float  # the deadline (Unix time)


nappers = rf.Reactor("bench.timers.nap", inputs=Until)


@nappers.sleep
async def nap(at: float) -> datetime:
    return datetime.fromtimestamp(at, UTC)


@nappers.step
async def woke(nap: datetime) -> float:
    return nap.timestamp()
