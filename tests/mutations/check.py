"""Deliberate bugs the suite must catch: each is applied to a temporary copy of the repository
and the tests named for it must then fail (and pass on the unmutated copy).

    python tests/mutations/check.py            # every mutation
    python tests/mutations/check.py stall      # those whose name contains "stall"

Prints one line per mutation (CAUGHT / SURVIVED / STALE when its code is no longer there) and
exits non-zero if any survived. Each mutation is a literal replacement that must match exactly
once, so a refactor that moves the code shows up as STALE instead of a false "caught".
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COPIED = ("reactorflow", "tests", "pyproject.toml", "README.md", "docs", "examples",
          "mkdocs.yml")


@dataclass(frozen=True)
class Mutation:
    name: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]


SWEEPER = "reactorflow/runtime/services/sweeper.py"
UNITS = "reactorflow/runtime/engine/async_units.py"
SWEEPER_TESTS = "tests/recovery/test_sweeper.py"

MUTATIONS = (
    Mutation(
        "sweeper ignores stall_timeout", SWEEPER,
        "        elif now - live.touched_at >= config.settings().stall_timeout:\n",
        "        else:\n",
        (f"{SWEEPER_TESTS}::test_a_stalled_run_is_left_alone_until_stall_timeout",)),
    Mutation(
        "unit sweep ignores the unit's lock holder and dispatch age", SWEEPER,
        "        elif unit.lock_owner is None and now - unit.dispatched_at >= stall:\n",
        "        else:\n",
        (f"{SWEEPER_TESTS}::test_a_unit_whose_worker_holds_its_lock_is_not_swept",
         f"{SWEEPER_TESTS}::test_a_unit_dispatched_within_stall_timeout_is_not_swept")),
    Mutation(
        "unit sweep ignores the unit's lock holder", SWEEPER,
        "        elif unit.lock_owner is None and now - unit.dispatched_at >= stall:\n",
        "        elif now - unit.dispatched_at >= stall:\n",
        (f"{SWEEPER_TESTS}::test_a_unit_whose_worker_holds_its_lock_is_not_swept",)),
    Mutation(
        "unit sweep ignores the unit's dispatch age", SWEEPER,
        "        elif unit.lock_owner is None and now - unit.dispatched_at >= stall:\n",
        "        elif unit.lock_owner is None:\n",
        (f"{SWEEPER_TESTS}::test_a_unit_dispatched_within_stall_timeout_is_not_swept",)),
    Mutation(
        "async unit enqueued before its marker is written", UNITS,
        "        await ex.writer.checkpoint(key, marker, [event(\"async.dispatched\", key)],"
        " unit=True)\n"
        "        queue.enqueue_unit(ex.run_id, ex.reactor, key, version=ex.meta.version)\n",
        "        queue.enqueue_unit(ex.run_id, ex.reactor, key, version=ex.meta.version)\n"
        "        await ex.writer.checkpoint(key, marker, [event(\"async.dispatched\", key)],"
        " unit=True)\n",
        (f"{SWEEPER_TESTS}::test_a_unit_marker_is_stored_before_its_job_is_enqueued",)),
    # -- further deliberate bugs, each pinned by a test that passed against it before --------
    Mutation(
        "undo in reverse declaration order (not completion order)",
        "reactorflow/runtime/engine/rollback.py",
        "    done.sort(key=lambda k: records[k].seq, reverse=True)\n",
        "    done.reverse()\n",
        ("tests/runtime/test_abort_cancel_undo.py::test_undo_of_a_completed_run_goes_newest_first",
         "tests/runtime/test_saga.py::test_failure_compensates_then_undoes_in_reverse")),
    Mutation(
        "completion not published (MemoryStorage): waiters only re-check",
        "reactorflow/storage/memory/storage.py",
        "        if publish:\n            await self.publish(run_id)\n",
        "        if False:\n            await self.publish(run_id)\n",
        ("tests/runtime/test_wait_and_middleware.py"
         "::test_wait_is_woken_by_a_run_finishing_in_another_thread",)),
    Mutation(
        "never_retry ignored", "reactorflow/retry.py",
        "        if self.never_retry and isinstance(error, self.never_retry):\n",
        "        if False:\n",
        ("tests/runtime/test_retry.py::test_never_retry_goes_straight_to_compensation",)),
    Mutation(
        "a refused unit marker stays in the unit index (Redis)",
        "reactorflow/storage/redis/storage.py",
        "            if unit:\n                await conn.client.zrem(self._keys.units(), "
        "_unit_member(run_id, key))\n",
        "            if False:\n                await conn.client.zrem(self._keys.units(), "
        "_unit_member(run_id, key))\n",
        ("tests/storage/test_unit_index.py::test_a_refused_unit_marker_leaves_no_index_entry",)),
    Mutation(
        "claimed payload of a paused run with no holder never swept", SWEEPER,
        "    if any(k in claims for k in state.waiting_on):\n",
        "    if False:\n",
        (f"{SWEEPER_TESTS}::test_a_paused_run_whose_resumer_died_after_its_claim_is_resumed",)),
    Mutation(
        "lock keeper keeps extending a lock it lost", "reactorflow/runtime/engine/lockkeeper.py",
        "        if not kept:\n",
        "        if False:\n",
        ("tests/runtime/test_lock_keeper.py::test_a_lock_taken_over_is_dropped_not_extended",)),
)


def _copy(into: Path) -> None:
    for name in COPIED:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, into / name,
                            ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
        elif source.exists():
            shutil.copy2(source, into / name)


def _pytest(where: Path, tests: tuple[str, ...]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *tests],
        cwd=where, capture_output=True, text=True, check=False, timeout=600)


def check(mutation: Mutation) -> str:
    with tempfile.TemporaryDirectory(prefix="rf-mutant-") as tmp:
        where = Path(tmp)
        _copy(where)
        baseline = _pytest(where, mutation.tests)
        if baseline.returncode != 0:
            return f"BROKEN    {mutation.name}: its tests fail without the mutation\n" + \
                baseline.stdout[-2000:]
        target = where / mutation.path
        text = target.read_text()
        if text.count(mutation.old) != 1:
            return f"STALE     {mutation.name}: its code is not (exactly once) in {mutation.path}"
        target.write_text(text.replace(mutation.old, mutation.new))
        mutated = _pytest(where, mutation.tests)
        verdict = "CAUGHT  " if mutated.returncode != 0 else "SURVIVED"
        return f"{verdict}  {mutation.name}"


def main(argv: list[str]) -> int:
    chosen = [m for m in MUTATIONS if not argv or any(a in m.name for a in argv)]
    results = []
    for mutation in chosen:
        line = check(mutation)
        print(line, flush=True)
        results.append(line)
    return 0 if all(line.startswith("CAUGHT") for line in results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
