"""The chaos checker can fail: each invariant is fed a ledger that breaks it (and a control
that keeps it), built from the harness's own data structures, and must name the run and the
fault that preceded the violation."""

from __future__ import annotations

from chaos.checker import Expectations, StoredRun, check
from chaos.ledger import Record, parse


class Book:
    """A ledger written in order, as the Lua append would: seq 1, 2, ... and a clock."""

    def __init__(self) -> None:
        self.records: list[Record] = []

    def add(self, kind: str, key: str = "", run: str = "", *, t: float | None = None,
            **fields: object) -> int:
        seq = len(self.records) + 1
        self.records.append(Record(seq, 1_000.0 + seq if t is None else t, kind, key, run,
                                   **fields))  # type: ignore[arg-type]
        return seq

    def apply(self, kind: str, key: str, run: str, token: str, *, pgid: int = 1,
              end: str = "end", note: str = "") -> None:
        self.add(f"{kind}.start", key, run, token=token, pgid=pgid)
        self.add(f"{kind}.{end}", key, run, token=token, pgid=pgid, note=note)


def _invariants(report: object) -> list[str]:
    return [v.invariant for v in report.violations]  # type: ignore[attr-defined]


def test_a_record_round_trips_through_its_stored_line() -> None:
    record = parse(b'7 1000.5 {"kind":"step.start","key":"r:a","run":"r","pgid":3,"token":"t"}')
    assert record == Record(7, 1000.5, "step.start", "r:a", "r", 3, "t")


def test_a_step_applied_again_after_its_checkpoint_is_reported() -> None:
    book = Book()
    book.apply("step", "r1:charge", "r1", "first")
    book.add("fault.kill_worker", "worker-0", pgid=1)
    book.apply("step", "r1:charge", "r1", "second", pgid=2)
    runs = {"r1": StoredRun("r1", "chaos.saga", "completed", committed={"r1:charge": "first"})}
    report = check(book.records, runs)
    assert _invariants(report) == ["applied-twice"]
    violation = report.violations[0]
    assert violation.run == "r1" and "r1:charge" in violation.detail
    assert violation.fault.startswith("kill_worker worker-0")


def test_a_re_run_before_the_checkpoint_is_at_least_once_not_a_violation() -> None:
    book = Book()
    book.add("step.start", "r1:charge", "r1", token="cut-off", pgid=1)
    book.add("fault.kill_worker", "worker-0", pgid=1)
    book.apply("step", "r1:charge", "r1", "kept", pgid=2)
    runs = {"r1": StoredRun("r1", "chaos.saga", "completed", committed={"r1:charge": "kept"})}
    report = check(book.records, runs)
    assert report.violations == [] and report.reapplied == 1


def test_an_undo_applied_twice_with_no_fault_between_is_reported() -> None:
    book = Book()
    book.apply("undo", "r1:reserve", "r1", "u1")
    book.apply("undo", "r1:reserve", "r1", "u2")
    assert _invariants(check(book.records, {})) == ["handler-twice"]
    excused = Book()
    excused.apply("undo", "r1:reserve", "r1", "u1")
    excused.add("fault.restart_redis", "redis:1", pgid=-1)
    excused.apply("undo", "r1:reserve", "r1", "u2")
    assert check(excused.records, {}).violations == []


def test_a_handler_whose_process_was_killed_while_it_ran_may_run_again() -> None:
    """The kill is noted before its signal lands: the dying process may still log the
    handler's end (seq after the kill's) and never checkpoint it, so the rollback runs it again
    (the quick lane's seed 85419). A kill of another process excuses nothing."""
    def book(killed: int) -> Book:
        b = Book()
        b.add("comp.start", "r1:weigh:3", "r1", token="c1", pgid=1)
        b.add("fault.kill_worker", "worker-0", pgid=killed)
        b.add("comp.end", "r1:weigh:3", "r1", token="c1", pgid=1)
        b.apply("comp", "r1:weigh:3", "r1", "c2", pgid=2)
        return b

    own = check(book(killed=1).records, {})
    assert own.violations == [] and own.reapplied == 1
    assert _invariants(check(book(killed=3).records, {})) == ["handler-twice"]


