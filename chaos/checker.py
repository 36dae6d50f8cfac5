"""The invariant checker: reads the ledger and what storage kept, and names every violation.

Pure functions over real data structures (ledger `Record`s and `StoredRun`s), so that
tests/chaos/test_checker.py can prove each invariant fails when it should.

The invariants (each a `Violation.invariant`):

- `run-lost`: every run the driver started is in storage; `never-started`: every run it tried
  to start was started; `not-settled`: every run reached a final state.
- `applied-twice`: no application of a step, interrupt or map element starts after the
  application storage checkpointed (matched by its token) had ended.
- `handler-twice`: an undo or compensate that had completed is not applied again unless a
  fault could have lost its checkpoint in between (its process killed or stopped, or the
  storage restarted or failed over): handlers run at least once, never twice for nothing.
- `undo-missing`: every effect of a rolled-back run (a step or element that ended) is undone;
  `compensate-missing`: every failed effect with a compensate handler is compensated;
  `not-rolled-back`: no step of a rolled-back run is left `completed`.
- `lock-overlap`, `semaphore-exceeded`: gate-held sections (ledger clock) never overlap past
  the gate's limit; `rate-exceeded`: no window admits more runs than its limit;
  `out-of-order`: ordered-lock runs enter in the order they were started.
- `element-unsettled`: every element of a completed map has exactly one outcome.
- `tick-twice`, `tick-missed`: one run per schedule tick.

An overlap whose holder was stopped (SIGSTOP) past its lease while inside the section is not a
violation but a documented limit (`limits`): a lease cannot stop a paused process's code; see
docs/guarantees.md. So is an application repeated after a cluster failover (asynchronous
replication may lose an acknowledged checkpoint).
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from chaos.ledger import Record

TIMER_SLACK = 0.002
"""Seconds a fire may seem early by: the ledger's clock and the workers' are the same machine's,
read through two Redis servers' TIME (microseconds, rounded)."""
PROCESS_FAULTS = ("fault.kill_worker", "fault.stop_worker", "fault.kill_sweeper",
                  "fault.kill_scheduler")
STORAGE_FAULTS = ("fault.restart_redis", "fault.failover")
RATE_SLACK = 0.5  # a run whose section starts this close after a window opens may be charged
#                   in the window before (the charge precedes the body): not counted


@dataclass(frozen=True)
class StoredRun:
    """What storage says about one run, as the checker needs it.

    committed: idempotency key -> token of the application storage kept.
    elements: for a map run that completed, the element tokens its collector returned
        (`""` for a failed element); `items` the number of elements it was given.
    """

    id: str
    reactor: str
    status: str
    steps: dict[str, str] = field(default_factory=dict)
    committed: dict[str, str] = field(default_factory=dict)
    inputs: dict[str, Any] = field(default_factory=dict)
    elements: list[str] | None = None
    items: int = 0
    map_name: str = ""


@dataclass(frozen=True)
class Violation:
    invariant: str
    run: str
    detail: str
    fault: str = ""  # the fault that preceded it

    def __str__(self) -> str:
        after = f"  [after {self.fault}]" if self.fault else ""
        return f"{self.invariant}: run {self.run or '-'}: {self.detail}{after}"


@dataclass
class Report:
    violations: list[Violation] = field(default_factory=list)
    limits: list[Violation] = field(default_factory=list)  # documented limits observed
    checked: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    reapplied: int = 0  # at-least-once re-applications before a checkpoint (allowed)

    def by_invariant(self) -> dict[str, int]:
        counts: dict[str, int] = defaultdict(int)
        for violation in self.violations:
            counts[violation.invariant] += 1
        return dict(counts)


@dataclass
class Execution:
    """One application of an effect: its start, and its end or failure (None if cut off)."""

    kind: str
    key: str
    run: str
    token: str
    pgid: int
    start: int
    t: float
    end: int | None = None
    failed: bool = False
    note: str = ""


@dataclass(frozen=True)
class Expectations:
    """What the harness knows beyond the ledger and storage."""

    undone_reactors: frozenset[str] = frozenset()  # every effect of these reactors has an undo
    expected_ticks: tuple[str, ...] = ()
    ticker: str = ""  # the scheduled reactor's name


