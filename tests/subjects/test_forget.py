"""`rf.forget_subject` on both backends (api.md §17): one subject's paused, sleeping and
completed runs read `"<erased>"` everywhere, its runs in flight are cancelled ("subject
erased"), the erasure is recorded without the subject's data, and nothing of another subject
(nor of a run without a subject) changes. Real runs on the real storage, the codec configured."""

from __future__ import annotations

import anyio
import pytest

import reactorflow as rf
from reactorflow.runtime.subjects.digests import subject_digest
from tests.subjects import flows

ERASED = "<erased>"
SUBJECT = "cust-42"
"""A subject no run id can contain (ids are hex: "c42" turned up inside one)."""


async def _three(customer: str) -> tuple[rf.Run, rf.Run, rf.Run]:
    """A paused, a sleeping and a completed run of `customer`."""
    email = f"{customer}@example.com"
    paused = await flows.signups.run(customer_id=customer, email=email)
    sleeping = await flows.reminders.run(customer_id=customer, email=email)
    done = await flows.receipts.run(customer_id=customer, email=email)
    assert paused.status is rf.Status.PAUSED
    assert sleeping.status is rf.Status.RUNNING
    assert sleeping.steps["wait_a_day"].status == "waiting"
    assert done.status is rf.Status.COMPLETED
    return paused, sleeping, done


async def test_forget_erases_one_subject_and_changes_nothing_else(sealed: rf.Storage) -> None:
    paused, sleeping, done = await _three(SUBJECT)
    kept = await _three("c7")
    unrelated = await flows.plain.run(customer_id=SUBJECT, email=f"{SUBJECT}@example.com")

    assert await rf.forget_subject(SUBJECT, actor="dpo@example.com") == 3

    after = {run.id: await rf.get_run(run.id) for run in (paused, sleeping, done)}
    for run in after.values():
        assert run.inputs == ERASED, run.inputs
        assert all(s.result in (None, ERASED) for s in run.steps.values()), run.steps
    assert after[done.id].steps["receipt"].result == ERASED
    assert after[done.id].status is rf.Status.COMPLETED  # ended: only its values are gone
    for run_id in (paused.id, sleeping.id):
        assert after[run_id].status is rf.Status.CANCELLED
        assert after[run_id].cancel_reason == "subject erased"
    # another subject's runs (and a run without a subject) are untouched, and go on
    assert (await rf.get_run(kept[2].id)).steps["receipt"].result == "receipt for c7@example.com"
    recorded = (await rf.get_run(unrelated.id)).steps["record"].result
    assert recorded == f"recorded {SUBJECT}@example.com"
    resumed = await flows.signups.continue_(kept[0].id, step="confirm", payload={"code": "X"})
    assert resumed.status is rf.Status.COMPLETED
    assert resumed.steps["confirm"].result == "welcome sent to c7@example.com, confirmed X"
    assert (await rf.get_run(kept[1].id)).status is rf.Status.RUNNING  # still asleep

    digest = subject_digest(SUBJECT)
    [erasure] = [e for e in await rf.list_erasures() if e.subject_digest == digest]
    assert (erasure.actor, erasure.runs) == ("dpo@example.com", 3)
    assert sorted(erasure.cancelled) == sorted([paused.id, sleeping.id])
    assert SUBJECT not in repr(erasure)  # the audit record holds no subject data


async def test_an_erased_run_cannot_be_continued_undone_or_retried(sealed: rf.Storage) -> None:
    """What was erased can never be read again: an operation that needs a value of the run
    is refused naming the erasure, and writes nothing."""
    paused, _, done = await _three("c43")
    await rf.forget_subject("c43")
    with pytest.raises(rf.KeyUnavailable) as caught:
        await flows.signups.continue_(paused.id, step="confirm", payload={"code": "X"})
    assert caught.value.erased and "can never be read again" in str(caught.value)
    with pytest.raises(rf.KeyUnavailable, match="erased"):
        await flows.receipts.undo(done.id)
    assert (await rf.get_run(paused.id)).status is rf.Status.CANCELLED  # nothing written
    assert (await rf.get_run(done.id)).status is rf.Status.COMPLETED


