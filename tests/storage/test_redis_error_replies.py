"""Error replies on RedisStorage's wire path are never read as data (issue 22, item 2).

A server that will not serve for now (`LOADING` while it loads its data after a restart,
`BUSY`, `TRYAGAIN`, `MASTERDOWN`, `CLUSTERDOWN`) is asked again under the retry policy, bounded,
with backoff; every other error reply raises `rf.StorageReplyError` naming the reply and the
script. A tiny fake Redis in front of the suite's real one answers chosen replies and forwards
everything else; the last test restarts a real redis-server (appendonly yes) under a run in
flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import subprocess
import tempfile
import time
from collections import deque
from collections.abc import AsyncIterator, Iterator

import anyio
import hiredis
import pytest
import redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff

import reactorflow as rf
from reactorflow.storage.redis.storage import RedisStorage
from reactorflow.testing.redis_server import (
    free_port,
    redis_server_executable,
    start_redis,
)
from tests.helpers import configured, redis_namespace, unique
from tests.storage.test_contract import OWNER, new_run

LOADING = b"-LOADING Redis is loading the dataset in memory\r\n"
RETRIES = 3  # the storage's default policy: the first attempt and three retries


class FakeRedis:
    """A loopback server speaking RESP in front of a real Redis: each command it reads takes
    the next scripted answer (`answer`), if any, instead of going upstream; every other command
    is forwarded and its replies pumped back. (A scripted answer is written at once: it is for a
    connection with nothing in flight upstream, as the tests send one call at a time.)"""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.answers: deque[bytes] = deque()
        self.answered: list[str] = []  # the commands answered from the script (their name)
        self.server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"redis://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/0"

    def answer(self, reply: bytes, times: int = 1) -> None:
        """The next `times` commands get `reply` (raw RESP) instead of the server's."""
        self.answers.extend([reply] * times)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        requests = hiredis.Reader()
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(self._pump, up_reader, writer)
                while data := await reader.read(65536):
                    requests.feed(data)
                    while (command := requests.gets()) is not False:
                        if self.answers:
                            self.answered.append(command[0].decode().upper())
                            writer.write(self.answers.popleft())
                        else:
                            up_writer.write(hiredis.pack_command(tuple(command)))
                group.cancel_scope.cancel()
        except ConnectionError:
            pass
        finally:
            up_writer.close()
            writer.close()

    @staticmethod
    async def _pump(up: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await up.read(65536):
                writer.write(data)

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()


def _port(url: str) -> int:
    return int(url.split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)[1])


@pytest.fixture
async def fake(redis_url: str) -> AsyncIterator[FakeRedis]:
    found = FakeRedis(_port(redis_url))
    await found.start()
    try:
        yield found
    finally:
        await found.stop()


@pytest.fixture
async def storage(fake: FakeRedis) -> AsyncIterator[RedisStorage]:
    found = RedisStorage.from_url(fake.url, namespace=redis_namespace())
    try:
        yield found
    finally:
        await found.aclose()


async def _on_the_wire(storage: RedisStorage) -> None:
    conn = await storage._redis.get()
    assert conn.wire is not None  # these tests are about the wire path


async def test_loading_replies_are_retried_and_each_write_applies_once(
        fake: FakeRedis, storage: RedisStorage) -> None:
    """The issue's three failures: create_run took LOADING for "the run exists", save_step
    failed with a TypeError, extend_lock said the lock was lost."""
    await _on_the_wire(storage)
    fake.answer(LOADING, 2)
    run_id = await new_run(storage, events=[b"created"])  # (asserts created is True)
    assert fake.answered == ["EVALSHA", "EVALSHA"]
    fake.answer(LOADING, 2)
    assert await storage.save_step(run_id, OWNER, "a", b"rec", [b"ev"]) is None
    fake.answer(LOADING, 2)
    assert await storage.extend_lock(run_id, OWNER, 10.0) is True
    assert len(fake.answered) == 6
    stored = await storage.load_run(run_id, history=True)
    assert stored is not None and stored.steps == {"a": b"rec"}
    assert stored.history == [b"created", b"ev"]  # each applied once


@pytest.mark.parametrize("reply", [
    b"-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN "
    b"NOSCRIPT.\r\n",
    b"-TRYAGAIN Multiple keys request during rehashing of slot\r\n",
    b"-MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.\r\n",
    b"-CLUSTERDOWN The cluster is down\r\n",
])
async def test_a_server_that_is_not_ready_is_asked_again(
        fake: FakeRedis, storage: RedisStorage, reply: bytes) -> None:
    await _on_the_wire(storage)
    run_id = await new_run(storage)
    fake.answer(reply, RETRIES)
    assert await storage.incr_counter(run_id, "n") == 1
    assert fake.answered == ["EVALSHA"] * RETRIES
    assert await storage.incr_counter(run_id, "n") == 2


