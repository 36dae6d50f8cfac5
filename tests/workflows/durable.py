"""Workflows for the durability tests, importable by the test process and by subprocesses.

Every step appends "<step> <start|done> <pid> <run id> [<idempotency key>]" to the log file
named by the run's `log` input, so a test can count, across processes, how often each step ran.

Run as a script (`python -m tests.workflows.durable <command> ...`, PYTHONPATH = repo root):

* `chain URL NAMESPACE LOG MARKER` - runs `chain`; its step s3 blocks for 60 s unless MARKER
  exists (the test kills the process while it blocks);
* `pause URL NAMESPACE LOG` - runs `approval` to its pause and prints the run as JSON;
* `continue URL NAMESPACE RUN_ID` - continues `approval`'s interrupt and prints the run;
* `zmap URL NAMESPACE LOG MARKER COUNT [fail]` - runs `zmap` (an inline map of COUNT elements,
  one at a time); its element 2 waits until MARKER exists (the test pauses the process
  meanwhile), then, with `fail`, raises (its compensate logs "comp start <pid> <run id> 2");
* `env` - configures nothing (REACTORFLOW_REDIS_URL selects the storage), runs `env_flow`,
  prints the run and the storage's description.
"""

from __future__ import annotations

import json
import os
import sys

import anyio
import msgspec

import reactorflow as rf

BLOCK_SECONDS = 60.0


def log_line(log: str, *fields: object) -> None:
    """Append one line (one write of a small buffer on an O_APPEND file: whole lines)."""
    with open(log, "a", encoding="utf-8") as out:
        out.write(" ".join(str(f) for f in fields) + "\n")


def read_log(log: str) -> list[list[str]]:
    """The log's lines, split into fields (missing file: no lines)."""
    try:
        with open(log, encoding="utf-8") as src:
            return [line.split() for line in src.read().splitlines() if line.strip()]
    except FileNotFoundError:
        return []


def count(lines: list[list[str]], step: str, phase: str) -> int:
    return sum(1 for fields in lines if fields[:2] == [step, phase])


# -- a four-step chain whose third step hangs the first time ------------------------------------


class ChainIn(msgspec.Struct):
    log: str
    marker: str


chain = rf.Reactor("tests.durable.chain", inputs=ChainIn)


@chain.step
async def s1(log: str, ctx: rf.StepContext) -> int:
    log_line(log, "s1", "start", os.getpid(), ctx.run_id)
    log_line(log, "s1", "done", os.getpid(), ctx.run_id)
    return 1


@chain.step
async def s2(s1: int, log: str, ctx: rf.StepContext) -> int:
    log_line(log, "s2", "start", os.getpid(), ctx.run_id)
    log_line(log, "s2", "done", os.getpid(), ctx.run_id)
    return s1 + 1


@chain.step
async def s3(s2: int, log: str, marker: str, ctx: rf.StepContext) -> int:
    log_line(log, "s3", "start", os.getpid(), ctx.run_id, ctx.idempotency_key)
    if not os.path.exists(marker):
        await anyio.sleep(BLOCK_SECONDS)  # the test kills the process here
    log_line(log, "s3", "done", os.getpid(), ctx.run_id, ctx.idempotency_key)
    return s2 + 1


@chain.step
async def s4(s3: int, log: str, ctx: rf.StepContext) -> str:
    log_line(log, "s4", "start", os.getpid(), ctx.run_id)
    log_line(log, "s4", "done", os.getpid(), ctx.run_id)
    return f"chain done at {s3 + 1}"


# -- a pause in one process, continued by another -----------------------------------------------


class ApprovalIn(msgspec.Struct):
    log: str


class Decision(msgspec.Struct):
    approved: bool
    by: str


approval = rf.Reactor("tests.durable.approval", inputs=ApprovalIn)


@approval.step
async def before(log: str, ctx: rf.StepContext) -> str:
    log_line(log, "before", "start", os.getpid(), ctx.run_id)
    log_line(log, "before", "done", os.getpid(), ctx.run_id)
    return "prepared"


@approval.interrupt
async def decide(payload: Decision, before: str, log: str, ctx: rf.StepContext) -> Decision:
    log_line(log, "decide", "start", os.getpid(), ctx.run_id)
    log_line(log, "decide", "done", os.getpid(), ctx.run_id)
    return payload


@approval.step
async def after(decide: Decision, before: str, log: str, ctx: rf.StepContext) -> str:
    log_line(log, "after", "start", os.getpid(), ctx.run_id)
    log_line(log, "after", "done", os.getpid(), ctx.run_id)
    return f"{before}, approved={decide.approved} by {decide.by}"


# -- an inline map whose element 2 waits (a zombie-to-be: the test pauses its process) ----------


class ZmapIn(msgspec.Struct):
    log: str
    marker: str
    items: list[int]
    fail: bool = False  # element 2 fails once MARKER exists


zmap = rf.Reactor("tests.durable.zmap", inputs=ZmapIn)


@zmap.map_step(over="items", batch_size=1)
async def each(item: int, log: str, marker: str, fail: bool, ctx: rf.StepContext) -> str:
    log_line(log, "el", "start", os.getpid(), ctx.run_id, item)
    while item == 2 and not os.path.exists(marker):
        await anyio.sleep(0.02)
    if item == 2 and fail:
        raise RuntimeError(f"element 2 broke in {os.getpid()}")
    log_line(log, "el", "done", os.getpid(), ctx.run_id, item)
    return f"{item} by {os.getpid()}"


@each.compensate
async def compensate_each(error: Exception, item: int, log: str, ctx: rf.StepContext) -> None:
    log_line(log, "comp", "start", os.getpid(), ctx.run_id, item)


# -- storage chosen by the environment ----------------------------------------------------------


env_flow = rf.Reactor("tests.durable.env")


@env_flow.step
async def where() -> str:
    return f"ran in {os.getpid()}"


# -- the script ---------------------------------------------------------------------------------


def _summary(run: rf.Run) -> str:
    return json.dumps({"id": run.id, "status": str(run.status), "value": run.value,
                       "waiting_on": [str(w) for w in run.waiting_on]})


async def _main(argv: list[str]) -> None:
    command, args = argv[0], argv[1:]
    if command == "env":
        run = await env_flow.run()
        from reactorflow import config

        print(_summary(run))
        print(config.current_storage().describe())
        return
    url, namespace = args[0], args[1]
    rf.configure(storage=rf.RedisStorage.from_url(url, namespace=namespace), lock_ttl=1.0)
    if command == "chain":
        run = await chain.run(log=args[2], marker=args[3])
    elif command == "zmap":
        run = await zmap.run(log=args[2], marker=args[3], items=list(range(int(args[4]))),
                             fail=args[5:] == ["fail"])
    elif command == "pause":
        run = await approval.run(log=args[2])
    elif command == "continue":
        run = await approval.continue_(args[2], step="decide",
                                       payload={"approved": True, "by": "process-2"})
    else:
        raise SystemExit(f"unknown command {command!r}")
    print(_summary(run))


if __name__ == "__main__":
    anyio.run(_main, sys.argv[1:])
