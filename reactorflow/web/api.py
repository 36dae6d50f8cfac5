"""The JSON routes: runs (list, read, continue, undo, cancel, retry), reactors, schedules and
workers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import msgspec
from starlette.requests import Request

from reactorflow import clock, pydantic_types
from reactorflow.definition import registry
from reactorflow.definition.graph import Plan, join, plan_for
from reactorflow.definition.reactor import Reactor
from reactorflow.definition.specs import StepKind
from reactorflow.errors import ReactorflowError
from reactorflow.jsonforms import page_form, run_form, workers_form
from reactorflow.runtime.ops import lookup, resume, search
from reactorflow.runtime.services import heartbeats, scheduler
from reactorflow.web.responses import JSON, BadFilter, BadRequest, NoSuchReactor
from reactorflow.web.runview import run_view


def page_limit(text: str | None) -> int:
    if text is None:
        return 50
    try:
        return int(text)
    except ValueError:
        raise BadRequest(f"limit={text!r}: use a whole number from 1 to 1000") from None


FILTERS = ("reactor", "status", "since", "until", "correlation_id", "idempotency_key",
           "version", "error_type")
"""The query fields `GET /api/runs` filters by (as `rf.list_runs`)."""


def run_filter(query: Mapping[str, str]) -> search.RunFilter:
    """The filters of a run listing's query string (empty fields are absent); `since`/`until`
    are a duration back from now (`2h`) or an ISO datetime with a time zone.

    Raises:
        BadFilter: a value the listing cannot use (HTTP 400), naming the field.
    """
    given = {name: query[name] for name in FILTERS if query.get(name)}
    now = datetime.fromtimestamp(clock.now(), UTC)
    try:
        moments = {name: search.parse_moment(name, given[name], now)
                   for name in ("since", "until") if name in given}
        version = given.get("version")
        if version is not None and not version.isdigit():
            raise ReactorflowError(f"version={version!r}: give a version number (1, 2, ...)")
        return search.run_filter(
            reactor=given.get("reactor"), status=given.get("status"),
            since=moments.get("since"), until=moments.get("until"),
            correlation_id=given.get("correlation_id"),
            idempotency_key=given.get("idempotency_key"),
            version=None if version is None else int(version),
            error_type=given.get("error_type"))
    except ReactorflowError as exc:
        raise BadFilter(exc.message) from None


async def list_runs(request: Request) -> JSON:
    query = request.query_params
    wanted = run_filter(query)
    limit = page_limit(query.get("limit"))
    search.check_page(limit)
    return JSON(page_form(await search.find_runs(wanted, limit, query.get("cursor") or None)))


async def get_run(request: Request) -> JSON:
    return JSON(await run_view(await lookup.get_run(request.path_params["run_id"])))


async def body_of(request: Request) -> dict[str, Any]:
    """The request's JSON object body (`{}` when empty).

    Raises:
        BadRequest: the body is not JSON, or not an object.
    """
    raw = await request.body()
    if not raw.strip():
        return {}
    try:
        body = msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        raise BadRequest(f"the body is not JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    return body


async def _continue_request(request: Request) -> tuple[str, str | tuple[str, ...], Any]:
    """The run id, the interrupt (a name, or a path) and the payload of a continue request."""
    run_id = request.path_params["run_id"]
    body = await body_of(request)
    step = body.get("step")
    if isinstance(step, list) and step and all(isinstance(p, str) for p in step):
        label: str | tuple[str, ...] = tuple(step)
    elif isinstance(step, str) and step:
        label = step
    else:
        raise BadRequest('give "step": an interrupt\'s name, or its path as a list of names')
    if "payload" not in body:
        raise BadRequest('give "payload": the value the interrupt waits for')
    return run_id, label, body["payload"]


async def continue_run(request: Request) -> JSON:
    """Deliver the payload: an invalid one counts one of the interrupt's attempts."""
    run_id, label, payload = await _continue_request(request)
    reactor = await lookup.declared_reactor(run_id)
    return JSON(run_form(await reactor.continue_(run_id, step=label, payload=payload)))


async def check_continue(request: Request) -> JSON:
    """What `continue` would refuse, refused the same way, with nothing written and no attempt
    counted (the dashboard's form asks this first): `{"ok": true, "payload": ...}` (the payload
    as the interrupt's schema reads it) when `continue` would accept it now."""
    run_id, label, payload = await _continue_request(request)
    reactor = await lookup.declared_reactor(run_id)
    checked = await resume.check_continue(reactor, run_id, step=label, payload=payload)
    return JSON({"ok": True, "run_id": run_id, "step": label,
                 "payload": pydantic_types.to_builtins(checked)})


STEERING = ("undo", "cancel", "retry")