class _Faults:
    def __init__(self, records: Sequence[Record]) -> None:
        self.all = [r for r in records if r.kind.startswith("fault.")]
        self.seqs = [r.seq for r in self.all]

    def before(self, seq: int) -> str:
        """The last fault before `seq`, described."""
        prior = [f for f in self.all if f.seq < seq]
        if not prior:
            return ""
        last = prior[-1]
        return f"{last.kind.removeprefix('fault.')} {last.key} (seq {last.seq})"

    def between(self, lo: int, hi: int, kinds: Iterable[str], pgid: int | None = None
                ) -> Record | None:
        wanted = tuple(kinds)
        for fault in self.all:
            if lo < fault.seq < hi and fault.kind in wanted and (
                    pgid is None or fault.pgid == pgid):
                return fault
        return None

    def killed_after(self, pgid: int, seq: int) -> int | None:
        for fault in self.all:
            if fault.seq > seq and fault.pgid == pgid and fault.kind in PROCESS_FAULTS and (
                    fault.kind != "fault.stop_worker"):
                return fault.seq
        return None


def executions(records: Iterable[Record], kinds: Iterable[str]) -> dict[str, list[Execution]]:
    """Applications of effects of `kinds` (`step`, `undo`, ...) by idempotency key, in start
    order."""
    wanted = set(kinds)
    by_token: dict[str, Execution] = {}
    for record in records:
        kind, _, phase = record.kind.partition(".")
        if kind not in wanted:
            continue
        if phase == "start":
            by_token[record.token] = Execution(kind, record.key, record.run, record.token,
                                               record.pgid, record.seq, record.t)
        elif record.token in by_token:
            execution = by_token[record.token]
            execution.end = record.seq
            execution.failed = phase == "fail"
            execution.note = record.note
    by_key: dict[str, list[Execution]] = defaultdict(list)
    for execution in sorted(by_token.values(), key=lambda e: e.start):
        by_key[execution.key].append(execution)
    return by_key


def check(records: Sequence[Record], runs: dict[str, StoredRun],
          expect: Expectations = Expectations()) -> Report:
    """Every invariant over the ledger `records` and the stored `runs`."""
    report = Report()
    faults = _Faults(records)
    _check_runs(records, runs, faults, report)
    effects = executions(records, ("step", "elem", "intr"))
    handlers = executions(records, ("undo", "comp"))
    _check_exactly_once(runs, effects, faults, report)
    _check_handlers(handlers, effects, faults, report)
    _check_rollbacks(runs, effects, handlers, faults, expect, report)
    _check_gates(records, faults, report)
    _check_ordered(records, faults, report)
    _check_elements(runs, effects, faults, report)
    _check_ticks(runs, expect, report)
    _check_timers(records, faults, report)
    return report


def _check_runs(records: Sequence[Record], runs: dict[str, StoredRun], faults: _Faults,
                report: Report) -> None:
    tried: dict[str, Record] = {}
    started: dict[str, Record] = {}
    for record in records:
        if record.kind == "submit.try":
            tried.setdefault(record.key, record)
        elif record.kind == "submit.ok":
            started[record.key] = record
    for key, record in tried.items():
        report.checked["runs"] += 1
        if key not in started:
            report.violations.append(Violation("never-started", "", f"submission {key} was "
                                               "never started", faults.before(record.seq)))
    for record in started.values():
        run = runs.get(record.run)
        if run is None:
            report.violations.append(Violation("run-lost", record.run, "started (dispatch "
                                               "returned) but not in storage",
                                               faults.before(record.seq)))
    for run in runs.values():
        if run.status not in ("completed", "failed", "halted", "cancelled", "aborted"):
            report.violations.append(Violation("not-settled", run.id,
                                               f"{run.reactor} ended the check {run.status}",
                                               faults.before(10**18)))


