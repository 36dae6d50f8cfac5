"""Key rotation (`keys rotate` / `keys check`, runtime/keys/rotation.py) on both backends: every
value under the old key is re-sealed under the new one and every subject's data key re-wrapped,
so the old key can be removed; a rotation run again touches nothing; a run in flight while it
rotates loses nothing."""

from __future__ import annotations

import anyio
import pytest

import reactorflow as rf
from reactorflow.runtime.keys.rotation import CLEAR, SUBJECT_KEYS, check, rotate
from tests.subjects import flows


async def _runs() -> list[rf.Run]:
    """Runs of each kind under the old key: subjects' (paused, sleeping, done) and plain."""
    made = [await flows.signups.run(customer_id="r1", email="r1@example.com"),
            await flows.reminders.run(customer_id="r1", email="r1@example.com"),
            await flows.receipts.run(customer_id="r2", email="r2@example.com")]
    made += [await flows.plain.run(customer_id=f"p{n}", email=f"p{n}@example.com")
             for n in range(3)]
    return made


async def test_rotation_reseals_everything_so_the_old_key_can_go(sealed: rf.Storage) -> None:
    runs = await _runs()
    before = await check(sealed)
    assert before.values[flows.OLD] > 0 and before.values[SUBJECT_KEYS] > 0
    assert before.data_keys == {flows.OLD: 2}
    rf.configure(codec=flows.codec(flows.NEW))  # step 1: every process seals with NEW

    done = await rotate(sealed, flows.codec(flows.NEW), flows.NEW, batch=2)
    assert done.data_keys == 2 and done.runs == len(runs) and not done.busy
    assert not done.unreadable
    after = await check(sealed)
    assert after.values[flows.OLD] == 0
    assert after.values[flows.NEW] == before.values[flows.OLD]  # nothing lost
    assert after.values[SUBJECT_KEYS] == before.values[SUBJECT_KEYS]  # unchanged: re-wrapped
    assert after.data_keys == {flows.NEW: 2}

    again = await rotate(sealed, flows.codec(flows.NEW), flows.NEW)
    assert (again.values, again.data_keys, again.runs_resealed) == (0, 0, 0)  # nothing twice

    rf.configure(codec=rf.EncryptionCodec(keys={flows.NEW: flows.KEYS[flows.NEW]},
                                          current=flows.NEW))  # the old key removed
    for run in runs:
        read = await rf.get_run(run.id)
        assert read.inputs.email.endswith("@example.com"), read.inputs
    resumed = await flows.signups.continue_(runs[0].id, step="confirm", payload={"code": "Z"})
    assert resumed.steps["confirm"].result == "welcome sent to r1@example.com, confirmed Z"


async def test_rotation_refuses_a_codec_that_does_not_seal_with_the_target(
        sealed: rf.Storage) -> None:
    await _runs()
    with pytest.raises(rf.ConfigurationError, match="still seals with 'k-2026'"):
        await rotate(sealed, flows.codec(flows.OLD), flows.NEW)
    with pytest.raises(rf.ConfigurationError, match="holds no key 'k-2028'"):
        await rotate(sealed, flows.codec(flows.NEW), "k-2028")
    with pytest.raises(rf.ConfigurationError, match="needs the codec"):
        await rotate(sealed, None, flows.NEW)
    assert (await check(sealed)).values[flows.NEW] == 0  # nothing was written


async def test_with_a_codec_from_the_start_no_value_is_counted_clear(
        sealed: rf.Storage) -> None:
    """Placeholders of values not there yet (a paused step's result, a step without child
    inputs) and events whose detail is structure (a pause's step name) are no clear values."""
    await _runs()
    counted = await check(sealed)
    assert counted.values[CLEAR] == 0, counted.values
    assert counted.values[flows.OLD] + counted.values[SUBJECT_KEYS] > 0


async def test_clear_values_stored_before_the_codec_are_counted_and_left(
        storage: rf.Storage) -> None:
    clear = await flows.plain.run(customer_id="p9", email="p9@example.com")  # no codec yet
    rf.configure(codec=flows.codec(flows.NEW))
    counted = await check(storage)
    assert counted.values[CLEAR] > 0 and counted.values[flows.NEW] == 0
    await rotate(storage, flows.codec(flows.NEW), flows.NEW)
    assert (await check(storage)).values[CLEAR] == counted.values[CLEAR]
    assert (await rf.get_run(clear.id)).steps["record"].result == "recorded p9@example.com"


async def test_runs_in_flight_lose_nothing_while_keys_rotate(sealed: rf.Storage) -> None:
    """Paused runs are continued (each writing its records) while a rotation re-seals them:
    every run completes with its own values, and a second pass leaves nothing under OLD."""
    paused = [await flows.signups.run(customer_id=f"f{n}", email=f"f{n}@example.com")
              for n in range(12)]
    rf.configure(codec=flows.codec(flows.NEW))
    finished: list[rf.Run] = []

    async def go_on() -> None:
        for run in paused:
            finished.append(await flows.signups.continue_(run.id, step="confirm",
                                                          payload={"code": run.id[-4:]}))
            await anyio.sleep(0)

    async with anyio.create_task_group() as tg:
        tg.start_soon(go_on)
        tg.start_soon(rotate, sealed, flows.codec(flows.NEW), flows.NEW)
    await rotate(sealed, flows.codec(flows.NEW), flows.NEW)  # whatever a run rewrote old
    assert (await check(sealed)).values[flows.OLD] == 0
    rf.configure(codec=rf.EncryptionCodec(keys={flows.NEW: flows.KEYS[flows.NEW]},
                                          current=flows.NEW))
    for run in paused:
        read = await rf.get_run(run.id)
        assert read.status is rf.Status.COMPLETED
        assert read.steps["confirm"].result == (
            f"welcome sent to {read.inputs.email}, confirmed {run.id[-4:]}")


@pytest.mark.parametrize("fail_late", [False, True])
async def test_every_kind_of_value_is_resealed(sealed: rf.Storage, fail_late: bool) -> None:
    """The data-protection tests' reactor stores every kind of value (inputs, results, a
    payload, child inputs, map items, shared arguments and outcomes inline and fanned out, an
    element reactor's inputs and steps, an async step's result, error texts): after a rotation
    nothing is under the old key, and with the old key removed the run reads the same."""
    from reactorflow.jsonforms import run_form
    from tests.protection.flows import approval, everything, order

    flow = everything(fail_late=fail_late)
    run = await flow.run(order("rot"))
    await flow.continue_(run.id, step="approve", payload=approval())
    done = await flow.wait(run.id, timeout=60)
    assert done.status is (rf.Status.FAILED if fail_late else rf.Status.COMPLETED)
    shown = run_form(await rf.get_run(run.id))
    before = await check(sealed)
    assert before.values[flows.OLD] > 10, before

    rf.configure(codec=flows.codec(flows.NEW))
    done_rotating = await rotate(sealed, flows.codec(flows.NEW), flows.NEW)
    assert not done_rotating.unreadable and not done_rotating.busy
    after = await check(sealed)
    assert after.values[flows.OLD] == 0, after
    assert after.values[flows.NEW] == before.values[flows.OLD]

    rf.configure(codec=rf.EncryptionCodec(keys={flows.NEW: flows.KEYS[flows.NEW]},
                                          current=flows.NEW))
    again = run_form(await rf.get_run(run.id))
    assert again == shown
    assert "<encrypted>" not in repr(again)
