"""A Redis URL without `redis://` (issue 22, item 17): every way in echoes it exactly as typed,
never rebuilt (`localhost:6379` was shown as `localhost://6379`), and says what to write."""

from __future__ import annotations

import subprocess
import sys

import pytest

import reactorflow as rf
from reactorflow import config
from reactorflow.workers import broker
from tests.operate.conftest import ROOT, environment

TYPED = "localhost:6379"


def _refused(message: str, typed: str = TYPED) -> None:
    assert f"'{typed}'" in message, message  # as typed
    assert "://6379" not in message, message  # not rebuilt as a URL
    assert "redis://" in message, message  # what it needs


@pytest.mark.parametrize("args", [("runs", "list"), ("sweep", "--once"),
                                  ("worker", "tests.operate.flows")],
                         ids=["runs-list", "sweep", "worker"])
def test_the_cli_echoes_the_environments_url_as_typed(args: tuple[str, ...]) -> None:
    proc = subprocess.run([sys.executable, "-m", "reactorflow", *args], cwd=ROOT,
                          env=dict(environment(None), REACTORFLOW_REDIS_URL=TYPED),
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 1
    lines = proc.stderr.splitlines()
    assert lines[0].startswith("error: ") and lines[1:] == ["(run again with -v for the "
                                                            "traceback)"], proc.stderr
    _refused(lines[0])


def test_the_cli_echoes_the_url_option_as_typed() -> None:
    typed = "redis.example:6380/2"
    proc = subprocess.run([sys.executable, "-m", "reactorflow", "runs", "list",
                           "--redis-url", typed], cwd=ROOT, env=environment(None),
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 1
    _refused(proc.stderr.splitlines()[0], typed)
    assert "redis://redis.example:6380/2" in proc.stderr


def test_rf_configure_and_the_environment_echo_the_url_as_typed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(rf.ConfigurationError) as caught:
        rf.configure(storage=rf.RedisStorage.from_url(TYPED))
    _refused(str(caught.value))
    assert caught.value.option == "url"

    monkeypatch.setenv(config.REDIS_URL_ENV, TYPED)
    monkeypatch.setattr(config, "_default_storage", None)
    config.reset()
    with pytest.raises(rf.ConfigurationError) as caught:
        config.current_storage()
    _refused(str(caught.value))
    assert str(caught.value).startswith(config.REDIS_URL_ENV)
    monkeypatch.setattr(broker._runtime, "env_broker", None)
    with pytest.raises(rf.ConfigurationError) as caught:
        broker.current_broker()  # the workers' broker, from the same variable
    _refused(str(caught.value))
    assert caught.value.option == config.REDIS_URL_ENV


@pytest.mark.parametrize("typed, shown", [
    ("http://localhost:6379", "'http://localhost:6379'"),
    ("user:hunter2@localhost:6379", "'***@localhost:6379'"),  # a password is never echoed
    ("http://user:hunter2@localhost:6379/0", "'http://localhost:6379/0'"),
])
def test_other_unusable_urls_say_what_to_write_and_hide_passwords(typed: str,
                                                                   shown: str) -> None:
    with pytest.raises(rf.ConfigurationError) as caught:
        rf.RedisStorage.from_url(typed)
    message = str(caught.value)
    assert shown in message and "redis://" in message and "hunter2" not in message
