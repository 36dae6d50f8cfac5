"""The names of a map's element-slot maps in storage (beside the map's own slots, `<key>`):
what its element jobs share, its items, the elements started, and its rollback's
acknowledgements."""

from __future__ import annotations


def job_key(key: str) -> str:
    """The slots of what a map's element jobs share (see `fanout.ARGS` and the fields after)."""
    return f"{key}#job"


def items_key(key: str) -> str:
    """The slots of a map's items, by element index."""
    return f"{key}#items"


def starts_key(key: str) -> str:
    """The slots marking the elements of an atomic fanned-out map whose body may have run, by
    element index (written before the body starts: a job that finds its element marked and
    the map stopped runs it again instead of skipping it, see `element_job`)."""
    return f"{key}#started"


def acks_key(key: str) -> str:
    """The slots acknowledging a map's undone elements, by element index (`throws`)."""
    return f"{key}#undone"


def slot_keys(key: str) -> list[str]:
    """Every slot map of map step `key` (to refresh their retention with the run's)."""
    return [key, job_key(key), items_key(key), acks_key(key), starts_key(key)]
