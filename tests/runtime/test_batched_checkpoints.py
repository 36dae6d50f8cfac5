"""Completions kept for a batch (`RunWriter.flush`): on `MemoryStorage` the completions of steps
nothing waits for, made while the run's task does not suspend, are written together. On every
backend: no other task sees storage without them, a control request is read back at the next
step boundary as before, a failure rolls them back, and the stored run is the same."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import anyio
import pytest

import reactorflow as rf
from reactorflow.errors import LockLost
from reactorflow.storage.contract.method_marks import batches, foldable, inline
from tests.conftest import ALL_BACKENDS, on_every
from tests.helpers import unique
from tests.storage.test_contract import OTHER, OWNER, new_run


@pytest.fixture(params=ALL_BACKENDS)
async def storage(request: pytest.FixtureRequest) -> AsyncIterator[rf.Storage]:
    async for backend in on_every(request):
        yield backend


def _leaves(flow: rf.Reactor, names: Sequence[str], undone: list[str] | None = None) -> None:
    """Steps that never suspend, each returning its name (its undo notes it in `undone`)."""
    for name in names:
        async def leaf(_name: str = name) -> str:
            return _name

        step = flow.step(name=name)(leaf)
        if undone is not None:
            async def undo(result: str) -> None:
                undone.append(result)

            step.undo(undo)


class _Waiting:
    """A step `name` (after the steps `after`) that notes its run's id, then waits until
    released; then it returns its name, or raises when it `fails`."""

    def __init__(self, flow: rf.Reactor, name: str, *, after: Sequence[str] = (),
                 fails: bool = False) -> None:
        self.ids: list[str] = []
        self.entered, self.release = anyio.Event(), anyio.Event()
        self.results: list[rf.Run] = []

        async def waits(ctx: rf.StepContext) -> str:
            self.ids.append(ctx.run_id)
            self.entered.set()
            await self.release.wait()
            if fails:
                raise RuntimeError("boom")
            return name

        flow.step(name=name, after=tuple(after))(waits)
        self.flow = flow

    async def run(self) -> None:
        self.results.append(await self.flow.run())

    async def seen_while_waiting(self) -> rf.Run:
        """Run the reactor; what another task reads of the run while this step waits (then
        the step is released and the run finishes)."""
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(self.run)
                await self.entered.wait()
                during = await self.flow.get(self.ids[0])
                self.release.set()
        return during


def _kinds(run: rf.Run) -> list[str]:
    return [f"{e.kind}:{e.step}" if e.step else e.kind for e in run.history]


async def test_a_fan_out_is_stored_whole_in_the_order_it_ran(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("batch"))
    names = [f"s{i}" for i in range(20)]
    _leaves(flow, names)
    run = await flow.run()
    stored = await flow.get(run.id)
    assert stored.status is rf.Status.COMPLETED
    assert {k: s.status for k, s in stored.steps.items()} == dict.fromkeys(names, "completed")
    assert {k: s.result for k, s in stored.steps.items()} == {n: n for n in names}
    assert _kinds(stored) == _kinds(run)
    assert _kinds(stored)[1:-1] == [f"step.{kind}:{n}" for n in names
                                    for kind in ("started", "completed")]


def _counted_writes(storage: rf.MemoryStorage) -> list[str]:
    """Note each run write made on `storage`: "step", "steps", or "state:<n>" (a state save
    carrying n step records); the wrappers stay inline, as the originals await nothing."""
    writes: list[str] = []
    save_step, save_steps, save_state = storage.save_step, storage.save_steps, storage.save_state

    async def counted_save_step(*args: Any, **options: Any) -> bytes | None:
        writes.append("step")
        return await save_step(*args, **options)

    async def counted_save_steps(*args: Any, **options: Any) -> bytes | None:
        writes.append("steps")
        return await save_steps(*args, **options)

    async def counted_save_state(*args: Any, **options: Any) -> bytes | None:
        writes.append(f"state:{len(options.get('steps') or ())}")
        return await save_state(*args, **options)

    storage.save_step = inline(foldable(counted_save_step))  # type: ignore[method-assign]
    storage.save_steps = inline(counted_save_steps)  # type: ignore[method-assign]
    storage.save_state = inline(counted_save_state)  # type: ignore[method-assign]
    return writes


async def test_memory_writes_a_fan_out_in_two_writes() -> None:
    """The first completion (a checkpoint), then the rest kept and carried by the final save: no
    step suspended, so no spare runner was started and the one runner never waited for one."""
    storage = rf.MemoryStorage()
    writes = _counted_writes(storage)
    assert batches(storage)
    rf.configure(storage=storage)
    flow = rf.Reactor(unique("batch"))
    _leaves(flow, [f"s{i}" for i in range(20)])
    run = await flow.run()
    assert run.status is rf.Status.COMPLETED and len(run.steps) == 20
    assert writes == ["step", "state:19"]


async def test_kept_completions_are_stored_before_the_task_suspends(storage: rf.Storage) -> None:
    """`a` and `b` complete without suspending; `c` (nothing waits for it either) then waits:
    another task reading the run meanwhile sees `a` and `b` completed."""
    flow = rf.Reactor(unique("batch"), max_concurrency=1)
    _leaves(flow, ["a", "b"])
    c = _Waiting(flow, "c")
    during = await c.seen_while_waiting()
    assert during.status is rf.Status.RUNNING
    assert {k: s.status for k, s in during.steps.items()} == {
        "a": "completed", "b": "completed", "c": "pending"}
    assert c.results[0].status is rf.Status.COMPLETED


async def test_a_cancel_request_while_a_step_waits_stops_at_its_completion(
        storage: rf.Storage) -> None:
    """One runner: `w` waits while the run is cancelled; when it completes, its checkpoint
    reads the request back and the steps after it never start (they would run at once, never
    suspending, if its completion were kept without reading the request)."""
    flow = rf.Reactor(unique("batch"), max_concurrency=1)
    w = _Waiting(flow, "w")
    _leaves(flow, ["x", "y", "z"])
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(w.run)
            await w.entered.wait()
            pending = await flow.cancel(w.ids[0], reason="enough")
            assert pending.status is rf.Status.RUNNING
            w.release.set()
    final = await flow.get(w.ids[0])
    assert final.status is rf.Status.CANCELLED and w.results[0].status is rf.Status.CANCELLED
    assert final.steps["w"].status == "completed"
    assert {k: final.steps[k].status for k in "xyz"} == dict.fromkeys("xyz", "pending")


async def test_a_failure_after_kept_completions_rolls_them_back(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("batch"))
    undone: list[str] = []
    _leaves(flow, ["a", "b", "c"], undone)

    @flow.step
    async def boom() -> None:
        raise RuntimeError("boom")

    run = await flow.run()
    stored = await flow.get(run.id)
    assert run.status is rf.Status.FAILED and stored.status is rf.Status.FAILED
    assert sorted(undone) == ["a", "b", "c"]
    assert {k: stored.steps[k].status for k in "abc"} == dict.fromkeys("abc", "undone")
    assert stored.steps["boom"].status == "failed"
    assert _kinds(stored) == _kinds(run)


async def test_memory_save_steps_is_fenced() -> None:
    storage = rf.MemoryStorage()
    run_id = await new_run(storage)
    assert await storage.save_steps(run_id, OWNER, {"a": b"rec-a", "b": b"rec-b"},
                                    [b"a.done", b"b.done"]) is None
    with pytest.raises(LockLost):
        await storage.save_steps(run_id, OTHER, {"a": b"zombie"}, [b"zombie.event"])
    stored = await storage.load_run(run_id)
    assert stored is not None and stored.steps == {"a": b"rec-a", "b": b"rec-b"}
    assert await storage.history(run_id) == [b"a.done", b"b.done"]


def _chain(flow: rf.Reactor, names: Sequence[str]) -> list[Any]:
    """Steps that never suspend, each taking the one before it (`n0`, then `n1(n0)`, ...), each
    returning the names so far; the step objects are returned."""
    steps: list[Any] = []
    for i, name in enumerate(names):
        if i == 0:
            async def first() -> list[str]:
                return [names[0]]

            steps.append(flow.step(name=name)(first))
        else:
            namespace: dict[str, Any] = {}
            exec(f"async def link({names[i - 1]}: list[str]) -> list[str]:\n"
                 f"    return [*{names[i - 1]}, {name!r}]\n", namespace)
            steps.append(flow.step(name=name)(namespace["link"]))
    return steps


async def test_memory_checkpoints_each_chain_step_another_reads() -> None:
    """A chain's steps wait for each other: each completion another step reads is a fenced
    checkpoint of its own (where an execution whose lock was taken over learns it before it
    starts the next step, tests/recovery/test_fencing.py), and the last rides in the final
    save."""
    storage = rf.MemoryStorage()
    writes = _counted_writes(storage)
    rf.configure(storage=storage)
    flow = rf.Reactor(unique("batch-chain"))
    names = [f"n{i}" for i in range(10)]
    _chain(flow, names)
    run = await flow.run()
    assert run.status is rf.Status.COMPLETED and run.value == names
    assert writes == ["step"] * 9 + ["state:1"]
    stored = await flow.get(run.id)
    assert stored == run
    assert _kinds(stored)[1:-1] == [f"step.{kind}:{n}" for n in names
                                    for kind in ("started", "completed")]


async def test_a_chain_step_that_suspends_finds_the_steps_before_it_stored(
        storage: rf.Storage) -> None:
    """`a` is written, `b` kept (nothing suspended since); `c` comes after `b` and waits:
    another task reading the run meanwhile sees `a` and `b` completed, and a failure of `c`
    then rolls them back."""
    flow = rf.Reactor(unique("batch-chain"))
    undone: list[str] = []
    for step in _chain(flow, ["a", "b"]):
        async def undo(result: list[str]) -> None:
            undone.append(result[-1])

        step.undo(undo)
    c = _Waiting(flow, "c", after=["b"], fails=True)
    during = await c.seen_while_waiting()
    assert {k: s.status for k, s in during.steps.items()} == {
        "a": "completed", "b": "completed", "c": "pending"}
    [result] = c.results
    assert result.status is rf.Status.FAILED and undone == ["b", "a"]
    assert await flow.get(result.id) == result
