"""Building a gate's key at run time, and the bucket of a period."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from typing import Any

from reactorflow.definition.gates import BoundGate, GateKind, Period
from reactorflow.errors import GateKeyError
from reactorflow.records import summary

_CALENDAR_TTL = {"hour": 2 * 3600.0, "day": 2 * 86_400.0, "week": 14 * 86_400.0,
                 "month": 62 * 86_400.0}


def render(bound: BoundGate, values: Mapping[str, Any], *, run_id: str,
           step: str | None = None) -> str:
    """The key `bound`'s template (or callable) makes of `values` (inputs or arguments).

    Raises:
        GateKeyError: the key is empty, names a missing value, or its callable failed or did
            not return a str; the message names the gate and the template.
    """
    gate = bound.gate
    template = gate.key if isinstance(gate.key, str) else getattr(gate.key, "__name__", "key")
    try:
        if isinstance(gate.key, str):
            text: Any = gate.key.format(**values)
        else:
            text = gate.key(**{name: values[name] for name in bound.names})
    except Exception as exc:
        raise GateKeyError(gate.kind.value, template, f"cannot be built: {summary(exc)}",
                           run_id=run_id, step=step) from exc
    if not isinstance(text, str):
        raise GateKeyError(gate.kind.value, template,
                           f"returned a {type(text).__name__}, not a str", run_id=run_id,
                           step=step)
    if not text:
        raise GateKeyError(gate.kind.value, template, "rendered to an empty string",
                           run_id=run_id, step=step)
    return text


def period_marker(gate: Period, key: str, now: float) -> tuple[str, float]:
    """The marker of the period `now` falls in (calendar buckets in UTC), and its TTL."""
    every = gate.every
    if isinstance(every, str):
        moment = dt.datetime.fromtimestamp(now, dt.UTC)
        formats = {"hour": "%Y-%m-%dT%H", "day": "%Y-%m-%d", "week": "%G-W%V",
                   "month": "%Y-%m"}
        return f"{key}@{moment.strftime(formats[every])}", _CALENDAR_TTL[every]
    return f"{key}@{math.floor(now / every)}", 2.0 * every


def is_place(bound: BoundGate) -> bool:
    """A gate whose holders take a place (released later): a lock or a semaphore."""
    return bound.kind in (GateKind.LOCK, GateKind.SEMAPHORE)
