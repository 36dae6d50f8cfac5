"""Gate orchestration: which gates a run or a step takes, in what order, for how long.

* `scope` — entering and leaving one gated scope (the places one execution holds, re-entrancy,
  the order of acquisition, what a busy gate gives back);
* `runs` — a reactor's own gates, held by its run: taken at the start, held by every execution
  that drives it, given back while it is paused, released at its final state;
* `steps` — a step's gates around its attempts, around its rollback handlers, and the deadlock
  guard of async units;
* `waiting` — waiting for a busy gate (notified by the gate's channel), and rate-limit windows;
* `keys` — building keys and period buckets.

The primitives are in the storage contract (`storage/contract/gates.py`).
"""