def _check_exactly_once(runs: dict[str, StoredRun], effects: dict[str, list[Execution]],
                        faults: _Faults, report: Report) -> None:
    for run in runs.values():
        for key, token in run.committed.items():
            report.checked["applications"] += 1
            attempts = effects.get(key, [])
            kept = next((e for e in attempts if e.token == token), None)
            if kept is None or kept.end is None or kept.failed:
                report.violations.append(Violation(
                    "applied-twice", run.id, f"{key}: the checkpointed application "
                    f"{token[:8]} has no completed ledger entry"))
                continue
            report.reapplied += sum(1 for e in attempts if e.start < kept.start)
            for later in attempts:
                if later.start <= kept.end:
                    continue
                failover = faults.between(kept.end, later.start, ("fault.failover",))
                violation = Violation(
                    "applied-twice", run.id,
                    f"{key}: applied again (seq {later.start}, pgid {later.pgid}) after the "
                    f"checkpointed application ended (seq {kept.end}, pgid {kept.pgid})",
                    faults.before(later.start))
                (report.limits if failover else report.violations).append(violation)


def _check_handlers(handlers: dict[str, list[Execution]], effects: dict[str, list[Execution]],
                    faults: _Faults, report: Report) -> None:
    for key, attempts in handlers.items():
        report.checked["handlers"] += 1
        done = [e for e in attempts if e.end is not None and not e.failed]
        for later in attempts:
            for earlier in done:
                assert earlier.end is not None
                if earlier.end >= later.start or earlier.kind != later.kind:
                    continue
                # a kill of its process from when it started until it ran again: one noted after
                # it ended cut off its checkpoint, and so did one noted while it ran (the fault
                # is noted before the signal is sent, so the dying process may still log the
                # handler's end, seq after the kill's, and never checkpoint it: the quick lane's
                # seed 85419); or a storage fault from the moment its checkpoint's story began:
                # an outage while the handler ran (the run's lease lapsed, its checkpoint was
                # refused or cut off) also costs its checkpoint, and the rollback resumed from
                # the one before runs it again
                excuse = (faults.between(earlier.start, later.start, PROCESS_FAULTS,
                                         earlier.pgid)
                          or faults.between(_window_opens(earlier, effects.get(key, [])),
                                            later.start, STORAGE_FAULTS))
                if excuse is None:
                    report.violations.append(Violation(
                        "handler-twice", later.run,
                        f"{later.kind} {key} applied again (seq {later.start}) after it had "
                        f"completed (seq {earlier.end}) with no fault that could cut off its "
                        f"checkpoint",
                        faults.before(later.start)))
                else:
                    report.reapplied += 1
                break


def _window_opens(handler: Execution, attempts: Sequence[Execution]) -> int:
    """Where a storage fault starts to excuse `handler` running again. An undo's checkpoint is
    its own, so its window opens when it started. A compensate's is not: the failed attempt it
    compensates and the compensation are stored together, in one write after both, so an
    outage from the start of that attempt (the element or step whose failure it answers) can
    cut the pair off, and the retry of the attempt fails and compensates again."""
    if handler.kind != "comp":
        return handler.start
    compensated = [e.start for e in attempts if e.start < handler.start and e.failed]
    return compensated[-1] if compensated else handler.start


def _check_rollbacks(runs: dict[str, StoredRun], effects: dict[str, list[Execution]],
                     handlers: dict[str, list[Execution]], faults: _Faults,
                     expect: Expectations, report: Report) -> None:
    by_run: dict[str, list[Execution]] = defaultdict(list)
    for attempts in effects.values():
        for execution in attempts:
            by_run[execution.run].append(execution)

    def handled(kind: str, key: str) -> bool:
        return any(e.kind == kind and e.end is not None and not e.failed
                   for e in handlers.get(key, []))

    for run in runs.values():
        for execution in by_run.get(run.id, []):
            if execution.failed and execution.note == "compensated":
                report.checked["compensations"] += 1
                if not handled("comp", execution.key):
                    report.violations.append(Violation(
                        "compensate-missing", run.id, f"{execution.key} failed (seq "
                        f"{execution.end}) and was never compensated",
                        faults.before(execution.end or execution.start)))
        if run.status != "failed" or run.reactor not in expect.undone_reactors:
            continue
        report.checked["rollbacks"] += 1
        for key, status in run.steps.items():
            if status == "completed":
                report.violations.append(Violation(
                    "not-rolled-back", run.id, f"step {key} is still completed in a "
                    "rolled-back run"))
        ended = {e.key: e for e in by_run.get(run.id, []) if e.end is not None and not e.failed}
        for key, execution in sorted(ended.items()):
            if not handled("undo", key):
                report.violations.append(Violation(
                    "undo-missing", run.id, f"{key} was applied (seq {execution.end}) and "
                    "never undone", faults.before(execution.end or execution.start)))


