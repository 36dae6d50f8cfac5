"""One run key of the wrong Redis type, through the `reactorflow` command (issue 22, item 8):
`runs list` lists every other run and warns on stderr naming the unreadable one (exit 0), its
JSON carries `unreadable`, and `runs show` of that run fails in one line saying it cannot be
read (rf.CorruptRecord), no traceback.
A subprocess against the suite's real Redis (the storage-level table:
tests/recovery/test_corrupt_fields.py)."""

from __future__ import annotations

import json

import pytest

import reactorflow as rf
from reactorflow import config
from tests.operate.conftest import Shared, cli
from tests.operate.flows import orders

pytestmark = pytest.mark.slow


async def _replaced_by_a_string(run_id: str) -> str:
    """The run's hash replaced by a string under the same key (its index entries kept), as a
    stray client's SET would leave it."""
    storage = config.current_storage()
    assert isinstance(storage, rf.RedisStorage)
    client = (await storage._redis.get()).client
    key = storage._keys.run(run_id)
    await client.delete(key)
    await client.set(key, "not a hash")
    return key


async def test_a_run_key_of_the_wrong_type_is_named_and_the_others_listed(
        shared: Shared) -> None:
    older = await orders.run(item="tea")
    bad = await orders.run(item="gin")
    newer = await orders.run(item="rum", fail=True)
    await _replaced_by_a_string(bad.id)

    listed = cli(shared, "runs", "list")
    assert listed.code == 0, listed.err
    assert "Traceback" not in listed.err
    rows = listed.out.splitlines()[1:]
    assert [row.split()[0] for row in rows] == [newer.id, older.id]
    warning = [line for line in listed.err.splitlines() if line.startswith("warning:")]
    assert len(warning) == 1 and bad.id in warning[0], listed.err
    assert "cannot be read" in warning[0]

    as_json = cli(shared, "runs", "list", "--json")
    assert as_json.code == 0, as_json.err
    page = json.loads(as_json.out)  # the warning went to stderr: stdout is the page alone
    assert [r["id"] for r in page["runs"]] == [newer.id, older.id]
    assert page["unreadable"] == [bad.id]
    assert bad.id in as_json.err

    shown = cli(shared, "runs", "show", bad.id)
    assert shown.code != 0
    assert "Traceback" not in shown.err and shown.out == ""
    lines = shown.err.strip().splitlines()
    assert lines[0].startswith("error: ") and bad.id in lines[0], shown.err
    assert "cannot be read" in lines[0] and "damaged" in lines[0]  # rf.CorruptRecord's
    assert "holds another type of value" in lines[0]
    assert lines[1:] == ["(run again with -v for the traceback)"]
    good = cli(shared, "runs", "show", older.id)  # the other runs stay readable
    assert good.code == 0 and older.id in good.out
