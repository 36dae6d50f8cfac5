"""Element reactors: `map_step(reactor=child)` runs the child reactor once per element as a
flattened child of the run (like `compose`): inside the run, never as a stored run of its own;
a failing child rolls its own steps back and fails the element; the map's rollback undoes each
completed element's child steps newest first, highest index first (issue 10 item 2; both
storage backends, inline and fanned out on the embedded worker)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import anyio
import msgspec
import pytest

import reactorflow as rf
from reactorflow import records
from reactorflow.definition.graph import plan_for
from reactorflow.definition.mermaid import render
from reactorflow.testing import Environment
from reactorflow.testing.plugin import rf_env, rf_redis_env  # noqa: F401 - fixtures
from tests.helpers import unique


@pytest.fixture(scope="session")
def rf_redis_url(redis_url: str) -> str:
    return redis_url

MODES = pytest.mark.parametrize("fan_out", [False, True], ids=["inline", "fan_out"])


class Parcel(msgspec.Struct):
    item: str
    broken: bool = False


class Order(msgspec.Struct):
    items: list[str]
    broken: str = ""
    late: bool = False
    flaky: str = ""


@dataclass
class Log:
    entries: list[str] = field(default_factory=list)
    keys: dict[str, list[str]] = field(default_factory=dict)  # item -> weigh's idempotency keys
    fail_undo: str = ""
    on_unweigh: Callable[[str], Awaitable[None]] | None = None


def child_reactor(log: Log, *, flaky: bool = False) -> rf.Reactor:
    """weigh -> pack -> label; weigh and pack have undos; label fails for a broken parcel."""
    child = rf.Reactor(unique("parcel"), inputs=Parcel)
    tries: Counter[str] = Counter()

    @child.step(retries=rf.Retry(3, backoff=0))
    async def weigh(item: str, ctx: rf.StepContext) -> int:
        log.keys.setdefault(item, []).append(ctx.idempotency_key)
        tries[item] += 1
        if flaky and tries[item] == 1:
            raise ConnectionError(f"scale for {item} is warming up")
        log.entries.append(f"weigh {item}")
        return len(item)

    @weigh.undo
    async def unweigh(result: int, item: str) -> None:
        if log.on_unweigh is not None:
            await log.on_unweigh(item)
        log.entries.append(f"unweigh {item}")

    @child.step
    async def pack(item: str, weigh: int) -> str:
        log.entries.append(f"pack {item}")
        return f"{item}:{weigh}"

    @pack.undo
    async def unpack(result: str, item: str) -> None:
        if item == log.fail_undo:
            raise OSError(f"cannot unpack {item}")
        log.entries.append(f"unpack {item}")

    @child.step
    async def label(pack: str, broken: bool, item: str) -> str:
        if broken:
            raise RuntimeError(f"{item} is broken")
        return f"[{pack}]"

    return child


def flows(*, fan_out: bool, atomic: bool = True, flaky: bool = False
          ) -> tuple[rf.Reactor, rf.Reactor, Log]:
    log = Log()
    child = child_reactor(log, flaky=flaky)
    parent = rf.Reactor(unique("orders"), inputs=Order)

    @parent.map_step(over="items", reactor=child, fan_out=fan_out, batch_size=2, atomic=atomic)
    async def each(item: str, broken: str) -> Parcel:
        return Parcel(item, item == broken)

    if atomic:
        @parent.step
        async def done(each: list[str], late: bool) -> list[str]:
            if late:
                raise RuntimeError("late")
            return each
    else:
        @parent.step
        async def done(each: list[rf.Outcome[str]]) -> list[str]:  # type: ignore[misc]
            return [o.value if o.ok else f"! {o.error.message}" for o in each]  # type: ignore[union-attr]

    return parent, child, log


async def finished(flow: rf.Reactor, **inputs: object) -> rf.Run:
    return await flow.wait((await flow.run(**inputs)).id, timeout=30)


async def element(storage: rf.Storage, run_id: str, index: int) -> records.ElementRecord:
    raw = (await storage.load_elements(run_id, "each", index, 1))[0]
    assert raw is not None
    return records.decode_element(raw)


@MODES
async def test_each_element_runs_the_child_inside_the_run(storage: rf.Storage,
                                                           fan_out: bool) -> None:
    parent, child, _log = flows(fan_out=fan_out)
    run = await finished(parent, items=["mug", "teapot", "cup"])
    assert run.status is rf.Status.COMPLETED, run.error
    assert run.value == ["[mug:3]", "[teapot:6]", "[cup:3]"]
    # no run record, run id or listing entry per element: the parent's run is the only run
    assert (await rf.list_runs(reactor=child.name)).runs == []
    assert [r.id for r in (await rf.list_runs(reactor=parent.name)).runs] == [run.id]
    with pytest.raises(rf.RunNotFound):
        await child.get(f"{run.id}-each-0")
    # the element's slot keeps what its rollback needs: the child's inputs and step records
    first = await element(storage, run.id, 0)
    assert first.status == "completed"
    assert {k: r.status for k, r in first.steps.items()} == {
        "weigh": "completed", "pack": "completed", "label": "completed"}
    assert msgspec.msgpack.decode(first.inputs, type=Parcel) == Parcel("mug")


@MODES
async def test_a_failing_child_rolls_back_its_own_steps_and_fails_the_map(
        storage: rf.Storage, fan_out: bool) -> None:
    parent, _child, log = flows(fan_out=fan_out)
    run = await finished(parent, items=["mug"], broken="mug")
    assert run.status is rf.Status.FAILED and run.error is not None
    assert run.error.step == "each" and run.error.type == "RuntimeError"
    assert "mug is broken" in run.error.message
    # its completed child steps, newest first, rolled back in the element's process
    assert log.entries == ["weigh mug", "pack mug", "unpack mug", "unweigh mug"]
    failed = await element(storage, run.id, 0)
    assert failed.status == "failed" and failed.error is not None
    assert failed.error.message == "mug is broken" and failed.steps == {}
    assert run.error.rollback_failures == []


@MODES
async def test_a_failing_child_fails_only_its_element_of_a_non_atomic_map(
        storage: rf.Storage, fan_out: bool) -> None:
    parent, _child, log = flows(fan_out=fan_out, atomic=False)
    run = await finished(parent, items=["a", "bb", "ccc"], broken="bb")
    assert run.status is rf.Status.COMPLETED, run.error
    assert run.value == ["[a:1]", "! bb is broken", "[ccc:3]"]
    assert [e for e in log.entries if e.startswith("un")] == ["unpack bb", "unweigh bb"]


@MODES
async def test_a_later_failure_undoes_each_childs_steps_newest_first_highest_index_first(
        storage: rf.Storage, fan_out: bool) -> None:
    parent, _child, log = flows(fan_out=fan_out)
    run = await finished(parent, items=["a", "bb", "ccc"], late=True)
    assert run.status is rf.Status.FAILED and run.error is not None
    assert run.error.step == "done" and run.error.rollback_failures == []
    undone = [e for e in log.entries if e.startswith("un")]
    for item in ("a", "bb", "ccc"):  # within an element: its steps newest first
        mine = [e for e in undone if e.endswith(f" {item}")]
        assert mine == [f"unpack {item}", f"unweigh {item}"]
    if not fan_out:  # inline: one element at a time, highest index first
        assert undone == ["unpack ccc", "unweigh ccc", "unpack bb", "unweigh bb",
                          "unpack a", "unweigh a"]
    else:  # undo jobs of batch_size=2, *started* highest index first
        assert undone[0] != "unpack a"
    for index in range(3):
        slot = await element(storage, run.id, index)
        assert slot.status == "undone" and slot.steps == {}
    assert run.steps["each"].status == "undone"


@MODES
async def test_undo_of_a_completed_run_undoes_the_element_children(
        storage: rf.Storage, fan_out: bool) -> None:
    parent, _child, log = flows(fan_out=fan_out)
    run = await finished(parent, items=["a", "bb"])
    assert run.status is rf.Status.COMPLETED, run.error
    undone = await parent.undo(run.id)
    assert undone.steps["each"].status == "undone"
    assert sorted(e for e in log.entries if e.startswith("un")) == [
        "unpack a", "unpack bb", "unweigh a", "unweigh bb"]


@MODES
async def test_a_failing_child_undo_is_recorded_and_the_rollback_goes_on(
        storage: rf.Storage, fan_out: bool) -> None:
    parent, _child, log = flows(fan_out=fan_out)
    log.fail_undo = "bb"
    run = await finished(parent, items=["a", "bb"], late=True)
    assert run.status is rf.Status.FAILED and run.error is not None
    [failure] = run.error.rollback_failures
    assert (failure.step, failure.kind, failure.type) == ("each", "undo", "OSError")
    assert "element 1" in failure.message and "'pack'" in failure.message
    assert "cannot unpack bb" in failure.message
    # the rest of that element's child, and the other element, are still undone
    assert sorted(e for e in log.entries if e.startswith("un")) == [
        "unpack a", "unweigh a", "unweigh bb"]


@MODES
async def test_child_step_idempotency_keys_are_stable_across_retries(
        storage: rf.Storage, fan_out: bool) -> None:
    parent, _child, log = flows(fan_out=fan_out, flaky=True)
    run = await finished(parent, items=["a", "bb"])
    assert run.status is rf.Status.COMPLETED, run.error
    assert log.keys == {"a": [f"{run.id}:each:0.weigh"] * 2,
                        "bb": [f"{run.id}:each:1.weigh"] * 2}


@pytest.fixture(params=["memory", "redis"])
def env(request: pytest.FixtureRequest) -> Environment:
    """The test kit's environment on memory and on Redis (crash injection)."""
    found: Environment = request.getfixturevalue(
        "rf_env" if request.param == "memory" else "rf_redis_env")
    return found


