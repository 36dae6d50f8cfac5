"""`DriveMode`: how one execution drives its run, fixed for the whole drive.

The caller that owns the run chooses it and passes it to `driver.drive` (or to the execution it
builds, for an execution that is not driven: an async unit's in its worker, an element's);
nothing in the engine changes it afterwards. The engine reads it as `ex.mode`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class DriveMode:
    """How an execution waits: for async units, busy gates and a fanned-out map's undo throws.

    The defaults are those of a caller's process (`Reactor.run`, `continue_`, ...): it waits
    for everything itself.
    """

    parks: bool = False
    """In a worker: a step waiting for an async unit (or a retry due later) parks the run
    instead of holding it (`driver.park`)."""
    never_waits: bool = False
    """An async unit in its worker: a busy gate snoozes the unit (its job is put back)."""
    waits_for_throws: bool = False
    """A manual undo, an interrupt's expiry, an in-process recovery: a fanned-out map's undo
    throws are waited for here; every other execution parks the run at them."""
    maps_inline: bool = False
    """An element's child: its maps run inline, `fan_out=True` too."""

    @property
    def in_worker(self) -> bool:
        """Runs in a worker: a busy gate snoozes (the job is put back), never waits."""
        return self.parks or self.never_waits


CALLER = DriveMode()
"""A caller's process: a fresh run, a resume, a retry."""
WORKER = DriveMode(parks=True)
"""A worker's job of the run."""
UNIT = DriveMode(never_waits=True)
"""An async unit's job, in its worker."""
WAITS_FOR_THROWS = DriveMode(waits_for_throws=True)
"""A manual undo, an interrupt's expiry, an in-process recovery."""
ELEMENT = DriveMode(maps_inline=True)
"""An element's child reactor (`maps.element_run`)."""
