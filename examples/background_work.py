"""Background work: a step that runs in a worker while its run goes on, a reader that receives
its outcome (success or failure) as a value, and a whole run dispatched to a worker.

Run it with `python examples/background_work.py` (no setup: storage is in memory and the
Dramatiq worker runs inside this process, the embedded default). In production the same code
runs with REACTORFLOW_REDIS_URL set and `reactorflow worker examples.background_work` started.
"""

from __future__ import annotations

import logging
import sys
import threading

import anyio
import msgspec

import reactorflow as rf


class Signup(msgspec.Struct):
    email: str
    smtp_up: bool = True


onboarding = rf.Reactor("examples.background_work", inputs=Signup)
SEEN: list[str] = []  # which step ran where (list.append is thread-safe)


def where() -> str:
    return "caller" if threading.current_thread() is threading.main_thread() else "worker"


@onboarding.step
async def create_account(email: str) -> str:
    SEEN.append(f"create_account ran in the {where()}")
    return f"acct:{email}"


@onboarding.async_step(retries=rf.Retry(attempts=2, backoff=0.05))
async def welcome_mail(email: str, smtp_up: bool, ctx: rf.StepContext) -> str:
    SEEN.append(f"welcome_mail attempt {ctx.attempt} ran in the {where()}")
    await anyio.sleep(0.1)  # talking to the mail server
    if not smtp_up:
        raise ConnectionError("smtp down")
    return f"mail to {email}"


@welcome_mail.compensate
async def note_bounce(error: Exception, email: str) -> None:
    SEEN.append(f"welcome_mail compensated itself ({error})")


@onboarding.step
async def suggest_friends(create_account: str) -> list[str]:
    SEEN.append(f"suggest_friends ran in the {where()}")  # does not wait for the mail
    return ["grace", "linus"]


@onboarding.step
async def summary(create_account: str, suggest_friends: list[str],
                  welcome_mail: rf.Outcome[str]) -> str:
    if welcome_mail.ok:
        mail = f"sent ({welcome_mail.value})"
    else:
        assert welcome_mail.error is not None
        mail = f"not sent ({welcome_mail.error.type}: {welcome_mail.error.message})"
    return f"{create_account}: {len(suggest_friends)} friend suggestions, welcome mail {mail}"


def show(title: str, run: rf.Run) -> None:
    print(title)
    print(f"  status: {run.status.value}")
    print(f"  value:  {run.value}")
    for line in SEEN:
        print(f"    {line}")
    print()


async def main() -> int:
    # 1. run(): the steps run here; the async step runs in the worker meanwhile.
    first = await onboarding.run(email="ada@example.com")
    show("1. run() with the mail server up", first)
    ran_here = "create_account ran in the caller" in SEEN
    mail_in_worker = "welcome_mail attempt 1 ran in the worker" in SEEN

    # 2. dispatch(): the whole run goes to the worker; the call returns at once.
    SEEN.clear()
    handed = await onboarding.dispatch(email="bob@example.com", smtp_up=False)
    print(f"2. dispatch() returned at once: status {handed.status.value}")
    second = await onboarding.wait(handed.id, timeout=30)
    show("   ...and the worker finished it, with the mail server down", second)

    ok = (first.status is rf.Status.COMPLETED and ran_here and mail_in_worker
          and "welcome mail sent" in str(first.value)
          and handed.status is rf.Status.RUNNING
          and second.status is rf.Status.COMPLETED  # the Outcome reader took the failure
          and "ConnectionError: smtp down" in str(second.value)
          and "create_account ran in the worker" in SEEN
          and sum(line.startswith("welcome_mail compensated") for line in SEEN) == 1
          and second.steps["welcome_mail"].status == "failed"
          and second.steps["welcome_mail"].attempts == 2)
    return 0 if ok else 1


if __name__ == "__main__":
    # the failed mail is logged as a warning (reactorflow.async.finished); show it inline
    logging.basicConfig(level=logging.WARNING, stream=sys.stdout, format="    log: %(message)s")
    sys.exit(anyio.run(main))
