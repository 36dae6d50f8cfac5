"""Long-running commands: `worker`, `sweep`, `dashboard`, and the `demo`."""

from __future__ import annotations

import ipaddress
import os
import sys

import click

from reactorflow import config
from reactorflow.cli.context import (
    app_options,
    import_apps,
    modules,
    prepare,
    run_async,
    run_until_stopped,
)
from reactorflow.definition import registry
from reactorflow.errors import ConfigurationError
from reactorflow.runtime.services.sweeper import SweepReport, run_forever, sweep_once
from reactorflow.web import TOKEN_ENV

WORKER_TIMEOUT_MS = 50  # reactorflow.workers.broker.WORKER_TIMEOUT_MS (kept import-free here)


@click.command("demo")
def demo_command() -> int:
    """Run the order-saga demo on the embedded default (nothing to set up)."""
    from reactorflow.demo import run_demo  # noqa: PLC0415 - it declares a reactor at import

    return run_demo()


@click.command("worker", context_settings={"ignore_unknown_options": False})
@click.argument("positional", nargs=-1, metavar="[MODULE]...")
@click.option("--app", "apps", metavar="MODULE", multiple=True,
              help="A module that declares reactors (repeatable; or REACTORFLOW_APP).")
@click.option("--processes", "-p", type=click.IntRange(min=1), default=1, show_default=True,
              help="Worker processes.")
@click.option("--threads", "-t", type=click.IntRange(min=1), default=8, show_default=True,
              help="Threads per process.")
@click.option("--path", "-P", "paths", multiple=True, default=["."], show_default=True,
              help="Import paths (repeatable).")
@click.pass_obj
def worker_command(obj: dict[str, bool], positional: tuple[str, ...], apps: tuple[str, ...],
                   processes: int, threads: int, paths: tuple[str, ...]) -> int:
    """Run Dramatiq worker processes with reactorflow's actors for the reactors in MODULEs.

    The broker comes from REACTORFLOW_REDIS_URL or an rf.configure(broker=...) in the modules.
    """
    names = modules(apps, positional)
    if not names:
        raise click.UsageError("name the modules that declare your reactors (--app MODULE)")
    # before Dramatiq is imported: its idle poll bound is read from the environment
    os.environ.setdefault("dramatiq_worker_timeout", str(WORKER_TIMEOUT_MS))
    os.environ["REACTORFLOW_WORKER_MODULES"] = ",".join(names)
    _banner(names, paths)
    from dramatiq.cli import main as dramatiq_main  # noqa: PLC0415 - after the env is set
    from dramatiq.cli import make_argument_parser  # noqa: PLC0415

    argv = ["reactorflow.workers.entry:broker", *names, "--processes", str(processes),
            "--threads", str(threads), "--path", *paths]
    if obj.get("verbose"):
        argv.append("-v")
    parsed = make_argument_parser().parse_args(argv)  # type: ignore[no-untyped-call]
    return int(dramatiq_main(parsed) or 0)  # type: ignore[no-untyped-call]


def _banner(names: list[str], paths: tuple[str, ...]) -> None:
    """What the worker serves: broker, queue and reactors (it refuses an embedded broker)."""
    for path in reversed(paths):
        if path not in sys.path:
            sys.path.insert(0, path)
    import_apps(names)
    # Dramatiq only now: it reads its idle poll bound from the environment when imported
    from reactorflow.workers.broker import QUEUE, current_broker, is_embedded  # noqa: PLC0415
    from reactorflow.workers.health import check_reachable, where  # noqa: PLC0415

    broker = current_broker()
    if is_embedded(broker):
        raise ConfigurationError(
            "reactorflow worker needs a broker shared with the processes that enqueue: set "
            "REACTORFLOW_REDIS_URL or call rf.configure(broker=...) in one of your modules",
            option="broker")
    check_reachable(broker)  # fail now, in one line, like every other command
    storage = config.current_storage()
    run_async(lambda: storage.load_head("reactorflow-worker-check"))  # reachable, too
    reactors = registry.names()
    click.echo(f"reactorflow worker: broker {where(broker)}, queue {QUEUE!r}, "
               f"{len(reactors)} reactor(s): {', '.join(reactors) or 'none'}", err=True)


@click.command("sweep")
@click.argument("positional", nargs=-1, metavar="[MODULE]...")
@click.option("--interval", type=click.FloatRange(min=0.1), default=30.0, show_default=True,
              help="Seconds between sweeps.")
@click.option("--limit", type=click.IntRange(1, 100_000), default=1000, show_default=True,
              help="Running runs, and as many paused ones, inspected per sweep (past that, each "
                   "sweep starts at a random point).")
@click.option("--once", is_flag=True, help="Sweep once and exit.")
@app_options
def sweep_command(positional: tuple[str, ...], interval: float, limit: int, once: bool,
                  apps: tuple[str, ...], redis_url: str | None, namespace: str | None) -> int:
    """Recover stalled runs and expire overdue interrupts, every --interval seconds.

    Needs shared storage (REACTORFLOW_REDIS_URL, --redis-url, or rf.configure in a module):
    sweeping a fresh in-memory store would do nothing. Ctrl-C or SIGTERM stops it.
    """
    prepare(apps, redis_url, namespace, positional)  # refuses an empty in-memory store

    def report(done: SweepReport) -> None:
        click.echo(f"sweep: recovered={len(done.recovered)} expired={len(done.expired)} "
                   f"failed={len(done.failed)} enqueued={len(done.enqueued)} "
                   f"skipped={len(done.skipped)} unreadable={len(done.unreadable)} "
                   f"no_key={len(done.no_key)} reindexed={len(done.reindexed)}")

    async def loop() -> None:
        if once:
            report(await sweep_once(limit=limit))
        else:  # survives storage outages: failed sweeps are logged and retried, backing off
            await run_forever(interval=interval, limit=limit, on_report=report)

    if run_until_stopped(loop):
        click.echo("sweep: stopped", err=True)
    return 0


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


@click.command("dashboard")
@app_options
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Interface to bind (loopback only by default).")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True)
@click.option("--token", envvar=TOKEN_ENV, show_envvar=True, metavar="TOKEN",
              help="Bearer token required by every request (mutations need it always).")
@click.option("--tokens", "tokens_file", metavar="FILE",
              type=click.Path(dir_okay=False, path_type=str),
              help='Named tokens with roles, as JSON: {"NAME": {"role": "read"|"operate", '
                   '"token": "..."}} (or "sha256": HEX instead of "token").')
def dashboard_command(apps: tuple[str, ...], redis_url: str | None, namespace: str | None,
                      host: str, port: int, token: str | None, tokens_file: str | None) -> int:
    """Serve the HTTP API and the dashboard (the reactorflow[web] extra)."""
    from reactorflow.web import create_app  # noqa: PLC0415 - the optional web extra
    from reactorflow.web.roles import read_token_file  # noqa: PLC0415 - beside it

    tokens = read_token_file(tokens_file) if tokens_file is not None else None
    app = create_app(token=token, tokens=tokens)  # refuses first when the web extra is missing
    import uvicorn  # noqa: PLC0415 - the optional web extra

    prepare(apps, redis_url, namespace)

    access = ("token required" if token or tokens
              else "read-only (no --token: every change is refused)")
    click.echo(f"reactorflow dashboard on http://{host}:{port}/ ({access})", err=True)
    if not token and not tokens and not _loopback(host):
        click.echo(f"warning: {host} is reachable from other machines and there is no token: "
                   "anyone who reaches it can read every run; pass --token", err=True)
    uvicorn.run(app, host=host, port=port, log_level="warning")
    return 0
