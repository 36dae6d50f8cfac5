"""The storage contract for data subjects (part of `Storage`; see `storage/contract/storage.py`):
each subject's wrapped data key, the index subject -> runs, and the audit trail of erasures.

A subject is named here by its digest (`runtime/subjects/digests.py`), never by its text. Per
subject the backend keeps, in one place (on Redis one hash slot, `{<digest>}`, so each method is
one atomic script on a cluster too):

* its **data key**, wrapped by the codec (opaque bytes): created first-wins with the first run's
  index entry (`enter_subject_run`: two concurrent first runs agree on one key), replaced only
  by a compare-and-set (`replace_subject_key`: a key rotation re-wraps it), destroyed with the
  run index in one atomic step (`destroy_subject`);
* the **run index**: the ids of the runs created under the current key. A run's entry is
  written, with the key it gets, before the run is created (a start that failed leaves an entry
  naming no run: readers verify entries against the runs); a run whose entry is gone from the
  index after its key was destroyed is erased (`run_subject_key` gives it no key, even once a
  later run created a fresh one). Retention drops the entries of runs that are gone: memory with
  the run; Redis, where the index lives in another slot than the runs, when `subject_runs` reads
  them and as new runs enter a large index (see `storage/redis/subjects.py`).

The digests of every subject that has a key are listed for a key rotation (`subject_digests`:
Redis scans the data keys; a subject erased meanwhile may still be listed, and is skipped).
Erasures are recorded in a bounded audit list (`record_erasure`, `erasures`), newest first,
never expiring (the newest `ERASURES_KEPT`). Nothing here is fenced: no run lock guards a
subject.
"""

from __future__ import annotations

import abc

ERASURES_KEPT = 10_000
"""Audit records of erasures a backend keeps at most (the oldest go first)."""


class SubjectsContract(abc.ABC):
    """Data keys, run indexes and erasure records of data subjects."""

    @abc.abstractmethod
    async def enter_subject_run(self, subject: str, run_id: str, wrapped: bytes) -> bytes:
        """Index a run about to be created for the subject and give it the subject's data key,
        in one atomic step: the key is stored unless the subject has one (first wins: two
        concurrent first runs agree on one key), the run enters the run index (idempotent),
        and the key stored now is returned (the caller's `wrapped`, or the one there first).

        Args:
            subject: The subject's digest.
            run_id: The run about to be created.
            wrapped: A new data key, wrapped by the codec (stored only if the subject has none).

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def run_subject_key(self, subject: str, run_id: str) -> bytes | None:
        """The subject's wrapped data key if `run_id` is in its run index (the run was created
        under this key), else None: the key was destroyed since (the run's values are erased,
        even when a later run created a fresh key). Read atomically.

        Args:
            subject: The subject's digest.
            run_id: The run.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def subject_key(self, subject: str) -> bytes | None:
        """The subject's wrapped data key (None: it has none, or it was destroyed).

        Args:
            subject: The subject's digest.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def replace_subject_key(self, subject: str, expected: bytes, wrapped: bytes) -> bool:
        """Compare-and-set of the subject's wrapped data key (a rotation re-wraps it): True if
        the stored key was `expected` and is now `wrapped`; False, writing nothing, if it was
        not (destroyed, or already replaced).

        Args:
            subject: The subject's digest.
            expected: The wrapped key the caller read.
            wrapped: The same data key wrapped anew.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def destroy_subject(self, subject: str) -> list[str] | None:
        """Destroy the subject's data key and empty its run index, in one atomic step. Returns
        the run ids the index held (hints: verify them against the runs), or None when the
        subject had no key (nothing is written then). A later `enter_subject_run` starts afresh.

        Args:
            subject: The subject's digest.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def subject_runs(self, subject: str) -> list[str]:
        """The runs indexed for the subject that are still stored (entries of runs that are
        gone are removed), in no order.

        Args:
            subject: The subject's digest.

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def subject_digests(self, cursor: str, limit: int) -> tuple[list[str], str]:
        """A page of the digests of subjects that have a data key: about `limit` of them and
        the cursor of the next page (`""` to start; `""` back: the listing is done). A subject
        whose key is created meanwhile may be missed by a listing under way (a rotation writes
        new keys under the new key already).

        Args:
            cursor: Where the page starts (`""`: the beginning).
            limit: About how many digests to return (>= 1).

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def record_erasure(self, record: bytes) -> None:
        """Append an erasure's audit record (keeps the newest `ERASURES_KEPT`).

        Args:
            record: The encoded record (it carries no subject data: its digest at most).

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """

    @abc.abstractmethod
    async def erasures(self, limit: int) -> list[bytes]:
        """The newest `limit` erasure records, newest first.

        Args:
            limit: How many at most (>= 1).

        Raises:
            StorageError: The backend failed (`StorageConnectionError`: it cannot be reached).
        """
