"""The Redis the benchmarks talk to, and helpers that look at what reactorflow sends it.

By default a private `redis-server --save '' --appendonly no` on a free loopback port, in a
temporary directory, stopped at the end. `REACTORFLOW_BENCH_REDIS_URL` points the benchmarks at
an existing Redis instead; their keys then live under a per-process namespace and are deleted
at the end.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import hashlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis
import redis.asyncio

from reactorflow.storage.redis import wire as redis_wire

URL_ENV = "REACTORFLOW_BENCH_REDIS_URL"
SERVER_ENV = "REACTORFLOW_BENCH_REDIS_SERVER"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(slots=True)
class RedisServer:
    url: str
    description: str
    private: bool
    process: subprocess.Popen[bytes] | None = None
    directory: tempfile.TemporaryDirectory[str] | None = None
    namespaces: list[str] = field(default_factory=list)

    def namespace(self, name: str) -> str:
        """A key namespace for one benchmark (cleaned up at the end on a shared server)."""
        ns = f"rfbench-{os.getpid()}-{name}"
        self.namespaces.append(ns)
        return ns

    @property
    def baseline_key(self) -> str:
        """The key the SET baseline writes (in a namespace of its own)."""
        name = f"rfbench-{os.getpid()}-baseline"
        if name not in self.namespaces:
            self.namespaces.append(name)
        return f"{name}:set"

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
            self.process = None
        elif self.namespaces:  # a shared server: remove what the benchmarks wrote
            with contextlib.suppress(redis.RedisError):
                client = redis.Redis.from_url(self.url)
                for ns in self.namespaces:
                    batch = list(client.scan_iter(match=f"{ns}:*", count=1000))
                    for start in range(0, len(batch), 500):
                        client.unlink(*batch[start:start + 500])
                client.close()
        if self.directory is not None:
            self.directory.cleanup()
            self.directory = None


def _describe(url: str) -> str:
    client = redis.Redis.from_url(url)
    try:
        info = client.info("server")
        return f"Redis {info.get('redis_version')} ({info.get('os', '?')})"
    finally:
        client.close()


def persistence(url: str) -> str:
    """The server's write durability as set: "appendonly no", or "appendonly yes, appendfsync
    always|everysec|no" (and "save ..." where RDB snapshots are on); "unknown" where CONFIG is
    refused."""
    client = redis.Redis.from_url(url)
    try:
        config = client.config_get("appendonly")
        config.update(client.config_get("appendfsync"))
        config.update(client.config_get("save"))
    except redis.RedisError:
        return "unknown"
    finally:
        client.close()
    text = f"appendonly {config.get('appendonly', '?')}"
    if config.get("appendonly") == "yes":
        text += f", appendfsync {config.get('appendfsync', '?')}"
    if config.get("save"):
        text += f", save {config['save']!r}"
    return text


def start() -> RedisServer:
    """The Redis to use (raises RuntimeError with the reason when there is none)."""
    url = os.environ.get(URL_ENV)
    if url:
        return RedisServer(url, f"{_describe(url)} at {URL_ENV} (shared)", private=False)
    return start_private(PLAIN)


# The persistence options of a private server: none (the default benchmarks' server), or the
# durable configuration (every write in the append-only file, fsynced before its reply).
PLAIN = ("--appendonly", "no")
DURABLE = ("--appendonly", "yes", "--appendfsync", "always")


def start_private(persistence: tuple[str, ...]) -> RedisServer:
    """A private redis-server with these persistence options (`PLAIN` or `DURABLE`), always
    started here, whatever `REACTORFLOW_BENCH_REDIS_URL` says (RuntimeError when none starts).

    Args:
        persistence: redis-server options after `--save ''` (`PLAIN`, `DURABLE`).

    Raises:
        RuntimeError: no redis-server binary, or it did not answer within 10 s (five tries).
    """
    binary = os.environ.get(SERVER_ENV) or shutil.which("redis-server") or "/usr/bin/redis-server"
    if not Path(binary).exists():
        raise RuntimeError(f"no redis-server found (looked on PATH and at {binary}); install it "
                           f"or set {URL_ENV}")
    last_error = ""
    for _ in range(5):
        directory = tempfile.TemporaryDirectory(prefix="rfbench-redis-")
        port = _free_port()
        log = Path(directory.name) / "redis.log"
        process = subprocess.Popen(
            [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", *persistence,
             "--dir", directory.name, "--logfile", str(log), "--daemonize", "no"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        url = f"redis://127.0.0.1:{port}/0"
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and process.poll() is None:
            try:
                client = redis.Redis.from_url(url, socket_connect_timeout=0.2)
                client.ping()
                client.close()
            except redis.RedisError:
                time.sleep(0.02)
                continue
            description = (f"{_describe(url)}, private redis-server on 127.0.0.1:{port} "
                           f"(--save '' {' '.join(persistence)})")
            return RedisServer(url, description, private=True, process=process,
                               directory=directory)
        process.terminate()
        process.wait(5)
        last_error = log.read_text(errors="replace")[-400:] if log.exists() else "no log"
        directory.cleanup()
    raise RuntimeError(f"redis-server did not start: {last_error}")


# -- baselines -------------------------------------------------------------------------------------


async def set_round_trip(client: redis.asyncio.Redis, key: str, iterations: int) -> float:
    """Mean seconds of one `await client.set(key, 256 bytes)` (anchor A2)."""
    value = b"x" * 256
    clock = time.perf_counter
    start = clock()
    for _ in range(iterations):
        await client.set(key, value)
    return (clock() - start) / iterations


async def wire_set_round_trip(storage: Any, key: str, iterations: int) -> float | None:
    """Mean seconds of one SET (256 bytes) through `storage`'s wire path (the connection its
    run scripts use, `reactorflow.storage.redis.wire`), or None where it has none (a cluster,
    TLS, or options only redis-py applies)."""
    conn = await storage._redis.get()
    wire = conn.wire
    if wire is None:
        return None
    value = b"x" * 256
    clock = time.perf_counter
    start = clock()
    for _ in range(iterations):
        await wire.command("SET", key, value)
    return (clock() - start) / iterations


async def set_latencies(client: redis.asyncio.Redis, key: str, iterations: int) -> list[float]:
    value = b"x" * 256
    clock = time.perf_counter
    found = []
    for _ in range(iterations):
        start = clock()
        await client.set(key, value)
        found.append(clock() - start)
    return found


# -- counting what the client sends ----------------------------------------------------------------


@dataclass(slots=True)
class Traffic:
    """Commands Redis received from clients (MONITOR, Lua-issued lines excluded) and the
    writes (round trips) the client side made, during one `watch` block."""

    commands: collections.Counter[str] = field(default_factory=collections.Counter)
    lua: int = 0
    round_trips: int = 0
    ports: set[str] = field(default_factory=set)  # local ports of the connections that sent

    @property
    def total(self) -> int:
        return sum(self.commands.values())

    def breakdown(self) -> str:
        return ", ".join(f"{name} {count}" for name, count in sorted(
            self.commands.items(), key=lambda item: (-item[1], item[0])))


@contextlib.contextmanager
def _count_round_trips(traffic: Traffic) -> Iterator[None]:
    """Count the writes of every asyncio stream (redis.asyncio connections write each command
    or pipeline with one `writelines`, whichever connection class sends it) and of the
    storage's wire path (`storage/redis/wire.py`: one `send` per command): one per round trip. Empty
    writes (a drain after bytes stayed buffered) are not counted."""
    original = asyncio.StreamWriter.writelines
    original_send = redis_wire._Wire.send

    def note(transport: asyncio.BaseTransport) -> None:
        traffic.round_trips += 1
        name = transport.get_extra_info("sockname")
        if isinstance(name, tuple) and len(name) >= 2:
            traffic.ports.add(str(name[1]))

    def counted(self: asyncio.StreamWriter, data: Iterable[Any]) -> None:
        chunks = list(data)
        if chunks:
            note(self.transport)
        original(self, chunks)

    def counted_send(self: redis_wire._Wire, command: bytes,
                     count: int | None = None) -> asyncio.Future[Any]:
        if self.transport is not None:
            note(self.transport)
        return original_send(self, command, count)

    asyncio.StreamWriter.writelines = counted  # type: ignore[method-assign]
    redis_wire._Wire.send = counted_send  # type: ignore[method-assign]
    try:
        yield
    finally:
        asyncio.StreamWriter.writelines = original  # type: ignore[method-assign]
        redis_wire._Wire.send = original_send  # type: ignore[method-assign]


@contextlib.asynccontextmanager
async def watch(url: str) -> AsyncIterator[Traffic]:
    """MONITOR the server while the block runs; yields the Traffic, filled in at exit.

    The window is delimited by two ECHO markers sent from a separate client, so only the
    commands issued inside the block are counted (the markers themselves are not). Lines that
    MONITOR marks as issued by Lua scripts are counted apart, in `lua`. Only commands from
    this process's TCP connections that sent something in the block are counted, so other
    clients of a shared server do not show up.
    """
    traffic = Traffic()
    marker = f"rfbench-mark-{uuid.uuid4().hex}"
    monitor_client = redis.asyncio.Redis.from_url(url)
    control = redis.asyncio.Redis.from_url(url)
    seen: list[tuple[str, str, str]] = []
    started = asyncio.Event()
    ended = asyncio.Event()

    async def listen(monitor: redis.asyncio.client.Monitor) -> None:
        inside = False
        while True:
            entry = await monitor.next_command()
            command = str(entry.get("command", ""))
            if marker in command and command.upper().startswith("ECHO"):
                if not inside:
                    inside = True
                    started.set()
                    continue
                ended.set()
                return
            if inside:
                seen.append((str(entry.get("client_type", "")),
                             str(entry.get("client_port", "")), command))

    async with monitor_client.monitor() as monitor:
        task = asyncio.create_task(listen(monitor))
        await control.echo(marker)
        await asyncio.wait_for(started.wait(), 10)
        try:
            with _count_round_trips(traffic):
                yield traffic
        finally:
            await control.echo(marker)
            await asyncio.wait_for(ended.wait(), 10)
            await task
    await monitor_client.aclose()
    await control.aclose()
    ours = traffic.ports
    for client_type, port, command in seen:
        if client_type == "lua":  # not attributed to a client: on a shared server, approximate
            traffic.lua += 1
            continue
        if ours and client_type == "tcp" and port not in ours:
            continue
        name = command.split(" ", 1)[0].upper()
        traffic.commands[name] += 1


TRIVIAL_WRITE = "redis.call('SET', KEYS[1], ARGV[1]) return 1"
"""The trivial scripted write of the gate hand-over's floor: one key written by a script."""


