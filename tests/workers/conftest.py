"""Fixtures of the worker tests: a note file and a gate directory for the test workflows."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.workflows.background import GATE_ENV, LOG_ENV, notes


@dataclass
class Lane:
    log: Path
    gates: Path

    def notes(self) -> list[str]:
        return notes(self.log)

    def open_gate(self, name: str) -> None:
        (self.gates / name).touch()


@pytest.fixture
def lane(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Lane:
    log = tmp_path / "notes.log"
    gates = tmp_path / "gates"
    gates.mkdir()
    monkeypatch.setenv(LOG_ENV, str(log))
    monkeypatch.setenv(GATE_ENV, str(gates))
    return Lane(log, gates)
