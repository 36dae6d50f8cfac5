"""The storage contract suites' shared fixture: storages of one backend built with options."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from reactorflow.storage.contract.storage import Storage
from reactorflow.storage.memory.storage import MemoryStorage
from reactorflow.storage.redis.storage import RedisStorage
from tests.conftest import ALL_BACKENDS
from tests.helpers import redis_namespace


@pytest.fixture(params=ALL_BACKENDS)
async def factory(request: pytest.FixtureRequest) -> AsyncIterator[Callable[..., Storage]]:
    """Builds storages of one backend with options (`retention`, `history_limit`), closed at
    the end; named in `tests/conftest.py`'s BACKEND_FIXTURES, so that its cluster parameter
    is marked for the cluster lane."""
    made: list[Storage] = []
    url = ("" if request.param == "memory" else
           request.getfixturevalue("redis_cluster_url" if request.param == "cluster"
                                   else "redis_url"))

    def make(**options: Any) -> Storage:
        backend: Storage
        if request.param == "memory":
            backend = MemoryStorage(**options)
        else:
            backend = RedisStorage.from_url(url, namespace=redis_namespace(), **options)
        made.append(backend)
        return backend

    yield make
    for backend in made:
        await backend.aclose()
