"""Version 2 of `tests.cli-versions.checkout` (see `versions_v1`), with a migration from
version 1: a fraud check before `approve` (completed by the migration), `review` gone, and
`bill` renamed `charge`. It does not declare `tests.cli-versions.retired`."""

from __future__ import annotations

from tests.versions.flows import version_2

checkout = version_2("tests.cli-versions.checkout", rename_bill=True)
