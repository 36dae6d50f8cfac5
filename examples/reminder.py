"""A reminder three days after shipping: a durable sleep, run under the test kit's fake clock so
that the three days pass in an instant.

The run ships, then sleeps (`@reactor.sleep`): it parks holding nothing (no coroutine, thread,
lock or worker) with `StepState.wake_at` saying until when, while the independent step goes on.
Advancing the clock fires the sleep's timer; the reminder step gets the deadline it woke for.
A second run is cancelled while it sleeps: at once, its timer disarmed.

Run it with `python examples/reminder.py`.
"""

from __future__ import annotations

import sys
from datetime import datetime, timedelta

import anyio
import msgspec

import reactorflow as rf
from reactorflow.testing import Environment

COOL_OFF = timedelta(days=3)


class Shipment(msgspec.Struct):
    order_id: str
    email: str


reminders = rf.Reactor("examples.reminder", inputs=Shipment)
outbox: list[str] = []


@reminders.step
async def ship(order_id: str) -> str:
    return f"parcel-{order_id}"


@reminders.sleep
async def cool_off(ship: str) -> timedelta:
    return COOL_OFF


@reminders.step
async def invoice(order_id: str) -> str:  # independent of the sleep: runs while it sleeps
    return f"invoice-{order_id}"


@reminders.step
async def remind(cool_off: datetime, email: str, ship: str) -> str:
    outbox.append(f"to {email}: how is {ship}? (sent {cool_off:%Y-%m-%d %H:%M} UTC)")
    return "reminded"


def show(run: rf.Run, now: float) -> None:
    for key, state in run.steps.items():
        note = ""
        if state.wake_at is not None:  # a sleep that waits: until when, and how long from now
            left = state.wake_at.timestamp() - now
            note = f"sleeping until {state.wake_at:%Y-%m-%d %H:%M:%S} UTC ({left / 3600:.2f} h)"
        print(f"    {key:<8} {state.status.value:<10} {note}".rstrip())


async def main() -> int:
    async with Environment() as env:
        run = await reminders.run(order_id="1042", email="ada@example.com")
        print(f"run {run.id} is {run.status.value}; its steps:")
        show(run, env.clock.now())
        wake_at = run.steps["cool_off"].wake_at

        await env.clock.advance(COOL_OFF.total_seconds() - 60)  # a minute short: still asleep
        print("a minute before the deadline:")
        show(await reminders.get(run.id), env.clock.now())

        await env.clock.advance(60)  # the deadline: the timer fires, the run resumes
        await env.drain()
        done = await reminders.get(run.id)
        print(f"three days later the run is {done.status.value}:")
        show(done, env.clock.now())
        print(f"  outbox: {outbox}")

        other = await reminders.run(order_id="1043", email="bob@example.com")
        cancelled = await reminders.cancel(other.id, reason="order returned")
        disarmed = await env.storage.timer_of(other.id) is None
        await env.clock.advance(COOL_OFF.total_seconds())  # nothing fires: it stays cancelled
        after = await reminders.get(other.id)
        print(f"a run cancelled while it sleeps: {after.status.value}, "
              f"cool_off {after.steps['cool_off'].status.value}, "
              f"remind {after.steps['remind'].status.value}, timer disarmed: {disarmed}")

        ok = (done.status is rf.Status.COMPLETED and done.steps["cool_off"].result == wake_at
              and len(outbox) == 1 and cancelled.status is rf.Status.CANCELLED and disarmed
              and after.steps["remind"].status is rf.StepStatus.PENDING)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(anyio.run(main))
