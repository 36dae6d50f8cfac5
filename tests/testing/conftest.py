"""The test kit's own fixtures, taken from its plugin (the package is not installed here, so its
`pytest11` entry point is not loaded); `rf_redis_env` uses the suite's redis-server."""

from __future__ import annotations

import pytest

from reactorflow.testing.plugin import rf_env, rf_redis_env  # noqa: F401 - fixtures


@pytest.fixture(scope="session")
def rf_redis_url(redis_url: str) -> str:
    return redis_url


