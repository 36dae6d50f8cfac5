"""A real cut between a run's write and its index writes, on a real Redis (or every node of a
Redis Cluster): a Redis user that may write every key of one namespace but its indexes, so the
server refuses (`NOPERM`) exactly the index writes a storage sends apart from a run's script,
after that script stored the run: what a failover or a lost connection does between the two,
made deterministic. A script that declares the index keys itself (one node, a known run) is
refused whole, and stores nothing. With `removals`, only what adds to an index is refused
(`ZADD`, `SADD`): a write that removes an entry and is cut off before it adds one again."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import urlsplit

import pytest
import redis.asyncio

import reactorflow as rf
from reactorflow.storage.redis.keys import RUN_PARTS
from reactorflow.testing.redis_server import redis_server_version

WRITABLE = (*RUN_PARTS, "map", "idem", "corr", "gate", "done")
"""The key kinds of a namespace the cut user may write: all but the indexes (`idx`,
`reactors`)."""


def _escaped(text: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


async def _nodes(url: str) -> list[tuple[str, int]]:
    """Every node of the Redis (Cluster) at `url`."""
    parts = urlsplit(url.replace("+cluster", "", 1))
    host, port = parts.hostname or "127.0.0.1", parts.port or 6379
    if "+cluster" not in url:
        return [(host, port)]
    client = redis.asyncio.Redis(host=host, port=port)
    try:
        listing = (await client.execute_command("CLUSTER", "NODES")).decode()
    finally:
        await client.aclose()
    found = []
    for line in listing.splitlines():
        address = line.split()[1].split("@")[0]
        node_host, _, node_port = address.rpartition(":")
        found.append((node_host or host, int(node_port)))
    return found


async def _on_every(nodes: list[tuple[str, int]], *command: str) -> None:
    for host, port in nodes:
        client = redis.asyncio.Redis(host=host, port=port)
        try:
            await client.execute_command(*command)
        finally:
            await client.aclose()


@asynccontextmanager
async def index_cut(url: str, namespace: str, *,
                    removals: bool = False) -> AsyncIterator[rf.RedisStorage]:
    """A `RedisStorage` on `namespace` at `url` whose index writes the server refuses (with
    `removals`: only those that add an entry)."""
    if () < redis_server_version() < (7,):  # (a server the suite did not start: it tries)
        pytest.skip("the cut needs Redis 7's read-only key patterns (ACL `%R~`); this "
                    f"redis-server is {'.'.join(map(str, redis_server_version()))}")
    user, password = f"cut-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    nodes = await _nodes(url)
    rules = ["on", f">{password}", "+@all", "&*", "%R~*",
             *(f"~{_escaped(namespace)}:{part}:*" for part in WRITABLE)]
    if removals:
        rules += [f"~{_escaped(namespace)}:idx:*", "-zadd", "-sadd"]
    await _on_every(nodes, "ACL", "SETUSER", user, *rules)
    scheme, _, rest = url.partition("://")
    storage = rf.RedisStorage.from_url(f"{scheme}://{user}:{password}@{rest}",
                                       namespace=namespace)
    try:
        yield storage
    finally:
        await storage.aclose()
        await _on_every(nodes, "ACL", "DELUSER", user)
