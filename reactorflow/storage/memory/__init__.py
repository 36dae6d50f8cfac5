"""`MemoryStorage`, the in-process backend: `storage.py` assembles it from its parts (gates,
maps, schedules), which share the run and lock records of `records.py`."""