async def test_a_crash_mid_element_re_runs_only_that_elements_child(env: Environment) -> None:
    log = Log()
    calls: Counter[str] = Counter()
    child = rf.Reactor(unique("crashchild"), inputs=Parcel)

    @child.step
    async def weigh(item: str, ctx: rf.StepContext) -> int:
        calls[f"weigh {item}"] += 1
        log.keys.setdefault(item, []).append(ctx.idempotency_key)
        if item == "b":  # the process dies in this element once element 0 is stored
            storage = env.storage
            with anyio.fail_after(10):
                while (await storage.load_elements(ctx.run_id, "each", 0, 1))[0] is None:
                    await anyio.sleep(0.01)
        return len(item)

    @child.step(when=lambda item: item == "b")
    async def fragile(item: str, weigh: int) -> int:
        calls[f"fragile {item}"] += 1
        return weigh

    @child.step
    async def done(item: str, weigh: int) -> str:
        return f"{item}={weigh}"

    parent = rf.Reactor(unique("crashparent"), inputs=Order)

    @parent.map_step(over="items", reactor=child, batch_size=1)
    async def each(item: str) -> Parcel:
        return Parcel(item)

    with env.crash(child, "fragile", when="before"):
        await parent.run(items=["a", "b"])
    assert calls == Counter({"weigh a": 1, "weigh b": 1})
    [run] = await env.recover()
    assert run.status is rf.Status.COMPLETED, run.error
    assert run.value == ["a=1", "b=1"]
    # element 0 was stored before the crash: not run again; element 1 ran again from its
    # child's first step, with the same idempotency key
    assert calls == Counter({"weigh a": 1, "weigh b": 2, "fragile b": 1})
    assert log.keys["b"] == [f"{run.id}:each:1.weigh"] * 2


