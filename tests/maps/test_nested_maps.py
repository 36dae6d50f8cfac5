"""A map nested in an element reactor (orders -> lines, issue 10): it runs inline inside the
element (`fan_out=True` too), with its own batch_size, atomic/non-atomic semantics, per-element
retries and results in order; its inner elements' outcomes are held with the element and saved
in the outer element's slot; a failing nested map rolls back as inside any run, and undoing the
outer element undoes its nested map's completed inner elements highest index first, in the
newest-first order of the child's steps (both storage backends; the outer map inline and
fanned out on the embedded worker)."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import msgspec
import pytest

import reactorflow as rf
from reactorflow import records
from reactorflow.definition.mermaid import render
from tests.helpers import unique

OUTER = pytest.mark.parametrize("fan_out", [False, True], ids=["inline", "fan_out"])


class Cart(msgspec.Struct):
    orders: list[list[str]]
    broken: str = ""
    late: bool = False


class Order(msgspec.Struct):
    items: list[str]
    broken: str = ""


class Line(msgspec.Struct):
    item: str


@dataclass
class Log:
    entries: list[str] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)  # the inner elements' idempotency keys
    tries: Counter[str] = field(default_factory=Counter)
    fail_undo: str = ""
    on_unline: Callable[[str], Awaitable[None]] | None = None


def reserving(log: Log) -> rf.Reactor:
    """An order reactor whose first step, reserve, has an undo."""
    order = rf.Reactor(unique("order"), inputs=Order)

    @order.step
    async def reserve(items: list[str]) -> str:
        log.entries.append(f"reserve {items[0]}")
        return items[0]

    @reserve.undo
    async def unreserve(result: str) -> None:
        log.entries.append(f"unreserve {result}")

    return order


def order_reactor(log: Log, *, atomic: bool = True, inner_fan_out: bool = False,
                  leaf: bool = False, undo_all: bool = False) -> rf.Reactor:
    """reserve (undo) -> lines (a map over the order's items, batch_size=1, each line flaky
    once; its elements undone by `unline`, or its own element reactor) -> total."""
    order = reserving(log)

    if leaf:
        pick = rf.Reactor(unique("pick"), inputs=Line)

        @pick.step
        async def take(item: str) -> str:
            log.entries.append(f"take {item}")
            return item.upper()

        @take.undo
        async def put_back(result: str, item: str) -> None:
            log.entries.append(f"put back {item}")

        @order.map_step(over="items", reactor=pick, batch_size=1, atomic=atomic,
                        fan_out=inner_fan_out)
        async def lines(item: str, reserve: str) -> Line:
            return Line(item)
    else:
        @order.map_step(over="items", batch_size=1, atomic=atomic, fan_out=inner_fan_out,
                        retries=rf.Retry(2, backoff=0))
        async def lines(item: str, broken: str, reserve: str, ctx: rf.StepContext) -> str:
            log.keys.append(ctx.idempotency_key)
            log.tries[item] += 1
            if log.tries[item] == 1:
                raise ConnectionError(f"{item}: warming up")  # retried per element
            if item == broken:
                raise RuntimeError(f"{item} is broken")
            log.entries.append(f"line {item}")
            return item.upper()

        if undo_all:
            @lines.undo_all
            async def unline_all(results: AsyncIterator[str]) -> None:
                log.entries.append(f"unline all {[r async for r in results]}")
        else:
            @lines.undo
            async def unline(result: str, item: str) -> None:
                if log.on_unline is not None:
                    await log.on_unline(item)
                if item == log.fail_undo:
                    raise OSError(f"cannot unline {item}")
                log.entries.append(f"unline {item}")

    if atomic:
        @order.step
        async def total(lines: list[str]) -> str:
            return "+".join(lines)
    else:
        @order.step
        async def total(lines: list[rf.Outcome[str]]) -> str:  # type: ignore[misc]
            return "+".join(o.value if o.ok else f"!{o.error.type}"  # type: ignore[union-attr]
                            for o in lines)

    return order


def cart_reactor(order: rf.Reactor, *, fan_out: bool, atomic: bool = True) -> rf.Reactor:
    cart = rf.Reactor(unique("cart"), inputs=Cart)

    @cart.map_step(over="orders", reactor=order, fan_out=fan_out, batch_size=2, atomic=atomic)
    async def each(items: list[str], broken: str) -> Order:
        return Order(items, broken)

    if atomic:
        @cart.step
        async def done(each: list[str], late: bool) -> list[str]:
            if late:
                raise RuntimeError("late")
            return each
    else:
        @cart.step
        async def done(each: list[rf.Outcome[str]]) -> list[str]:  # type: ignore[misc]
            return [o.value if o.ok else f"! {o.error.message}" for o in each]  # type: ignore[union-attr]

    return cart


async def finished(flow: rf.Reactor, **inputs: object) -> rf.Run:
    return await flow.wait((await flow.run(**inputs)).id, timeout=30)


async def slot(storage: rf.Storage, run_id: str, index: int) -> records.ElementRecord:
    raw = (await storage.load_elements(run_id, "each", index, 1))[0]
    assert raw is not None
    return records.decode_element(raw)


def inner(record: records.ElementRecord, key: str = "lines") -> dict[int, records.ElementRecord]:
    return {i: records.decode_element(raw) for i, raw in record.maps.get(key, {}).items()}


@OUTER
@pytest.mark.parametrize("inner_fan_out", [False, True], ids=["inner", "inner_fan_out"])
async def test_a_nested_map_runs_inline_in_the_element_with_results_in_order(
        storage: rf.Storage, fan_out: bool, inner_fan_out: bool) -> None:
    log = Log()
    cart = cart_reactor(order_reactor(log, inner_fan_out=inner_fan_out), fan_out=fan_out)
    run = await finished(cart, orders=[["a", "b"], ["c"], ["d", "e", "f"]])
    assert run.status is rf.Status.COMPLETED, run.error
    assert run.value == ["A+B", "C", "D+E+F"]
    # inline in each element, one at a time (batch_size=1), each retried once: each element's
    # lines in its own order (the outer elements run two at a time, and fanned out in any order)
    lines = [e for e in log.entries if e.startswith("line")]
    for items in (["a", "b"], ["c"], ["d", "e", "f"]):
        assert [e for e in lines if e.removeprefix("line ") in items] == [
            f"line {item}" for item in items]
    assert log.tries == Counter(dict.fromkeys("abcdef", 2))
    assert sorted(set(log.keys))[-1] == f"{run.id}:each:2.lines:2"
    # no run per outer element, and no slots of the nested map beside the run
    assert [r.id for r in (await rf.list_runs()).runs if r.id == run.id] == [run.id]
    assert await storage.load_elements(run.id, "lines", 0, 1) == [None]
    # the inner outcomes are kept with the outer element (its rollback undoes them)
    third = await slot(storage, run.id, 2)
    assert {i: (r.status, msgspec.msgpack.decode(r.result)) for i, r in inner(third).items()} == {
        0: ("completed", "D"), 1: ("completed", "E"), 2: ("completed", "F")}
    assert third.steps["lines"].status == "completed"


@OUTER
async def test_an_inner_failure_of_an_atomic_nested_map_fails_the_outer_element(
        storage: rf.Storage, fan_out: bool) -> None:
    log = Log()
    cart = cart_reactor(order_reactor(log), fan_out=fan_out)
    run = await finished(cart, orders=[["w", "x", "y"]], broken="x")
    assert run.status is rf.Status.FAILED and run.error is not None
    assert run.error.step == "each" and "x is broken" in run.error.message
    assert run.error.rollback_failures == []
    # the nested map stopped at x (y never started); its completed element and the element's
    # earlier step are rolled back in the element, newest first
    assert log.entries == ["reserve w", "line w", "unline w", "unreserve w"]
    failed = await slot(storage, run.id, 0)
    assert failed.status == "failed" and failed.steps == {} and failed.maps == {}


@OUTER
async def test_a_non_atomic_nested_map_gives_outcomes(storage: rf.Storage,
                                                      fan_out: bool) -> None:
    log = Log()
    cart = cart_reactor(order_reactor(log, atomic=False), fan_out=fan_out)
    run = await finished(cart, orders=[["w", "x", "y"], ["z"]], broken="x")
    assert run.status is rf.Status.COMPLETED, run.error
    assert run.value == ["W+!RuntimeError+Y", "Z"]
    assert [e for e in log.entries if e.startswith("un")] == []


@OUTER
async def test_a_later_failure_undoes_outer_elements_and_their_nested_maps(
        storage: rf.Storage, fan_out: bool) -> None:
    log = Log()
    cart = cart_reactor(order_reactor(log), fan_out=fan_out)
    run = await finished(cart, orders=[["a", "b"], ["c", "d", "e"]], late=True)
    assert run.status is rf.Status.FAILED and run.error is not None
    assert run.error.step == "done" and run.error.rollback_failures == []
    undone = [e for e in log.entries if e.startswith("un")]
    # within an outer element: its child's steps newest first, the nested map's inner
    # elements highest index first
    assert [e for e in undone if e in ("unline a", "unline b", "unreserve a")] == [
        "unline b", "unline a", "unreserve a"]
    assert [e for e in undone if e not in ("unline a", "unline b", "unreserve a")] == [
        "unline e", "unline d", "unline c", "unreserve c"]
    if not fan_out:  # inline: outer elements highest index first
        assert undone == ["unline e", "unline d", "unline c", "unreserve c",
                          "unline b", "unline a", "unreserve a"]
    for index in range(2):
        undone_slot = await slot(storage, run.id, index)
        assert undone_slot.status == "undone"
        assert undone_slot.steps == {} and undone_slot.maps == {}


@OUTER
async def test_a_failing_inner_undo_is_recorded_and_the_rollback_goes_on(
        storage: rf.Storage, fan_out: bool) -> None:
    log = Log(fail_undo="b")
    cart = cart_reactor(order_reactor(log), fan_out=fan_out)
    run = await finished(cart, orders=[["a", "b", "c"]], late=True)
    assert run.status is rf.Status.FAILED and run.error is not None
    [failure] = run.error.rollback_failures
    assert (failure.step, failure.kind, failure.type) == ("each", "undo", "OSError")
    assert "'lines'" in failure.message and "cannot unline b" in failure.message
    assert [e for e in log.entries if e.startswith("un")] == [
        "unline c", "unline a", "unreserve a"]


@OUTER
async def test_undo_all_of_a_nested_map_runs_when_the_outer_element_is_undone(
        storage: rf.Storage, fan_out: bool) -> None:
    log = Log()
    cart = cart_reactor(order_reactor(log, undo_all=True), fan_out=fan_out)
    run = await finished(cart, orders=[["a", "b"]])
    assert run.status is rf.Status.COMPLETED, run.error
    undone = await cart.undo(run.id)
    assert undone.steps["each"].status == "undone"
    assert [e for e in log.entries if e.startswith("un")] == [
        "unline all ['A', 'B']", "unreserve a"]


@OUTER
async def test_an_element_reactor_map_nested_in_an_element_reactor(
        storage: rf.Storage, fan_out: bool) -> None:
    log = Log()
    cart = cart_reactor(order_reactor(log, leaf=True), fan_out=fan_out)
    run = await finished(cart, orders=[["a", "b"], ["c"]])
    assert run.status is rf.Status.COMPLETED, run.error
    assert run.value == ["A+B", "C"]
    first = await slot(storage, run.id, 0)
    assert {i: r.steps["take"].status for i, r in inner(first).items()} == {
        0: "completed", 1: "completed"}
    await cart.undo(run.id)
    undone = [e for e in log.entries if e.startswith(("put", "unreserve"))]
    assert [e for e in undone if e.endswith(("a", "b"))] == [
        "put back b", "put back a", "unreserve a"]
    assert [e for e in undone if e.endswith("c")] == ["put back c", "unreserve c"]


def test_the_graph_of_a_nested_map_renders() -> None:
    cart = cart_reactor(order_reactor(Log()), fan_out=False)
    assert "lines" in render(cart)


@OUTER
async def test_an_outer_element_rollback_cut_off_resumes_after_the_last_saved_inner_undo(
        storage: rf.Storage, fan_out: bool) -> None:
    """Each inner element's undo is saved in the outer element's slot as it returns; a
    rollback that finds one saved (its process was killed right after it) does not run it
    again."""
    log = Log()
    cart = cart_reactor(order_reactor(log), fan_out=fan_out)
    run = await finished(cart, orders=[["a", "b", "c"]])
    assert run.status is rf.Status.COMPLETED, run.error
    # as a killed rollback leaves it: inner element 2 (c) undone and saved
    outer = await slot(storage, run.id, 0)
    last = records.decode_element(outer.maps["lines"][2])
    last.status = rf.StepStatus.UNDONE
    outer.maps["lines"][2] = records.encode(last)
    await storage.save_elements(run.id, "each", {0: records.encode(outer)}, replace=True)
    seen: list[str] = []

    async def probe(item: str) -> None:  # what the outer slot holds as unline runs
        held = inner(await slot(storage, run.id, 0))
        seen.append(f"{item}: {' '.join(held[i].status for i in range(3))}")

    log.on_unline = probe
    await cart.undo(run.id)
    assert [e for e in log.entries if e.startswith("un")] == [
        "unline b", "unline a", "unreserve a"]  # c was not undone again
    assert seen == ["b: completed completed undone", "a: completed undone undone"]
    assert (await slot(storage, run.id, 0)).maps == {}


def notifying_reactor(log: Log) -> rf.Reactor:
    """reserve (undo) -> notify: an async reactor whose child (send (undo) -> confirm, which
    fails for the order's broken item) runs inside the element -> total."""
    mailer = rf.Reactor(unique("mailer"), inputs=Order)

    @mailer.step
    async def send(items: list[str], ctx: rf.StepContext) -> str:
        log.keys.append(ctx.idempotency_key)
        log.entries.append(f"send {items[0]}")
        return f"mail {items[0]}"

    @send.undo
    async def unsend(result: str, items: list[str]) -> None:
        log.entries.append(f"unsend {items[0]}")

    @mailer.step
    async def confirm(send: str, items: list[str], broken: str) -> str:
        if broken in items:
            raise RuntimeError(f"mail for {broken} bounced")
        return f"{send} sent"

    order = reserving(log)

    @order.async_reactor(mailer)
    async def notify(items: list[str], broken: str, reserve: str) -> Order:
        return Order(items, broken)

    @order.step
    async def total(notify: str, reserve: str) -> str:
        return f"{reserve}: {notify}"

    return order


@OUTER
async def test_an_async_reactor_inside_an_element_reactor_runs_in_the_element(
        storage: rf.Storage, fan_out: bool) -> None:
    log = Log()
    order = notifying_reactor(log)
    cart = cart_reactor(order, fan_out=fan_out)
    run = await finished(cart, orders=[["a"], ["b", "c"]])
    assert run.status is rf.Status.COMPLETED, run.error
    assert run.value == ["a: mail a sent", "b: mail b sent"]
    assert sorted(log.keys) == [f"{run.id}:each:0.notify.send", f"{run.id}:each:1.notify.send"]
    mailer = order.steps["notify"].child
    assert mailer is not None
    assert (await rf.list_runs(reactor=mailer.name)).runs == []  # no run of its own
    # never rolled back: a later failure undoes the element's other steps only
    late = await finished(cart, orders=[["d"]], late=True)
    assert late.status is rf.Status.FAILED and late.error is not None
    assert late.error.rollback_failures == []
    assert [e for e in log.entries if e.startswith("un")] == ["unreserve d"]


@OUTER
async def test_a_failing_async_reactor_child_rolls_itself_back_and_fails_the_element(
        storage: rf.Storage, fan_out: bool) -> None:
    log = Log()
    cart = cart_reactor(notifying_reactor(log), fan_out=fan_out)
    run = await finished(cart, orders=[["a", "x"]], broken="x")
    assert run.status is rf.Status.FAILED and run.error is not None
    assert run.error.step == "each" and "mail for x bounced" in run.error.message
    assert log.entries == ["reserve a", "send a", "unsend a", "unreserve a"]
