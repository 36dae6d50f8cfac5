"""The records `MemoryStorage` keeps: a run (`_Run`) and a liveness lock (`_Lock`), shared by the
backend's modules (`storage.py` and its parts, e.g. the map element slots kept on the run)."""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from reactorflow.storage.contract.values import RunHead

LIVE = math.inf
"""The expiry of a run that has not ended (and of a correlation id's mapping): never."""


@dataclass(slots=True)
class _Run:
    run_id: str
    reactor: str
    status: str
    meta: bytes
    state: bytes
    created_at: float
    touched_at: float
    expires: float  # monotonic; LIVE until the run ends (`_set_status`)
    history: deque[bytes]
    steps: dict[str, bytes] = field(default_factory=dict)
    claims: dict[str, bytes] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)
    maps: dict[str, dict[int, bytes]] = field(default_factory=dict)  # map key -> element slots
    control: bytes | None = None
    idempotency: tuple[str, str] | None = None  # (reactor, key) of the claim it holds
    held: bool = False  # its lock was taken and not yet released (`Liveness.lapsed`)

    def head(self) -> RunHead:
        return RunHead(self.run_id, self.reactor, self.status, self.meta, self.state,
                       self.created_at, self.touched_at)


@dataclass(slots=True)
class _Lock:
    owner: str
    count: int
    expires: float
