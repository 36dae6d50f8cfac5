"""The fault scheduler: at seeded random moments, SIGKILL and restart workers, the sweeper and
the scheduler; SIGSTOP a worker past its lock TTL and SIGCONT it (a zombie); restart Redis
(AOF always); restart the broker (RabbitMQ lane); kill a cluster master so its replica takes
over (cluster lane). Every fault is written to the ledger before it strikes."""

from __future__ import annotations

import random
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from chaos import flows
from chaos.ledger import Ledger
from chaos.services import Cluster, Rabbit, RedisNode, Service

ZOMBIE_SECONDS = max(flows.LOCK_TTL, flows.GATE_TTL) * 2  # stopped well past every lease


@dataclass
class Lane:
    """Everything a fault can strike."""

    name: str
    workers: list[Service]
    sweeper: Service
    scheduler: Service
    redis: RedisNode | None = None  # the storage's Redis (redis and rabbitmq lanes)
    broker_redis: RedisNode | None = None  # a separate broker Redis (cluster lane)
    cluster: Cluster | None = None
    rabbit: Rabbit | None = None


@dataclass
class Tally:
    """What the faults did (the figures of a run)."""

    counts: Counter[str] = field(default_factory=Counter)

    @property
    def kills(self) -> int:
        return sum(n for kind, n in self.counts.items() if kind.startswith("kill")) + (
            self.counts["restart_redis"] + self.counts["failover"])


WEIGHTS = {"kill_worker": 5, "stop_worker": 2, "kill_sweeper": 1, "kill_scheduler": 1,
           "restart_redis": 1, "restart_broker": 1, "failover": 1}


class FaultScheduler:
    """Strikes `count` faults at random moments over `span` seconds (a thread of its own)."""

    def __init__(self, lane: Lane, ledger: Ledger, rng: random.Random, *, count: int,
                 span: float, log: Callable[[str], None]) -> None:
        self.lane, self.ledger, self.rng, self.log = lane, ledger, rng, log
        self.moments = sorted(rng.uniform(1.0, span) for _ in range(count))
        self.tally = Tally()
        self.kinds = [k for k in WEIGHTS if self._applies(k)]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="faults", daemon=True)
        self._zombies: list[threading.Thread] = []
        self._storage_busy = threading.Lock()

    def _applies(self, kind: str) -> bool:
        lane = self.lane
        if kind == "restart_redis":
            return lane.redis is not None
        if kind == "restart_broker":
            return lane.rabbit is not None
        if kind == "failover":
            return lane.cluster is not None
        return True

    def start(self) -> None:
        self._thread.start()

    def join(self) -> None:
        self._stop.set()
        self._thread.join()
        for zombie in self._zombies:
            zombie.join()

    def _loop(self) -> None:
        began = time.monotonic()
        for moment in self.moments:
            if self._stop.wait(max(0.0, began + moment - time.monotonic())):
                return
            kind = self.rng.choices(self.kinds, [WEIGHTS[k] for k in self.kinds])[0]
            try:
                getattr(self, kind)()
            except Exception as error:  # a fault that could not strike is logged, not fatal
                self.log(f"fault {kind} failed: {error!r}")

    def _note(self, kind: str, target: str, pgid: int = 0, note: str = "") -> None:
        self.ledger.record(f"fault.{kind}", target, pgid=pgid or -1, note=note)
        self.tally.counts[kind] += 1

    # ---- the faults -------------------------------------------------------------------

    def _restart(self, service: Service, kind: str) -> None:
        self._note(kind, service.name, service.pgid)
        service.kill()
        time.sleep(self.rng.uniform(0.0, 0.5))
        service.start()
        self.tally.counts["restarts"] += 1

    def kill_worker(self) -> None:
        candidates = [w for w in self.lane.workers if not w.stopped]
        if candidates:
            self._restart(self.rng.choice(candidates), "kill_worker")

    def kill_sweeper(self) -> None:
        self._restart(self.lane.sweeper, "kill_sweeper")

    def kill_scheduler(self) -> None:
        self._restart(self.lane.scheduler, "kill_scheduler")

    def stop_worker(self) -> None:
        candidates = [w for w in self.lane.workers if not w.stopped and w.alive()]
        if len(candidates) < 2:  # keep one worker running
            return
        worker = self.rng.choice(candidates)
        pgid = worker.pgid
        self._note("stop_worker", worker.name, pgid, note=f"{ZOMBIE_SECONDS:g}s")
        worker.stopped = True
        worker.signal(signal.SIGSTOP)

        def resume() -> None:
            time.sleep(ZOMBIE_SECONDS)
            if worker.pgid == pgid:  # not killed and restarted meanwhile
                self.ledger.record("fault.cont_worker", worker.name, pgid=pgid)
                worker.signal(signal.SIGCONT)
            worker.stopped = False

        thread = threading.Thread(target=resume, name="zombie", daemon=True)
        self._zombies.append(thread)
        thread.start()

    def restart_redis(self) -> None:
        node = self.lane.redis
        assert node is not None
        with self._storage_busy:
            self._note("restart_redis", f"redis:{node.port}")
            node.kill()
            time.sleep(self.rng.uniform(0.0, 1.0))
            node.start()  # replays its AOF (appendfsync always) before answering PING
            self.tally.counts["restarts"] += 1

    def restart_broker(self) -> None:
        rabbit = self.lane.rabbit
        assert rabbit is not None
        with self._storage_busy:
            self._note("restart_broker", f"rabbitmq:{rabbit.port}")
            rabbit.stop()
            rabbit.start()
            self.tally.counts["restarts"] += 1

    def failover(self) -> None:
        cluster = self.lane.cluster
        assert cluster is not None
        with self._storage_busy:
            if not cluster.wait_ok(timeout=30):
                return
            masters = cluster.masters()
            if len(masters) < 3:
                return
            node = self.rng.choice(masters)
            self._note("failover", f"master:{node.port}")
            node.kill()
            # the replica is promoted after the node timeout; then the old master rejoins
            time.sleep(Cluster.NODE_TIMEOUT_MS / 1000 * 3)
            cluster_ok = cluster.wait_ok(timeout=30)
            node.start()
            self.tally.counts["restarts"] += 1
            if not cluster_ok:
                self.log("cluster did not report ok after a failover")
            cluster.wait_ok(timeout=30)
