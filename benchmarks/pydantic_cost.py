"""The cost of pydantic models as declared types: a run whose inputs, step results and values are
pydantic v2 models against the same run with msgspec Structs, on MemoryStorage.

Both reactors have the same shape: inputs of an order (a nested address and five lines), then
three steps, each returning a record of that shape that the next one reads. Every value crosses
storage as msgspec MessagePack either way; a model is also converted at the edge (its
`model_dump(mode="json")` on encode, `model_validate` on decode and on validating the inputs),
and that conversion is what the difference measures, per run and per value (the inputs and the
three results: four values per run).
"""

from __future__ import annotations

import msgspec

import reactorflow as rf
from benchmarks._context import Context
from benchmarks._report import Spread, ratios, settle, time_per_call
from reactorflow import pydantic_types

TITLE = "pydantic-typed run vs the same run with msgspec Structs (MemoryStorage)"
NEEDS_REDIS = False
VALUES_PER_RUN = 4  # the inputs and three step results

INPUTS = {"customer": "c-1", "address": {"city": "Lyon", "zip": "69001"},
          "lines": [{"sku": f"sku-{i}", "qty": i + 1, "price": 2.5 * (i + 1)} for i in range(5)]}


class SAddress(msgspec.Struct):
    city: str
    zip: str


class SLine(msgspec.Struct):
    sku: str
    qty: int
    price: float


class SOrder(msgspec.Struct):
    customer: str
    address: SAddress
    lines: list[SLine]


def struct_flow() -> rf.Reactor:
    flow = rf.Reactor("bench.pydantic.struct", inputs=SOrder)

    @flow.step
    async def checked(customer: str, address: SAddress, lines: list[SLine]) -> SOrder:
        return SOrder(customer=customer, address=address, lines=lines)

    @flow.step
    async def priced(checked: SOrder) -> SOrder:
        return checked

    @flow.step
    async def shipped(priced: SOrder) -> SOrder:
        return priced

    return flow


def pydantic_flow() -> rf.Reactor:
    from pydantic import BaseModel

    class PAddress(BaseModel):
        city: str
        zip: str

    class PLine(BaseModel):
        sku: str
        qty: int
        price: float

    class POrder(BaseModel):
        customer: str
        address: PAddress
        lines: list[PLine]

    flow = rf.Reactor("bench.pydantic.model", inputs=POrder)

    async def checked(customer: str, address: PAddress, lines: list[PLine]) -> POrder:
        return POrder(customer=customer, address=address, lines=lines)

    async def priced(checked: POrder) -> POrder:
        return checked

    async def shipped(priced: POrder) -> POrder:
        return priced

    # the model classes are local: annotate with the classes themselves, not their names
    checked.__annotations__ = {"customer": str, "address": PAddress, "lines": list[PLine],
                               "return": POrder}
    priced.__annotations__ = {"checked": POrder, "return": POrder}
    shipped.__annotations__ = {"priced": POrder, "return": POrder}
    for fn in (checked, priced, shipped):
        flow.step(fn)
    return flow


async def run(ctx: Context) -> None:
    report = ctx.report
    try:
        models = pydantic_flow()
    except ImportError:
        report.skipped("pydantic is not installed: pip install 'reactorflow[pydantic]'")
        return
    structs = struct_flow()
    runs = ctx.pick(full=2000, quick=150)
    report.note(f"{ctx.reps} repetitions x {runs} runs of each; a fresh MemoryStorage per "
                "repetition")

    async def with_structs() -> object:
        return await structs.run(**INPUTS)

    async def with_models() -> object:
        return await models.run(**INPUTS)

    rf.configure(storage=rf.MemoryStorage())
    for _ in range(ctx.pick(full=200, quick=30)):  # warm-up (plans compiled, caches filled)
        await with_structs()
        await with_models()
    for flow in (structs, models):
        first = await flow.run(**INPUTS)
        if first.status is not rf.Status.COMPLETED:
            report.error(f"{flow.name} did not complete as expected: {first.status} "
                         f"{first.error}")
            return
        got = await flow.get(first.id)
        shipped = got.steps["shipped"].result
        if pydantic_types.to_builtins(shipped) != INPUTS:
            report.error(f"{flow.name}: the last result did not round-trip: {shipped!r}")
            return

    t_structs: list[float] = []
    t_models: list[float] = []
    for _ in range(ctx.reps):
        rf.configure(storage=rf.MemoryStorage())
        settle()
        t_structs.append(await time_per_call(with_structs, runs))
        settle()
        t_models.append(await time_per_call(with_models, runs))

    us = 1e6
    per_value = Spread.of([(m - s) / VALUES_PER_RUN * us
                           for s, m in zip(t_structs, t_models, strict=True)])
    report.row("reactorflow, pydantic models: await flow.run()", Spread.of(t_models).scaled(us),
               "µs/run")
    report.row("baseline: the same run with msgspec Structs", Spread.of(t_structs).scaled(us),
               "µs/run")
    report.row("pydantic / Struct", ratios(t_models, t_structs), "x")
    report.row("cost of a model per value ((models - structs) / 4)", per_value, "µs/value")
    report.verdict("informational (no target)", None,
                   f"{per_value.median:.1f} µs per model value crossing storage")
