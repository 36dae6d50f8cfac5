"""Fixtures of the subject tests: the tests' codec configured on each backend (`storage`, from
tests/conftest.py, resets the configuration after each test)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

import reactorflow as rf
from reactorflow import config
from tests.helpers import redis_namespace
from tests.operate.conftest import Shared
from tests.subjects import flows


@pytest.fixture
async def sealed(storage: rf.Storage) -> AsyncIterator[rf.Storage]:
    """`storage` with the tests' codec (sealing with `flows.OLD`)."""
    rf.configure(codec=flows.codec(flows.OLD))
    yield storage


@pytest.fixture
async def lane(redis_url: str) -> AsyncIterator[Shared]:
    """A Redis namespace of this test's own, configured here with the tests' codec; the CLI's
    subprocesses reach it through the environment (`Shared.env`)."""
    shared = Shared(redis_url, redis_namespace("subj"))
    backend = rf.RedisStorage.from_url(shared.url, namespace=shared.namespace)
    rf.configure(storage=backend, codec=flows.codec(flows.OLD))
    try:
        yield shared
    finally:
        config.reset()
        await backend.aclose()
