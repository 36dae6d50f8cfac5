"""What the two versions of the reactor `tests.rolling` share (tests/workflows/rolling_v1.py,
rolling_v2.py; the rolling-deploy tests in tests/workers/test_versions_workers.py): the
reactor's name, the note each step makes, and, in a worker subprocess, a note of every run job
the worker takes (its run, the version it carries and the Dramatiq retries it has used), so a
test can count a job's deliveries: the hand-backs of a job for a version the worker lacks.
"""

from __future__ import annotations

import os
from typing import Any

import dramatiq

import reactorflow as rf
from reactorflow import config
from tests.workflows import background as bg

NAME = "tests.rolling"
PATIENCE_ENV = "REACTORFLOW_TEST_VERSION_PATIENCE"
"""Set in a worker subprocess: its `version_patience` (seconds), short for a test."""
DELIVERIES_ENV = "REACTORFLOW_TEST_NOTE_DELIVERIES"
"""Set in a worker subprocess: it notes every run job it takes (`Deliveries`)."""


def step_note(version: int, step: str, ctx: rf.StepContext) -> None:
    """Note that version `version`'s step `step` ran for the run (with this process's id)."""
    bg.note(f"v{version} {step} {ctx.run_id}")


def delivery(run_id: str) -> str:
    """The start of the note of a delivery of run `run_id`'s job (`Deliveries`)."""
    return f"delivered {run_id} "


class Deliveries(dramatiq.Middleware):
    """Notes each run job this worker takes: "delivered <run> version=<v> retries=<n>"."""

    def before_process_message(self, broker: Any, message: Any) -> None:
        if message.actor_name != "reactorflow.execute_run":
            return
        version = (message.kwargs or {}).get("version", 1)
        bg.note(f"{delivery(str(message.args[0]))}version={version} "
                f"retries={message.options.get('retries', 0)}")


# a worker subprocess of the tests: its patience and the delivery notes, as its environment asks
if os.environ.get(PATIENCE_ENV):
    rf.configure(version_patience=float(os.environ[PATIENCE_ENV]))
if os.environ.get(DELIVERIES_ENV):
    config.settings().broker.add_middleware(Deliveries())