def test_an_undo_run_again_after_an_outage_while_it_ran_is_at_least_once() -> None:
    """Redis restarted while the undo ran: its lease or its checkpoint was lost with it, so the
    rollback ran it again (the full chaos run's first finding, seed 7). A restart before the
    undo started excuses nothing."""
    during = Book()
    during.add("undo.start", "r1:reserve", "r1", token="u1", pgid=1)
    during.add("fault.restart_redis", "redis:1", pgid=-1)
    during.add("undo.end", "r1:reserve", "r1", token="u1", pgid=1)
    during.apply("undo", "r1:reserve", "r1", "u2", pgid=2)
    report = check(during.records, {})
    assert report.violations == [] and report.reapplied == 1
    before = Book()
    before.add("fault.restart_redis", "redis:1", pgid=-1)
    before.apply("undo", "r1:reserve", "r1", "u1")
    before.apply("undo", "r1:reserve", "r1", "u2")
    assert _invariants(check(before.records, {})) == ["handler-twice"]


def test_a_compensate_run_again_after_an_outage_while_its_attempt_ran_is_at_least_once() -> None:
    """Redis restarted while the element ran, before its compensate started: the failed
    attempt and its compensation are stored together, so the outage cut off both and the retry
    compensated again (seed 8's flag). A restart before the attempt started excuses nothing, and
    an undo's window still opens at the undo itself."""
    def book(restart_first: bool) -> Book:
        b = Book()
        if restart_first:
            b.add("fault.restart_redis", "redis:1", pgid=-1)
        b.add("elem.start", "r1:pack:3", "r1", token="e1", pgid=1)
        if not restart_first:
            b.add("fault.restart_redis", "redis:1", pgid=-1)
        b.add("elem.fail", "r1:pack:3", "r1", token="e1", pgid=1, note="compensated")
        b.apply("comp", "r1:pack:3", "r1", "c1", pgid=1)
        b.apply("elem", "r1:pack:3", "r1", "e2", pgid=2, end="fail", note="compensated")
        b.apply("comp", "r1:pack:3", "r1", "c2", pgid=2)
        return b

    during = check(book(restart_first=False).records, {})
    assert during.violations == [] and during.reapplied == 1
    assert _invariants(check(book(restart_first=True).records, {})) == ["handler-twice"]
    undo = Book()
    undo.add("step.start", "r1:reserve", "r1", token="s1", pgid=1)
    undo.add("fault.restart_redis", "redis:1", pgid=-1)
    undo.add("step.end", "r1:reserve", "r1", token="s1", pgid=1)
    undo.apply("undo", "r1:reserve", "r1", "u1")
    undo.apply("undo", "r1:reserve", "r1", "u2")
    assert _invariants(check(undo.records, {})) == ["handler-twice"]


def test_a_lock_overlap_is_reported_unless_its_holder_was_a_zombie() -> None:
    def overlapping(stop_first: bool) -> Book:
        book = Book()
        book.add("gate.enter", "chaos-lock:a1", "r1", token="s1", gate="lock", pgid=1)
        if stop_first:
            book.add("fault.stop_worker", "worker-0", pgid=1)
        book.add("gate.enter", "chaos-lock:a1", "r2", token="s2", gate="lock", pgid=2)
        book.add("gate.leave", "chaos-lock:a1", "r2", token="s2", gate="lock", pgid=2)
        book.add("gate.leave", "chaos-lock:a1", "r1", token="s1", gate="lock", pgid=1)
        return book

    report = check(overlapping(stop_first=False).records, {})
    assert _invariants(report) == ["lock-overlap"]
    assert report.violations[0].run == "r2" and "r1" in report.violations[0].detail
    zombie = check(overlapping(stop_first=True).records, {})
    assert zombie.violations == [] and [v.invariant for v in zombie.limits] == ["lock-overlap"]