def steering(action: str) -> Callable[[Request], Awaitable[JSON]]:
    """The handler of `POST /api/runs/{id}/<action>` for undo, cancel (optional `reason`) and
    retry (answers with the new run)."""

    async def handler(request: Request) -> JSON:
        run_id = request.path_params["run_id"]
        body = await body_of(request)
        reactor = await lookup.declared_reactor(run_id)
        if action == "cancel":
            reason = body.get("reason", "")
            if not isinstance(reason, str):
                raise BadRequest('"reason" must be a string')
            return JSON(run_form(await reactor.cancel(run_id, reason=reason)))
        operation = reactor.undo if action == "undo" else reactor.retry
        return JSON(run_form(await operation(run_id)))

    return handler


def schema_or_none(tp: Any) -> dict[str, Any] | None:
    """The JSON Schema of `tp`, or None where JSON Schema cannot describe it (or its annotations
    can no longer be resolved): one such type leaves its form undrawn, never the listing failing
    (the server still checks what is sent)."""
    try:
        return pydantic_types.json_schema(tp)
    except TypeError:
        return None


def inputs_schema(reactor: Reactor) -> dict[str, Any] | None:
    """The JSON Schema of a reactor's inputs type (what a rewind's changed inputs must fit; the
    dashboard checks them against it before sending), or None: no inputs type, or one JSON
    Schema cannot describe (the server still checks)."""
    return None if reactor.inputs is None else schema_or_none(reactor.inputs)


def reactor_form(reactor: Reactor) -> dict[str, Any]:
    """A reactor's graph (steps with kind and dependencies), its interrupts' JSON Schemas and
    its inputs' (`inputs`, or null), of its version (`version`), with every version of its name
    this process declares (`versions`, lowest first)."""
    identity = {"name": reactor.name, "version": reactor.version,
                "versions": registry.versions(reactor.name), "inputs": inputs_schema(reactor)}
    try:
        plan: Plan | None = plan_for(reactor)
    except ReactorflowError as exc:
        return {**identity, "error": str(exc), "steps": [], "interrupts": {}, "mermaid": ""}
    assert plan is not None
    steps = [{"key": key, "kind": node.kind.value, "deps": list(node.deps),
              "level": node.level} for key, node in plan.nodes.items()]
    steps += _element_steps(plan, "")
    interrupts = {key: schema_or_none(node.spec.interrupt.payload_type)
                  for key, node in plan.nodes.items()
                  if node.kind is StepKind.INTERRUPT and node.spec.interrupt is not None}
    return {**identity, "steps": steps, "interrupts": interrupts,
            "mermaid": reactor.to_mermaid()}


def _element_steps(plan: Plan, outer: str) -> list[dict[str, Any]]:
    """The steps of each map's element reactor, under the map (`<map>.<step>`, level the map),
    as the run's graph shows them: run once per element, they have no record of their own in
    the run (`element_of` names the map whose status they take)."""
    found: list[dict[str, Any]] = []
    for map_key, child in plan.elements.items():
        under = join(outer, map_key)
        for key, node in child.nodes.items():
            found.append({"key": join(under, key), "kind": node.kind.value,
                          "deps": [join(under, dep) for dep in node.deps],
                          "level": join(under, node.level) if node.level else under,
                          "element_of": under})
        found += _element_steps(child, under)
    return found


async def list_reactors(request: Request) -> JSON:
    """Every reactor declared in this process, each with the graph of its newest version (the
    one that starts runs) and the versions declared (`GET /api/reactors/{name}?version=N` gives
    another version's graph)."""
    found = [registry.lookup(name) for name in registry.names()]
    return JSON({"reactors": [reactor_form(r) for r in found if r is not None]})


def version_wanted(text: str | None) -> int | None:
    """The `version` query parameter: a whole number >= 1, or absent (None: the newest)."""
    if text is None or text == "":
        return None
    if not text.isdigit() or int(text) < 1:
        raise BadRequest(f"version={text!r}: use a whole number >= 1 (versions count up "
                         "from 1), or leave it out for the newest")
    return int(text)


async def get_reactor(request: Request) -> JSON:
    """One reactor's graph, of `?version=N` (default: the newest declared)."""
    name = request.path_params["name"]
    version = version_wanted(request.query_params.get("version"))
    reactor = registry.lookup(name, version)
    if reactor is None:
        raise NoSuchReactor(name, version, registry.versions(name))
    return JSON(reactor_form(reactor))


async def list_schedules(request: Request) -> JSON:
    """Every declared schedule: next fire time, paused, last run, last error."""
    return JSON({"schedules": await scheduler.listing()})


def schedule_toggle(paused: bool) -> Callable[[Request], Awaitable[JSON]]:
    """Pause (or resume) the schedule `{target}` (`REACTOR` or `REACTOR:NAME`)."""

    async def handler(request: Request) -> JSON:
        entry = await scheduler.set_paused(request.path_params["target"], paused)
        listed = await scheduler.listing()
        return JSON(next(row for row in listed if row["schedule"] == entry.key))

    return handler


async def list_workers(request: Request) -> JSON:
    """The live worker processes (`rf.list_workers()`): `{"workers": [...]}`."""
    return JSON(workers_form(await heartbeats.list_workers()))
