"""Acting on many runs at once, a bounded number at a time (`runs migrate`, the bulk
operations): one shared iterator feeds `workers` tasks of one anyio task group, so each item is
taken once, and each outcome is reported as it comes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import anyio

Item = TypeVar("Item")
Result = TypeVar("Result")


async def each(items: Sequence[Item], job: Callable[[Item], Awaitable[Result]],
               report: Callable[[Result], None], workers: int) -> None:
    """`await job(item)` of every item, at most `workers` at a time; `report` gets each result
    as it comes. `job` turns a refusal into a result itself: an exception it raises cancels the
    others and propagates (the items not reported yet were not acted on, or not reported).

    Args:
        items: What to act on (each is taken once).
        job: The action on one item.
        report: Called with each result, in the order they finish.
        workers: How many jobs run at a time (at least 1).
    """
    pending = iter(items)

    async def work() -> None:
        for item in pending:  # (one iterator shared by the workers: each item taken once)
            report(await job(item))

    async with anyio.create_task_group() as group:
        for _ in range(min(max(workers, 1), len(items))):
            group.start_soon(work)
