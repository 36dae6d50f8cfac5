"""A key rotation's compare-and-set of a run's records in `MemoryStorage` (the contract:
`storage/contract/resealing.py`).

Mixed into `MemoryStorage`: the method runs under its one mutex, so it is atomic.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

from reactorflow import clock
from reactorflow.storage.contract.resealing import Reseal, Swap


class MemoryResealing:
    """`reseal_run` in memory."""

    _mutex: threading.Lock
    _live: Callable[[str, float], Any]

    async def reseal_run(self, run_id: str, reseal: Reseal) -> bool:
        with self._mutex:
            run = self._live(run_id, clock.monotonic())
            if run is None:
                return False
            head = {"meta": run.meta, "state": run.state}
            tables: list[tuple[Mapping[Any, bytes], Mapping[Any, Swap]]] = [
                (head, reseal.head), (run.steps, reseal.steps), (run.claims, reseal.claims),
                *((run.maps.get(key, {}), swaps) for key, swaps in reseal.elements.items())]
            if not all(_holds(stored, swaps) for stored, swaps in tables):
                return False
            for name, (_, new) in reseal.head.items():
                setattr(run, name, new)
            _swap(run.steps, reseal.steps)
            _swap(run.claims, reseal.claims)
            for key, swaps in reseal.elements.items():
                _swap(run.maps[key], swaps)
            history = run.history
            for old, new in reseal.events:
                for index, event in enumerate(history):
                    if event == old:
                        history[index] = new
                        break
            return True


def _holds(stored: Mapping[Any, bytes], swaps: Mapping[Any, Swap]) -> bool:
    return all(stored.get(name) == old for name, (old, _) in swaps.items())


def _swap(stored: MutableMapping[Any, bytes], swaps: Mapping[Any, Swap]) -> None:
    for name, (_, new) in swaps.items():
        stored[name] = new
