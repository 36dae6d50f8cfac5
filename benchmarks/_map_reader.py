"""`python -m benchmarks._map_reader URL NAMESPACE RUN_ID MODE`: read a stored map's results in a
fresh process and print `baseline_kb peak_kb count` (RSS from /proc/self/status). MODE is `lazy`
(through rf.MapResults, a page at a time) or `list` (every result loaded, as a list[T] reader)."""

from __future__ import annotations

import sys

import anyio

import reactorflow as rf
from benchmarks._map_flows import big
from reactorflow.definition.graph import plan_for
from reactorflow.definition.params import MapRead
from reactorflow.protection.resolve import plain_keys
from reactorflow.runtime.engine.map_reads import load_list, results_view


def _kb(field: str) -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


async def main(url: str, namespace: str, run_id: str, mode: str) -> None:
    storage = rf.RedisStorage.from_url(url, namespace=namespace)
    keys = plain_keys(run_id)  # the run's keys (the configured codec's: none here)
    node = plan_for(big).nodes["label"]
    count = await storage.count_elements(run_id, "label")
    await storage.load_elements(run_id, "label", 0, 1)  # connection open, scripts loaded
    baseline = _kb("VmRSS")
    seen = 0
    if mode == "lazy":
        async for outcome in results_view(storage, keys, node, count):
            seen += outcome.ok
    else:
        values = await load_list(storage, keys, node, count, MapRead.VALUES)
        seen = len(values)
    print(baseline, _kb("VmHWM"), seen, flush=True)
    await storage.aclose()


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:5])