async def test_an_unknown_or_erased_subject_is_a_no_op(sealed: rf.Storage) -> None:
    assert await rf.forget_subject("nobody") == 0
    await flows.receipts.run(customer_id="c44", email="c44@example.com")
    assert await rf.forget_subject("c44") == 1
    before = len(await rf.list_erasures())
    assert await rf.forget_subject("c44") == 0  # erased already: nothing recorded again
    assert len(await rf.list_erasures()) == before


async def test_a_new_run_of_a_forgotten_subject_gets_a_fresh_key(sealed: rf.Storage) -> None:
    old = await flows.receipts.run(customer_id="c45", email="c45@example.com")
    digest = subject_digest("c45")
    first_key = await sealed.subject_key(digest)
    await rf.forget_subject("c45")
    assert await sealed.subject_key(digest) is None
    new = await flows.receipts.run(customer_id="c45", email="new-c45@example.com")
    assert new.steps["receipt"].result == "receipt for new-c45@example.com"
    assert (await rf.get_run(new.id)).inputs.email == "new-c45@example.com"
    assert await sealed.subject_key(digest) not in (None, first_key)
    assert (await rf.get_run(old.id)).inputs == ERASED  # erased stays erased


async def test_concurrent_first_runs_of_a_subject_agree_on_one_key(sealed: rf.Storage) -> None:
    """Twenty first runs of one new subject at once: storage keeps one data key (first wins),
    and every run's values open with it."""
    runs: list[rf.Run] = []

    async def start(n: int) -> None:
        runs.append(await flows.receipts.run(customer_id="c46", email=f"{n}@example.com"))

    async with anyio.create_task_group() as tg:
        for n in range(20):
            tg.start_soon(start, n)
    for run in runs:
        again = await rf.get_run(run.id)
        assert again.steps["receipt"].result == f"receipt for {again.inputs.email}"
    assert await rf.forget_subject("c46") == 20


async def test_bad_arguments_are_refused_and_change_nothing(sealed: rf.Storage) -> None:
    await flows.receipts.run(customer_id="c47", email="c47@example.com")
    for bad in ("", None, 42):
        with pytest.raises(rf.ReactorflowError, match="a subject is a non-empty str"):
            await rf.forget_subject(bad)  # type: ignore[arg-type]
    with pytest.raises(rf.ReactorflowError, match="actor must name who acts"):
        await rf.forget_subject("c47", actor="  ")
    with pytest.raises(rf.ReactorflowError, match="limit must be a whole number"):
        await rf.list_erasures(0)
    assert await sealed.subject_key(subject_digest("c47")) is not None  # still there


async def test_a_subject_needs_a_codec(storage: rf.Storage) -> None:
    with pytest.raises(rf.ConfigurationError, match=r"declares subject=.*no codec is configured"):
        await flows.receipts.run(customer_id="c48", email="c48@example.com")
    assert (await flows.receipts.list_runs()).runs == []  # nothing was stored


