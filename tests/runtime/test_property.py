"""Property test over random DAGs with random failures (the saga's invariants), on both
backends; `test_property_compose.py` extends it to composed children, pauses and aborts."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import reactorflow as rf
from tests.conftest import make_storage
from tests.helpers import run_on, unique


@st.composite
def dags(draw: st.DrawFn) -> dict[str, Any]:
    size = draw(st.integers(min_value=1, max_value=10))
    deps = [sorted(draw(st.sets(st.integers(0, i - 1), max_size=3))) if i else []
            for i in range(size)]
    fails = draw(st.sets(st.integers(0, size - 1), max_size=2))
    yields = draw(st.lists(st.integers(0, 4), min_size=size, max_size=size))
    limit = draw(st.sampled_from([None, 1, 2, 3]))
    return {"size": size, "deps": deps, "fails": fails, "yields": yields, "limit": limit}


def _step_function(name: str, params: list[str],
                   body: Callable[[str, dict[str, int]], Awaitable[int]]) -> Any:
    args = ", ".join(f"{p}: int" for p in params)
    call = "{" + ", ".join(f"{p!r}: {p}" for p in params) + "}"
    namespace: dict[str, Any] = {"body": body}
    exec(f"async def {name}({args}) -> int:\n    return await body({name!r}, {call})", namespace)
    return namespace[name]


def _expected(deps: list[list[int]]) -> list[int]:
    values: list[int] = []
    for i, ds in enumerate(deps):
        values.append(i + 1 + sum(values[d] for d in ds))
    return values


@pytest.mark.parametrize("backend", ["memory", "redis"])
@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(dag=dags())
def test_random_dags_keep_the_saga_invariants(dag: dict[str, Any], backend: str,
                                              request: pytest.FixtureRequest) -> None:
    run_on(make_storage(backend, request), _check, dag)


async def _check(dag: dict[str, Any]) -> None:
    size, deps, fails, yields = dag["size"], dag["deps"], dag["fails"], dag["yields"]
    log: list[tuple[str, str]] = []
    flow = rf.Reactor(unique("prop"), max_concurrency=dag["limit"])

    async def body(name: str, args: dict[str, int]) -> int:
        index = int(name[1:])
        log.append(("start", name))
        for _ in range(yields[index]):
            await anyio.sleep(0)
        if index in fails:
            log.append(("fail", name))
            raise RuntimeError(name)
        log.append(("done", name))
        return index + 1 + sum(args.values())

    for i in range(size):
        name = f"s{i}"
        step = flow.step(_step_function(name, [f"s{d}" for d in deps[i]], body))

        async def undo(result: int, _name: str = name) -> None:
            log.append(("undo", _name))

        step.undo(undo)

    run = await flow.run()
    events = [kind for kind, _ in log]
    if not fails or "fail" not in events:
        assert run.status is rf.Status.COMPLETED
        expected = _expected(deps)
        assert run.value == expected[-1]
        assert all(state.status == "completed" for state in run.steps.values())
        assert "undo" not in events
        return

    assert run.status is rf.Status.FAILED
    first_failure = events.index("fail")
    starts = [i for i, kind in enumerate(events) if kind == "start"]
    assert all(i < first_failure for i in starts), "a step started after a failure was seen"
    completed = [name for kind, name in log if kind == "done"]
    undone = [name for kind, name in log if kind == "undo"]
    assert undone == list(reversed(completed)), "undo is not reverse completion order"
    assert len(set(undone)) == len(undone)
    for name in completed:
        assert run.steps[name].status == "undone"
