"""The data subjects of `MemoryStorage` (the contract: `storage/contract/subjects.py`).

Mixed into `MemoryStorage`: every method runs under its one mutex, so each is atomic. A run's
index entry goes with the run when the storage drops it (`_drop_subject_run`).
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

from reactorflow.storage.contract.subjects import ERASURES_KEPT


class MemorySubjects:
    """Data keys, run indexes and erasure records, in memory."""

    _mutex: threading.Lock
    _runs: dict[str, Any]

    def _init_subjects(self) -> None:
        self._subject_keys: dict[str, bytes] = {}  # digest -> wrapped data key
        self._subject_runs: dict[str, set[str]] = {}  # digest -> run ids
        self._run_subjects: dict[str, str] = {}  # run id -> digest (to drop it with the run)
        self._erasures: deque[bytes] = deque(maxlen=ERASURES_KEPT)  # newest first

    def _drop_subject_run(self, run_id: str) -> None:
        """Forget the index entry of a run the storage drops (caller holds the mutex)."""
        digest = self._run_subjects.pop(run_id, None)
        if digest is not None:
            self._subject_runs.get(digest, set()).discard(run_id)

    async def enter_subject_run(self, subject: str, run_id: str, wrapped: bytes) -> bytes:
        with self._mutex:
            self._subject_runs.setdefault(subject, set()).add(run_id)
            self._run_subjects[run_id] = subject
            return self._subject_keys.setdefault(subject, bytes(wrapped))

    async def run_subject_key(self, subject: str, run_id: str) -> bytes | None:
        with self._mutex:
            if run_id not in self._subject_runs.get(subject, ()):
                return None
            return self._subject_keys.get(subject)

    async def subject_key(self, subject: str) -> bytes | None:
        with self._mutex:
            return self._subject_keys.get(subject)

    async def replace_subject_key(self, subject: str, expected: bytes, wrapped: bytes) -> bool:
        with self._mutex:
            if self._subject_keys.get(subject) != expected:
                return False
            self._subject_keys[subject] = bytes(wrapped)
            return True

    async def destroy_subject(self, subject: str) -> list[str] | None:
        with self._mutex:
            if self._subject_keys.pop(subject, None) is None:
                return None
            run_ids = self._subject_runs.pop(subject, set())
            for run_id in run_ids:
                self._run_subjects.pop(run_id, None)
            return sorted(run_ids)

    async def subject_runs(self, subject: str) -> list[str]:
        with self._mutex:
            indexed = self._subject_runs.get(subject, set())
            for run_id in [r for r in indexed if r not in self._runs]:
                indexed.discard(run_id)
                self._run_subjects.pop(run_id, None)
            return sorted(indexed)

    async def subject_digests(self, cursor: str, limit: int) -> tuple[list[str], str]:
        with self._mutex:
            digests = sorted(d for d in self._subject_keys if d > cursor)
        page = digests[:limit]
        return page, (page[-1] if len(digests) > limit else "")

    async def record_erasure(self, record: bytes) -> None:
        with self._mutex:
            self._erasures.appendleft(bytes(record))

    async def erasures(self, limit: int) -> list[bytes]:
        with self._mutex:
            return list(self._erasures)[:limit]
