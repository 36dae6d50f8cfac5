"""Every public name of the API contract is exported from the package root."""

from __future__ import annotations

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
