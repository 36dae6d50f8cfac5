"""The execution of an owned run is three objects (docs/architecture.md, "One execution"):
the `Execution` (the run's state), its `RunWriter` (every write) and a frozen `DriveMode`
(how it waits), which the caller passes to `drive` instead of setting flags on the execution.

Checked on the source of every module of the package: no code assigns how an execution waits
(the drive mode's fields, or the mode itself outside the engine's driver), and no code
outside the writer assigns what the writer owns; plus the objects themselves.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
from pathlib import Path

import pytest

import reactorflow

PACKAGE = Path(reactorflow.__file__).resolve().parent
MODE_FIELDS = {"parks", "never_waits", "waits_for_throws", "maps_inline"}
# what the writer owns, written only by the writer itself (`self.<name> = ...` in writer.py)
WRITER_STATE = {"seq", "folded", "folds", "batches", "unconfirmed", "history", "loaded_history",
                "stored_status", "hold"}
ENGINE = PACKAGE / "runtime" / "engine"


def _assignments(path: Path) -> list[tuple[int, str, str]]:
    """(line, target's owner as written, attribute) for every attribute assignment."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        for target in targets:
            for part in ast.walk(target):
                if isinstance(part, ast.Attribute):
                    found.append((part.lineno, ast.unparse(part.value), part.attr))
    return found


def _runtime_files() -> list[Path]:
    return sorted((PACKAGE / "runtime").rglob("*.py"))


def test_no_code_sets_how_an_execution_waits() -> None:
    wrong = [f"{path.relative_to(PACKAGE)}:{line}: {owner}.{attr} = ..."
             for path in _runtime_files() for line, owner, attr in _assignments(path)
             if attr in MODE_FIELDS
             or (attr == "mode" and owner != "self" and path != ENGINE / "driver.py")]
    assert not wrong, ("how an execution waits is its frozen DriveMode, passed to "
                       "drive(ex, mode) or to the execution it builds:\n" + "\n".join(wrong))


def test_only_the_writer_writes_what_it_owns() -> None:
    wrong = [f"{path.relative_to(PACKAGE)}:{line}: {owner}.{attr} = ..."
             for path in _runtime_files() for line, owner, attr in _assignments(path)
             if attr in WRITER_STATE and path != ENGINE / "writer.py"
             and not owner.endswith("writer")  # `ex.writer.hold = hold`: the owner's lock
             and owner != "self"]  # (an unrelated object's own attribute of that name)
    assert not wrong, ("the run's writes and what they own belong to its RunWriter "
                       "(runtime/engine/writer.py):\n" + "\n".join(wrong))


def test_the_drive_mode_is_frozen_and_passed_to_drive() -> None:
    from reactorflow.runtime.engine.driver import drive
    from reactorflow.runtime.engine.execution import Execution
    from reactorflow.runtime.engine.mode import CALLER, WORKER, DriveMode
    from reactorflow.runtime.engine.writer import RunWriter

    assert {f.name for f in dataclasses.fields(DriveMode)} == MODE_FIELDS
    with pytest.raises(dataclasses.FrozenInstanceError):
        WORKER.parks = False  # type: ignore[misc]
    assert list(inspect.signature(drive).parameters) == ["ex", "mode"]
    assert WORKER.in_worker and not CALLER.in_worker
    # the execution holds no flag of its own and no write of its own; the writer has slots
    assert not MODE_FIELDS & set(Execution.__slots__)
    assert not WRITER_STATE & set(Execution.__slots__)
    for name in ("checkpoint", "fold", "flush", "save_state", "next_seq"):
        assert not hasattr(Execution, name) and hasattr(RunWriter, name)
    assert RunWriter.__dictoffset__ == 0 and Execution.__dictoffset__ == 0  # (slots only)
