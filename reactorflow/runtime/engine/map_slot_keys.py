"""The names of a map's element-slot maps in storage (beside the map's own slots, `<key>`):
what its element jobs share, its items, the elements started, and its rollback's
acknowledgements."""

from __future__ import annotations

ARGS = 0
"""The field of a map's shared job data (`job_key`) that holds its `ElementArgs`."""


def element_lock(run_id: str, key: str, index: int) -> str:
    """The lock of one element of a fanned-out map (`<run>:<map>:<index>`, as an async unit's
    lock is named): an element job holds it while it runs, then leaves it to expire (its
    outcome guards the element from then on)."""
    return f"{run_id}:{key}:{index}"


def job_key(key: str) -> str:
    """The slots of what a map's element jobs share (see `fanout.ARGS` and the fields after)."""
    return f"{key}#job"


def items_key(key: str) -> str:
    """The slots of a map's items, by element index."""
    return f"{key}#items"


def starts_key(key: str) -> str:
    """The slots marking the elements of a fanned-out map whose body may have run, by element
    index (marked by `start_element` as the job starts, atomically with the map's fence: a job
    that finds its element marked runs it again even once the map is closed, instead of
    skipping it; a rollback waits for every marked element without an outcome, `inflight`)."""
    return f"{key}#started"


def settled_topic(key: str) -> str:
    """The run's notification topic of a map's elements settled once the run stopped going
    forward (an owner waiting in its process for the elements in flight, `inflight`)."""
    return f"{key}#settled"


def acks_key(key: str) -> str:
    """The slots acknowledging a map's undone elements, by element index (`undo_throws`)."""
    return f"{key}#undone"


def slot_keys(key: str) -> list[str]:
    """Every slot map of map step `key` (to refresh their retention with the run's)."""
    return [key, job_key(key), items_key(key), acks_key(key), starts_key(key)]
