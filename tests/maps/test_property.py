"""Property: for random element failures, an inline map and the same map fanned out over the
embedded worker end in the same state, with the same set of undone elements, on both backends.

Atomic maps with a failing element use batch_size=1, where which elements complete before the
failure is the same in both modes (with more in flight it depends on timing, in either mode)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import make_storage
from tests.helpers import run_on
from tests.maps.flows import saga


@st.composite
def cases(draw: st.DrawFn) -> dict[str, Any]:
    size = draw(st.integers(min_value=0, max_value=8))
    fails = sorted(draw(st.sets(st.integers(0, max(size - 1, 0)), max_size=2))) if size else []
    atomic = draw(st.booleans())
    batch = 1 if atomic and fails else draw(st.integers(1, 4))
    return {"size": size, "fail": fails, "atomic": atomic, "batch": batch,
            "late": draw(st.booleans())}


async def _outcome(case: dict[str, Any], fan_out: bool) -> tuple[Any, ...]:
    flow, log, _ = saga(fan_out=fan_out, batch_size=case["batch"], atomic=case["atomic"])
    run = await flow.run(tag="p", items=list(range(case["size"])), fail=case["fail"],
                         late=case["late"])
    run = await flow.wait(run.id, timeout=60)
    undone = [entry for entry in log if entry.startswith("undo:")]
    indexes = [int(entry.split(":")[1]) for entry in undone]
    assert indexes == sorted(indexes, reverse=True), f"undo not highest index first: {undone}"
    error = (run.error.step, run.error.type, run.error.message) if run.error else None
    compensated = sorted(entry for entry in log if entry.startswith("compensate:"))
    return run.status, run.value, error, sorted(undone), compensated


async def _check(case: dict[str, Any]) -> None:
    inline = await _outcome(case, fan_out=False)
    fanned = await _outcome(case, fan_out=True)
    assert fanned == inline, case


@pytest.mark.parametrize("backend", ["memory", "redis"])
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(case=cases())
def test_inline_and_fan_out_end_the_same(case: dict[str, Any], backend: str,
                                         request: pytest.FixtureRequest) -> None:
    run_on(make_storage(backend, request), _check, case)
