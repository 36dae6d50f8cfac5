"""The pytest plugin as users use it: small user test files run by pytest in a subprocess,
under pytest-asyncio's strict and auto modes and under anyio's plugin; no autouse fixtures;
importing the test kit changes nothing."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import reactorflow

ROOT = Path(reactorflow.__file__).resolve().parent.parent

pytestmark = pytest.mark.slow

USER_FLOW = '''
import reactorflow as rf
from reactorflow import testing

attempts = []
flow = rf.Reactor("user-flow")

@flow.step(retries=rf.Retry(3, 3600.0))
async def charge() -> str:
    attempts.append(1)
    if len(attempts) == 1:
        raise OSError("gateway down")
    return "charged"

@flow.step
async def ship(charge: str) -> str:
    return "shipped"

async def _fake_ship(charge: str) -> str:
    return "fake"
'''

USER_TESTS = '''
import anyio

async def test_runs_on_fresh_memory(rf_env):
    with rf_env.override(flow, "charge", _charged):
        run = await flow.run()
    assert run.ok and testing.executed(run) == ["charge", "ship"]

async def _charged() -> str:
    return "charged"

async def test_a_one_hour_backoff_on_the_fake_clock(rf_env):
    attempts.clear()
    start = rf_env.clock.now()
    run = await flow.run()
    assert run.status == "running"  # parked on its timer until the next attempt
    await rf_env.clock.advance(3600)
    await rf_env.drain()
    done = await flow.get(run.id)
    assert done.ok and rf_env.clock.now() == start + 3600 and len(attempts) == 2

async def test_a_crash_and_recovery(rf_env):
    with rf_env.override(flow, "charge", _charged):
        with rf_env.crash(flow, "charge", when="after"):
            await flow.run()
        [run] = await rf_env.recover()
    assert run.ok and testing.executed(run) == ["charge", "ship"]

async def test_on_redis(rf_redis_env):
    with rf_redis_env.override(flow, "charge", _charged), \
            rf_redis_env.override(flow, "ship", _fake_ship):
        run = await flow.run()
    assert run.ok and run.value == "fake"
    assert "rftest-" in rf_redis_env.storage.describe()
'''

ANYIO_HEADER = '''
import pytest

@pytest.fixture
def anyio_backend():
    return "asyncio"

pytestmark = pytest.mark.anyio
'''


STRICT_HEADER = '''
import pytest

pytestmark = pytest.mark.asyncio
'''


def _entry_point_installed() -> bool:
    return any(ep.value == "reactorflow.testing.plugin"
               for ep in importlib.metadata.entry_points(group="pytest11"))


def _pytest(tmp_path: Path, source: str, *args: str, redis_url: str | None = None
            ) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_user.py").write_text(textwrap.dedent(source))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("REACTORFLOW_REDIS_URL", None)
    if redis_url is not None:
        env["REACTORFLOW_TEST_REDIS_URL"] = redis_url
    # installed (as users and CI have it), pytest loads the plugin through its pytest11 entry
    # point; from a bare checkout it is named with -p (naming it twice would be an error)
    load = [] if _entry_point_installed() else ["-p", "reactorflow.testing.plugin"]
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", *load,
         "-p", "no:cacheprovider", "-c", os.devnull, "--rootdir", str(tmp_path), *args,
         str(tmp_path / "test_user.py")],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=False, timeout=120)


def test_user_tests_under_pytest_asyncio_auto_mode(tmp_path: Path, redis_url: str) -> None:
    done = _pytest(tmp_path, USER_FLOW + USER_TESTS, "-o", "asyncio_mode=auto",
                   "-p", "no:anyio", redis_url=redis_url)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 passed" in done.stdout


def test_user_tests_under_pytest_asyncio_strict_mode(tmp_path: Path, redis_url: str) -> None:
    # strict is pytest-asyncio's default mode: async fixtures must be its own there
    done = _pytest(tmp_path, STRICT_HEADER + USER_FLOW + USER_TESTS, "-o", "asyncio_mode=strict",
                   "-p", "no:anyio", redis_url=redis_url)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 passed" in done.stdout


def test_user_tests_under_anyio_plugin(tmp_path: Path, redis_url: str) -> None:
    done = _pytest(tmp_path, ANYIO_HEADER + USER_FLOW + USER_TESTS, "-p", "no:asyncio",
                   redis_url=redis_url)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 passed" in done.stdout


def test_rf_redis_env_starts_its_own_redis_server(tmp_path: Path) -> None:
    done = _pytest(tmp_path, USER_FLOW + USER_TESTS, "-o", "asyncio_mode=auto",
                   "-k", "on_redis")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


def test_the_plugin_has_no_autouse_fixtures(tmp_path: Path) -> None:
    source = '''
    from reactorflow import clock, config
    from reactorflow.runtime.engine import job_queue as queue

    def test_nothing_of_reactorflow_is_used(request):
        assert not [name for name in request.fixturenames if name.startswith("rf_")]
        autouse = request._fixturemanager._getautousenames(request.node)
        assert not [name for name in autouse if name.startswith("rf_")]
        assert clock.current() is clock.REAL and config.settings() == config.Settings()
        assert queue.register(None).__module__ == "reactorflow.workers.queue"
    '''
    done = _pytest(tmp_path, source, "-o", "asyncio_mode=auto")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
    listed = _pytest(tmp_path, source, "--fixtures")
    assert "rf_env" in listed.stdout and "rf_redis_env" in listed.stdout


def test_importing_the_test_kit_changes_nothing() -> None:
    code = textwrap.dedent('''
        import reactorflow as rf
        from reactorflow import clock, config
        from reactorflow.runtime.engine import job_queue as queue
        before = (clock.current(), config.settings(), queue.register(None))
        queue.register(before[2])
        import reactorflow.testing, reactorflow.testing.plugin
        after = (clock.current(), config.settings(), queue.register(None))
        assert before == after, (before, after)
        assert "pytest" not in __import__("sys").modules or True
    ''')
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ,
                          "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, check=False,
                          timeout=60)
    assert done.returncode == 0, done.stderr


def test_the_test_kit_imports_without_pytest() -> None:
    code = ("import sys; sys.modules['pytest'] = None\n"
            "import reactorflow.testing as t; print(t.Environment.__name__)")
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ,
                          "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, check=False,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Environment"
