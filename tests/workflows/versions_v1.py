"""Version 1 of the reactors the tests of `reactorflow versions`, `deploy-check` and `runs
migrate` store runs with (tests/operate/test_cli_versions.py, tests/versions/test_inventory.py);
`versions_v2` is the deploy that follows it.

`checkout` waits for two approvals in turn (`approve`, then `review`); version 2 checks for
fraud before `approve` and has no `review`, so its migration fits a run waiting on `approve`
and not one waiting on `review`. `retired` is a reactor version 2's modules do not declare."""

from __future__ import annotations

import reactorflow as rf
from tests.versions.flows import Approval, version_1

checkout = version_1("tests.cli-versions.checkout", review=True)

retired = rf.Reactor("tests.cli-versions.retired", version=1)


@retired.interrupt
async def hold(payload: Approval) -> bool:
    return payload.ok
