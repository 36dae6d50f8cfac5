"""Reactors the benchmarks run, built programmatically (steps are wired by parameter name),
and a probe that times a storage's checkpoints.

Every reactor gets a process-unique name. The step functions are returned too, so that a
baseline can await exactly the same coroutines without the engine.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Coroutine
from typing import Any

import reactorflow as rf

StepFn = Callable[..., Coroutine[Any, Any, int]]
_serial = itertools.count(1)


def unique(name: str) -> str:
    return f"bench.{name}.{next(_serial)}"


def _compile(source: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": __name__}
    exec(source, namespace)
    return namespace


def chain_steps(n: int) -> list[StepFn]:
    """`s0() -> 0`, then `s<i>(s<i-1>) -> s<i-1> + 1`: each step takes the previous result."""
    lines = ["async def s0() -> int:", "    return 0"]
    for i in range(1, n):
        lines += [f"async def s{i}(s{i - 1}: int) -> int:", f"    return s{i - 1} + 1"]
    namespace = _compile("\n".join(lines) + "\n")
    return [namespace[f"s{i}"] for i in range(n)]


def independent_steps(n: int) -> list[StepFn]:
    """`f<i>() -> i`: n steps with no dependencies."""
    lines: list[str] = []
    for i in range(n):
        lines += [f"async def f{i}() -> int:", f"    return {i}"]
    namespace = _compile("\n".join(lines) + "\n")
    return [namespace[f"f{i}"] for i in range(n)]


def reactor(name: str, steps: list[StepFn]) -> rf.Reactor:
    flow = rf.Reactor(unique(name))
    for fn in steps:
        flow.step(fn)
    return flow


def chain(name: str, n: int) -> tuple[rf.Reactor, list[StepFn]]:
    steps = chain_steps(n)
    return reactor(name, steps), steps


def fanout(name: str, n: int) -> tuple[rf.Reactor, list[StepFn]]:
    steps = independent_steps(n)
    return reactor(name, steps), steps


async def await_chain(steps: list[StepFn]) -> int:
    """The baseline of a chain: the same coroutines awaited in a row, no engine."""
    value = await steps[0]()
    for fn in steps[1:]:
        value = await fn(value)
    return value


def paused_with_tail(name: str) -> rf.Reactor:
    """`prep`, then the interrupt `approve` (needs `prep`), then a one-step tail `finish`."""
    flow = rf.Reactor(unique(name))
    source = (
        "async def prep() -> int:\n"
        "    return 1\n"
        "async def approve(payload: int, prep: int) -> int:\n"
        "    return payload + prep\n"
        "async def finish(approve: int) -> int:\n"
        "    return approve + 1\n"
    )
    namespace = _compile(source)
    flow.step(namespace["prep"])
    flow.interrupt(namespace["approve"])
    flow.step(namespace["finish"])
    return flow


class SaveStepTimer:
    """Replaces `storage.save_step` on the instance; records (start, duration) of each call."""

    def __init__(self, storage: rf.Storage) -> None:
        self.storage = storage
        self.original = storage.save_step
        self.calls: list[tuple[float, float]] = []

        async def timed(*args: Any, **kwargs: Any) -> bytes | None:
            start = time.perf_counter()
            try:
                return await self.original(*args, **kwargs)
            finally:
                self.calls.append((start, time.perf_counter() - start))

        storage.save_step = timed  # type: ignore[method-assign]

    def take(self) -> list[tuple[float, float]]:
        calls, self.calls = self.calls, []
        return calls

    def remove(self) -> None:
        del self.storage.save_step  # the class's method again


def saga(name: str, n: int) -> rf.Reactor:
    """An n-step chain (as `chain`) where every step has an undo: a saga that completes."""
    lines: list[str] = []
    for i in range(n):
        lines += [f"async def undo_s{i}(result: int) -> None:", "    return None"]
    undos = _compile("\n".join(lines) + "\n")
    flow = rf.Reactor(unique(name))
    for i, fn in enumerate(chain_steps(n)):
        flow.step(fn).undo(undos[f"undo_s{i}"])
    return flow
