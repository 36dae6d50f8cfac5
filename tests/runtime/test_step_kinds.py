"""The step-kind table (`runtime.engine.kinds`): a kind of step is one handler and one
registration. A toy kind, registered from this test module, runs forward and rolls back with no
edit to the engine: the driver, the forward drive and rollback find it in the table."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, cast

import msgspec
import pytest

import reactorflow as rf
from reactorflow import clock, records
from reactorflow.definition.graph import Node, plan_for
from reactorflow.definition.specs import StepKind
from reactorflow.errors import ReactorflowError
from reactorflow.records import RollbackFailure, StepRecord
from reactorflow.runtime.engine import kinds
from reactorflow.runtime.engine.execution import Execution, event
from reactorflow.runtime.engine.forward import Forward
from reactorflow.runtime.maps import map_step
from reactorflow.status import StepStatus
from tests.helpers import unique

pytestmark = pytest.mark.usefixtures("storage")


class ToyKind(StrEnum):
    TOY = "toy"


TOY = cast(StepKind, ToyKind.TOY)  # a kind the definition layer does not know


@dataclass
class Seen:
    forward: list[str] = field(default_factory=list)
    rolled_back: list[str] = field(default_factory=list)


SEEN = Seen()


async def toy_forward(drive: Forward, node: Node) -> None:
    """The toy kind's step: completes with a value of its own, without calling the body."""
    ex = drive.ex
    SEEN.forward.append(node.key)
    value = f"toy value of {node.key}"
    ex.values[node.key] = value
    now = clock.now()
    done = StepRecord(StepStatus.COMPLETED, 1, now, now, records.raw(value),
                      seq=ex.writer.next_seq())
    await drive._finish(node, done, [event("step.completed", node.key, detail="the toy kind")])


@dataclass
class ToyRollback:
    failures: list[RollbackFailure] = field(default_factory=list)
    parked_since: float | None = None


async def toy_roll_back(ex: Execution, key: str) -> ToyRollback:
    SEEN.rolled_back.append(key)
    record = msgspec.structs.replace(ex.records[key], status=StepStatus.UNDONE)
    await ex.writer.checkpoint(key, record, [event("undo.completed", key, detail="the toy kind")])
    return ToyRollback()


HANDLER = kinds.KindHandler(toy_forward, roll_back=toy_roll_back)


@pytest.fixture
def toy() -> Iterator[None]:
    SEEN.forward.clear()
    SEEN.rolled_back.clear()
    kinds.register(TOY, HANDLER)
    try:
        yield
    finally:
        kinds.unregister(TOY)


def _with_toy(flow: rf.Reactor, key: str) -> None:
    """Make step `key` of the compiled plan a step of the toy kind (what a declaration of that
    kind would compile to)."""
    plan = plan_for(flow)
    plan.nodes[key] = dataclasses.replace(plan.nodes[key], kind=TOY, plain=False)


def _flow(*, fail_after: bool) -> rf.Reactor:
    flow = rf.Reactor(unique("kinds.toy"))

    @flow.step
    async def source() -> str:
        raise AssertionError("the toy kind's handler runs instead of the body")

    @flow.step
    async def shout(source: str) -> str:
        if fail_after:
            raise RuntimeError("after the toy")
        return source.upper()

    return flow


async def test_a_registered_toy_kind_runs_forward(toy: None) -> None:
    flow = _flow(fail_after=False)
    _with_toy(flow, "source")
    run = await flow.run()
    assert run.status is rf.Status.COMPLETED, run.error
    assert run.value == "TOY VALUE OF SOURCE"
    assert SEEN.forward == ["source"]
    assert run.steps["source"].status is rf.StepStatus.COMPLETED
    assert any(e.detail == "the toy kind" for e in run.history)


async def test_a_registered_toy_kind_rolls_back_its_own_way(toy: None) -> None:
    flow = _flow(fail_after=True)
    _with_toy(flow, "source")
    run = await flow.run()
    assert run.status is rf.Status.FAILED
    assert SEEN.rolled_back == ["source"]
    assert run.steps["source"].status is rf.StepStatus.UNDONE


def test_a_kind_registers_once() -> None:
    assert kinds.handler_of(StepKind.MAP) is map_step.HANDLER  # registered by runtime.maps
    kinds.register(StepKind.MAP, map_step.HANDLER)  # the same again: a no-op
    with pytest.raises(ReactorflowError, match="has a handler already"):
        kinds.register(StepKind.MAP, HANDLER)
    assert set(StepKind) <= set(kinds.table())  # every declared kind has its handler


def test_an_unknown_kind_names_what_to_import() -> None:
    with pytest.raises(ReactorflowError, match="no handler is registered for step kind"):
        kinds.handler_of(cast(Any, "no-such-kind"))