def test_sections_one_after_the_other_hold_the_lock() -> None:
    book = Book()
    for run in ("r1", "r2", "r3"):
        book.add("gate.enter", "chaos-lock:a1", run, token=run, gate="lock")
        book.add("gate.leave", "chaos-lock:a1", run, token=run, gate="lock")
    assert check(book.records, {}).violations == []


def test_a_section_cut_off_by_a_kill_ends_at_the_kill() -> None:
    book = Book()
    book.add("gate.enter", "chaos-lock:a1", "r1", token="s1", gate="lock", pgid=1)
    book.add("fault.kill_worker", "worker-0", pgid=1)
    book.add("gate.enter", "chaos-lock:a1", "r2", token="s2", gate="lock", pgid=2)
    book.add("gate.leave", "chaos-lock:a1", "r2", token="s2", gate="lock", pgid=2)
    assert check(book.records, {}).violations == []
    book.add("gate.enter", "chaos-lock:a1", "r3", token="s3", gate="lock", pgid=3)
    assert _invariants(check(book.records, {})) == ["section-open"]


def test_a_semaphore_past_its_limit_is_reported() -> None:
    book = Book()
    for run in ("r1", "r2", "r3"):
        book.add("gate.enter", "chaos-sem:a1", run, token=run, gate="semaphore:2", pgid=1)
    for run in ("r1", "r2", "r3"):
        book.add("gate.leave", "chaos-sem:a1", run, token=run, gate="semaphore:2", pgid=1)
    report = check(book.records, {})
    assert _invariants(report) == ["semaphore-exceeded"] and report.violations[0].run == "r3"


def test_an_exceeded_rate_is_reported() -> None:
    book = Book()
    for index, run in enumerate(("r1", "r2", "r3")):  # 3 runs in the window [6000, 6060)
        book.add("gate.enter", "chaos-rate", run, token=run, gate="rate:2/60", t=6010.0 + index)
        book.add("gate.leave", "chaos-rate", run, token=run, gate="rate:2/60", t=6011.0 + index)
    report = check(book.records, {})
    assert _invariants(report) == ["rate-exceeded"] and report.violations[0].run == "r3"
    spread = Book()  # the same 3 runs over two windows: within the limit
    for t, run in ((6010.0, "r1"), (6020.0, "r2"), (6070.0, "r3")):
        spread.add("gate.enter", "chaos-rate", run, token=run, gate="rate:2/60", t=t)
        spread.add("gate.leave", "chaos-rate", run, token=run, gate="rate:2/60", t=t + 1)
    assert check(spread.records, {}).violations == []


def test_a_missing_undo_in_a_rolled_back_run_is_reported() -> None:
    book = Book()
    book.apply("step", "r1:reserve", "r1", "a")
    book.apply("step", "r1:charge", "r1", "b")
    book.add("fault.kill_worker", "worker-1", pgid=1)
    book.apply("step", "r1:ship", "r1", "c", end="fail", note="compensated")
    book.apply("comp", "r1:ship", "r1", "c2")
    book.apply("undo", "r1:charge", "r1", "u")
    runs = {"r1": StoredRun("r1", "chaos.saga", "failed",
                            steps={"reserve": "undone", "charge": "undone", "ship": "failed"})}
    expect = Expectations(undone_reactors=frozenset({"chaos.saga"}))
    report = check(book.records, runs, expect)
    assert _invariants(report) == ["undo-missing"]
    assert report.violations[0].run == "r1" and "r1:reserve" in report.violations[0].detail
    book.apply("undo", "r1:reserve", "r1", "u2")
    assert check(book.records, runs, expect).violations == []


