"""RedisStorage's wire path (`storage/redis/wire.py`): the run scripts on one Redis node go over
one pipelined connection of its own, with redis-py's settings, errors, retries and script
reloading. A real redis-server throughout; where a network fault is needed (a reply lost or
late) a loopback proxy in front of it drops or holds the server's bytes."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import uuid
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
import redis.asyncio

import reactorflow as rf
from reactorflow.storage.redis.storage import RedisStorage
from reactorflow.storage.redis.wire import wire_for
from tests.helpers import configured, redis_namespace
from tests.storage.test_contract import OWNER, _commands_during, new_run


class Proxy:
    """A loopback TCP proxy in front of Redis that can drop the next reply bytes (closing the
    client's connection instead) or hold the server's bytes until released."""

    def __init__(self, upstream: str) -> None:
        self.host, port = upstream.split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)
        self.upstream_port = int(port)
        self.drop_next = False
        self.dropped = 0
        self.open = asyncio.Event()
        self.open.set()
        self.server: asyncio.Server | None = None
        self.tasks: set[asyncio.Task[None]] = set()
        self.writers: list[asyncio.StreamWriter] = []

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"redis://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/0"

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(self.host, self.upstream_port)
        self.writers += [writer, up_writer]
        for pump in (self._requests(reader, up_writer), self._replies(up_reader, writer)):
            task = asyncio.create_task(pump)
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    async def _requests(self, reader: asyncio.StreamReader, up: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await reader.read(65536):
                up.write(data)
        up.close()

    async def _replies(self, up: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await up.read(65536):
                await self.open.wait()
                if self.drop_next:
                    self.drop_next = False
                    self.dropped += 1
                    break  # the reply never reaches the client: its connection closes
                writer.write(data)
        writer.close()

    async def stop(self) -> None:
        for writer in self.writers:
            writer.close()
        for task in list(self.tasks):
            task.cancel()
        if self.server is not None:
            self.server.close()


@pytest.fixture
async def proxy(redis_url: str) -> AsyncIterator[Proxy]:
    found = Proxy(redis_url)
    await found.start()
    try:
        yield found
    finally:
        await found.stop()


@pytest.fixture
async def raw(redis_url: str) -> AsyncIterator[redis.asyncio.Redis]:
    async with redis.asyncio.Redis.from_url(redis_url) as client:
        yield client


async def _wire_port(storage: RedisStorage) -> str:
    conn = await storage._redis.get()
    assert conn.wire is not None and conn.wire._wire is not None
    transport = conn.wire._wire.transport
    assert transport is not None
    return str(transport.get_extra_info("sockname")[1])


async def test_run_scripts_go_over_the_wire_connection_on_one_node(redis_url: str) -> None:
    storage = RedisStorage.from_url(redis_url, namespace=redis_namespace())
    try:
        run_id = await new_run(storage)
        await storage.save_step(run_id, OWNER, "a", b"first", [b"first"])  # script loaded
        port = await _wire_port(storage)
        seen = await _commands_during(
            redis_url, lambda: storage.save_step(run_id, OWNER, "a", b"rec", [b"ev"]))
        sent = [(c["client_port"], c["command"].split(" ", 1)[0].upper())
                for c in seen if c["client_type"] != "lua"]
        assert sent == [(port, "EVALSHA")]
        stored = await storage.load_run(run_id, history=True)  # redis-py reads what it wrote
        assert stored is not None and stored.steps == {"a": b"rec"}
        assert stored.history == [b"first", b"ev"]
    finally:
        await storage.aclose()


@pytest.mark.parametrize("url, options", [
    ("rediss://127.0.0.1:6379/0", {}),
    ("redis://127.0.0.1:6379/0", {"health_check_interval": 5}),
    ("redis://127.0.0.1:6379/0", {"protocol": 3}),
    ("redis://127.0.0.1:6379/0", {"socket_keepalive": True}),
])
def test_settings_only_redis_py_applies_keep_the_scripts_on_redis_py(
        url: str, options: dict[str, Any]) -> None:
    pool = RedisStorage.from_url(url, **options)._redis._new_client().connection_pool
    assert wire_for(pool.connection_class, pool.connection_kwargs) is None
    plain = RedisStorage.from_url("redis://127.0.0.1:6379/0")._redis._new_client().connection_pool
    assert wire_for(plain.connection_class, plain.connection_kwargs) is not None
    unix = RedisStorage.from_url("unix:///tmp/redis.sock?db=2")._redis._new_client()
    link = wire_for(unix.connection_pool.connection_class, unix.connection_pool.connection_kwargs)
    assert link is not None and link.path == "/tmp/redis.sock" and link.db == 2


async def test_a_flushed_script_cache_is_loaded_again(redis_url: str,
                                                      raw: redis.asyncio.Redis) -> None:
    storage = RedisStorage.from_url(redis_url, namespace=redis_namespace())
    try:
        run_id = await new_run(storage)
        await raw.script_flush()  # as a restarted or failed-over server
        assert await storage.save_step(run_id, OWNER, "a", b"rec", [b"ev"]) is None
        assert await storage.history(run_id) == [b"ev"]
    finally:
        await storage.aclose()


async def test_checkpoints_reuse_the_runs_packed_head_and_keep_every_write(
        redis_url: str) -> None:
    """save_step packs its EVALSHA head (sha, key count, the run's keys) once per run: the
    steps of two runs written in turn each land in their own run; an id hiredis cannot pack (a
    lone surrogate) takes the encoder's path into the head and names no run (refused)."""
    storage = RedisStorage.from_url(redis_url, namespace=redis_namespace())
    try:
        first, second = await new_run(storage), await new_run(storage)
        for i in range(3):
            for run_id in (first, second):
                await storage.save_step(run_id, OWNER, f"s{i}", run_id.encode(), [b"e"])
        for run_id in (first, second):
            stored = await storage.load_run(run_id)
            assert stored is not None
            assert stored.steps == {f"s{i}": run_id.encode() for i in range(3)}
        with pytest.raises(rf.LockLost):
            await storage.save_step("\ud800", OWNER, "a", b"rec", [b"ev"])
    finally:
        await storage.aclose()


async def test_a_killed_connection_is_opened_again_and_the_call_sent_again(
        redis_url: str, raw: redis.asyncio.Redis) -> None:
    storage = RedisStorage.from_url(redis_url, namespace=redis_namespace())
    try:
        run_id = await new_run(storage)
        port = await _wire_port(storage)
        assert await raw.client_kill_filter(_type=None, addr=f"127.0.0.1:{port}") == 1
        await storage.save_step(run_id, OWNER, "a", b"rec", [b"ev"])
        assert await _wire_port(storage) != port
        assert await storage.history(run_id) == [b"ev"]
    finally:
        await storage.aclose()


async def test_a_reply_lost_on_its_way_is_retried_and_applied_once(proxy: Proxy) -> None:
    storage = RedisStorage.from_url(proxy.url, namespace=redis_namespace())
    try:
        run_id = await new_run(storage, events=[b"created"])
        proxy.drop_next = True
        await storage.save_step(run_id, OWNER, "a", b"rec", [b"ev"])  # applied, reply lost
        assert proxy.dropped == 1
        proxy.drop_next = True
        assert await storage.incr_counter(run_id, "n") == 1  # not 2
        assert proxy.dropped == 2
        assert await storage.history(run_id) == [b"created", b"ev"]
    finally:
        await storage.aclose()


async def test_a_cancelled_caller_leaves_the_connection_in_step(proxy: Proxy) -> None:
    """The cancelled call's reply, when it comes, is read and dropped: the next call gets its
    own reply, not that one."""
    storage = RedisStorage.from_url(proxy.url, namespace=redis_namespace())
    try:
        run_id = await new_run(storage)
        for _ in range(2):
            await storage.incr_counter(run_id, "a")
        proxy.open.clear()  # replies held
        with anyio.move_on_after(0.2):  # cancels it while its reply is held
            await storage.incr_counter(run_id, "a")
        proxy.open.set()
        with anyio.fail_after(10):
            assert await storage.incr_counter(run_id, "b") == 1  # (its reply, not a's 3)
            assert await storage.incr_counter(run_id, "a") == 4
    finally:
        await storage.aclose()


async def test_a_reply_later_than_the_socket_timeout_fails_then_the_next_call_works(
        proxy: Proxy) -> None:
    storage = RedisStorage.from_url(proxy.url, namespace=redis_namespace(), socket_timeout=0.2)
    try:
        run_id = await new_run(storage)
        proxy.open.clear()
        with anyio.fail_after(30), pytest.raises(rf.StorageConnectionError) as caught:
            await storage.incr_counter(run_id, "n")
        assert "Timeout reading from" in caught.value.reason
        proxy.open.set()
        with anyio.fail_after(10):
            assert await storage.incr_counter(run_id, "m") == 1
    finally:
        await storage.aclose()


async def test_database_credentials_and_client_name_are_applied(
        redis_url: str, raw: redis.asyncio.Redis) -> None:
    user, password = f"rf-wire-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    await raw.acl_setuser(user, enabled=True, passwords=[f"+{password}"], keys=["*"],
                          channels=["*"], commands=["+@all"])
    base = redis_url.rsplit("/", 1)[0].replace("redis://", f"redis://{user}:{password}@")
    storage = RedisStorage.from_url(f"{base}/5?client_name=rf-wire-test",
                                    namespace=redis_namespace())
    wrong = RedisStorage.from_url(
        redis_url.replace("redis://", f"redis://{user}:not-{password}@"),
        namespace=redis_namespace())
    try:
        run_id = await new_run(storage)
        on_five = redis.asyncio.Redis.from_url(f"{redis_url.rsplit('/', 1)[0]}/5")
        try:
            assert await on_five.exists(storage._keys.run(run_id)) == 1
        finally:
            await on_five.aclose()
        assert await raw.exists(storage._keys.run(run_id)) == 0
        port = await _wire_port(storage)
        clients = [c for c in await raw.client_list() if c["addr"].endswith(f":{port}")]
        assert [(c["name"], c["user"], c["db"]) for c in clients] == [
            ("rf-wire-test", user, "5")]
        with anyio.fail_after(30), pytest.raises(rf.StorageConnectionError):
            await new_run(wrong)
    finally:
        await storage.aclose()
        await wrong.aclose()
        await raw.acl_deluser(user)


@pytest.mark.parametrize("namespace", ["rf", "n%s", "ñs"])
@pytest.mark.parametrize("run_id", ["01a22ffa8dc1e773b3a22709", "ab\udcffc", "%d{x}", "üñ"])
def test_packed_run_keys_are_the_bulk_strings_of_the_run_keys(namespace: str,
                                                               run_id: str) -> None:
    """`RedisKeys.packed_run_keys` (the claim script's keys on the wire path) is what hiredis,
    or redis-py's encoder for text that is no valid UTF-8, packs for `run_keys`."""
    keys = RedisStorage(namespace=namespace)._keys
    expected = b"".join(
        b"$%d\r\n%b\r\n" % (len(raw), raw)
        for raw in (key.encode(errors="surrogatepass") for key in keys.run_keys(run_id)))
    assert keys.packed_run_keys(run_id) == expected


async def test_a_resume_on_the_wire_path_names_the_run_keys_and_indexes(
        redis_url: str) -> None:
    """`continue_`'s claim, sent with its keys packed once per index set, reaches the same
    keys as redis-py would name: the run resumes and moves between the status indexes."""
    async with configured(RedisStorage.from_url(redis_url, namespace=redis_namespace())):
        flow = rf.Reactor(f"wire-resume-{uuid.uuid4().hex[:8]}")

        @flow.interrupt
        async def approve(payload: int) -> int:
            return payload

        for expected in (1, 2):  # the second claim reuses the packed head of the first
            paused = await flow.run()
            assert paused.status is rf.Status.PAUSED
            done = await flow.continue_(paused.id, step="approve", payload=expected)
            assert done.status is rf.Status.COMPLETED and done.value == expected
        assert not (await flow.list_runs(status="paused")).runs
        assert len((await flow.list_runs(status="completed")).runs) == 2


_caller: contextvars.ContextVar[str] = contextvars.ContextVar("caller", default="")


async def test_callers_whose_replies_arrive_together_resume_in_order_in_their_own_context(
        proxy: Proxy) -> None:
    """Replies read in one chunk resolve their callers in the order they were sent, and each
    caller resumes (at once, from the read: `_Reply.wake`) in its own task's context."""
    storage = RedisStorage.from_url(proxy.url, namespace=redis_namespace())
    try:
        run_id = await new_run(storage)
        for _ in range(3):
            await storage.incr_counter(run_id, "c")
        resumed: list[str] = []

        async def caller(name: str) -> tuple[str, int]:
            _caller.set(name)
            value = await storage.incr_counter(run_id, name)
            resumed.append(name)
            return _caller.get(), value

        proxy.open.clear()  # the replies are held, then sent on together
        names = [f"n{i}" for i in range(6)] + ["c"]
        tasks = []
        for name in names:
            tasks.append(asyncio.create_task(caller(name)))
            await asyncio.sleep(0)  # each sends before the next starts
        await asyncio.sleep(0.05)
        proxy.open.set()
        with anyio.fail_after(10):
            found = await asyncio.gather(*tasks)
        assert found == [(name, 1) for name in names[:-1]] + [("c", 4)]
        assert resumed == names
    finally:
        await storage.aclose()


async def test_a_reply_awaited_through_wait_for_or_shield_arrives(redis_url: str) -> None:
    """A reply's future that something other than the calling task waits on (asyncio.shield,
    asyncio.wait_for) completes as a plain future would."""
    storage = RedisStorage.from_url(redis_url, namespace=redis_namespace())
    try:
        run_id = await new_run(storage)
        assert await asyncio.wait_for(storage.incr_counter(run_id, "a"), 10) == 1
        assert await asyncio.shield(storage.incr_counter(run_id, "a")) == 2
        conn = await storage._redis.get()
        assert conn.wire is not None
        sent = conn.wire.command("PING")
        assert await asyncio.wait_for(asyncio.shield(sent), 10) == b"PONG"
    finally:
        await storage.aclose()