@dataclass
class _Section:
    key: str
    gate: str
    run: str
    token: str
    pgid: int
    enter: int
    t: float
    leave: float = math.inf
    zombie: bool = False


def _sections(records: Sequence[Record], faults: _Faults) -> list[_Section]:
    by_token: dict[str, _Section] = {}
    for record in records:
        if record.kind == "gate.enter":
            by_token[record.token] = _Section(record.key, record.gate, record.run,
                                              record.token, record.pgid, record.seq, record.t)
        elif record.kind == "gate.leave" and record.token in by_token:
            by_token[record.token].leave = record.seq
    sections = sorted(by_token.values(), key=lambda s: s.enter)
    for section in sections:
        if section.leave == math.inf:
            killed = faults.killed_after(section.pgid, section.enter)
            if killed is not None:
                section.leave = killed
        stop = faults.between(section.enter - 1, int(min(section.leave, 10**18)) + 1,
                              ("fault.stop_worker",), section.pgid)
        section.zombie = stop is not None
    return sections


def _check_gates(records: Sequence[Record], faults: _Faults, report: Report) -> None:
    by_key: dict[str, list[_Section]] = defaultdict(list)
    for section in _sections(records, faults):
        by_key[section.key].append(section)
    for key, sections in by_key.items():
        gate = sections[0].gate
        if gate.startswith("rate:"):
            _check_rate(key, gate, sections, faults, report)
            continue
        limit = int(gate.split(":", 1)[1]) if gate.startswith("semaphore:") else 1
        invariant = "semaphore-exceeded" if gate.startswith("semaphore:") else "lock-overlap"
        for section in sections:
            report.checked["sections"] += 1
            if section.leave == math.inf:
                report.violations.append(Violation(
                    "section-open", section.run, f"{gate} {key}: entered (seq "
                    f"{section.enter}) and never left, and its process was not killed",
                    faults.before(section.enter)))
        active: list[_Section] = []
        for section in sections:
            active = [s for s in active if s.leave > section.enter]
            active.append(section)
            if len(active) <= limit:
                continue
            holders = ", ".join(f"{s.run} (seq {s.enter}-{s.leave}, pgid {s.pgid})"
                                for s in active)
            violation = Violation(invariant, section.run,
                                  f"{gate} {key}: {len(active)} holders at seq "
                                  f"{section.enter} (limit {limit}): {holders}",
                                  faults.before(section.enter))
            zombie = any(s.zombie for s in active)
            (report.limits if zombie else report.violations).append(violation)


def _check_rate(key: str, gate: str, sections: list[_Section], faults: _Faults,
                report: Report) -> None:
    limit_text, window_text = gate.removeprefix("rate:").split("/")
    limit, window = int(limit_text), float(window_text)
    first: dict[str, _Section] = {}
    for section in sections:
        first.setdefault(section.run, section)
    buckets: dict[int, list[_Section]] = defaultdict(list)
    for section in first.values():
        bucket = math.floor(section.t / window)
        report.checked["rate-runs"] += 1
        if section.t - bucket * window >= RATE_SLACK:
            buckets[bucket].append(section)
    for bucket, admitted in sorted(buckets.items()):
        if len(admitted) > limit:
            runs = sorted(admitted, key=lambda s: s.enter)
            report.violations.append(Violation(
                "rate-exceeded", runs[limit].run,
                f"{key}: {len(admitted)} runs in the window starting {bucket * window:.0f} "
                f"(limit {limit})", faults.before(runs[limit].enter)))


