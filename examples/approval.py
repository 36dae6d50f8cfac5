"""An approval: the run pauses at an interrupt until a valid payload arrives.

Shows a correlation id (resume by a business id instead of the run id), an invalid payload
that is refused without changing the run, exactly-once resumption, and a rejection that halts
the run. Run it with `python examples/approval.py`.
"""

from __future__ import annotations

import sys

import anyio
import msgspec

import reactorflow as rf


class Expense(msgspec.Struct):
    expense_id: str
    employee: str
    amount: float


class Decision(msgspec.Struct):
    approved: bool
    by: str


expenses = rf.Reactor("examples.approval", inputs=Expense)


@expenses.step
async def check_policy(amount: float) -> str:
    return "within policy" if amount <= 500 else "needs a director"


@expenses.step
async def acknowledge(employee: str) -> str:
    return f"told {employee} the claim is in review"  # independent: runs before the pause


@expenses.interrupt(correlation_id="expense:{expense_id}", timeout=7 * 86_400, max_attempts=3)
async def approve(payload: Decision, check_policy: str) -> Decision:
    print(f"  approve: {payload.by} says {'yes' if payload.approved else 'no'} ({check_policy})")
    return payload


@expenses.step
async def reimburse(approve: Decision, employee: str, amount: float) -> str:
    if not approve.approved:
        raise rf.Halt(f"rejected by {approve.by}")
    return f"paid {amount:.2f} to {employee}"


async def main() -> int:
    print("1. submit an expense")
    run = await expenses.run(expense_id="EX-7", employee="ada", amount=120.0)
    print(f"  status={run.status.value} waiting_on={run.waiting_on}")
    print(f"  schema: {expenses.interrupt_schema('approve')['$defs']['Decision']['required']}")

    print("2. a malformed payload is refused; the run stays paused")
    try:
        await expenses.continue_(run.id, step="approve", payload={"approved": "sure"})
    except rf.PayloadValidationError as error:
        print(f"  refused: {error.field}: {error.reason} "
              f"(attempt {error.attempts} of {error.max_attempts})")
    assert (await expenses.get(run.id)).status is rf.Status.PAUSED

    print("3. the approver's webhook knows only the expense id")
    done = await expenses.continue_by_correlation_id(
        "expense:EX-7", step="approve", payload={"approved": True, "by": "grace"})
    print(f"  status={done.status.value} value={done.value!r}")

    print("4. a second decision for the same expense is refused")
    try:
        await expenses.continue_(run.id, step="approve", payload={"approved": False, "by": "x"})
    except rf.AlreadyResumed:
        print("  refused with rf.AlreadyResumed: one payload per interrupt, nothing was written")

    print("5. a rejected expense halts (nothing to roll back)")
    other = await expenses.run(expense_id="EX-8", employee="bob", amount=900.0)
    rejected = await expenses.continue_(other.id, step="approve",
                                        payload=Decision(approved=False, by="grace"))
    print(f"  status={rejected.status.value} reason={rejected.halt_reason!r}")

    ok = done.status is rf.Status.COMPLETED and rejected.status is rf.Status.HALTED
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(anyio.run(main))
