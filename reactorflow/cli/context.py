"""What the commands share: importing the app modules, choosing the storage, finding a run's
reactor, and running a coroutine with the storage closed afterwards."""

from __future__ import annotations

import importlib
import os
import re
import signal
import sys
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

import anyio
import click
from anyio.abc import TaskStatus

from reactorflow import config
from reactorflow.config import configure
from reactorflow.errors import ConfigurationError
from reactorflow.storage.memory.storage import MemoryStorage
from reactorflow.storage.redis.storage import RedisStorage

APP_ENV = "REACTORFLOW_APP"
NAMESPACE_ENV = "REACTORFLOW_REDIS_NAMESPACE"
T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


def app_options(function: F) -> F:
    """`--app` (repeatable), `--redis-url` and `--namespace`, the options of every command that
    reads runs."""
    function = click.option(
        "--namespace", metavar="NAME", envvar=NAMESPACE_ENV, show_envvar=True,
        help="The RedisStorage key namespace (default rf).")(function)
    function = click.option(
        "--redis-url", metavar="URL", envvar="REACTORFLOW_REDIS_URL", show_envvar=True,
        help="The Redis that stores the runs.")(function)
    return click.option(
        "--app", "apps", metavar="MODULE", multiple=True,
        help=f"A module that declares reactors (repeatable; or {APP_ENV}, comma-separated).",
    )(function)


def modules(apps: Iterable[str], extra: Iterable[str] = ()) -> list[str]:
    """The app modules: `--app` values, positional ones, then `REACTORFLOW_APP`."""
    found = [*apps, *extra]
    if not found:
        found = [m for m in re.split(r"[,\s]+", os.environ.get(APP_ENV, "")) if m]
    return list(dict.fromkeys(found))


def import_apps(names: Iterable[str]) -> None:
    """Import the modules that declare reactors (from the current directory too)."""
    if "" not in sys.path:
        sys.path.insert(0, "")
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise ConfigurationError(
                f"cannot import app module {name!r}: {exc}; check the name and that it can be "
                "imported from the current directory", option="app") from exc


def prepare(apps: Iterable[str], redis_url: str | None, namespace: str | None,
            extra: Iterable[str] = ()) -> None:
    """Import the apps, then point the storage at `redis_url` and `namespace` when given.
    Refuses a process with only the embedded in-memory store: it holds no runs of anyone
    else's."""
    import_apps(modules(apps, extra))
    if redis_url or namespace:
        url = redis_url or os.environ.get(config.REDIS_URL_ENV)
        if not url:
            raise ConfigurationError(
                f"--namespace {namespace!r} needs a Redis: pass --redis-url or set "
                f"{config.REDIS_URL_ENV}", option="namespace")
        configure(storage=RedisStorage.from_url(url, namespace=namespace or "rf"))
    if isinstance(config.current_storage(), MemoryStorage):
        raise ConfigurationError(
            "no shared storage: set REACTORFLOW_REDIS_URL, pass --redis-url, or call "
            "rf.configure(storage=...) in a module given with --app (this process has only an "
            "empty in-memory store)", option="storage")


def run_async(factory: Callable[[], Awaitable[T]]) -> T:
    """Run `factory()` on a fresh event loop, closing the storage's connections after."""
    async def main() -> T:
        try:
            return await factory()
        finally:
            await config.current_storage().aclose()

    return anyio.run(main)


def run_until_stopped(factory: Callable[[], Awaitable[object]]) -> bool:
    """Run `factory()` (a daemon's loop) on a fresh event loop until it returns or SIGINT or
    SIGTERM arrives, then close the storage's connections; True when a signal stopped it.

    1. A signal receiver is installed before `factory()` starts.
    2. A signal cancels the task group that runs both. The cancellation is anyio's (delivered
       again at every await until the loop has left), so a daemon stops even if something
       inside it swallowed a single cancellation, as a bare `task.cancel()` could be.
    3. The storage is closed shielded from that cancellation.
    A signal that arrives before the receiver is installed is Python's KeyboardInterrupt.
    """
    stopped = False

    async def watch(group: anyio.abc.TaskGroup, *,
                    task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        nonlocal stopped
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            task_status.started()
            async for _ in signals:
                stopped = True
                group.cancel_scope.cancel()
                return

    async def main() -> None:
        try:
            async with anyio.create_task_group() as group:
                await group.start(watch, group)
                await factory()
                group.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await config.current_storage().aclose()

    try:
        anyio.run(main)
    except KeyboardInterrupt:
        return True
    return stopped
