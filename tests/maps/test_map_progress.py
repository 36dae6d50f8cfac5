"""A run's map progress (`runtime.maps.progress`), as `GET /api/runs/{id}` gives it in `maps`:
an inline map held in flight, then completed, on both backends."""

from __future__ import annotations

import anyio
import httpx
import msgspec

import reactorflow as rf
from reactorflow.web import create_app

GATE = {"open": anyio.Event()}


class Parcels(msgspec.Struct):
    items: list[str]


parcels = rf.Reactor("maps.progress", inputs=Parcels)


@parcels.step
async def label() -> str:
    return "L"


@parcels.map_step(over="items", batch_size=2, atomic=False)
async def ship(item: str, label: str) -> str:
    if item == "bad":
        raise RuntimeError("fell off the truck")
    if item == "wait":
        await GATE["open"].wait()
    return item


async def _maps(client: httpx.AsyncClient, run_id: str) -> dict[str, object]:
    reply = await client.get(f"/api/runs/{run_id}")
    assert reply.status_code == 200, reply.text
    maps: dict[str, object] = reply.json()["maps"]
    return maps


async def test_the_run_json_gives_each_map_s_element_progress(storage: rf.Storage) -> None:
    GATE["open"] = anyio.Event()
    app = httpx.ASGITransport(app=create_app())
    items = ["a", "b", "bad", "wait", "wait", "c"]
    async with httpx.AsyncClient(transport=app, base_url="http://t") as client:
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: parcels.run(items=items))
            with anyio.fail_after(20):
                while not (found := (await rf.list_runs(reactor=parcels.name)).runs):
                    await anyio.sleep(0.02)
                run_id = found[0].id
                held = {"total": 6, "done": 2, "failed": 1, "running": 2, "undone": 0,
                        "skipped": 0, "exact": True}
                while (await _maps(client, run_id)).get("ship") != held:  # outcomes settle
                    await anyio.sleep(0.02)
            GATE["open"].set()
        assert (await rf.get_run(run_id)).status is rf.Status.COMPLETED
        assert await _maps(client, run_id) == {"ship": {
            "total": 6, "done": 5, "failed": 1, "running": 0, "undone": 0, "skipped": 0,
            "exact": True}}


async def test_an_empty_map_counts_nothing(storage: rf.Storage) -> None:
    app = httpx.ASGITransport(app=create_app())
    run = await parcels.run(items=[])
    async with httpx.AsyncClient(transport=app, base_url="http://t") as client:
        assert (await _maps(client, run.id)) == {"ship": {
            "total": 0, "done": 0, "failed": 0, "running": 0, "undone": 0, "skipped": 0,
            "exact": True}}
