"""Gates: payouts that never overlap per account, a warehouse that picks three jobs at a time, a
payment API called at most four times an hour, and one invoice per customer per month.

Run it with `python examples/gates.py` (embedded storage and worker; the same code works on
Redis across processes).
"""

from __future__ import annotations

import sys

import anyio
import msgspec

import reactorflow as rf


class Payout(msgspec.Struct):
    account_id: str
    amount: float
    warehouse_id: str = "w1"


TRACE: list[str] = []
API = rf.RateLimit("examples.payment-api", hour=4)

payouts = rf.Reactor("examples.gates.payouts", inputs=Payout,
                     gates=[rf.Lock("account:{account_id}", wait=10)])


@payouts.step(gates=[rf.Semaphore("warehouse:{warehouse_id}", limit=3, wait=10)])
async def pick(account_id: str, warehouse_id: str) -> str:
    TRACE.append(f"pick {account_id}")
    await anyio.sleep(0.01)
    return f"parcel for {account_id}"


@payouts.step(gates=[API])
async def pay(account_id: str, amount: float, pick: str) -> str:
    TRACE.append(f"pay {account_id} {amount:g}")
    return f"paid {amount:g} with {pick}"


class Invoice(msgspec.Struct):
    customer: str


invoices = rf.Reactor("examples.gates.invoices", inputs=Invoice,
                      gates=[rf.Period("invoice:{customer}", every="month"),
                             rf.Lock("invoice:{customer}")])


@invoices.step
async def bill(customer: str) -> str:
    return f"invoice for {customer}"


async def main() -> None:
    # three payouts for one account run one at a time (the lock); two accounts interleave
    runs: list[rf.Run] = []

    async def start(account: str, amount: float) -> None:
        runs.append(await payouts.run(account_id=account, amount=amount))

    async with anyio.create_task_group() as tg:
        for account, amount in (("acct-1", 10), ("acct-1", 20), ("acct-2", 5), ("acct-1", 30)):
            tg.start_soon(start, account, amount)
    print("payouts:", [run.status.value for run in runs])
    ones = [line for line in TRACE if line.endswith(("acct-1", "10", "20", "30"))]
    print("acct-1, one payout at a time:", ones)

    # the payment API allows four calls an hour: the fifth payout's pay step is refused
    fifth = await payouts.run(account_id="acct-3", amount=1)
    assert fifth.error is not None
    print("fifth payout:", fifth.status.value, "-", fifth.error.type, "on", fifth.error.step)

    first = await invoices.run(customer="acme")
    again = await invoices.run(customer="acme")
    print("invoices:", first.status.value, "then", again.status.value,
          f"(halt_reason={again.halt_reason!r})")
    if again.halt_reason != "period" or fifth.error.type != "GateBusy":
        sys.exit(1)


if __name__ == "__main__":
    anyio.run(main)
