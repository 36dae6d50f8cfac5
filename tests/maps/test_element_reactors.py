"""Element reactors: `map_step(reactor=child)` runs the child reactor once per element (a run of
its own per element, id `<run>-<map>-<index>`), inline or fanned out; the map's rollback undoes
each completed element's child, highest index first."""

from __future__ import annotations

import msgspec
import pytest

import reactorflow as rf
from tests.helpers import unique


class Parcel(msgspec.Struct):
    item: str
    broken: bool = False


class Order(msgspec.Struct):
    items: list[str]
    broken: str = ""
    late: bool = False


def flows(*, fan_out: bool) -> tuple[rf.Reactor, list[str]]:
    log: list[str] = []
    child = rf.Reactor(unique("parcel"), inputs=Parcel)

    @child.step
    async def weigh(item: str) -> int:
        log.append(f"weigh {item}")
        return len(item)

    @weigh.undo
    async def unweigh(result: int, item: str) -> None:
        log.append(f"unweigh {item}")

    @child.step
    async def label(item: str, weigh: int, broken: bool) -> str:
        if broken:
            raise RuntimeError(f"{item} is broken")
        return f"{item}:{weigh}"

    parent = rf.Reactor(unique("orders"), inputs=Order)

    @parent.map_step(over="items", reactor=child, fan_out=fan_out, batch_size=2)
    async def each(item: str, broken: str) -> Parcel:
        return Parcel(item, item == broken)

    @parent.step
    async def done(each: list[str], late: bool) -> list[str]:
        if late:
            raise RuntimeError("late")
        return each

    return parent, log


@pytest.mark.parametrize("fan_out", [False, True])
async def test_each_element_runs_the_child_reactor(storage: rf.Storage, fan_out: bool) -> None:
    parent, _log = flows(fan_out=fan_out)
    run = await parent.run(items=["mug", "teapot"])
    run = await parent.wait(run.id, timeout=30)
    assert run.status is rf.Status.COMPLETED, run.error
    assert run.value == ["mug:3", "teapot:6"]
    child = parent.steps["each"].child
    assert child is not None
    first = await child.get(f"{run.id}-each-0")
    assert first.status is rf.Status.COMPLETED and first.value == "mug:3"


@pytest.mark.parametrize("fan_out", [False, True])
async def test_a_failed_element_child_rolls_itself_back_and_fails_the_map(
        storage: rf.Storage, fan_out: bool) -> None:
    parent, log = flows(fan_out=fan_out)
    run = await parent.run(items=["mug"], broken="mug")
    run = await parent.wait(run.id, timeout=30)
    assert run.status is rf.Status.FAILED and run.error is not None
    assert run.error.step == "each" and "mug is broken" in run.error.message
    assert log == ["weigh mug", "unweigh mug"]


@pytest.mark.parametrize("fan_out", [False, True])
async def test_a_later_failure_undoes_each_child_highest_index_first(
        storage: rf.Storage, fan_out: bool) -> None:
    parent, log = flows(fan_out=fan_out)
    run = await parent.run(items=["a", "bb", "ccc"], late=True)
    run = await parent.wait(run.id, timeout=30)
    assert run.status is rf.Status.FAILED
    undone = [e for e in log if e.startswith("unweigh")]
    if not fan_out:  # inline: one at a time, highest index first
        assert undone == ["unweigh ccc", "unweigh bb", "unweigh a"]
    else:  # at most batch_size=2 at a time, *started* highest index first: "ccc" and "bb"
        # run together (either may log first); "a" starts only once one of them has finished
        assert sorted(undone) == ["unweigh a", "unweigh bb", "unweigh ccc"]
        assert undone[0] != "unweigh a"


def test_an_element_reactor_takes_no_handlers_retries_or_timeout() -> None:
    parent, _ = flows(fan_out=False)
    each = parent.steps["each"]
    with pytest.raises(rf.DefinitionError, match="rolls back its own steps"):
        @rf.MapStep(parent, "each", each.fn).undo
        async def back(result: str) -> None: ...
    with pytest.raises(rf.DefinitionError, match="never retried as a whole"):
        @parent.map_step(over="items", reactor=each.child, retries=rf.Retry(2), name="again")
        async def again(item: str) -> Parcel:
            return Parcel(item)