def _check_ordered(records: Sequence[Record], faults: _Faults, report: Report) -> None:
    tried: dict[str, int] = {}
    started: dict[str, tuple[str, str, int, int]] = {}  # submission -> (key, run, try, ok)
    for record in records:
        if record.kind == "submit.try" and record.gate:
            tried.setdefault(record.key, record.seq)
        elif record.kind == "submit.ok" and record.gate:
            started[record.key] = (record.gate, record.run, tried.get(record.key, record.seq),
                                   record.seq)
    first_enter: dict[str, int] = {}
    for record in records:
        if record.kind == "gate.enter" and record.gate == "ordered":
            first_enter.setdefault(record.run, record.seq)
    lines: dict[str, list[tuple[str, int, int]]] = defaultdict(list)
    for key, run, try_seq, ok_seq in started.values():
        lines[key].append((run, try_seq, ok_seq))
    for key, line in lines.items():
        line.sort(key=lambda entry: entry[2])
        for index, (run_a, _try_a, ok_a) in enumerate(line):
            report.checked["ordered-runs"] += 1
            for run_b, try_b, _ok_b in line[index + 1:]:
                if ok_a >= try_b or run_a not in first_enter or run_b not in first_enter:
                    continue
                if first_enter[run_b] < first_enter[run_a]:
                    report.violations.append(Violation(
                        "out-of-order", run_b, f"{key}: entered (seq {first_enter[run_b]}) "
                        f"before {run_a} (seq {first_enter[run_a]}), which was started "
                        "first", faults.before(first_enter[run_b])))


def _check_elements(runs: dict[str, StoredRun], effects: dict[str, list[Execution]],
                    faults: _Faults, report: Report) -> None:
    for run in runs.values():
        if run.elements is None or run.status != "completed":
            continue
        if len(run.elements) != run.items:
            report.violations.append(Violation(
                "element-unsettled", run.id, f"{len(run.elements)} outcomes for {run.items} "
                "elements"))
        for index, token in enumerate(run.elements):
            report.checked["elements"] += 1
            key = f"{run.id}:{run.map_name}:{index}"
            attempts = effects.get(key, [])
            if token:
                continue  # checked by applied-twice against its committed token
            if not any(e.failed for e in attempts):
                report.violations.append(Violation(
                    "element-unsettled", run.id, f"{key} has a failed outcome but no failed "
                    "application in the ledger", faults.before(10**18)))


def _check_ticks(runs: dict[str, StoredRun], expect: Expectations, report: Report) -> None:
    if not expect.ticker:
        return
    per_tick: dict[str, list[str]] = defaultdict(list)
    for run in runs.values():
        if run.reactor == expect.ticker:
            per_tick[str(run.inputs.get("tick"))].append(run.id)
    for tick, ids in sorted(per_tick.items()):
        report.checked["ticks"] += 1
        if len(ids) > 1:
            report.violations.append(Violation("tick-twice", ids[1],
                                               f"tick {tick} started {len(ids)} runs: {ids}"))
    for tick in expect.expected_ticks:
        if tick not in per_tick:
            report.violations.append(Violation("tick-missed", "", f"tick {tick} started no "
                                               "run"))


def _check_timers(records: Sequence[Record], faults: _Faults, report: Report) -> None:
    """Timers fire once, never early: each `timer.fire` record (the step after a sleep, as it
    began) comes at or after its deadline by the ledger's clock; a second fire of one key
    needs a fault between the two that could have cut off the first one's checkpoint (the
    step after the sleep is then applied at least once, as any step is)."""
    fires: dict[str, list[Record]] = defaultdict(list)
    for record in records:
        if record.kind == "timer.fire":
            fires[record.key].append(record)
    for key, seen in fires.items():
        report.checked["timers"] += 1
        first = seen[0]
        deadline = float(first.note) if first.note else 0.0
        if first.t + TIMER_SLACK < deadline:
            report.violations.append(Violation(
                "timer-early", first.run, f"{key}: fired at {first.t:.3f}, "
                f"{deadline - first.t:.3f}s before its deadline {deadline:.3f}",
                faults.before(first.seq)))
        for earlier, later in itertools.pairwise(seen):
            excuse = faults.between(earlier.seq, later.seq, (*PROCESS_FAULTS, *STORAGE_FAULTS))
            if excuse is None:
                report.violations.append(Violation(
                    "timer-twice", later.run, f"{key}: fired again (seq {later.seq}) after "
                    f"seq {earlier.seq} with no fault between", faults.before(later.seq)))
            else:
                report.reapplied += 1
