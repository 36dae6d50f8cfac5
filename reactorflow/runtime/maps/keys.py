"""The names of a map's element-slot maps in storage (beside the map's own slots, `<key>`):
what its element jobs share, its items, and its rollback's acknowledgements."""

from __future__ import annotations


def job_key(key: str) -> str:
    """The slots of what a map's element jobs share (see `fanout.ARGS` and the fields after)."""
    return f"{key}#job"


def items_key(key: str) -> str:
    """The slots of a map's items, by element index."""
    return f"{key}#items"


def acks_key(key: str) -> str:
    """The slots acknowledging a map's undone elements, by element index (`throws`)."""
    return f"{key}#undone"


def slot_keys(key: str) -> list[str]:
    """Every slot map of map step `key` (to refresh their retention with the run's)."""
    return [key, job_key(key), items_key(key), acks_key(key)]
