"""Retry tokens on Redis (lib/run_write.lua): a checkpoint reads its token with the run hash's
head fields and records it with them (no command of its own), and a checkpoint refused by the
fence records nothing, so that the refused call, sent again (redis-py's or the wire path's
retry after a lost reply), is refused again instead of being taken for a write that applied."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from reactorflow.errors import LockLost
from reactorflow.storage.redis.storage import RedisStorage
from tests.helpers import redis_namespace
from tests.storage.test_contract import OTHER, OWNER, _commands_during, new_run


@pytest.fixture
async def redis_storage(redis_url: str) -> AsyncIterator[RedisStorage]:
    storage = RedisStorage.from_url(redis_url, namespace=redis_namespace())
    yield storage
    await storage.aclose()


async def test_a_refused_checkpoint_sent_again_is_refused_again(
        redis_storage: RedisStorage, monkeypatch: pytest.MonkeyPatch) -> None:
    run_id = await new_run(redis_storage)
    monkeypatch.setattr("reactorflow.storage.redis.storage._token", lambda: "f" * 16)
    for _ in range(2):  # the same call twice: the second is its retry
        with pytest.raises(LockLost):
            await redis_storage.save_step(run_id, OTHER, "a", b"rec", [b"ev"])
    assert await redis_storage.history(run_id) == []
    stored = await redis_storage.load_run(run_id)
    assert stored is not None and stored.steps == {}


async def test_a_checkpoint_checks_and_records_its_token_with_the_runs_head(
        redis_storage: RedisStorage, redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    run_id = await new_run(redis_storage)
    await redis_storage.save_step(run_id, OWNER, "a", b"rec", [b"ev"])  # script loaded
    monkeypatch.setattr("reactorflow.storage.redis.storage._token", lambda: "e" * 16)
    seen = await _commands_during(
        redis_url, lambda: redis_storage.save_step(run_id, OWNER, "b", b"rec", [b"ev"]))
    keys = redis_storage._keys.run_keys(run_id)
    lua = [c["command"] for c in seen if c["client_type"] == "lua"]
    assert not [c for c in lua if keys[6] in c], lua  # the tok hash: untouched
    on_run = [c.split(" ", 1)[0].upper() for c in lua if keys[0] in c]
    assert on_run == ["HMGET", "HSET"], lua  # read with the head, written with it
    token = "w" + "e" * 16
    assert [c for c in lua if c.upper().startswith("HMGET") and token in c], lua
    assert [c for c in lua if c.upper().startswith("HSET") and keys[0] in c and token in c], lua