async def test_a_server_still_loading_after_the_retries_is_not_ready(
        fake: FakeRedis, storage: RedisStorage) -> None:
    await _on_the_wire(storage)
    run_id = await new_run(storage, events=[b"created"])
    fake.answer(LOADING, 10)
    with pytest.raises(rf.StorageNotReady) as caught:
        await storage.save_step(run_id, OWNER, "a", b"rec", [b"ev"])
    assert fake.answered == ["EVALSHA"] * (1 + RETRIES)  # bounded by the policy
    error = caught.value
    assert isinstance(error, rf.StorageConnectionError)  # an outage to every caller
    assert error.reply == "LOADING Redis is loading the dataset in memory"
    assert error.command == "save_step"
    assert "LOADING" in str(error) and "save_step" in str(error)
    fake.answers.clear()
    assert await storage.history(run_id) == [b"created"]  # nothing written


@pytest.mark.parametrize("reply, text", [
    (b"-WEIRD something odd\r\n", "WEIRD something odd"),
    (b"-ERR unknown command 'EVALSHA'\r\n", "ERR unknown command 'EVALSHA'"),
    (b"-READONLY You can't write against a read only replica.\r\n",
     "READONLY You can't write against a read only replica."),
    (b"-NOPERM this user has no permissions to run the 'evalsha' command\r\n",
     "NOPERM this user has no permissions to run the 'evalsha' command"),
    (b"*2\r\n:1\r\n-ERR inner failure\r\n", "ERR inner failure"),  # inside an array
    (b"*2\r\n*1\r\n-ERR deep\r\n$1\r\nx\r\n", "ERR deep"),
])
async def test_any_other_error_reply_raises_naming_the_reply_and_the_script(
        fake: FakeRedis, storage: RedisStorage, reply: bytes, text: str) -> None:
    await _on_the_wire(storage)
    run_id = await new_run(storage, events=[b"created"])
    fake.answer(reply)
    with pytest.raises(rf.StorageReplyError) as caught:
        await storage.save_step(run_id, OWNER, "a", b"rec", [b"ev"])
    assert fake.answered == ["EVALSHA"]  # not sent again
    assert (caught.value.reply, caught.value.command) == (text, "save_step")
    assert text in str(caught.value)
    assert not isinstance(caught.value, rf.StorageConnectionError)
    assert await storage.save_step(run_id, OWNER, "a", b"rec", [b"ev"]) is None  # in step
    assert await storage.history(run_id) == [b"created", b"ev"]


@pytest.mark.parametrize("reply", [b"-MOVED 3999 127.0.0.1:7001\r\n",
                                   b"-ASK 3999 127.0.0.1:7001\r\n"])
async def test_a_cluster_redirection_on_a_single_node_url_says_to_use_a_cluster_url(
        fake: FakeRedis, storage: RedisStorage, reply: bytes) -> None:
    await _on_the_wire(storage)
    run_id = await new_run(storage)
    fake.answer(reply)
    with pytest.raises(rf.StorageReplyError, match=r"redis\+cluster://") as caught:
        await storage.extend_lock(run_id, OWNER, 10.0)
    assert caught.value.command == "extend_lock"
    assert caught.value.reply == reply[1:-2].decode()


async def test_refused_credentials_on_the_wire_handshake_are_not_retried(
        fake: FakeRedis) -> None:
    url = fake.url.replace("redis://", "redis://:secret@")
    storage = RedisStorage.from_url(url, namespace=redis_namespace())
    try:
        await _on_the_wire(storage)
        fake.answer(b"-WRONGPASS invalid username-password pair or user is disabled.\r\n")
        with pytest.raises(rf.StorageConnectionError) as caught:
            await storage.extend_lock("r1", OWNER, 10.0)
        assert fake.answered == ["AUTH"]  # once: credentials are not retried
        assert "invalid username-password pair" in str(caught.value)
        assert "secret" not in str(caught.value)
    finally:
        await storage.aclose()


async def test_a_batch_with_an_error_reply_raises_it(fake: FakeRedis,
                                                      storage: RedisStorage) -> None:
    """`script_batch` (one round trip of several scripts): a loading server is asked again for
    the batch; an error reply of one of them raises, naming that script."""
    await _on_the_wire(storage)
    run_id = await new_run(storage)
    conn = await storage._redis.get()
    keys = storage._keys.run_keys(run_id)
    calls = [("incr_counter", keys, ["tok-1", "a", *_counter_args(storage)]),
             ("incr_counter", keys, ["tok-2", "b", *_counter_args(storage)])]
    fake.answer(LOADING, 2)
    assert await conn.script_batch(calls) == [1, 1]
    fake.answer(b"-ERR kaput\r\n")
    with pytest.raises(rf.StorageReplyError) as caught, storage._errors():
        await conn.script_batch([calls[0], ("incr_counter", keys,
                                            ["tok-3", "b", *_counter_args(storage)])])
    assert (caught.value.reply, caught.value.command) == ("ERR kaput", "incr_counter")


