"""`reactorflow versions`, `deploy-check` and `runs migrate` as subprocesses against the suite's
real Redis: the runs are stored by version 1's code in this process, the commands load the
modules of a deploy (`tests.workflows.versions_v2`, or both versions), and every key of the
namespace is compared before and after a command that must write nothing."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers import closed_port
from tests.operate.conftest import ROOT, Result, Shared, cli, environment
from tests.versions.storage_image import redis_image
from tests.versions.test_inventory import CHECKOUT, RETIRED, stored_runs

pytestmark = pytest.mark.slow
V2 = ("--app", "tests.workflows.versions_v2")
BOTH = ("--app", "tests.workflows.versions_v1", *V2)


def answered(lane: Shared, answer: str, *args: str) -> Result:
    """`python -m reactorflow ARGS` with `answer` typed at its prompt."""
    proc = subprocess.run([sys.executable, "-m", "reactorflow", *args], cwd=ROOT,
                          env=environment(lane), input=answer, capture_output=True, text=True,
                          timeout=60, check=False)
    return Result(proc.returncode, proc.stdout, proc.stderr)


async def test_deploy_check_classifies_every_run_exits_1_and_writes_nothing(
        shared: Shared) -> None:
    runs = await stored_runs()
    before = await redis_image(shared.url, shared.namespace)

    checked = cli(shared, "deploy-check", *V2, "--json")
    shown = cli(shared, "deploy-check", *V2)

    assert await redis_image(shared.url, shared.namespace) == before
    assert checked.code == 1, checked.err
    verdicts = {r["id"]: r for r in json.loads(checked.out)["runs"]}
    assert set(verdicts) == {runs[k] for k in ("migrates", "review", "retired", "continues")}
    assert verdicts[runs["continues"]] == {"id": runs["continues"], "reactor": CHECKOUT,
                                           "version": 2, "verdict": "continues",
                                           "differences": []}
    assert verdicts[runs["migrates"]]["verdict"] == "migrates"
    assert verdicts[runs["review"]]["verdict"] == "stranded"
    assert any("'review'" in d for d in verdicts[runs["review"]]["differences"])
    assert verdicts[runs["retired"]]["verdict"] == "stranded"
    assert "declared by none of the modules loaded" in verdicts[runs["retired"]]["differences"][0]
    assert checked.err == ""  # no progress when stderr is not a terminal

    assert shown.code == 1, shown.err
    lines = shown.out.splitlines()
    assert lines[0].split() == ["REACTOR", "VERSION", "CONTINUES", "MIGRATES", "STRANDED"]
    assert [CHECKOUT, "1", "0", "1", "1"] in [line.split() for line in lines]
    assert [CHECKOUT, "2", "1", "0", "0"] in [line.split() for line in lines]
    assert [RETIRED, "1", "0", "0", "1"] in [line.split() for line in lines]
    assert f"{runs['review']}  {CHECKOUT}  version 1" in lines
    assert lines[-1] == "deploy-check: 2 of 4 in-flight run(s) would be stranded by this code"


async def test_deploy_check_exits_0_when_every_run_continues_or_migrates(shared: Shared) -> None:
    await stored_runs()
    checked = cli(shared, "deploy-check", *BOTH)
    assert checked.code == 0, checked.out + checked.err
    assert checked.out.splitlines()[-1] == ("deploy-check: every in-flight run (4) continues "
                                            "or migrates")


async def test_versions_marks_the_stranded_versions_and_exits_1(shared: Shared) -> None:
    await stored_runs()

    deployed = cli(shared, "versions", *V2, "--json")
    both = cli(shared, "versions", *BOTH, "--json")
    human = cli(shared, "versions", *V2)

    assert deployed.code == 1, deployed.err
    reactors = {r["reactor"]: r for r in json.loads(deployed.out)["reactors"]}
    assert reactors == {
        CHECKOUT: {"reactor": CHECKOUT, "declared": [2], "versions": [
            {"version": 1, "in_flight": 2, "stranded": True},
            {"version": 2, "in_flight": 1, "stranded": False}]},
        RETIRED: {"reactor": RETIRED, "declared": [], "versions": [
            {"version": 1, "in_flight": 1, "stranded": True}]}}
    assert both.code == 0, both.err
    assert {r["reactor"]: r["declared"] for r in json.loads(both.out)["reactors"]} == {
        CHECKOUT: [1, 2], RETIRED: [1]}
    assert human.code == 1
    rows = [line.split() for line in human.out.splitlines()]
    assert rows[0] == ["REACTOR", "DECLARED", "VERSION", "IN", "FLIGHT", "STRANDED"]
    assert [CHECKOUT, "2", "1", "2", "stranded", "(a", "migration", "to", "2", "is",
            "declared)"] in rows
    assert ["2", "1"] in rows
    assert [RETIRED, "none", "1", "1", "stranded"] in rows


async def test_runs_migrate_dry_run_confirmation_refusal_and_rerun(shared: Shared) -> None:
    runs = await stored_runs()
    migrate = ("runs", "migrate", "--reactor", CHECKOUT, "--from-version", "1", *V2)
    before = await redis_image(shared.url, shared.namespace)

    dry = cli(shared, *migrate, "--dry-run", "--json")
    declined = answered(shared, "n\n", *migrate)

    assert await redis_image(shared.url, shared.namespace) == before  # neither wrote
    assert dry.code == 1, dry.err
    planned = json.loads(dry.out)
    assert (planned["dry_run"], planned["to_version"]) == (True, 2)
    assert {r["id"]: r["verdict"] for r in planned["runs"]} == {
        runs["migrates"]: "migrates", runs["review"]: "stranded"}
    assert declined.code == 0 and "nothing was migrated" in declined.err
    assert "Migrate 2 in-flight run(s)" in declined.err

    done = cli(shared, *migrate, "--yes")
    again = cli(shared, *migrate, "--yes", "--json")

    assert done.code == 1, done.err
    assert f"{runs['migrates']}  migrated to version 2" in done.out.splitlines()
    refusal = next(line for line in done.out.splitlines() if line.startswith(runs["review"]))
    assert refusal.startswith(f"{runs['review']}  refused: run {runs['review']!r}")
    assert "'review'" in refusal
    assert done.out.splitlines()[-1] == "runs migrate: 1 migrated, 1 refused (of 2)"
    assert again.code == 1
    assert [(r["id"], r["outcome"]) for r in json.loads(again.out)["runs"]] == [
        (runs["review"], "refused")]  # the migrated run is on version 2: not listed again
    assert json.loads(cli(shared, "runs", "show", runs["migrates"], "--json").out)[
        "version"] == 2


@pytest.mark.parametrize("args", [("deploy-check", *V2), ("versions", *V2),
                                  ("runs", "migrate", "--reactor", CHECKOUT, "--from-version",
                                   "1", "--yes", *V2)],
                         ids=["deploy-check", "versions", "runs-migrate"])
def test_unreachable_storage_is_one_line_and_exit_status_2(args: tuple[str, ...]) -> None:
    url = f"redis://127.0.0.1:{closed_port()}/0"
    result = cli(None, *args, "--redis-url", url)
    assert result.code == 2, result.out + result.err
    assert result.out == ""
    assert len(result.err.splitlines()) == 1 and result.err.startswith("error: ")
    assert "Traceback" not in result.err and f"127.0.0.1:{url.split(':')[2]}" in result.err
