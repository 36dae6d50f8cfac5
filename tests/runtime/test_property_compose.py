"""Property test over random sagas with composed children (with and without inputs), random
failures, pauses inside children (continued) and aborts inside children (then undone), on both
storage backends, every step with undo and compensate handlers.

The invariants, whatever the shape:
* a run with no failure and no abort completes with the value the arithmetic predicts, and
  nothing is undone or compensated;
* otherwise every step that completed is undone exactly once and every step that started but
  did not complete (it failed, or the abort cut it off) is compensated exactly once, nothing
  else is; at each level (the root, each child) undo runs in reverse completion order; step
  statuses say so; after a failure nothing new starts.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import reactorflow as rf
from tests.conftest import make_storage
from tests.helpers import run_on, unique

PAYLOAD = 5
"""What every interrupt is continued with (its value)."""


class ChildIn(msgspec.Struct):
    x: int


@dataclass
class ChildShape:
    deps: list[list[int]]
    pause: int | None  # the child step that is an interrupt instead


@dataclass
class Node:
    deps: list[int]
    child: ChildShape | None = None  # a composed step when set


@dataclass
class Saga:
    nodes: list[Node]
    fails: set[str]
    hang: str | None  # the child step during which the caller is cancelled (an abort)
    yields: dict[str, int]

    def labels(self) -> list[str]:
        out: list[str] = []
        for i, node in enumerate(self.nodes):
            if node.child is None:
                out.append(f"s{i}")
            else:
                out.extend(f"s{i}.c{j}" for j in range(len(node.child.deps))
                           if j != node.child.pause)
        return out


@st.composite
def sagas(draw: st.DrawFn) -> Saga:
    size = draw(st.integers(1, 5))
    nodes = []
    for i in range(size):
        deps = sorted(draw(st.sets(st.integers(0, i - 1), max_size=2))) if i else []
        child = None
        if draw(st.booleans()):
            csize = draw(st.integers(1, 3))
            cdeps = [sorted(draw(st.sets(st.integers(0, j - 1), max_size=2))) if j else []
                     for j in range(csize)]
            pause = draw(st.none() | st.integers(0, csize - 1))
            child = ChildShape(cdeps, pause)
        nodes.append(Node(deps, child))
    saga = Saga(nodes, set(), None, {})
    labels = saga.labels()
    child_labels = [label for label in labels if "." in label]
    saga.fails = draw(st.sets(st.sampled_from(labels), max_size=2)) if labels else set()
    saga.hang = draw(st.none() | st.sampled_from(child_labels)) if child_labels else None
    saga.yields = {label: draw(st.integers(0, 3)) for label in labels}
    return saga


def _function(name: str, params: list[tuple[str, str]], returns: str,
              body: Callable[..., Awaitable[Any]], namespace: dict[str, Any]) -> Any:
    """`async def name(p: T, ...) -> R: return await body({"p": p, ...})`."""
    args = ", ".join(f"{p}: {t}" for p, t in params)
    call = "{" + ", ".join(f"{p!r}: {p}" for p, _ in params) + "}"
    scope = dict(namespace, body=body)
    exec(f"async def {name}({args}) -> {returns}:\n    return await body({call})", scope)
    return scope[name]


@dataclass
class Trial:
    saga: Saga
    child_inputs: bool
    log: list[tuple[str, str]] = field(default_factory=list)
    hang_started: anyio.Event = field(default_factory=anyio.Event)

    def plain_step(self, flow: rf.Reactor, name: str, label: str, params: list[str]) -> None:
        async def body(args: dict[str, int]) -> int:
            self.log.append(("start", label))
            for _ in range(self.saga.yields[label]):
                await anyio.sleep(0)
            if label == self.saga.hang and not self.hang_started.is_set():
                self.hang_started.set()
                await anyio.sleep_forever()
            if label in self.saga.fails:
                self.log.append(("fail", label))
                raise RuntimeError(label)
            self.log.append(("done", label))
            return len(label) + sum(args.values())

        step = flow.step(_function(name, [(p, "int") for p in params], "int", body, {}))

        async def undo(result: int) -> None:
            self.log.append(("undo", label))

        async def compensate(error: Exception) -> None:
            self.log.append(("compensate", label))

        step.undo(undo)
        step.compensate(compensate)

    def child(self, label: str, shape: ChildShape) -> rf.Reactor:
        flow = rf.Reactor(unique("child"), inputs=ChildIn if self.child_inputs else None)
        for j, deps in enumerate(shape.deps):
            params = [f"c{d}" for d in deps] + (["x"] if j == 0 and self.child_inputs else [])
            if j == shape.pause:
                async def approve(args: dict[str, int]) -> int:
                    return int(args["payload"])

                flow.interrupt(_function(f"c{j}", [("payload", "int")] +
                                         [(p, "int") for p in params], "int", approve, {}))
            else:
                self.plain_step(flow, f"c{j}", f"{label}.c{j}", params)
        return flow

    def build(self) -> rf.Reactor:
        root = rf.Reactor(unique("saga"))
        for i, node in enumerate(self.saga.nodes):
            params = [f"s{d}" for d in node.deps]
            if node.child is None:
                self.plain_step(root, f"s{i}", f"s{i}", params)
                continue
            child = self.child(f"s{i}", node.child)

            async def inputs(args: dict[str, int]) -> ChildIn | None:
                return ChildIn(x=sum(args.values())) if self.child_inputs else None

            returns = "ChildIn" if self.child_inputs else "None"
            root.compose(child)(_function(f"s{i}", [(p, "int") for p in params], returns,
                                          inputs, {"ChildIn": ChildIn}))
        return root

    def expected_value(self) -> int:
        values: dict[str, int] = {}
        for i, node in enumerate(self.saga.nodes):
            args = sum(values[f"s{d}"] for d in node.deps)
            if node.child is None:
                values[f"s{i}"] = len(f"s{i}") + args
                continue
            child: dict[int, int] = {}
            for j, deps in enumerate(node.child.deps):
                own = sum(child[d] for d in deps) + (args if j == 0 and self.child_inputs else 0)
                child[j] = PAYLOAD if j == node.child.pause else len(f"s{i}.c{j}") + own
            values[f"s{i}"] = child[len(node.child.deps) - 1]
        return values[f"s{len(self.saga.nodes) - 1}"]


async def _until_settled_or_hung(trial: Trial, call: Callable[[], Awaitable[rf.Run]]
                                 ) -> rf.Run | None:
    """Run `call`; if the hanging step starts meanwhile, cancel the caller (the run is
    aborted) and return None."""
    result: list[rf.Run] = []
    async with anyio.create_task_group() as tg:
        async def go() -> None:
            result.append(await call())
            tg.cancel_scope.cancel()

        tg.start_soon(go)
        await trial.hang_started.wait()
        tg.cancel_scope.cancel()
    return result[0] if result else None


async def _drive(trial: Trial, flow: rf.Reactor) -> tuple[rf.Run, rf.Run | None]:
    """Run the saga, continue every pause; on a hang, abort and undo.
    Returns the final run and, after an abort, the aborted run as stored before the undo."""
    run = await _until_settled_or_hung(trial, flow.run)
    for _ in range(20):
        if run is None or run.status is not rf.Status.PAUSED:
            break
        path = run.waiting_on[0]
        run_id = run.id
        run = await _until_settled_or_hung(trial, lambda r=run_id, p=path: flow.continue_(
            r, step=p, payload=PAYLOAD))
    if run is not None:
        return run, None
    (aborted,) = (await flow.list_runs(status="aborted")).runs
    before = await flow.get(aborted.id)
    undone = await flow.undo(aborted.id)
    return undone, before


def _level(label: str) -> str:
    return label.split(".", maxsplit=1)[0] if "." in label else ""


async def _check(trial: Trial) -> None:
    flow = trial.build()
    run, aborted = await _drive(trial, flow)
    log = trial.log
    kinds = [kind for kind, _ in log]
    started = [label for kind, label in log if kind == "start"]
    undone = [label for kind, label in log if kind == "undo"]
    compensated = [label for kind, label in log if kind == "compensate"]
    event("aborted" if aborted is not None else "failed" if "fail" in kinds else "completed")
    event(f"paused {sum(e.kind == 'run.paused' for e in run.history)} time(s)")

    if aborted is None and "fail" not in kinds:
        assert run.status is rf.Status.COMPLETED, (run.status, run.error)
        assert run.value == trial.expected_value()
        assert undone == compensated == []
        return

    expected = rf.Status.CANCELLED if aborted is not None else rf.Status.FAILED
    assert run.status is expected, (run.status, run.error)
    # completed = stored as completed (a body that returned while the abort cut its checkpoint
    # off did not complete), in the order the run's history recorded them
    plain = set(trial.saga.labels())
    if aborted is not None:
        plain = {label for label in plain if aborted.steps[label].status == "completed"}
    done = [e.step for e in run.history if e.kind == "step.completed" and e.step in plain]
    assert sorted(undone) == sorted(done), "not every completed step was undone exactly once"
    cut_off = sorted(set(started) - set(done))
    assert sorted(compensated) == cut_off, "compensated steps are not the ones that failed"
    for level in {_level(label) for label in done}:
        mine = [label for label in done if _level(label) == level]
        assert [u for u in undone if _level(u) == level] == mine[::-1], \
            f"undo at level {level or 'root'!r} is not reverse completion order"
    for label in done:
        assert run.steps[label].status == "undone", label
    for label in cut_off:
        assert run.steps[label].status == "compensated", label
    if aborted is None:
        first_failure = kinds.index("fail")
        assert all(i < first_failure for i, kind in enumerate(kinds) if kind == "start"), \
            "a step started after a failure was seen"


@pytest.mark.parametrize("child_inputs", [True, False], ids=["child-inputs", "no-child-inputs"])
@pytest.mark.parametrize("backend", ["memory", "redis"])
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(saga=sagas())
def test_random_composed_sagas_keep_the_saga_invariants(
        saga: Saga, backend: str, child_inputs: bool, request: pytest.FixtureRequest) -> None:
    run_on(make_storage(backend, request), _check, Trial(saga, child_inputs))