async def test_forget_cancels_held_runs_and_runs_in_the_middle_of_a_step(
        sealed: rf.Storage) -> None:
    """A held run is cancelled at once; a run whose step is running in another task is
    cancelled at its next step boundary (the request is left for its execution): the step in
    flight finishes, sealed under the destroyed key, so its result reads erased too."""
    held = await flows.holds.run(customer_id="c50", email="c50@example.com")
    assert held.status is rf.Status.HELD
    flows.STARTED.append(anyio.Event())
    flows.RELEASE.append(anyio.Event())
    ended: list[rf.Run] = []

    async def drive() -> None:
        ended.append(await flows.busy.run(customer_id="c50", email="c50@example.com"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(drive)
        await flows.STARTED[-1].wait()
        assert await rf.forget_subject("c50") == 2
        flows.RELEASE[-1].set()
    [busy] = ended
    assert (busy.status, busy.cancel_reason) == (rf.Status.CANCELLED, "subject erased")
    read = await rf.get_run(busy.id)
    assert read.steps["slow"].result == ERASED and read.steps["after_slow"].status == "pending"
    after = await rf.get_run(held.id)
    assert (after.status, after.cancel_reason) == (rf.Status.CANCELLED, "subject erased")
    assert after.error is None or after.error.message == ERASED
    assert after.steps["charge"].error == f"ValueError: {ERASED}"  # its text named the e-mail


async def test_the_subject_is_stored_nowhere_in_clear(sealed: rf.Storage,
                                                      request: pytest.FixtureRequest) -> None:
    """Only the subject's digest is stored (runs, index, data key, audit record): its text is
    in no stored byte, before the erasure and after it; the scan finds the digest (a check of
    the check)."""
    from tests.protection.conftest import memory_bytes, redis_bytes

    subject = "subject-marker-5f1e9c"
    await flows.signups.run(customer_id=subject, email="m@example.com")
    await flows.receipts.run(customer_id=subject, email="m@example.com")

    def stored() -> list[bytes]:
        if isinstance(sealed, rf.MemoryStorage):
            return memory_bytes(sealed)
        return redis_bytes(request.getfixturevalue("redis_url"))

    digest = subject_digest(subject).encode()
    for _ in ("before", "after"):
        found = stored()
        assert not [b for b in found if subject.encode() in b]
        assert any(digest in b for b in found)
        await rf.forget_subject(subject)


async def test_a_subject_that_cannot_be_rendered_refuses_the_start(sealed: rf.Storage) -> None:
    """A template over a nested field passes the declaration (its root is an input) but may
    not render over given inputs: the start is refused naming the field, nothing stored."""
    nested = rf.Reactor("subj.nested", inputs=flows.Account, subject="{email.domain}")

    @nested.step
    async def only(email: str) -> str:
        return email

    with pytest.raises(rf.InputValidationError) as caught:
        await nested.run(customer_id="c51", email="c51@example.com")
    assert caught.value.field == "subject"
    assert "the template '{email.domain}' cannot be rendered" in str(caught.value)
    assert (await nested.list_runs()).runs == []


async def test_sync_code_forgets_and_lists_erasures(sealed: rf.Storage) -> None:
    await flows.receipts.run(customer_id="c60", email="c60@example.com")
    assert await anyio.to_thread.run_sync(rf.sync.forget_subject, "c60") == 1
    listed = await anyio.to_thread.run_sync(rf.sync.list_erasures, 1)
    assert [e.subject_digest for e in listed] == [subject_digest("c60")]
    with pytest.raises(rf.SyncInEventLoop):
        rf.sync.forget_subject("c60")


async def test_a_run_of_a_reactor_not_declared_here_gets_a_cancel_request(
        sealed: rf.Storage) -> None:
    """A process that does not declare a run's reactor cannot drive it: the erasure leaves a
    cancel request ("subject erased") that the next execution of the run honours."""
    from reactorflow.definition import naming

    gone = rf.Reactor("subj.elsewhere", inputs=flows.Account, subject="{customer_id}")

    @gone.interrupt
    async def wait_here(payload: str) -> str:
        return payload

    paused = await gone.run(customer_id="c61", email="c61@example.com")
    naming.forget(gone)  # as a process that never imported its module
    assert await rf.forget_subject("c61") == 1
    stored = await sealed.load_run(paused.id)
    assert stored is not None and stored.head.status == "paused"
    assert await sealed.request_control(paused.id, b"another") is False  # one is pending
    [erasure] = await rf.list_erasures(1)
    assert erasure.cancelled == (paused.id,)
