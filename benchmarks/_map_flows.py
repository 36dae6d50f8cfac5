"""The map read by `map_memory`, declared both by the benchmark and by its reader process."""

from __future__ import annotations

import msgspec

import reactorflow as rf


class Items(msgspec.Struct):
    items: list[int]


class Parcel(msgspec.Struct):
    index: int
    label: str


big = rf.Reactor("bench.map.memory", inputs=Items)


@big.map_step(over="items", batch_size=500)
async def label(item: int) -> Parcel:
    return Parcel(item, f"parcel-{item:08d}-" + "x" * 80)
