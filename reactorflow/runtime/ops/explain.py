"""`rf.explain(run_id)`: what a run waits on, and since when, read from what storage holds.

Each kind of `rf.Blocker` is told by one function below, from the run's head (its status and
state), its step records, and the gates, locks and ordered lines in storage; nothing is asked
of the process that may be driving the run. A run that is moving (an execution holds its lock
and it moved lately) and an ended run have no blockers: the list is empty, and the surfaces say
which from the run's status and its steps in flight (`in_flight`).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from reactorflow import clock, config
from reactorflow.blockers import Blocker, BlockerKind
from reactorflow.definition.gates import GateKind
from reactorflow.errors import RunNotFound
from reactorflow.protection.errors import open_run_error, opened_errors
from reactorflow.protection.resolve import run_keys
from reactorflow.records import GateBlock, RunState, StepRecord, decode_step
from reactorflow.runtime.ops.snapshots import read_head
from reactorflow.runtime.services.heartbeats import JOB_QUEUE, serving
from reactorflow.snapshot import Run
from reactorflow.status import RollbackTrigger, Status, StepStatus
from reactorflow.storage.contract.decoding import reading
from reactorflow.storage.contract.storage import Storage


async def explain(run_id: str) -> list[Blocker]:
    """What run `run_id` waits on, each blocker named by its cause, with since when and until
    when (see `rf.Blocker`). Empty when nothing holds it back: it has ended (a terminal
    status), or it is moving (an execution holds it and it moved lately; `rf.get_run(...)`
    tells its steps in flight).

    Args:
        run_id: The run's id.

    Raises:
        RunNotFound: no such run (a wrong id, or it expired after its retention period).
        CorruptRecord: the run's stored state cannot be decoded.
        StorageError: the storage failed.
    """
    if not isinstance(run_id, str) or not run_id:
        raise RunNotFound(str(run_id))
    storage = config.current_storage()
    stored = await storage.load_run(run_id)
    if stored is None:
        raise RunNotFound(run_id)
    status, meta, state = read_head(stored.head)
    keys = await run_keys(storage, meta, run_id)  # error text is shown opened (or <encrypted>)
    steps: dict[str, StepRecord] = {}
    for key, raw in stored.steps.items():
        with reading(run_id, "step", key):
            steps[key] = opened_errors(keys, decode_step(raw))
    if state.error is not None:
        state.error = open_run_error(keys, state.error, shown=True)
    now = clock.now()
    match status:
        case (Status.COMPLETED | Status.FAILED | Status.HALTED | Status.CANCELLED
              | Status.ABORTED):
            return []
        case Status.HELD:
            return [held(state)]
        case Status.ROLLING_BACK:
            return [*rolling_back(state), *await async_units(storage, run_id, state, steps)]
        case Status.RUNNING | Status.PAUSED if state.paused_by is not None:
            return [paused(state)]
        case Status.RUNNING | Status.PAUSED:
            owner = await storage.lock_owner(run_id)
            found = [*interrupts(state, steps), *sleeps(steps), *backoffs(steps),
                     *await async_units(storage, run_id, state, steps)]
            if owner is None:
                found += await gates(storage, run_id, state)
            if found or status is Status.PAUSED:
                return found
            if owner is None:
                return [queued(state, now, await serving(JOB_QUEUE))]
            return stale_owner(owner, state, steps, now)


def _utc(moment: float | None) -> datetime | None:
    return clock.utc(moment) if moment is not None else None


def _when(moment: float) -> str:
    return clock.utc(moment).isoformat(timespec="seconds")


def _run_of(holder: str) -> str:
    """The run id in a gate holder's name (`<run id>`, `<run id>|<scope>`, `<run id>:<elem>`)."""
    return holder.split("|", 1)[0].split(":", 1)[0]


def held(state: RunState) -> Blocker:
    """A run held after a step failed under `on_failure="hold"`: an operator's turn (or its
    `hold_timeout`, when it has one: then it rolls back by itself)."""
    error = state.error
    step = error.step if error is not None else None
    what = str(error) if error is not None else "a step failed"
    until = (f"; it rolls back by itself at {_when(state.hold_until)}"
             if state.hold_until is not None else "; retry, skip, rewind or undo it")
    return Blocker(BlockerKind.HELD, step, _utc(state.updated_at), _utc(state.hold_until),
                   f"held: {what}{until}")


