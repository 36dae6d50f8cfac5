"""Every public name of the API contract is exported from the package root."""

from __future__ import annotations

import re
from pathlib import Path

import reactorflow as rf

CONTRACT = {
    "Reactor", "Input", "Result", "StepContext", "Retry", "Run", "StepState", "RunError",
    "RollbackFailure", "Status", "StepStatus", "Halt", "RecordedError", "MemoryStorage",
    "Middleware", "configure", "ReactorflowError", "DefinitionError", "InputValidationError",
    "PayloadValidationError", "RunNotFound", "AlreadyResumed", "NotPaused",
    "InterruptNotPending", "InterruptExpired", "WaitTimeout", "SerializationError",
    "StorageConnectionError", "LockTimeout", "DefinitionChanged", "Redacted", "CorruptRecord",
}


def test_contract_names_are_exported() -> None:
    missing = CONTRACT - set(rf.__all__)
    assert not missing, missing
    for name in rf.__all__:
        assert hasattr(rf, name), name


def test_every_error_derives_from_the_root() -> None:
    for name in rf.__all__:
        obj = getattr(rf, name)
        if isinstance(obj, type) and issubclass(obj, Exception) and obj is not rf.Halt:
            assert issubclass(obj, rf.ReactorflowError), name


def test_status_members_are_the_values_in_upper_case() -> None:
    assert [s.name for s in rf.Status] == [s.value.upper() for s in rf.Status]
    assert rf.Status.ROLLING_BACK == "rolling_back"
    assert {s.value for s in rf.StepStatus} >= {
        "pending", "running", "completed", "failed", "skipped", "waiting", "compensated",
        "undone",
    }


def test_configure_rejects_unknown_options() -> None:
    import pytest

    with pytest.raises(rf.ConfigurationError, match="lock_tll"):
        rf.configure(lock_tll=3)  # type: ignore[call-arg]
    with pytest.raises(rf.ConfigurationError, match="seconds"):
        rf.configure(lock_ttl=-1)


def test_the_grouping_bases_hold_the_refusals_and_the_validation_errors() -> None:
    """`rf.Refused` and `rf.ValidationFailed` group errors without renaming any."""
    refusals = [rf.NotPaused("r", "completed"), rf.AlreadyResumed("r", "approve"),
                rf.InterruptNotPending("r", "approve", []),
                rf.InterruptExpired("r", "approve", 0.0),
                rf.RunStateError("r", "completed", "cancel"), rf.errors.RunExists("r")]
    for error in refusals:
        assert isinstance(error, rf.Refused), type(error).__name__
        assert isinstance(error, rf.ReactorflowError)
        assert not isinstance(error, rf.ValidationFailed)
    validation = [rf.InputValidationError("flow", "amount", "expected int"),
                  rf.PayloadValidationError("r", "approve", "ok", "expected bool",
                                            attempts=1, max_attempts=None, exhausted=False)]
    for error in validation:
        assert isinstance(error, rf.ValidationFailed), type(error).__name__
        assert not isinstance(error, rf.Refused)
    assert not issubclass(rf.RunNotFound, rf.Refused | rf.ValidationFailed)
    assert rf.Refused.__module__ == rf.ValidationFailed.__module__ == "reactorflow.errors"


def test_the_public_modules_are_stated_and_documented() -> None:
    """What users may import is one stated list; the docs say the same, and every other
    module of the package is internal (listed nowhere as public)."""
    assert rf.PUBLIC_MODULES == ("reactorflow", "reactorflow.otel", "reactorflow.sync",
                                 "reactorflow.testing", "reactorflow.web")
    root = Path(rf.__file__).resolve().parent
    modules = {".".join(p.relative_to(root.parent).with_suffix("").parts).removesuffix(
        ".__init__") for p in root.rglob("*.py")}
    assert set(rf.PUBLIC_MODULES) <= modules
    page = (root.parent / "docs" / "reference.md").read_text()
    section = page.split("## What you may import", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"`(reactorflow(?:\.[a-z_]+)*)`", section))
    assert documented >= set(rf.PUBLIC_MODULES), documented
    internal = documented - set(rf.PUBLIC_MODULES)
    assert internal <= {"reactorflow.definition", "reactorflow.runtime", "reactorflow.storage",
                        "reactorflow.workers", "reactorflow.cli"}, internal
    for name in rf.PUBLIC_MODULES:
        assert name in (rf.__doc__ or ""), name