async def scripted_write_latencies(storage: Any, key: str, iterations: int) -> list[float]:
    """Seconds of each EVALSHA of `TRIVIAL_WRITE` (one key written), through `storage`'s
    wire path (the connection its run scripts use) where it has one, else redis-py."""
    conn = await storage._redis.get()
    sha = hashlib.sha1(TRIVIAL_WRITE.encode()).hexdigest()
    await conn.client.script_load(TRIVIAL_WRITE)
    wire = conn.wire
    clock = time.perf_counter
    found = []
    for _ in range(iterations):
        start = clock()
        if wire is not None:
            await wire.evalsha(sha, TRIVIAL_WRITE, [key], [b"1"], "trivial write")
        else:
            await conn.client.evalsha(sha, 1, key, b"1")
        found.append(clock() - start)
    return found


# -- what the server spent ------------------------------------------------------------------------


async def command_usec(client: redis.asyncio.Redis) -> dict[str, tuple[int, int]]:
    """`INFO commandstats`: each command's (calls, usec) since the last `CONFIG RESETSTAT`,
    by lower-case name. The time of a script's inner commands is counted twice there: under
    their own names and inside the script's EVALSHA."""
    info = await client.info("commandstats")
    return {name.removeprefix("cmdstat_"): (int(row["calls"]), int(row["usec"]))
            for name, row in info.items()}


async def server_cpu(client: redis.asyncio.Redis) -> tuple[float, float]:
    """`INFO cpu`: the CPU seconds (user + system) of the server's main thread (the one that
    runs every command: its core is what saturates) and of the whole process (its background
    threads included), since it started."""
    info = await client.info("cpu")
    main = float(info["used_cpu_user_main_thread"]) + float(info["used_cpu_sys_main_thread"])
    return main, float(info["used_cpu_user"]) + float(info["used_cpu_sys"])
