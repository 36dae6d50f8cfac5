"""The subject and key commands end to end, each in a subprocess on a real Redis:
`reactorflow subjects forget S` (asks first, `--yes` does not), `subjects erasures`,
`keys check`, `keys rotate` (refusals in one line, and a rotation killed midway — SIGKILL, and
Ctrl-C — then run again to the end: nothing lost, nothing sealed twice)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

import reactorflow as rf
from reactorflow.runtime.keys.rotation import SUBJECT_KEYS, check
from reactorflow.runtime.subjects.digests import subject_digest
from tests.operate.conftest import ROOT, Result, Shared, environment
from tests.subjects import flows

pytestmark = pytest.mark.slow
APP = ("--app", "tests.subjects.flows")


def cli(lane: Shared, *args: str, stdin: str = "", current: str = flows.OLD) -> Result:
    env = environment(lane)
    env[flows.ROTATED_ENV] = current
    proc = subprocess.run([sys.executable, "-m", "reactorflow", *args], cwd=ROOT, env=env,
                          input=stdin, capture_output=True, text=True, timeout=120,
                          check=False)
    return Result(proc.returncode, proc.stdout, proc.stderr)


async def test_subjects_forget_asks_first_then_erases(lane: Shared) -> None:
    paused = await flows.signups.run(customer_id="c42", email="ann@example.com")
    done = await flows.receipts.run(customer_id="c42", email="ann@example.com")
    kept = await flows.receipts.run(customer_id="c7", email="bob@example.com")

    declined = cli(lane, "subjects", "forget", "c42", *APP, stdin="n\n")
    assert declined.code == 0 and "nothing was erased" in declined.err
    assert (await rf.get_run(done.id)).inputs.email == "ann@example.com"

    asked = cli(lane, "subjects", "forget", "c42", *APP, stdin="y\n")
    assert asked.code == 0, asked.err
    assert "Erase this subject?" in asked.err
    assert asked.out.strip() == "subject erased: 2 run(s) touched"
    assert (await rf.get_run(done.id)).inputs == "<erased>"
    cancelled = await rf.get_run(paused.id)
    assert (cancelled.status, cancelled.cancel_reason) == (rf.Status.CANCELLED, "subject erased")
    assert (await rf.get_run(kept.id)).inputs.email == "bob@example.com"

    shown = cli(lane, "runs", "show", done.id, "--json")  # a CLI reading the erased run
    assert shown.code == 0, shown.err
    assert json.loads(shown.out)["inputs"] == "<erased>"
    assert "ann@example.com" not in shown.out

    again = cli(lane, "subjects", "forget", "c42", "--yes", *APP)
    assert again.out.strip() == ("no such subject (unknown, or erased already): nothing was "
                                 "changed")
    listed = cli(lane, "subjects", "erasures", "--json")
    assert listed.code == 0, listed.err
    [record] = json.loads(listed.out)
    assert record["subject_digest"] == subject_digest("c42") and record["runs"] == 2
    assert record["cancelled"] == [paused.id] and "c42" not in listed.out
    table = cli(lane, "subjects", "erasures")
    assert subject_digest("c42")[:16] in table.out


async def test_subjects_forget_refuses_a_bad_subject_in_one_line(lane: Shared) -> None:
    refused = cli(lane, "subjects", "forget", "", "--yes", *APP)
    assert refused.code == 1
    assert refused.err.strip().splitlines()[0] == (
        "error: a subject is a non-empty str (what the reactor's subject= template renders, "
        "such as a customer id), not an empty str")
    assert "Traceback" not in refused.err


async def test_keys_rotate_refuses_until_the_codec_seals_with_the_target(lane: Shared) -> None:
    await flows.plain.run(customer_id="p1", email="p1@example.com")
    refused = cli(lane, "keys", "rotate", "--to", flows.NEW, *APP)
    assert refused.code == 1
    assert "still seals with 'k-2026'" in refused.err and "Traceback" not in refused.err
    unknown = cli(lane, "keys", "rotate", "--to", "k-2030", *APP, current=flows.NEW)
    assert unknown.code == 1 and "holds no key 'k-2030'" in unknown.err
    for secret in flows.KEYS.values():
        assert secret.decode() not in refused.err + unknown.err  # a key is never printed


def _values(found: dict[str, int], key_id: str) -> int:
    return int(found.get(key_id, 0))


@pytest.mark.parametrize("stop", [signal.SIGKILL, signal.SIGINT])
async def test_keys_rotate_killed_midway_goes_on_when_run_again(lane: Shared,
                                                              stop: signal.Signals) -> None:
    runs = [await flows.receipts.run(customer_id=f"s{n}", email=f"s{n}@example.com")
            for n in range(10)]  # (older: a rotation reads the newest runs first)
    runs += [await flows.plain.run(customer_id=f"p{n}", email=f"p{n}@example.com")
             for n in range(40)]
    before = json.loads(cli(lane, "keys", "check", "--json").out)
    assert _values(before["values"], flows.OLD) > 40 and before["data_keys"] == {flows.OLD: 10}

    env = environment(lane)
    env[flows.ROTATED_ENV] = flows.NEW
    proc = subprocess.Popen([sys.executable, "-m", "reactorflow", "keys", "rotate", "--to",
                             flows.NEW, "--batch", "1", *APP], cwd=ROOT, env=env,
                            stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    lines = [proc.stderr.readline() for _ in range(15)]  # progress: it has begun on the runs
    assert all(line.startswith("runs read ") or "data keys" in line for line in lines), lines
    os.kill(proc.pid, stop)
    proc.communicate(timeout=60)
    assert proc.returncode == (-signal.SIGKILL if stop is signal.SIGKILL else 130)

    midway = json.loads(cli(lane, "keys", "check", "--json").out)
    assert _values(midway["values"], flows.OLD) > 0, midway  # stopped before the end...
    assert _values(midway["values"], flows.NEW) > 0, midway  # ...after some were re-sealed
    assert midway["data_keys"] == {flows.NEW: 10}  # (data keys are re-wrapped first)

    finished = cli(lane, "keys", "rotate", "--to", flows.NEW, *APP, current=flows.NEW)
    assert finished.code == 0, finished.err
    after = json.loads(cli(lane, "keys", "check", "--json").out)
    assert _values(after["values"], flows.OLD) == 0
    assert (_values(after["values"], flows.NEW)
            == _values(before["values"], flows.OLD))  # every value, each once
    assert after["values"][SUBJECT_KEYS] == before["values"][SUBJECT_KEYS]
    assert after["data_keys"] == {flows.NEW: 10}

    rf.configure(codec=rf.EncryptionCodec(keys={flows.NEW: flows.KEYS[flows.NEW]},
                                          current=flows.NEW))  # the old key retired
    for run in runs:
        read = await rf.get_run(run.id)
        assert read.inputs.email == f"{read.inputs.customer_id}@example.com"
    assert (await check(rf.config.current_storage())).values[flows.OLD] == 0
