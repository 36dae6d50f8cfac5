"""A held version-1 run retried by code that declares only version 2 goes through its
migration first (api.md §14 and §15 together), on both backends."""

from __future__ import annotations

import reactorflow as rf
from tests.helpers import redeploy, unique


def _declare(name: str, version: int, log: list[str]) -> rf.Reactor:
    flow = rf.Reactor(name, version=version, on_failure="hold")

    @flow.step
    async def draft() -> str:
        log.append(f"v{version} draft")
        return "D1"

    @flow.step(name="charge" if version == 1 else "collect")
    async def charge(draft: str) -> str:
        log.append(f"v{version} charge")
        if version == 1:
            raise RuntimeError("the v1 charge has a bug")
        return f"paid {draft}"

    return flow


async def test_a_held_v1_run_retried_on_v2_code_is_migrated_then_retried(
        storage: rf.Storage) -> None:
    name, log = unique("held-ver"), []
    v1 = _declare(name, 1, log)
    run = await v1.run()
    assert run.status is rf.Status.HELD and run.version == 1
    redeploy(v1)  # the fix ships as version 2, which renamed the step
    v2 = _declare(name, 2, log)

    @v2.migrate(from_version=1)
    def renamed(m: rf.Migration) -> None:
        m.rename("charge", "collect")

    done = await v2.retry_step(run.id, "collect")
    assert done.status is rf.Status.COMPLETED and done.version == 2
    assert log == ["v1 draft", "v1 charge", "v2 charge"]
    assert done.steps["collect"].result == "paid D1"
    kinds = [e.kind for e in done.history]
    assert kinds.index(rf.EventKind.RUN_MIGRATED) < kinds.index(rf.EventKind.RUN_REPAIRED)
