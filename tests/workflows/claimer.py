"""A start that dies between claiming its idempotency key and storing its run.

`python -m tests.workflows.claimer URL NAMESPACE REACTOR KEY` (PYTHONPATH = repo root) starts
a run of a one-step reactor named REACTOR with idempotency key KEY on that Redis namespace. Its
storage prints `claimed <run id>` when the run is about to be stored, then blocks there until
the process is killed: the claim (and the run's liveness lock, lock_ttl 1 s) reached Redis, the
run never does.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import anyio

import reactorflow as rf


class StallingStorage(rf.RedisStorage):
    """Redis storage whose create_run never returns (the process is killed there)."""

    async def create_run(self, run_id: str, **fields: Any) -> bool:
        print(f"claimed {run_id}", flush=True)
        await anyio.sleep_forever()
        raise AssertionError("unreachable")


async def _main(argv: Sequence[str]) -> None:
    url, namespace, reactor, key = argv
    flow = rf.Reactor(reactor)

    @flow.step
    async def only() -> int:
        return 1

    rf.configure(storage=StallingStorage.from_url(url, namespace=namespace), lock_ttl=1.0)
    await flow.run(idempotency_key=key)


if __name__ == "__main__":
    anyio.run(_main, sys.argv[1:])
