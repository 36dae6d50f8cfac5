"""Where a bounded scan starts (`Storage.scan_status`): when more runs match than a call may
return, it reads a window that starts at a random point of all of them and wraps around, so
successive calls (the sweeper's passes) see every run over time instead of the same first
`limit` each time."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


def window(items: Sequence[T], limit: int) -> list[T]:
    """At most `limit` of `items`: all of them in order when they fit, else `limit` in a row
    from a random start, wrapping around."""
    if len(items) <= limit:
        return list(items)
    start = random.randrange(len(items))
    taken = list(items[start:start + limit])  # (only what is returned is copied)
    return taken + list(items[:limit - len(taken)])


def ring_segments(sizes: Sequence[int], limit: int) -> list[tuple[int, int, int]]:
    """The ranges to read, in order, from lists of these `sizes` read as one ring: `(list,
    first, last)` with inclusive positions. All of every list when they hold at most `limit`
    together; else from a random position to the end, then round from the start to just
    before it (empty ranges left out)."""
    total = sum(sizes)
    start = random.randrange(total) if total > limit else 0
    first_list, offset = 0, start
    while first_list < len(sizes) and offset >= sizes[first_list]:
        offset -= sizes[first_list]
        first_list += 1
    if first_list == len(sizes):  # nothing at all
        return []
    order = [*range(first_list, len(sizes)), *range(first_list)]
    segments = [(first_list, offset, sizes[first_list] - 1)]
    segments += [(i, 0, sizes[i] - 1) for i in order[1:] if sizes[i]]
    if offset:
        segments.append((first_list, 0, offset - 1))
    return segments