def paused(state: RunState) -> Blocker:
    """A run an operator paused (`reactor.pause`): only `resume` moves it."""
    by = state.paused_by
    assert by is not None
    why = f" ({by.reason})" if by.reason else ""
    return Blocker(BlockerKind.PAUSED, None, _utc(by.at), None,
                   f"paused by {by.by}{why}; resume it to go on")


def rolling_back(state: RunState) -> list[Blocker]:
    """A run undoing its steps, and each rollback handler that waits for its lock or
    semaphore (parked until a release hands it the place)."""
    trigger = state.rollback_trigger
    why = {None: "rolling back", RollbackTrigger.FAILURE: "rolling back after a failure",
           RollbackTrigger.UNDO: "rolling back: an undo was asked for",
           RollbackTrigger.REWIND: "rolling back the steps of a rewind"}[trigger]
    found = [Blocker(BlockerKind.ROLLING_BACK, None, _utc(state.updated_at), None, why)]
    for key, since in state.rollback_waits.items():
        found.append(Blocker(BlockerKind.ROLLING_BACK, key, _utc(since), None,
                             f"the rollback handler of step {key!r} waits for its lock or "
                             "semaphore (another run holds it)"))
    return found


def interrupts(state: RunState, steps: dict[str, StepRecord]) -> list[Blocker]:
    """Interrupts waiting for a payload: since the step began waiting, until its timeout."""
    found = []
    for key in state.waiting_on:
        record = steps.get(key)
        since = record.started_at if record is not None and record.started_at else None
        deadline = state.deadlines.get(key)
        tail = (f"; it times out at {_when(deadline)}" if deadline is not None
                else "; only a payload moves it")
        found.append(Blocker(BlockerKind.INTERRUPT, key, _utc(since or state.updated_at),
                             _utc(deadline), f"waiting for a payload for interrupt {key!r}{tail}"))
    return found


def sleeps(steps: dict[str, StepRecord]) -> list[Blocker]:
    """Sleep steps waiting for their deadline (`wake_at`)."""
    return [Blocker(BlockerKind.SLEEP, key, _utc(record.started_at), _utc(record.wake_at),
                    f"sleep step {key!r} sleeps until {_when(record.wake_at)}")
            for key, record in steps.items()
            if record.status is StepStatus.WAITING and record.wake_at is not None]


def backoffs(steps: dict[str, StepRecord]) -> list[Blocker]:
    """Steps parked between retry attempts (`running` with a `retry_at`)."""
    found = []
    for key, record in steps.items():
        if record.status is not StepStatus.RUNNING or record.retry_at is None:
            continue
        error = f" ({record.error.type}: {record.error.message})" if record.error else ""
        detail = (f"step {key!r} failed attempt {record.attempts}{error}; attempt "
                  f"{record.attempts + 1} at {_when(record.retry_at)}")
        found.append(Blocker(BlockerKind.BACKOFF, key,
                             _utc(record.finished_at or record.started_at),
                             _utc(record.retry_at), " ".join(detail.split())))
    return found


async def async_units(storage: Storage, run_id: str, state: RunState,
                      steps: dict[str, StepRecord]) -> list[Blocker]:
    """Async units out (the run parked on them): the execution holding each unit's lock, or
    none (its job waits for a worker, or its worker was lost and its lock lapsed)."""
    found = []
    for key, since in state.parked_on.items():
        owner = await storage.lock_owner(f"{run_id}:{key}")
        record = steps.get(key)
        child = record.child_run if record is not None else None
        what = f"async unit {key!r}" + (f" (child run {child})" if child else "")
        where = (f" is out in {owner}" if owner is not None else
                 " is out; no execution holds it (its job waits for a worker)")
        found.append(Blocker(BlockerKind.ASYNC_UNIT, key, _utc(since), None, what + where))
    return found


