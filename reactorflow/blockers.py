"""What `rf.explain` says a run waits on: `rf.Blocker` and its closed `rf.BlockerKind`."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

import msgspec


class BlockerKind(StrEnum):
    """What holds a run back (`rf.Blocker.kind`), a closed `StrEnum`.

    `INTERRUPT` (a payload is awaited), `SLEEP` (a sleep step's deadline), `GATE` (a lock or
    semaphore held by another run), `RATE_LIMIT` (a rate-limit window is full), `ORDERED_TURN`
    (an ordered lock's turn is another run's), `QUEUED` (a dispatched run that no execution
    owns yet), `BACKOFF` (a step parked between retry attempts), `ASYNC_UNIT` (an async step
    or async reactor is out), `HELD` (a step failed under `on_failure="hold"`), `PAUSED` (an
    operator paused the run), `OWNER` (an execution holds the run's lock but the run has not
    moved for long), `ROLLING_BACK` (the run is undoing its steps).
    """

    INTERRUPT = "interrupt"
    SLEEP = "sleep"
    GATE = "gate"
    RATE_LIMIT = "rate_limit"
    ORDERED_TURN = "ordered_turn"
    QUEUED = "queued"
    BACKOFF = "backoff"
    ASYNC_UNIT = "async_unit"
    HELD = "held"
    PAUSED = "paused"
    OWNER = "owner"
    ROLLING_BACK = "rolling_back"


class Blocker(msgspec.Struct, frozen=True, omit_defaults=True):
    """One thing a run waits on, as `rf.explain` names it from what storage holds.

    Attributes:
        kind: What it is: an `rf.BlockerKind`.
        step: The step that waits (its key), or `None` for the run as a whole.
        since: Since when (an aware UTC datetime), when known.
        until: When it moves by itself (an aware UTC datetime); `None` when only an operator
            (or an event outside the run: a payload, another run's release) can move it.
        detail: One line saying what it is, naming the gate, the key, the holder or the owner.
        holder: For a `gate` or `ordered_turn` blocker, the id of the run holding the gate
            (or the turn); `None` otherwise, or when no holder is known.
        waited: For a `queued` blocker, the seconds the run has waited for a worker.
        workers: For a `queued` blocker, the live workers serving its queue (0: none);
            `None` when that is not known.
    """

    kind: BlockerKind
    step: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    detail: str = ""
    holder: str | None = None
    waited: float | None = None
    workers: int | None = None
