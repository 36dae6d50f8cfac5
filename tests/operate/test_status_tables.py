"""Every run status is in every table an operator meets: the CLI's `runs list --status`
choices and its colours, the dashboard's status filter and badge colours, and the refusal
advice of the repair operations (a status added to `rf.Status` and forgotten in one of them is
a test failure, not an operator's blank)."""

from __future__ import annotations

import re
from importlib.resources import files

import reactorflow as rf
from reactorflow.cli.output import STATUS_COLOURS
from reactorflow.cli.runs import STATUSES
from reactorflow.errors.runs import refusal_advice
from reactorflow.runtime.ops.rewind import REWINDABLE

STATIC = files("reactorflow.web") / "static"
RUN_STATUSES = {status.value for status in rf.Status}
STEP_STATUSES = {status.value for status in rf.StepStatus}
DEFAULT_ADVICE = refusal_advice("no such operation", "no such status")


def test_the_cli_lists_and_colours_every_status() -> None:
    assert set(STATUSES) == RUN_STATUSES
    assert set(STATUS_COLOURS) >= RUN_STATUSES | STEP_STATUSES


def test_the_dashboard_filters_by_and_colours_every_status() -> None:
    page = (STATIC / "index.html").read_text(encoding="utf-8")
    select = page[page.index('<select id="f-status">'):]
    select = select[:select.index("</select>")]
    assert set(re.findall(r"<option>(\w+)</option>", select)) == RUN_STATUSES
    css = (STATIC / "dashboard.css").read_text(encoding="utf-8")
    coloured = set(re.findall(r"\.s-(\w+)", css.split("svg", 1)[0]))  # the badges
    assert coloured >= RUN_STATUSES | STEP_STATUSES


def test_every_refusal_of_a_repair_says_what_the_status_allows() -> None:
    for operation in ("retry_step", "skip_step"):
        for status in RUN_STATUSES - {"held"}:
            advice = refusal_advice(operation, status)
            assert advice != DEFAULT_ADVICE, (operation, status)
            assert "held" in advice, (operation, status)
    for status in RUN_STATUSES - set(REWINDABLE):
        assert refusal_advice("rewind", status) != DEFAULT_ADVICE, status
    for operation in ("retry", "continue"):  # refused on a held run: they point to the repairs
        advice = refusal_advice(operation, "held")
        assert "retry_step(run_id, step)" in advice and "undo(run_id)" in advice
