"""Fixtures of the data-protection tests: a codec configured for the test, and every byte a
backend holds (Redis: every key of the server, of every type; memory: every bytes and str
object reachable from the storage object)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

import reactorflow as rf
from reactorflow import config
from tests.operate.conftest import shared  # noqa: F401 - the CLI test's Redis namespace
from tests.protection.flows import codec


@pytest.fixture
def with_codec() -> Iterator[rf.EncryptionCodec]:
    """A codec (key id `k1`) configured for the test, removed after it."""
    made = codec("k1")
    rf.configure(codec=made)
    try:
        yield made
    finally:
        rf.configure(codec=None)
        config.reset()


def redis_bytes(url: str) -> list[bytes]:
    """Every key and value on the Redis server at `url` (SCAN of the whole keyspace, each key
    read by its type: string, hash, list, set, sorted set, stream)."""
    found: list[bytes] = []
    with redis.Redis.from_url(url) as client:
        for key in client.scan_iter(count=1000):
            found.append(key)
            kind = client.type(key).decode()
            if kind == "string":
                found.append(client.get(key) or b"")
            elif kind == "hash":
                for field, value in client.hgetall(key).items():
                    found += [field, value]
            elif kind == "list":
                found += client.lrange(key, 0, -1)
            elif kind == "set":
                found += list(client.smembers(key))
            elif kind == "zset":
                found += [member for member, _ in client.zrange(key, 0, -1, withscores=True)]
            elif kind == "stream":
                for _, entry in client.xrange(key):
                    for field, value in entry.items():
                        found += [field, value]
            elif kind != "none":  # (expired meanwhile)
                raise AssertionError(f"key {key!r} holds a {kind}, which this scan cannot read")
    return found


def memory_bytes(storage: rf.MemoryStorage) -> list[bytes]:
    """Every bytes (and str, encoded) object reachable from a MemoryStorage's attributes."""
    found: list[bytes] = []
    seen: set[int] = set()
    todo: list[object] = [storage]
    while todo:
        item = todo.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, bytes | bytearray | memoryview):
            found.append(bytes(item))
        elif isinstance(item, str):
            found.append(item.encode("utf-8", "surrogatepass"))
        elif isinstance(item, dict):
            todo += list(item.keys()) + list(item.values())
        elif isinstance(item, list | tuple | set | frozenset):
            todo += list(item)
        elif hasattr(item, "__dict__") or hasattr(type(item), "__slots__"):
            attrs = dict(getattr(item, "__dict__", {}))
            for cls in type(item).__mro__:
                for name in getattr(cls, "__slots__", ()):
                    if hasattr(item, name):
                        attrs[name] = getattr(item, name)
            todo += [v for v in attrs.values() if (not isinstance(v, type) and not callable(v))
                     or isinstance(v, dict | list)]
    return found
