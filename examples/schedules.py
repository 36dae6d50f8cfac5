"""Schedules: a nightly report in Madrid time, started once per tick however many schedulers
run, and what each catch-up policy does after an outage.

Run it with `python examples/schedules.py` (embedded storage and worker; with Redis, run
`reactorflow scheduler --app your.module` on one or more hosts instead of the calls below).
"""

from __future__ import annotations

import sys
import time

import anyio
import msgspec

import reactorflow as rf


class Day(msgspec.Struct):
    day: str


nightly = rf.Reactor("examples.schedules.nightly", inputs=Day, schedules=[
    rf.Schedule("0 2 * * *", timezone="Europe/Madrid", catch_up="all", name="nightly",
                inputs=lambda tick: Day(day=tick.date().isoformat())),
    rf.Schedule("0 * * * *", inputs={"day": "hourly"}, catch_up="latest", name="hourly"),
])


@nightly.step
async def report(day: str) -> str:
    return f"report for {day}"


async def main() -> int:
    storage = rf.MemoryStorage()
    rf.configure(storage=storage)
    # Pretend a scheduler last ran three days ago and all were down since: store the
    # schedules' cursors (the last tick handled) as of then.
    three_days_ago = round((time.time() - 3 * 86_400) * 1000)
    for name in ("nightly", "hourly"):
        await storage.schedule_load(f"{nightly.name}:{name}", three_days_ago)

    # Five schedulers at once: each missed nightly tick starts one run, the hourly one run.
    started: list[rf.Run] = []

    async def scheduler() -> None:
        started.extend(await rf.schedule_once())

    async with anyio.create_task_group() as tg:
        for _ in range(5):
            tg.start_soon(scheduler)
    values = sorted([(await nightly.wait(run.id, timeout=30)).value for run in started])
    for value in values:
        print(value)
    nightly_runs = [v for v in values if v != "report for hourly"]
    # catch_up="all": one run per missed night, each night once (three nights; one more or
    # less when the 72 hours span a daylight-saving change)
    assert 2 <= len(nightly_runs) <= 4 and len(set(nightly_runs)) == len(nightly_runs), values
    assert values.count("report for hourly") == 1, values  # catch_up="latest": just one
    assert await rf.schedule_once() == []  # nothing more is due
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main))