def _counter_args(storage: RedisStorage) -> list[str]:
    return [str(int(time.time() * 1000)), str(storage._retention_ms)]


# -- a real restart ---------------------------------------------------------------------------

KEYS_TO_LOAD = 400
KEY_LOAD_DELAY_US = 2500  # x KEYS_TO_LOAD: the restarted server loads for about a second


def _answer(port: int) -> bytes:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64)
    except OSError:
        return b""


class Persistent:
    """A redis-server of its own with appendonly yes, restartable on its port and directory."""

    def __init__(self, exe: str) -> None:
        self.exe = exe
        self.port = free_port()
        self.workdir = tempfile.mkdtemp(prefix="rf-aof-")
        self.procs = [start_redis(exe, self.port, self.workdir, "--appendonly", "yes")]

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def restart_loading(self) -> None:
        """Stop the server (its AOF flushed) and start it again, loading slowly; return once
        it answers LOADING."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
            sock.sendall(b"SHUTDOWN\r\n")
            sock.recv(64)
        self.procs[-1].wait(10)
        self.procs.append(subprocess.Popen(
            [self.exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "yes", "--dir", self.workdir, "--daemonize", "no",
             "--key-load-delay", str(KEY_LOAD_DELAY_US),
             "--loading-process-events-interval-bytes", "1024"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        deadline = time.monotonic() + 10
        while not _answer(self.port).startswith(b"-LOADING"):
            assert time.monotonic() < deadline, "the restarted server never answered LOADING"
            time.sleep(0.005)  # (a subprocess's state: nothing to await)

    def stop(self) -> None:
        for proc in self.procs:
            proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)
            proc.kill()
        shutil.rmtree(self.workdir, ignore_errors=True)


@pytest.fixture
def persistent_redis() -> Iterator[Persistent]:
    exe = redis_server_executable()
    if exe is None:
        pytest.skip("no redis-server")
    found = Persistent(exe)
    try:
        yield found
    finally:
        found.stop()


async def test_a_run_in_flight_survives_a_redis_restart_that_loads_its_aof(
        persistent_redis: Persistent) -> None:
    """The server is restarted while a step runs, and is still loading its AOF (answering
    LOADING) when the step checkpoints and its lock is extended: the run completes, no abort."""
    server = persistent_redis
    with redis.Redis.from_url(server.url) as client:  # data to load: the AOF's base RDB
        client.mset({f"ballast:{i}": "x" for i in range(KEYS_TO_LOAD)})
        client.bgrewriteaof()
        while client.info("persistence")["aof_rewrite_in_progress"]:
            time.sleep(0.02)  # (a subprocess's state: nothing to await)
    storage = RedisStorage.from_url(  # retries that outlast a second of loading
        server.url, namespace=redis_namespace(),
        retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), 12))
    started, release = anyio.Event(), anyio.Event()
    flow = rf.Reactor(unique("restart"))

    @flow.step
    async def first() -> int:
        started.set()
        await release.wait()
        return 1

    @flow.step
    async def second(first: int) -> int:
        return first + 1

    outcome: list[rf.Run] = []

    async def go() -> None:
        outcome.append(await flow.run())

    try:
        async with configured(storage):
            rf.configure(lock_ttl=3.0)  # its keeper extends the lock during the restart
            async with anyio.create_task_group() as group:
                group.start_soon(go)
                await started.wait()
                await anyio.to_thread.run_sync(server.restart_loading)
                assert _answer(server.port).startswith(b"-LOADING")  # as the step ends
                release.set()
    finally:
        await storage.aclose()
    run = outcome[0]
    assert run.status is rf.Status.COMPLETED, run.error
    assert run.value == 2


@pytest.mark.parametrize(("reply", "code", "transient"), [
    ("OOM command not allowed when used memory > 'maxmemory'.", "OOM", True),
    ("ERR Error running script (call to f_ec2d): @user_script:255: @user_script: 255: -OOM "
     "command not allowed when used memory > 'maxmemory'.", "OOM", True),  # Redis 6 wraps it
    ("ERR Error running script (call to f_ec2d): @user_script:12: -NOPERM this user has no "
     "permissions to access one of the keys", "NOPERM", False),
    ("ERR unknown command 'FOO'", "ERR", False),
])
def test_the_reply_code_is_read_inside_a_script_error_of_redis_before_7(
        reply: str, code: str, transient: bool) -> None:
    from reactorflow.errors.storage import reply_code

    assert reply_code(reply) == code
    refused = rf.StorageReplyError("redis://127.0.0.1:6379/0", reply, "request_control")
    assert refused.transient is transient