class Box(msgspec.Struct):
    item: str


@MODES
async def test_a_compose_nested_in_an_element_reactor(storage: rf.Storage,
                                                      fan_out: bool) -> None:
    log = Log()
    inner = rf.Reactor(unique("boxing"), inputs=Box)

    @inner.step
    async def box(item: str, ctx: rf.StepContext) -> str:
        log.keys.setdefault(item, []).append(ctx.idempotency_key)
        return f"box({item})"

    @box.undo
    async def unbox(result: str) -> None:
        log.entries.append(f"unbox {result}")

    child = rf.Reactor(unique("wrapper"), inputs=Parcel)

    @child.compose(inner)
    async def wrap(item: str) -> Box:
        return Box(item)

    @child.step
    async def shipped(wrap: str) -> str:
        return wrap.upper()

    parent = rf.Reactor(unique("nested"), inputs=Order)

    @parent.map_step(over="items", reactor=child, fan_out=fan_out)
    async def each(item: str) -> Parcel:
        return Parcel(item)

    @parent.step
    async def after(each: list[str], late: bool) -> list[str]:
        if late:
            raise RuntimeError("late")
        return each

    run = await finished(parent, items=["x", "y"])
    assert run.status is rf.Status.COMPLETED, run.error
    assert run.value == ["BOX(X)", "BOX(Y)"]
    assert log.keys == {"x": [f"{run.id}:each:0.wrap.box"], "y": [f"{run.id}:each:1.wrap.box"]}
    failed = await finished(parent, items=["x", "y"], late=True)
    assert failed.status is rf.Status.FAILED
    assert sorted(log.entries) == ["unbox box(x)", "unbox box(y)"]


