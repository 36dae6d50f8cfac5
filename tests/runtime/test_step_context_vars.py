"""A context variable a step sets stays inside the run: the caller's context never sees it,
with or without middleware observing the steps (each step runs in a runner task of the run's
task group, which works on a copy of the caller's context)."""

from __future__ import annotations

import contextvars

import pytest

import reactorflow as rf
from tests.helpers import unique

pytestmark = pytest.mark.usefixtures("storage")

REQUEST = contextvars.ContextVar[str]("request", default="caller")


class Quiet(rf.Middleware):
    """A middleware that observes steps and changes nothing."""


def _flow(observed: bool) -> rf.Reactor:
    flow = rf.Reactor(unique("ctxvars"), middleware=[Quiet()] if observed else [])

    @flow.step
    async def tag() -> str:
        REQUEST.set("step")
        return REQUEST.get()

    @flow.step
    async def after(tag: str) -> str:
        return tag

    return flow


@pytest.mark.parametrize("observed", [False, True], ids=["plain", "middleware"])
async def test_a_context_variable_set_by_a_step_does_not_reach_the_caller(observed: bool) -> None:
    flow = _flow(observed)
    run = await flow.run()
    assert run.value == "step"
    assert REQUEST.get() == "caller"
