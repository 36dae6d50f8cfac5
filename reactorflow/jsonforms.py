"""The JSON forms of runs shared by the CLI (`--json`) and the HTTP API.

A run becomes a JSON object with the keys of `rf.Run` (history entries as objects with the keys
of `rf.Event`); user values (inputs, results) go through `msgspec.to_builtins`, so any type
reactorflow can store has a JSON form (datetimes as ISO strings, bytes as base64).
"""

from __future__ import annotations

from typing import Any

import msgspec

from reactorflow import pydantic_types
from reactorflow.records import Erasure, Event, WorkerInfo
from reactorflow.snapshot import Run, RunPage, RunSummary

_encoder = msgspec.json.Encoder()


def event_form(event: Event) -> dict[str, Any]:
    return {"at": event.at, "kind": event.kind, "step": event.step, "attempt": event.attempt,
            "detail": event.detail, "actor": event.actor}


def run_form(run: Run) -> dict[str, Any]:
    """`run` as a JSON-ready dict with the keys of `rf.Run`."""
    data: dict[str, Any] = pydantic_types.to_builtins(run)
    data["history"] = [event_form(e) for e in run.history]
    return data


def summary_form(summary: RunSummary) -> dict[str, Any]:
    form: dict[str, Any] = pydantic_types.to_builtins(summary)
    return form


def page_form(page: RunPage) -> dict[str, Any]:
    """A page as JSON: its runs, the next cursor, and `unreadable`, the ids of runs left out
    because their record cannot be read (the CLI's and the API's warning)."""
    return {"runs": [summary_form(r) for r in page.runs], "next_cursor": page.next_cursor,
            "unreadable": list(page.unreadable)}


def workers_form(workers: list[WorkerInfo]) -> dict[str, Any]:
    """The live workers as JSON: `{"workers": [...]}`, each with the keys of `rf.WorkerInfo`
    (times as ISO strings)."""
    return {"workers": [pydantic_types.to_builtins(w) for w in workers]}


def erasure_form(erasure: Erasure) -> dict[str, Any]:
    """An erasure's audit record as JSON: the keys of `rf.Erasure` (its time an ISO string)."""
    form: dict[str, Any] = pydantic_types.to_builtins(erasure)
    return form


def dumps(value: Any) -> bytes:
    """JSON bytes (msgspec)."""
    return _encoder.encode(value)
