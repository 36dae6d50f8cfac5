"""An app module that declares versions 1 and 2 of `cli.ver.checkout` side by side, as a
process does during a deploy (the CLI tests load it with --app)."""

from __future__ import annotations

from tests.versions.flows import version_1, version_2

NAME = "cli.ver.checkout"
checkout_v1 = version_1(NAME)
checkout = version_2(NAME, migration=False)
