"""The repair routes of the HTTP API (api.md §15): `POST /api/runs/{id}/retry-step` and
`/skip-step` on a held run, `/rewind` on a run whose work is in effect, `/pause` and
`/resume`, and
`GET /api/runs/{id}/steps/{step}/schema`, the JSON Schema of a step's return type (what
`skip-step`'s `result` must fit; the dashboard's form is generated from it)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request

from reactorflow import config, pydantic_types, records
from reactorflow.definition import registry
from reactorflow.definition.graph import plan_for
from reactorflow.definition.reactor import Reactor
from reactorflow.errors import ReactorNotDeclared, RunNotFound
from reactorflow.jsonforms import run_form
from reactorflow.runtime.ops import lookup
from reactorflow.runtime.ops.payloads import step_key
from reactorflow.snapshot import Run
from reactorflow.web.api import body_of
from reactorflow.web.responses import JSON, BadRequest, NoSuchStep

StepLabel = str | tuple[str, ...]


def step_label(body: dict[str, Any], name: str = "step") -> StepLabel:
    """Field `name` of a request body: a step's name, or its path as a list of names.

    Raises:
        BadRequest: the field is missing or neither (naming the field).
    """
    value = body.get(name)
    if isinstance(value, list) and value and all(isinstance(p, str) and p for p in value):
        return tuple(value)
    if isinstance(value, str) and value:
        return value
    raise BadRequest(f'give "{name}": a step\'s name, or its path as a list of names')


def repairing(operation: str) -> Callable[[Request], Awaitable[JSON]]:
    """The handler of `POST /api/runs/{id}/<operation>` for `retry-step` (body `{"step"}`),
    `skip-step` (body `{"step", "result"}`), `rewind` (body `{"to", "inputs"}`, `inputs`
    optional), `pause` (body `{"reason"}`, optional) and `resume`: answers with the run as
    the operation left it."""

    async def handler(request: Request) -> JSON:
        run_id = request.path_params["run_id"]
        body = await body_of(request)  # the body is checked before the run is looked up
        if operation in ("pause", "resume"):
            reactor = await lookup.declared_reactor(run_id)
            if operation == "resume":
                return JSON(run_form(await reactor.resume(run_id)))
            reason = body.get("reason", "")
            if not isinstance(reason, str):
                raise BadRequest('"reason" must be a string')
            return JSON(run_form(await reactor.pause(run_id, reason=reason)))
        if operation == "rewind":
            to, inputs = _rewound_to(body), _changed(body)
            reactor = await lookup.declared_reactor(run_id)
            return JSON(run_form(await reactor.rewind(run_id, to=to, inputs=inputs)))
        step = step_label(body)
        if operation == "skip-step" and "result" not in body:
            raise BadRequest('give "result": the value the step would have returned (see '
                             f"GET /api/runs/{run_id}/steps/{step_key(step)}/schema)")
        reactor = await lookup.declared_reactor(run_id)
        run: Run = (await reactor.retry_step(run_id, step) if operation == "retry-step"
                    else await reactor.skip_step(run_id, step, result=body["result"]))
        return JSON(run_form(run))

    return handler


def _rewound_to(body: dict[str, Any]) -> str:
    to = body.get("to")
    if not isinstance(to, str) or not to:
        raise BadRequest('give "to": the name of the step to go back to')
    return to


def _changed(body: dict[str, Any]) -> dict[str, Any] | None:
    inputs = body.get("inputs")
    if inputs is not None and not isinstance(inputs, dict):
        raise BadRequest('"inputs" must be an object of the changed input fields (or null)')
    return inputs


REPAIRS = ("retry-step", "skip-step", "rewind", "pause", "resume")


async def run_reactor(run_id: str) -> Reactor:
    """The reactor that would execute run `run_id` here: its own version when this process
    declares it, else the newest (which migrates the run first).

    Raises:
        RunNotFound: no such run.
        ReactorNotDeclared: no version of the run's reactor is declared in this process.
    """
    head = await config.current_storage().load_head(run_id)
    if head is None:
        raise RunNotFound(run_id)
    reactor = (registry.lookup(head.reactor, records.meta_version(head.meta))
               or registry.lookup(head.reactor))
    if reactor is None:
        raise ReactorNotDeclared(run_id, head.reactor)
    return reactor


async def step_schema(request: Request) -> JSON:
    """`{"run_id", "step", "schema"}`: the JSON Schema of the return type of step `{step}` (a
    nested step by its key, `outer.inner`) of run `{run_id}`, as its reactor declares it (`{}`,
    any JSON, for a type JSON Schema cannot describe)."""
    run_id, key = request.path_params["run_id"], request.path_params["step"]
    reactor = await run_reactor(run_id)
    node = plan_for(reactor).nodes.get(key)
    if node is None:
        raise NoSuchStep(run_id, key, reactor.name)
    try:
        schema = pydantic_types.json_schema(node.result_type)
    except TypeError:  # a type with no JSON Schema: any JSON, checked by skip-step itself
        schema = {}
    return JSON({"run_id": run_id, "step": key, "schema": schema})
