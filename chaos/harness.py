"""One chaos run: set up a lane, start the reactorflow processes, dispatch the runs while the
fault scheduler strikes, let everything settle, then check the invariants and print figures."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import msgspec

import reactorflow as rf
from chaos import checker, flows
from chaos.faults import FaultScheduler, Lane
from chaos.ledger import Ledger
from chaos.plan import ACCOUNTS, MIX, UNDONE_REACTORS, Plan, rate_per_minute
from chaos.services import AOF, Cluster, Rabbit, RedisNode, Service, redis_node, workdir
from reactorflow.definition import registry

SCHEDULER_GRACE = 75.0  # a tick whose claimer died starts within lock_ttl + 60 s
SCHEDULER_STARTUP = 15.0  # seconds a scheduler process may take to its first pass
# how long a submission is retried while storage cannot take it: past the longest outage a
# fault makes (a cluster failover whose replica is not promoted lasts until the old master is
# back: 3 node timeouts, then up to 30 s for the cluster to report ok, then its restart and
# up to 30 s more), so that the harness, which plays a user told "starting it again is safe",
# never gives a submission up while the storage is still recovering
DISPATCH_PATIENCE = 150.0


@dataclass
class Figures:
    lane: str
    seed: int
    runs: int = 0
    ticks: int = 0
    faults: dict[str, int] = field(default_factory=dict)
    kills: int = 0
    violations: int = 0
    limits: int = 0
    reapplied: int = 0
    duration: float = 0.0
    commit: str = ""


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=False, timeout=10,
                              cwd=os.path.dirname(__file__)).stdout.strip()
    except OSError:
        return ""


def _inputs(reactor: str, index: int, rng: random.Random) -> dict[str, Any]:
    account = rng.choice(ACCOUNTS)
    if reactor in ("chaos.saga", "chaos.approval"):
        return {"n": index, "fail": reactor == "chaos.saga" and rng.random() < 0.25}
    if reactor == "chaos.fanout":
        items = list(range(rng.randint(3, 6)))
        return {"items": items, "fail_item": rng.choice(items) if rng.random() < 0.25 else -1}
    if reactor == "chaos.survey":
        return {"items": list(range(rng.randint(3, 6)))}
    if reactor == "chaos.napper":
        return {"n": index, "seconds": round(rng.uniform(0.2, 3.0), 3)}
    return {"account": account, "n": index}


class Harness:
    def __init__(self, plan: Plan, log: Callable[[str], None] = print) -> None:
        self.plan, self.log = plan, log
        self.rng = random.Random(plan.seed)
        self.root = workdir()
        self.namespace = f"chaos{plan.seed}"
        self.ledger_node: RedisNode | None = None
        self.lane: Lane | None = None
        self.submitted: dict[str, str] = {}  # submission key -> run id
        self.interrupted: set[str] = set()
        self.scheduler_started = 0.0

    # ---- setting up ---------------------------------------------------------------------

    def _env(self, storage: str, broker: str, ledger: str) -> dict[str, str]:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        return {"CHAOS_STORAGE_URL": storage, "CHAOS_BROKER_URL": broker,
                "CHAOS_LEDGER_URL": ledger, "CHAOS_NAMESPACE": self.namespace,
                "CHAOS_RATE_PER_MINUTE": str(rate_per_minute(self.plan)),
                "PYTHONPATH": os.pathsep.join(
                    p for p in (root, os.environ.get("PYTHONPATH", "")) if p)}

    def setup(self) -> None:
        plan = self.plan
        self.ledger_node = redis_node(self.root, "ledger")
        redis: RedisNode | None = None
        broker_redis: RedisNode | None = None
        cluster: Cluster | None = None
        rabbit: Rabbit | None = None
        if plan.lane == "cluster":
            cluster = Cluster(self.root)
            broker_redis = redis_node(self.root, "broker", *AOF)
            storage, broker = cluster.url, broker_redis.url
        else:
            redis = redis_node(self.root, "storage", *AOF)
            storage = broker = redis.url
            if plan.lane == "rabbitmq":
                rabbit = Rabbit(self.root)
                broker = rabbit.url
        extra = self._env(storage, broker, self.ledger_node.url)
        os.environ.update(extra)
        env = dict(os.environ)
        logs = os.path.join(self.root, "logs")
        os.makedirs(logs)
        workers = [Service(f"worker-{i}", ["worker", "chaos.flows", "-p", "1", "-t", "8"],
                           env, logs) for i in range(plan.workers)]
        sweeper = Service("sweeper", ["sweep", "chaos.flows", "--interval", "1"], env, logs)
        scheduler = Service("scheduler", ["scheduler", "chaos.flows"], env, logs)
        self.lane = Lane(plan.lane, workers, sweeper, scheduler, redis=redis,
                         broker_redis=broker_redis, cluster=cluster, rabbit=rabbit)
        for service in (*workers, sweeper, scheduler):
            service.start()
        self.scheduler_started = time.time()

    def teardown(self) -> None:
        lane = self.lane
        if lane is not None:
            for service in (*lane.workers, lane.sweeper, lane.scheduler):
                service.stop()
            for node in (lane.redis, lane.broker_redis):
                if node is not None:
                    node.stop()
            if lane.cluster is not None:
                lane.cluster.stop()
            if lane.rabbit is not None:
                lane.rabbit.close()
        if self.ledger_node is not None:
            self.ledger_node.stop()
        if os.environ.get("CHAOS_KEEP"):
            self.log(f"kept {self.root}")
        else:
            shutil.rmtree(self.root, ignore_errors=True)

    # ---- driving ------------------------------------------------------------------------

    async def _retrying(self, what: str, call: Callable[[], Any], deadline: float) -> Any:
        """`call()` until it succeeds (the storage may be restarting), up to `deadline`."""
        while True:
            try:
                return await call()
            except Exception as error:
                if time.monotonic() > deadline:
                    self.log(f"{what}: gave up: {error!r}")
                    return None
                await anyio.sleep(0.3)

    async def _dispatch_all(self, book: Ledger) -> None:

        flows.configure_from_env()
        plan = self.plan
        names = [name for name, _ in MIX]
        weights = [share for _, share in MIX]
        began = time.monotonic()
        for index in range(plan.runs):
            await anyio.sleep(max(0.0, began + index * plan.span / plan.runs - time.monotonic()))
            name = self.rng.choices(names, weights)[0]
            inputs = _inputs(name, index, self.rng)
            key = f"{self.namespace}-{index}"
            gate = f"chaos-ord:{inputs['account']}" if name == "chaos.ordered" else ""
            flow = _reactor(name)
            book.record("submit.try", key, gate=gate, note=name)
            run = await self._retrying(
                f"dispatch {key}",
                lambda flow=flow, inputs=inputs, key=key: flow.dispatch(idempotency_key=key,
                                                                        **inputs),
                time.monotonic() + DISPATCH_PATIENCE)
            if run is not None:
                book.record("submit.ok", key, run.id, gate=gate, note=name)
                self.submitted[key] = run.id
                if name in flows.INTERRUPTS:
                    self.interrupted.add(run.id)

    async def _answer_interrupts(self) -> None:
        """Continue every paused approval run (again after a fault lost the answer)."""

        for run_id in sorted(self.interrupted):
            with contextlib.suppress(Exception):
                run = await flows.approval.get(run_id)
                if run.status.is_terminal:
                    self.interrupted.discard(run_id)
                elif run.status == "paused":
                    await flows.approval.continue_(run_id, step="approve",
                                                   payload={"by": "chaos"})

    async def _answering(self, until: anyio.Event) -> None:
        while not until.is_set():
            await self._answer_interrupts()
            with anyio.move_on_after(0.5):
                await until.wait()

    async def _unsettled(self) -> list[str]:

        left = []
        for run_id in self.submitted.values():
            try:
                run = await rf.get_run(run_id)
            except Exception:
                left.append(run_id)
                continue
            if not run.status.is_terminal:
                left.append(run_id)
        return left

    def _revive(self) -> None:
        lane = self.lane
        assert lane is not None
        for service in (*lane.workers, lane.sweeper, lane.scheduler):
            if not service.alive():
                service.start()
        if lane.cluster is not None:
            for node in lane.cluster.nodes:
                if not node.alive():
                    node.start()
            lane.cluster.wait_ok()

    async def drive(self, book: Ledger, faults: FaultScheduler) -> float:
        """Dispatch while the faults strike; then settle; returns when the faults stopped."""
        done = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._answering, done)
            await self._dispatch_all(book)
            faults.join()
            faults_ended = time.time()
            self._revive()
            self.log(f"faults over: {dict(faults.tally.counts)}; settling")
            deadline = time.monotonic() + self.plan.settle
            while time.monotonic() < deadline:
                left = await self._unsettled()
                if not left:
                    break
                await anyio.sleep(1.0)
            else:
                self.log(f"settle deadline passed with {len(left)} runs unsettled")
            done.set()
        return faults_ended

    # ---- checking -----------------------------------------------------------------------

    async def stored_runs(self) -> dict[str, checker.StoredRun]:


        ids = set(self.submitted.values())
        cursor = None
        while True:
            page = await rf.list_runs(reactor="chaos.ticker", limit=1000, cursor=cursor)
            ids.update(summary.id for summary in page.runs)
            cursor = page.next_cursor
            if cursor is None:
                break
        runs: dict[str, checker.StoredRun] = {}
        for run_id in ids:
            try:
                run = await rf.get_run(run_id)
            except rf.RunNotFound:
                continue
            runs[run_id] = _stored(run)
        return runs

    def expected_ticks(self, settled_at: float) -> tuple[str, ...]:
        # the scheduler's first pass (after its imports) sees the schedule for the first time
        # and fires only for later ticks
        first = datetime.fromtimestamp(self.scheduler_started + SCHEDULER_STARTUP, UTC).replace(
            second=0, microsecond=0) + timedelta(minutes=1)
        last = datetime.fromtimestamp(settled_at - SCHEDULER_GRACE, UTC)
        ticks = []
        while first <= last:
            ticks.append(first.isoformat())
            first += timedelta(minutes=1)
        return tuple(ticks)

    async def run(self) -> tuple[Figures, checker.Report]:
        began = time.monotonic()
        self.setup()
        assert self.ledger_node is not None and self.lane is not None
        book = Ledger(self.ledger_node.url)
        try:
            faults = FaultScheduler(self.lane, book, self.rng, count=self.plan.faults,
                                    span=self.plan.span, log=self.log)
            await anyio.sleep(3.0)  # the workers import and connect
            faults.start()
            await self.drive(book, faults)
            settled_at = time.time()
            runs = await self.stored_runs()
            records = book.read()
            if os.environ.get("CHAOS_KEEP"):
                with open(os.path.join(self.root, "ledger.jsonl"), "wb") as dump:
                    dump.writelines(msgspec.json.encode(r) + b"\n" for r in records)
            expect = checker.Expectations(undone_reactors=UNDONE_REACTORS,
                                          expected_ticks=self.expected_ticks(settled_at),
                                          ticker="chaos.ticker")
            report = checker.check(records, runs, expect)
            figures = Figures(
                lane=self.plan.lane, seed=self.plan.seed, runs=len(self.submitted),
                ticks=sum(1 for r in runs.values() if r.reactor == "chaos.ticker"),
                faults=dict(faults.tally.counts), kills=faults.tally.kills,
                violations=len(report.violations), limits=len(report.limits),
                reapplied=report.reapplied, duration=time.monotonic() - began,
                commit=_commit())
            return figures, report
        finally:
            book.close()
            self.teardown()


def _reactor(name: str) -> Any:

    return registry.lookup(name)


def _stored(run: rf.Run) -> checker.StoredRun:
    inputs = msgspec.structs.asdict(run.inputs) if run.inputs is not None else {}
    collector = flows.MAP_COLLECTORS.get(run.reactor)
    elements: list[str] | None = None
    map_name = ""
    if collector is not None:
        step, map_name = collector
        state = run.steps.get(step)
        if state is not None and isinstance(state.result, list):
            elements = list(state.result)
    return checker.StoredRun(
        id=run.id, reactor=run.reactor, status=str(run.status),
        steps={key: str(state.status) for key, state in run.steps.items()},
        committed=flows.committed_tokens(run), inputs=inputs, elements=elements,
        items=len(inputs.get("items", [])), map_name=map_name)
