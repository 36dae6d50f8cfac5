"""Every storage script's loops are bounded by construction (issue 22, item 6): no `while` or
`repeat`, and each numeric `for` runs to a size Redis or the script holds (`#KEYS`, `#ARGV`, a
reply's length, SCARD/HLEN/ZCARD) or to a count the script checked first. And the scripts that
loop over a count from ARGV refuse a forged one before they write anything, on a real Redis."""

from __future__ import annotations

import re
from importlib.resources import files

import pytest

import reactorflow as rf
from reactorflow.storage.redis.storage import RedisStorage

SCRIPTS = files("reactorflow.storage.redis") / "scripts"
BOUNDED_LIMIT = re.compile(
    r"^(#\w+|\d+|last|first_event - 1|first_removed - 1|15 \+ unclaimed|claim_events - 1"
    r"|start \+ count - 1"
    r"|redis\.call\('(SCARD|HLEN|ZCARD)', KEYS\[\d\]\)( \+ redis\.call\('(SCARD|HLEN|ZCARD)', "
    r"KEYS\[\d\]\) \+ 1)?)$")
"""What a numeric `for` may run to (each of the named counts is checked by its script first)."""


def _code(text: str) -> list[str]:
    return [line.split("--", 1)[0] for line in text.splitlines()]


def _sources() -> dict[str, str]:
    found = {f"lib/{p.name}": p.read_text("utf-8") for p in (SCRIPTS / "lib").iterdir()
             if p.name.endswith(".lua")}
    found.update({p.name: p.read_text("utf-8") for p in SCRIPTS.iterdir()
                  if p.name.endswith(".lua")})
    return found


@pytest.mark.parametrize("name", sorted(_sources()))
def test_every_loop_of_a_script_is_bounded(name: str) -> None:
    for line in _code(_sources()[name]):
        assert not re.search(r"\b(while|repeat)\b", line), (name, line)
        numeric = re.search(r"\bfor \w+ = [^,]+, (.+?)(, \d+)? do\b", line)
        if numeric:
            assert BOUNDED_LIMIT.match(numeric.group(1).strip()), (name, line)


async def _script(storage: RedisStorage, name: str, keys: list[str], args: list[object]) -> str:
    conn = await storage._redis.get()
    with pytest.raises(Exception) as caught:
        await conn.client.evalsha(conn.scripts[name].sha, len(keys), *keys, *args)
    return str(caught.value)


@pytest.fixture
async def redis(storage: rf.Storage) -> RedisStorage:
    if not isinstance(storage, RedisStorage):
        pytest.skip("the Redis scripts")
    conn = await storage._redis.get()
    for name, script in conn.scripts.items():  # loaded, as any first call would
        await conn.client.script_load(script.script)
        assert script.sha, name
    return storage


@pytest.mark.parametrize("first", [2**53 + 2, -1, "1e400", "nan", 2**31])
async def test_lock_load_elements_refuses_a_forged_range_before_it_takes_the_lock(
        redis: RedisStorage, first: object) -> None:
    lock = redis._keys.lock("r1:m:0")
    message = await _script(redis, "lock_load_elements", [lock, redis._keys.elements("r1", "m")],
                            ["me", 10_000, "t1", first, 2])
    assert "is not whole numbers within 0 .. 2^31" in message
    assert await redis.lock_owner("r1:m:0") is None  # nothing written
    with pytest.raises(rf.StorageError):  # and the method refuses it before any script
        await redis.lock_and_load_elements("r1:m:0", "me", 10.0, "r1", [("m", 2**53 + 2, 2)])


@pytest.mark.parametrize("first", [2**53 + 2, -1, "1e400", "nan", 2**31])
async def test_start_element_refuses_a_forged_range_before_it_takes_the_lock_or_marks(
        redis: RedisStorage, first: object) -> None:
    lock = redis._keys.lock("r1:m:0")
    marks = redis._keys.elements("r1", "m#started")
    keys = [redis._keys.run("r1"), marks, redis._keys.elements("r1", "m#job"),
            redis._keys.elements("r1", "m"), lock]
    message = await _script(redis, "start_element", keys,
                            [0, "stop", ",failed,", "me", 10_000, "t1", first, 2])
    assert "is not whole numbers within 0 .. 2^31" in message
    assert await redis.lock_owner("r1:m:0") is None  # nothing written
    client = (await redis._redis.get()).client
    assert await client.exists(marks) == 0
    with pytest.raises(rf.StorageError):  # and the method refuses it before any script
        await redis.start_element("r1:m:0", "me", 10.0, "r1", [("m", 2**53 + 2, 2)],
                                  starts=("m#started", 0), stop=("m#job", 0))


async def test_a_count_from_argv_is_checked_before_anything_is_written(
        redis: RedisStorage) -> None:
    keys = redis._keys.run_keys("r2")
    state = await _script(redis, "save_state", keys,
                          ["t", "me", "running", b"", "1", 1000, 10, "", "", "r2", 10**15])
    assert "ARGV[11]" in state
    claim = await _script(redis, "claim_lock_load", keys,
                          ["t", "gate", b"p", 1000, "me", 1000, "1", 10, "r2", "then", "running",
                           "paused", b"", b"", 10**15])
    assert "ARGV[15]" in claim
    events = await _script(redis, "claim_lock_load", keys,  # the status write's events counted
                           ["t", "gate", b"p", 1000, "me", 1000, "1", 10, "r2", "then", "running",
                            "paused", b"", b"", 0, 10**15])
    assert "ARGV[16]" in events
    checked = await _script(redis, "claim_lock_load", keys,
                            ["t", "gate", b"p", 1000, "me", 1000, "1", 10, "r2", "check", "flow",
                             b"m", "1.0", "1", "", 2])
    assert "ARGV[16]" in checked
    migrated = await _script(redis, "migrate_run", keys,
                             ["t", "me", b"old", b"new", b"", "1", 10, 10**15, 0])
    assert "ARGV[8]" in migrated
    client = (await redis._redis.get()).client
    assert [await client.exists(key) for key in keys] == [0] * len(keys)


async def test_an_ordered_line_with_a_cursor_past_2_53_is_read_in_bounded_time(
        redis: RedisStorage) -> None:
    """(The cursor plus one was the cursor again: the loop over finished numbers never ended.)"""
    client = (await redis._redis.get()).client
    line = [f"{redis._keys.ns}:corrupt-line:{part}" for part in ("line", "tickets", "stamps",
                                                                 "done")]
    await client.hset(line[0], "cursor", str(2**53 + 1))
    await client.sadd(line[3], str(2**53))
    conn = await redis._redis.get()
    reply = await conn.client.evalsha(conn.scripts["ordered_peek"].sha, 4, *line)
    assert reply[0] in (b"", "")
