"""What the CLI says about one step beyond its status: its error, until when it sleeps (`"sleeping
until 2026-12-04 10:00 UTC (in 2 d 3 h)"`), the gate it waits for. The one place a
step's note is phrased; the dashboard's script phrases it the same way (`stepNote` in
`reactorflow/web/static/dashboard.js`)."""

from __future__ import annotations

import math
from datetime import UTC, datetime

from reactorflow.snapshot import StepState
from reactorflow.status import StepStatus

MINUTE, HOUR, DAY = 60, 3600, 86_400


def span(seconds: float) -> str:
    """A duration in words, to its two largest units, rounded to the smaller one: `"2 d 3 h"`,
    `"3 h 5 min"`, `"4 min 10 s"`, `"42 s"` (a unit that rounds to 0 is left out: `"3 d"`).

    Args:
        seconds: How long (non-negative; a negative one is read as its size).
    """
    seconds = abs(seconds)
    if _rounded(seconds / MINUTE) >= DAY // MINUTE:  # in hours it would read 24 h or more
        days, hours = divmod(_rounded(seconds / HOUR), 24)
        return _pair(days, "d", hours, "h")
    if _rounded(seconds) >= HOUR:
        hours, minutes = divmod(_rounded(seconds / MINUTE), 60)
        return _pair(hours, "h", minutes, "min")
    if _rounded(seconds) >= MINUTE:
        minutes, rest = divmod(_rounded(seconds), 60)
        return _pair(minutes, "min", rest, "s")
    return f"{_rounded(seconds)} s"


def _rounded(value: float) -> int:
    """`value` rounded half up (as the dashboard's `Math.round`: the two read alike)."""
    return math.floor(value + 0.5)


def _pair(big: int, big_unit: str, small: int, small_unit: str) -> str:
    return f"{big} {big_unit} {small} {small_unit}" if small else f"{big} {big_unit}"


def moment_utc(at: datetime) -> str:
    """`at` in UTC as `2026-12-04 10:00 UTC` (with `:SS` when its seconds are not 0; a
    fraction of a second is not shown).

    Args:
        at: An aware datetime.
    """
    at = at.astimezone(UTC)
    shown = at.strftime("%Y-%m-%d %H:%M" if at.second == 0 else "%Y-%m-%d %H:%M:%S")
    return f"{shown} UTC"


def until(at: datetime, now: float) -> str:
    """How far `at` is from `now`: `"in 2 d 3 h"`, `"due now"`, or `"due 3 s ago"` (a deadline
    that passed and whose timer has not fired yet).

    Args:
        at: An aware datetime.
        now: Unix time now.
    """
    left = at.timestamp() - now
    if _rounded(left) == 0:
        return "due now"
    return f"in {span(left)}" if left > 0 else f"due {span(left)} ago"


def sleeping(at: datetime, now: float) -> str:
    """`"sleeping until 2026-12-04 10:00 UTC (in 2 d 3 h)"`.

    Args:
        at: The sleep's deadline (`StepState.wake_at`).
        now: Unix time now.
    """
    return f"sleeping until {moment_utc(at)} ({until(at, now)})"


def step_note(state: StepState, now: float) -> str:
    """What the steps table says about `state` beyond its status, attempts and duration: its
    error, until when it sleeps, or the gate it was put back for
    (`"waiting for lock 'account:A1'"`); "" when none applies.

    Args:
        state: The step's state.
        now: Unix time now (what "in 2 d 3 h" counts from).
    """
    notes = []
    if state.wake_at is not None and state.status is StepStatus.WAITING:
        notes.append(sleeping(state.wake_at, now))
    if state.gate is not None:
        notes.append(f"waiting for {state.gate}")
    if state.error is not None:
        notes.append(state.error)
    return "; ".join(notes)