@MODES
async def test_a_childs_reactor_lock_excludes_elements_but_is_re_entered_for_the_run(
        storage: rf.Storage, fan_out: bool) -> None:
    """The child reactor's lock is held per element (two elements with the same key run one at
    a time), while a lock the run holds itself is re-entered, as for a composed child (inline:
    a fanned-out element runs without its run, and holds its locks as itself)."""
    inside: list[int] = []
    peak: list[int] = []
    shared = [] if fan_out else [rf.Lock("order:all", wait=1)]
    child = rf.Reactor(unique("lockchild"), inputs=Parcel,
                       gates=[rf.Lock("shelf:{item}", wait=10), *shared])

    @child.step
    async def hold(item: str) -> str:
        inside.append(1)
        peak.append(len(inside))
        await anyio.sleep(0.01)
        inside.pop()
        return item

    parent = rf.Reactor(unique("lockparent"), inputs=Order, gates=[rf.Lock("order:all")])

    @parent.map_step(over="items", reactor=child, batch_size=4, fan_out=fan_out)
    async def each(item: str) -> Parcel:
        return Parcel(item)

    run = await finished(parent, items=["s", "s", "s"])
    assert run.status is rf.Status.COMPLETED, run.error
    assert max(peak) == 1  # same shelf: one element at a time
    assert await storage.gate_holders("shelf:s") == []
    assert await storage.gate_holders("order:all") == []


def test_an_interrupt_in_an_async_reactor_of_an_element_reactor_is_refused() -> None:
    """(A map, an async step or an async reactor inside an element reactor runs in the
    element: tests/maps/test_nested_maps.py.)"""
    mailer = rf.Reactor(unique("mailer"))

    @mailer.interrupt
    async def approve(payload: bool) -> bool:
        return payload

    child = rf.Reactor(unique("inner"), inputs=Order)

    @child.async_reactor(mailer)
    async def nested() -> dict[str, object]:
        return {}

    parent = rf.Reactor(unique("outer"), inputs=Order)
    with pytest.raises(rf.DefinitionError, match="cannot pause its run"):
        @parent.map_step(over="items", reactor=child)
        async def each(item: str) -> Order:
            return Order([item])


