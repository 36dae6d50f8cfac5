"""The program `engine_instructions` runs under callgrind: `python _chain_program.py MODE N`.

MODE `flow`: `await flow.run()` of a 10-step chain of trivial async steps on MemoryStorage, N
times; MODE `direct`: the same 10 coroutines awaited in a row, N times. Both warm up first
(plans compiled, caches filled) and then run N operations, so the difference between two
counts of N is the cost of the operations alone.

Self-contained on purpose (it imports only `reactorflow`): the same file runs against another
checkout of the library (`PYTHONPATH=<that checkout>`), e.g. the commit a change is measured
against, whatever that checkout's benchmarks look like.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Coroutine
from typing import Any

import reactorflow as rf

STEPS = 10
WARM_UP = 200
StepFn = Callable[..., Coroutine[Any, Any, int]]


def chain_steps(n: int) -> list[StepFn]:
    """`s0() -> 0`, then `s<i>(s<i-1>) -> s<i-1> + 1` (parameters name the previous step)."""
    lines = ["async def s0() -> int:", "    return 0"]
    for i in range(1, n):
        lines += [f"async def s{i}(s{i - 1}: int) -> int:", f"    return s{i - 1} + 1"]
    namespace: dict[str, Any] = {"__name__": __name__}
    exec("\n".join(lines) + "\n", namespace)
    return [namespace[f"s{i}"] for i in range(n)]


async def main(mode: str, n: int) -> None:
    steps = chain_steps(STEPS)
    flow = rf.Reactor("bench.instructions.chain")
    for fn in steps:
        flow.step(fn)

    async def direct() -> int:
        value = await steps[0]()
        for fn in steps[1:]:
            value = await fn(value)
        return value

    rf.configure(storage=rf.MemoryStorage())
    for _ in range(WARM_UP):
        await flow.run()
        await direct()
    run = await flow.run()
    if run.status != "completed" or run.value != STEPS - 1:
        raise SystemExit(f"the chain did not complete as expected: {run.status} {run.value!r}")
    operation = flow.run if mode == "flow" else direct
    for _ in range(n):
        await operation()


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("flow", "direct") or not sys.argv[2].isdigit():
        raise SystemExit("usage: _chain_program.py flow|direct N")
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