async def gates(storage: Storage, run_id: str, state: RunState) -> list[Blocker]:
    """The busy gates a worker snoozed the run for (`RunState.gate_blocks`), each with its
    holder as storage has it now."""
    return [await gate(storage, run_id, slot, block) for slot, block in state.gate_blocks.items()]


async def gate(storage: Storage, run_id: str, slot: str, block: GateBlock) -> Blocker:
    """One busy gate: a lock or semaphore and the run holding it, a rate limit and when its
    window frees, an ordered lock's turn with the runs ahead and the head run."""
    step = slot or None
    where = f" for step {slot!r}" if slot else ""
    since = _utc(block.since)
    kind = GateKind(block.gate)
    match kind:
        case GateKind.LOCK | GateKind.SEMAPHORE:
            others = [h for h in await storage.gate_holders(block.key) if _run_of(h) != run_id]
            holder = _run_of(sorted(others)[0]) if others else None
            by = (f"held by run {holder}" + (f" and {len(others) - 1} more" if len(others) > 1
                                             else "")
                  if holder is not None else "free now: the run takes it when it is tried again")
            return Blocker(BlockerKind.GATE, step, since, None,
                           f"{kind} {block.key!r}{where} is {by}", holder=holder)
        case GateKind.RATE_LIMIT:
            frees = f" until {_when(block.until)}" if block.until is not None else ""
            return Blocker(BlockerKind.RATE_LIMIT, step, since, _utc(block.until),
                           f"rate limit {block.key!r}{where} is spent{frees}")
        case GateKind.ORDERED_LOCK:
            ticket = f"{run_id}|{slot}" if slot else run_id
            line = await storage.ordered_peek(block.key, ticket)
            head = _run_of(line.turn) if line.turn is not None else None
            ahead = (f"{line.ahead} run(s) ahead" if line.ahead is not None
                     else "not in line now (it takes a place when it is tried again)")
            turn = f", the turn is run {head}'s" if head is not None else ""
            return Blocker(BlockerKind.ORDERED_TURN, step, since, None,
                           f"ordered lock {block.key!r}{where}: {ahead}{turn}", holder=head)
        case GateKind.PERIOD:  # a used period halts the run: it never snoozes for one
            return Blocker(BlockerKind.GATE, step, since, None,
                           f"period {block.key!r}{where} is used for this period")


def queued(state: RunState, now: float, workers: int) -> Blocker:
    """A running run that no execution owns and that waits on nothing else: its job is
    queued for a worker (dispatched, handed off, or put back); `workers` live worker processes
    consume its queue (by their heartbeats; none: the detail says so)."""
    waited = max(0.0, now - state.updated_at)
    serve = (f"{workers} live worker(s) serve queue {JOB_QUEUE!r}" if workers else
             f"no live worker serves queue {JOB_QUEUE!r}: start one (reactorflow worker)")
    return Blocker(BlockerKind.QUEUED, None, _utc(state.updated_at), None,
                   f"queued for a worker for {waited:.0f}s; {serve}", waited=waited,
                   workers=workers)


def last_moved(state: RunState, steps: Iterable[StepRecord]) -> float:
    """When the run last showed progress: its state's last write or a step's last start or end."""
    moments = [state.updated_at]
    for record in steps:
        moments += [m for m in (record.started_at, record.finished_at) if m is not None]
    return max(moments)


def stale_owner(owner: str, state: RunState, steps: dict[str, StepRecord],
                now: float) -> list[Blocker]:
    """An execution holds the run's lock: moving (no blocker) unless the run has not moved for
    longer than `stall_timeout` (its process renews the lock, but its steps do not end)."""
    moved = last_moved(state, steps.values())
    if now - moved <= config.settings().stall_timeout:
        return []
    return [Blocker(BlockerKind.OWNER, None, _utc(moved), None,
                    f"the execution {owner} holds the run's lock, but the run has not moved "
                    f"since {_when(moved)} (stale: a step that does not return?)")]


def in_flight(run: Run) -> list[tuple[str, datetime | None]]:
    """The steps of a moving run that are running now, with since when (for the surfaces'
    "running: step X in flight since ..." when `explain` finds no blocker)."""
    return [(key, _utc(state.started_at)) for key, state in run.steps.items()
            if state.status == StepStatus.RUNNING]
