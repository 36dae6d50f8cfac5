"""A schedule's inputs for a reactor whose inputs type is a pydantic model (reactorflow[pydantic]),
on both backends: a model instance, a mapping and a callable returning a model each start a run
whose inputs are the model; refused inputs are recorded naming the field path."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import pytest
from pydantic import BaseModel, Field

import reactorflow as rf
from tests.schedules.conftest import Clock


class Report(BaseModel):
    day: str
    pages: int = Field(default=1, ge=1)


def nightly(inputs: Any) -> rf.Reactor:
    flow = rf.Reactor(f"sched-pyd-{uuid.uuid4().hex[:8]}", inputs=Report,
                      schedules=[rf.Schedule("* * * * *", inputs=inputs)])

    @flow.step
    async def report(day: str, pages: int) -> str:
        return f"{day}/{pages}"

    return flow


def at_tick(tick: datetime) -> Report:
    return Report(day=tick.date().isoformat(), pages=2)


@pytest.mark.parametrize("inputs", [Report(day="d", pages=3), {"day": "d", "pages": 3}, at_tick],
                         ids=["instance", "mapping", "callable"])
async def test_a_schedule_starts_runs_with_model_inputs(
        storage: rf.Storage, clock: Clock, inputs: Any) -> None:
    flow = nightly(inputs)
    assert await rf.schedule_once(reactors=[flow]) == []
    clock.advance(minutes=1)
    started = await rf.schedule_once(reactors=[flow])
    assert len(started) == 1
    done = await flow.wait(started[0].id, timeout=30)
    assert done.status is rf.Status.COMPLETED, done.error
    assert type(done.inputs) is Report
    assert done.value == ("2026-01-01/2" if callable(inputs) else "d/3")


async def test_refused_model_inputs_are_recorded_naming_the_field(
        storage: rf.Storage, clock: Clock) -> None:
    flow = nightly({"day": "d", "pages": 0})
    await rf.schedule_once(reactors=[flow])
    clock.advance(minutes=1)
    assert await rf.schedule_once(reactors=[flow]) == []
    state = await storage.schedule_load(f"{flow.name}:0", None)
    assert state is not None and "pages: Input should be greater than or equal to 1" in state.error
    assert (await flow.list_runs()).runs == []