def test_the_graph_shows_the_element_reactor_under_the_map() -> None:
    parent, child, _log = flows(fan_out=False)
    plan = plan_for(parent)
    assert plan.fingerprint["each"][0] == f"map:{child.name}"
    assert plan.fingerprint["each.pack"] == ["step", "each.weigh"]
    chart = render(parent)
    assert f'subgraph n_each_child["{parent.name}.each: {child.name} (each element)"]' in chart
    assert "n_each__weigh --> n_each__pack" in chart


def test_an_element_reactor_takes_no_handlers_retries_or_timeout() -> None:
    parent, _child, _log = flows(fan_out=False)
    each = parent.steps["each"]
    with pytest.raises(rf.DefinitionError, match="rolls back its own steps"):
        @rf.MapStep(parent, "each", each.fn).undo
        async def back(result: str) -> None: ...
    with pytest.raises(rf.DefinitionError, match="never retried as a whole"):
        @parent.map_step(over="items", reactor=each.child, retries=rf.Retry(2), name="again")
        async def again(item: str) -> Parcel:
            return Parcel(item)


@MODES
async def test_an_element_rollback_cut_off_resumes_after_the_last_saved_child_undo(
        storage: rf.Storage, fan_out: bool) -> None:
    """Each child undo is saved in the element's slot as it returns; a rollback that finds one
    saved (its process was killed right after it) does not run it again."""
    parent, _child, log = flows(fan_out=fan_out)
    run = await finished(parent, items=["a", "bb"])
    assert run.status is rf.Status.COMPLETED, run.error
    # as a killed rollback leaves it: element 1's newest child step (pack) undone and saved
    slot = await element(storage, run.id, 1)
    slot.steps["pack"] = msgspec.structs.replace(slot.steps["pack"], status=rf.StepStatus.UNDONE)
    await storage.save_elements(run.id, "each", {1: records.encode(slot)}, replace=True)
    seen: list[str] = []

    async def probe(item: str) -> None:  # what the slot holds when unweigh runs
        saved = await element(storage, run.id, 0 if item == "a" else 1)
        seen.append(f"{item}: pack {saved.steps['pack'].status}")

    log.on_unweigh = probe
    await parent.undo(run.id)
    assert sorted(e for e in log.entries if e.startswith("un")) == [
        "unpack a", "unweigh a", "unweigh bb"]  # bb's pack was not undone again
    assert sorted(seen) == ["a: pack undone", "bb: pack undone"]


async def test_duplicate_and_lost_element_jobs_of_an_element_reactor(storage: rf.Storage) -> None:
    """Fanned out: a duplicate delivery of a settled element runs nothing of its child; a lost
    element job is re-dispatched by the sweeper, and its child runs once."""
    from reactorflow.runtime.engine import job_queue as queue
    from reactorflow.runtime.services import job_handling as jobs
    from tests.maps.test_fanout import Dropping

    parent, _child, log = flows(fan_out=True)
    inner = queue.current()
    dropping = Dropping(inner, {1})
    queue.register(lambda: dropping)
    try:
        rf.configure(stall_timeout=3600, async_wait_timeout=3600)  # no fallback re-check
        run = await parent.run(items=["a", "bb", "ccc"])
        with anyio.fail_after(20):
            while await storage.count_elements(run.id, "each") < 2:
                await anyio.sleep(0.02)
        assert dropping.dropped == [1]
        rf.configure(stall_timeout=0.01)
        with anyio.fail_after(20):
            while run.id not in (await rf.sweep_once()).recovered:
                await anyio.sleep(0.02)
        done = await parent.wait(run.id, timeout=30)
    finally:
        queue.register(lambda: inner)
    assert done.status is rf.Status.COMPLETED, done.error
    assert done.value == ["[a:1]", "[bb:2]", "[ccc:3]"]
    assert sorted(log.entries) == sorted(
        f"{step} {item}" for step in ("weigh", "pack") for item in ("a", "bb", "ccc"))
    for index in range(3):  # late duplicates of every element
        await jobs.execute_element(run.id, parent.name, "each", index)
    assert len(log.entries) == 6  # nothing ran again
