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


SWEEPER = "reactorflow/runtime/sweeper.py"
UNITS = "reactorflow/runtime/units.py"
SWEEPER_TESTS = "tests/recovery/test_sweeper.py"

MUTATIONS = (
    Mutation(
        "sweeper ignores stall_timeout", SWEEPER,
        "            elif now - live.touched_at >= settings.stall_timeout:\n",
        "            else:\n",
        (f"{SWEEPER_TESTS}::test_a_stalled_run_is_left_alone_until_stall_timeout",)),
    Mutation(
        "unit sweep ignores the unit's lock holder and dispatch age", SWEEPER,
        "        if unit.lock_owner is not None or now - unit.dispatched_at < stall:\n",
        "        if False:\n",
        (f"{SWEEPER_TESTS}::test_a_unit_whose_worker_holds_its_lock_is_not_swept",
         f"{SWEEPER_TESTS}::test_a_unit_dispatched_within_stall_timeout_is_not_swept")),
    Mutation(
        "unit sweep ignores the unit's lock holder", SWEEPER,
        "        if unit.lock_owner is not None or now - unit.dispatched_at < stall:\n",
        "        if now - unit.dispatched_at < stall:\n",
        (f"{SWEEPER_TESTS}::test_a_unit_whose_worker_holds_its_lock_is_not_swept",)),
    Mutation(
        "unit sweep ignores the unit's dispatch age", SWEEPER,
        "        if unit.lock_owner is not None or now - unit.dispatched_at < stall:\n",
        "        if unit.lock_owner is not None:\n",
        (f"{SWEEPER_TESTS}::test_a_unit_dispatched_within_stall_timeout_is_not_swept",)),
    Mutation(
        "async unit enqueued before its marker is written", UNITS,
        "        await ex.checkpoint(key, marker, [event(\"async.dispatched\", key)], unit=True)\n"
        "        enqueue_unit(ex.run_id, ex.reactor, key)\n",
        "        enqueue_unit(ex.run_id, ex.reactor, key)\n"
        "        await ex.checkpoint(key, marker, [event(\"async.dispatched\", key)], unit=True)\n",
        (f"{SWEEPER_TESTS}::test_a_unit_marker_is_stored_before_its_job_is_enqueued",)),
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
