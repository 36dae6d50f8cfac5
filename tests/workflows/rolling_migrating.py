"""Version 2 of `tests.rolling` (tests/workflows/rolling_v2.py) with a migration from version
1: the new code of a deploy that no longer ships version 1's module. A version-1 run's `fetch`
becomes version 2's `load` (both `str`); its pending `pack` is not in version 2."""

from __future__ import annotations

import reactorflow as rf
from tests.workflows.rolling_v2 import flow


@flow.migrate(from_version=1)
def from_v1(run: rf.Migration) -> None:
    if "fetch" in run.steps:
        run.rename("fetch", "load")
