"""Retries and timeouts: a flaky provider is retried with backoff, a slow attempt is cut off
by its timeout and tried again, and an error that must not be retried goes straight to
compensation. The step context's idempotency key lets the provider recognise repeats.

Run it with `python examples/retries_and_timeouts.py`.
"""

from __future__ import annotations

import sys

import anyio

import reactorflow as rf


class RetryPrinter(rf.Middleware):
    """Prints every retry as it is scheduled."""

    def before_retry(self, event: rf.StepEvent) -> None:
        print(f"  retry {event.step}: attempt {event.attempt} failed with "
              f"{type(event.error).__name__}; next in {event.delay * 1000:.0f} ms")


class Provider:
    """A payment provider that drops the first calls and deduplicates by idempotency key."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.charges: dict[str, float] = {}

    async def charge(self, key: str, amount: float) -> str:
        await anyio.sleep(0.001)
        if self.failures > 0:
            self.failures -= 1
            raise ConnectionError("provider unavailable")
        self.charges.setdefault(key, amount)  # a repeat with the same key charges nothing new
        return f"ch-{len(self.charges)}"


class CardDeclined(Exception):
    pass


provider = Provider(failures=2)
payments = rf.Reactor("examples.retries", middleware=[RetryPrinter()])


@payments.step(retries=rf.Retry(attempts=4, backoff=0.01, strategy="exponential",
                                max_delay=0.05, retry_on=(ConnectionError,),
                                never_retry=(CardDeclined,)))
async def charge(ctx: rf.StepContext, amount: float = 25.0) -> str:
    print(f"  charge attempt {ctx.attempt} (idempotency key {ctx.idempotency_key})")
    return await provider.charge(ctx.idempotency_key, amount)


@payments.step(timeout=0.05, retries=rf.Retry(attempts=2, backoff=0))
async def receipt(charge: str, ctx: rf.StepContext) -> str:
    if ctx.attempt == 1:
        await anyio.sleep(1)  # hangs: cut off after 50 ms, then tried again
    return f"receipt for {charge}"


declines = rf.Reactor("examples.retries.declined", middleware=[RetryPrinter()])
compensations: list[str] = []


@declines.step(retries=rf.Retry(attempts=5, backoff=0.01, never_retry=(CardDeclined,)))
async def charge_declined(ctx: rf.StepContext) -> str:
    print(f"  charge attempt {ctx.attempt}")
    raise CardDeclined("insufficient funds")


@charge_declined.compensate
async def notify_customer(error: Exception) -> None:
    compensations.append(f"told the customer: {error}")


async def main() -> int:
    print("delays of rf.Retry(attempts=5, backoff=0.5, max_delay=3.0), after tries 1-4:")
    for strategy in ("exponential", "linear", "fixed"):
        policy = rf.Retry(attempts=5, backoff=0.5, strategy=strategy, max_delay=3.0)
        print(f"  {strategy:<11} {[policy.delay(n) for n in range(1, 5)]}")

    print("a flaky provider, then a slow receipt:")
    run = await payments.run()
    print(f"  status={run.status.value} value={run.value!r}")
    print(f"  attempts: charge={run.steps['charge'].attempts} "
          f"receipt={run.steps['receipt'].attempts}")
    print(f"  the provider charged {len(provider.charges)} time(s)")

    print("a declined card is never retried:")
    declined = await declines.run()
    print(f"  status={declined.status.value} error={declined.error}")
    print(f"  compensation: {compensations}")

    ok = (run.status is rf.Status.COMPLETED and run.steps["charge"].attempts == 3
          and run.steps["receipt"].attempts == 2 and declined.status is rf.Status.FAILED
          and declined.steps["charge_declined"].attempts == 1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(anyio.run(main))