def test_a_missing_compensate_and_a_step_left_completed_are_reported() -> None:
    book = Book()
    book.apply("step", "r1:ship", "r1", "c", end="fail", note="compensated")
    runs = {"r1": StoredRun("r1", "chaos.saga", "failed", steps={"reserve": "completed"})}
    report = check(book.records, runs, Expectations(undone_reactors=frozenset({"chaos.saga"})))
    assert sorted(_invariants(report)) == ["compensate-missing", "not-rolled-back"]


def test_a_lost_run_an_unsettled_run_and_a_never_started_one_are_reported() -> None:
    book = Book()
    book.add("submit.try", "chaos-0")
    book.add("fault.restart_redis", "redis:1", pgid=-1)
    book.add("submit.ok", "chaos-0", "r-lost")
    book.add("submit.try", "chaos-1")
    book.add("submit.ok", "chaos-1", "r-stuck")
    book.add("submit.try", "chaos-2")
    runs = {"r-stuck": StoredRun("r-stuck", "chaos.saga", "running")}
    report = check(book.records, runs)
    assert sorted(_invariants(report)) == ["never-started", "not-settled", "run-lost"]
    lost = next(v for v in report.violations if v.invariant == "run-lost")
    assert lost.run == "r-lost" and lost.fault.startswith("restart_redis")


def test_an_ordered_lock_entered_out_of_start_order_is_reported() -> None:
    book = Book()
    for key, run in (("chaos-0", "r1"), ("chaos-1", "r2")):
        book.add("submit.try", key, gate="chaos-ord:a1")
        book.add("submit.ok", key, run, gate="chaos-ord:a1")
    for run in ("r2", "r1"):
        book.add("gate.enter", "chaos-ord:a1", run, token=run, gate="ordered")
        book.add("gate.leave", "chaos-ord:a1", run, token=run, gate="ordered")
    runs = {run: StoredRun(run, "chaos.ordered", "completed") for run in ("r1", "r2")}
    report = check(book.records, runs)
    assert _invariants(report) == ["out-of-order"] and report.violations[0].run == "r2"


def test_a_tick_started_twice_or_missed_is_reported() -> None:
    runs = {rid: StoredRun(rid, "chaos.ticker", "completed", inputs={"tick": "T1"})
            for rid in ("t1", "t2")}
    expect = Expectations(expected_ticks=("T1", "T2"), ticker="chaos.ticker")
    assert sorted(_invariants(check([], runs, expect))) == ["tick-missed", "tick-twice"]


def test_a_map_element_without_an_outcome_is_reported() -> None:
    book = Book()
    book.apply("elem", "r1:weigh:0", "r1", "e0")
    runs = {"r1": StoredRun("r1", "chaos.survey", "completed", elements=["e0", ""], items=3,
                            map_name="weigh", committed={"r1:weigh:0": "e0"})}
    assert _invariants(check(book.records, runs)) == ["element-unsettled"] * 2


def test_a_timer_that_fires_early_or_twice_without_a_fault_is_reported() -> None:
    early = Book()
    early.add("timer.fire", "r1:woke", "r1", t=1_000.0, note=repr(1_001.0))
    assert _invariants(check(early.records, {})) == ["timer-early"]
    on_time = Book()
    on_time.add("timer.fire", "r1:woke", "r1", t=1_001.0, note=repr(1_001.0))
    assert check(on_time.records, {}).violations == []
    twice = Book()
    twice.add("timer.fire", "r1:woke", "r1", t=1_002.0, note=repr(1_001.0))
    twice.add("timer.fire", "r1:woke", "r1", t=1_003.0, note=repr(1_001.0))
    assert _invariants(check(twice.records, {})) == ["timer-twice"]
    excused = Book()
    excused.add("timer.fire", "r1:woke", "r1", t=1_002.0, note=repr(1_001.0))
    excused.add("fault.kill_worker", "worker-0", pgid=1)
    excused.add("timer.fire", "r1:woke", "r1", t=1_004.0, note=repr(1_001.0))
    report = check(excused.records, {})
    assert report.violations == [] and report.reapplied == 1
