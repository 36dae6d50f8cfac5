"""`run.version` on the command line (api.md §14): `runs list` has a VERSION column, `runs show`
says the version and what each migration did, and both `--json` forms carry `version`; a run
whose meta has no version field (made before versions) is version 1. Read without --app: the
version is stored with the run."""

from __future__ import annotations

import json

import pytest

from tests.helpers import unique
from tests.operate.conftest import Shared, cli
from tests.versions.flows import migrated_run

pytestmark = pytest.mark.slow


async def test_runs_list_has_a_version_column(shared: Shared) -> None:
    deployed = await migrated_run(unique("cli.ver"))
    listed = cli(shared, "runs", "list")
    assert listed.code == 0, listed.err
    header, *rows = listed.out.splitlines()
    assert header.split()[:4] == ["RUN", "REACTOR", "VERSION", "STATUS"]
    at = header.index("VERSION")
    versions = {row.split()[0]: row[at:].split()[0] for row in rows}
    assert versions == {deployed.v2_run: "2", deployed.migrated: "2", deployed.v1_run: "1"}
    page = json.loads(cli(shared, "runs", "list", "--json").out)
    assert {r["id"]: r["version"] for r in page["runs"]} == {
        deployed.v2_run: 2, deployed.migrated: 2, deployed.v1_run: 1}


async def test_runs_show_says_the_version_and_the_migration(shared: Shared) -> None:
    deployed = await migrated_run(unique("cli.ver"))
    shown = cli(shared, "runs", "show", deployed.migrated)
    assert shown.code == 0, shown.err
    facts = {line.split()[0]: line.split(None, 1)[1] for line in shown.out.splitlines()
             if line and not line.startswith(" ")}
    assert facts["version"] == "2"
    assert facts["migrated"].startswith("1 -> 2: completed fraud_check (at ")
    old = cli(shared, "runs", "show", deployed.v1_run)
    lines = old.out.splitlines()
    assert next(line for line in lines if line.startswith("version ")).split() == [
        "version", "1"]
    assert not any(line.startswith("migrated ") for line in lines)
    assert json.loads(cli(shared, "runs", "show", deployed.migrated, "--json").out)[
        "version"] == 2
    assert json.loads(cli(shared, "runs", "show", deployed.v1_run, "--json").out)[
        "version"] == 1


def test_graph_prints_the_graph_of_a_declared_version(shared: Shared) -> None:
    app = ("--app", "tests.versions.deployed")
    newest = cli(shared, "graph", "cli.ver.checkout", *app)
    assert newest.code == 0, newest.err
    assert "fraud_check" in newest.out and "charge" in newest.out
    first = cli(shared, "graph", "cli.ver.checkout", "--version", "1", *app)
    assert first.code == 0, first.err
    assert "bill" in first.out and "fraud_check" not in first.out
    missing = cli(shared, "graph", "cli.ver.checkout", "--version", "3", *app)
    assert missing.code != 0 and "Traceback" not in missing.err
    assert "no version 3" in missing.err and "version(s) 1, 2" in missing.err
    bad = cli(shared, "graph", "cli.ver.checkout", "--version", "0", *app)
    assert bad.code == 2 and "--version" in bad.err
