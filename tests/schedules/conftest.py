"""Schedules run on a settable clock: the scheduler's one time read, `scheduler.now`."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from reactorflow.runtime.services import scheduler
from tests.operate.conftest import shared  # noqa: F401 - the CLI tests' Redis namespace


class Clock:
    """The time the scheduler reads; tests move it forward."""

    def __init__(self, start: datetime) -> None:
        self.at = start

    def now(self) -> float:
        return self.at.timestamp()

    def advance(self, **delta: float) -> None:
        self.at += timedelta(**delta)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[Clock]:
    gc.collect()  # reactors (and schedules) of earlier tests are gone
    fake = Clock(datetime(2026, 1, 1, 0, 0, 30, tzinfo=UTC))
    monkeypatch.setattr(scheduler, "now", fake.now)
    yield fake
