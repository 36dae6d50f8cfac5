"""`Annotated[T, rf.Redacted]`: stored and given to the steps as is, shown as "***" everywhere
else (snapshots and their repr, error text and tracebacks, history, logs, middleware events),
on both backends."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypedDict

import msgspec
import pytest

import reactorflow as rf
from reactorflow.definition.redaction import mask_of
from reactorflow.redaction import masked
from tests.helpers import redeploy, unique

TOKEN = "tok-9f3b2c71"
CVV = "cvv-318"
CODE = "otp-77120"
HIDDEN = "***"


class Billing(msgspec.Struct):
    city: str
    cvv: Annotated[str, rf.Redacted]


class CardStruct(msgspec.Struct):
    holder: str
    token: Annotated[str, rf.Redacted]
    billing: Billing


@dataclass
class CardData:
    holder: str
    token: Annotated[str, rf.Redacted]
    billing: Billing


class CardDict(TypedDict):
    holder: str
    token: Annotated[str, rf.Redacted]
    billing: Billing


class Charge(msgspec.Struct):
    charge_id: str
    receipt: Annotated[str, rf.Redacted]


class Code(msgspec.Struct):
    approver: str
    code: Annotated[str, rf.Redacted]


def field(value: Any, name: str) -> Any:
    return value[name] if isinstance(value, dict) else getattr(value, name)


def card_flow(inputs: type, seen: list[Any], *, fail: bool = False) -> rf.Reactor:
    flow = rf.Reactor(unique(f"redact-{inputs.__name__}"), inputs=inputs)

    @flow.step
    async def charge(token: str, cvv: Annotated[str, rf.Input("billing", "cvv")]) -> Charge:
        seen.append(("charge", token, cvv))
        return Charge("ch_1", f"rcpt-{token}")

    @charge.undo
    async def refund(charge: Charge) -> None:
        seen.append(("refund", charge.receipt))

    @flow.interrupt
    async def approve(payload: Code, charge: Charge) -> Code:
        seen.append(("approve", payload.code, charge.receipt))
        return payload

    @flow.step
    async def confirm(charge: Charge, approve: Code) -> Annotated[str, rf.Redacted]:
        seen.append(("confirm", charge.receipt, approve.code))
        if fail:
            raise ValueError(f"card {charge.receipt} declined for code {approve.code!r}")
        return f"conf-{approve.code}"

    return flow


def card(inputs: type) -> Any:
    billing = Billing("Lyon", CVV)
    if inputs is CardDict:
        return {"holder": "Ada", "token": TOKEN, "billing": billing}
    return inputs("Ada", TOKEN, billing)


def assert_masked(run: rf.Run) -> None:
    assert field(run.inputs, "holder") == "Ada"
    assert field(run.inputs, "token") == HIDDEN
    assert field(run.inputs, "billing") == Billing("Lyon", HIDDEN)
    assert run.steps["charge"].result == Charge("ch_1", HIDDEN)
    for secret in (TOKEN, CVV, CODE):
        assert secret not in repr(run)
        assert secret not in repr(msgspec.to_builtins(run))


@pytest.mark.parametrize("inputs", [CardStruct, CardData, CardDict])
async def test_steps_get_the_real_values_and_every_snapshot_masks_them(
        storage: rf.Storage, inputs: type) -> None:
    seen: list[Any] = []
    flow = card_flow(inputs, seen)
    paused = await flow.run(card(inputs))
    assert paused.status == "paused"
    assert seen == [("charge", TOKEN, CVV)]
    assert_masked(paused)
    assert type(paused.inputs) is (dict if inputs is CardDict else inputs)

    done = await flow.continue_(paused.id, step="approve", payload={"approver": "bo",
                                                                     "code": CODE})
    assert done.status == "completed"
    assert seen[1:] == [("approve", CODE, f"rcpt-{TOKEN}"), ("confirm", f"rcpt-{TOKEN}", CODE)]
    assert done.value == HIDDEN
    assert done.steps["approve"].result == Code("bo", HIDDEN)
    for run in (done, await flow.get(done.id), await rf.get_run(done.id)):
        assert_masked(run)
        assert run.value == HIDDEN
        assert run.steps["confirm"].result == HIDDEN


async def test_undo_and_retry_use_the_stored_real_values(storage: rf.Storage) -> None:
    seen: list[Any] = []
    flow = card_flow(CardStruct, seen, fail=True)
    paused = await flow.run(card(CardStruct))
    failed = await flow.continue_(paused.id, step="approve", payload=Code("bo", CODE))
    assert failed.status == "failed"
    assert ("refund", f"rcpt-{TOKEN}") in seen  # the rollback undid with the real result

    seen.clear()
    retried = await flow.retry(failed.id)
    assert seen == [("charge", TOKEN, CVV)]  # the retry started from the real inputs
    assert_masked(retried)

    seen.clear()
    undone = await flow.undo(retried.id)
    assert undone.status == "cancelled"  # undoing a paused run cancels it, rolled back
    assert seen == [("refund", f"rcpt-{TOKEN}")]
    assert_masked(undone)


async def test_error_text_history_and_logs_never_show_a_secret(
        storage: rf.Storage, caplog: pytest.LogCaptureFixture) -> None:
    seen: list[Any] = []
    flow = card_flow(CardStruct, seen, fail=True)
    caplog.set_level(logging.DEBUG, logger="reactorflow")
    paused = await flow.run(card(CardStruct))
    failed = await flow.continue_(paused.id, step="approve", payload=Code("bo", CODE))
    assert failed.status == "failed"
    assert failed.error is not None
    assert failed.error.message == f"card {HIDDEN} declined for code '{HIDDEN}'"
    assert "ValueError" in failed.error.traceback and HIDDEN in failed.error.traceback
    for run in (failed, await flow.get(failed.id), await rf.get_run(failed.id)):
        text = repr(run) + repr(msgspec.to_builtins(run)) + str(run.error)
        for secret in (TOKEN, CVV, CODE):
            assert secret not in text
        assert run.steps["confirm"].error == f"ValueError: card {HIDDEN} declined for code " \
                                             f"'{HIDDEN}'"
    logged = "\n".join(f"{r.getMessage()} {r.exc_text or ''}" for r in caplog.records)
    assert "reactorflow.step.failed" in logged
    for secret in (TOKEN, CVV, CODE):
        assert secret not in logged


class Secretive(rf.Middleware):
    def __init__(self) -> None:
        self.errors: list[BaseException] = []

    def after_step(self, event: rf.StepEvent) -> None:
        if event.error is not None:
            self.errors.append(event.error)

    def before_retry(self, event: rf.StepEvent) -> None:
        assert event.error is not None
        self.errors.append(event.error)


class Login(msgspec.Struct):
    user: str
    password: Annotated[str, rf.Redacted]


async def test_middleware_and_retries_see_errors_scrubbed(
        storage: rf.Storage, caplog: pytest.LogCaptureFixture) -> None:
    watcher = Secretive()
    flow = rf.Reactor(unique("redact-mw"), inputs=Login, middleware=[watcher])
    caplog.set_level(logging.DEBUG, logger="reactorflow")

    @flow.step(retries=rf.Retry(attempts=2, backoff=0))
    async def lookup(user: str, ctx: rf.StepContext) -> str:
        if ctx.attempt == 1:
            raise ValueError(f"no such user {user}")
        return user

    @flow.step(retries=rf.Retry(attempts=2, backoff=0))
    async def login(lookup: str, password: str) -> str:
        try:
            raise KeyError(password)
        except KeyError as exc:
            raise PermissionError(f"{lookup} cannot log in with {password}") from exc

    run = await flow.run(user="ada", password="hunter22")
    assert run.status == "failed"
    hidden = [e for e in watcher.errors if isinstance(e, rf.RecordedError)]
    assert len(hidden) == 2  # the retry, then the failure
    assert all(e.type == "PermissionError" for e in hidden)
    assert str(hidden[0]) == f"PermissionError: ada cannot log in with {HIDDEN}"
    plain_errors = [e for e in watcher.errors if isinstance(e, ValueError)]
    assert [str(e) for e in plain_errors] == ["no such user ada"]  # nothing secret: as raised
    retried = [e for e in run.history if e.kind == "step.retried"]
    assert retried and all("hunter22" not in e.detail for e in run.history)
    logged = "\n".join(f"{r.getMessage()} {r.exc_text or ''}" for r in caplog.records)
    assert "reactorflow.step.retry" in logged and "hunter22" not in logged
    assert run.error is not None and "hunter22" not in run.error.traceback
    assert "KeyError" in run.error.traceback  # the chained cause is kept, scrubbed


async def test_a_reader_without_the_reactor_masks_from_the_stored_marks(
        storage: rf.Storage) -> None:
    seen: list[Any] = []
    flow = card_flow(CardStruct, seen)
    paused = await flow.run(card(CardStruct))
    redeploy(flow)  # as a CLI or dashboard process that never imported the module
    run = await rf.get_run(paused.id)
    assert run.inputs == {"holder": "Ada", "token": HIDDEN,
                          "billing": {"city": "Lyon", "cvv": HIDDEN}}
    assert run.steps["charge"].result == {"charge_id": "ch_1", "receipt": HIDDEN}
    assert TOKEN not in repr(run)


class Inner(msgspec.Struct, rename="camel"):
    api_key: Annotated[str, rf.Redacted]
    note: str = ""


class Outer(msgspec.Struct):
    items: list[Inner]
    by_name: dict[str, Annotated[int, rf.Redacted]]
    maybe: Inner | None = None
    pair: tuple[str, Annotated[str, rf.Redacted]] = ("", "")


def test_masks_follow_nested_collections_unions_and_renames() -> None:
    assert mask_of(Outer) == {"items": {"*": {"apiKey": True}}, "by_name": {"*": True},
                              "maybe": {"apiKey": True}, "pair": {"*": True}}
    assert mask_of(Inner | None) == {"apiKey": True}
    assert mask_of(rf.Outcome[Annotated[str, rf.Redacted]]) == {"value": True}
    assert mask_of(str) is None and mask_of(Billing) == {"cvv": True}


class Cards(msgspec.Struct):
    numbers: list[Annotated[str, rf.Redacted]]
    merchant_key: Annotated[str, rf.Redacted] = "mk-0451"


GOOD, BAD = "4111-1111-1111-1111", "4000-0000-0000-0000"


@pytest.mark.parametrize("fan_out", [False, True], ids=["inline", "fan_out"])
async def test_map_elements_get_real_values_and_their_outcomes_are_masked(
        storage: rf.Storage, fan_out: bool) -> None:
    received: list[str] = []
    flow = rf.Reactor(unique("redact-map"), inputs=Cards)

    @flow.map_step(over="numbers", fan_out=fan_out, atomic=False)
    async def tokenize(number: str, merchant_key: str) -> Annotated[str, rf.Redacted]:
        received.append(number)
        if number == BAD:
            raise ValueError(f"bad card {number} for {merchant_key}")
        return f"tok-{number}"

    run = await flow.run(numbers=[GOOD, BAD])
    if fan_out:
        run = await flow.wait(run.id, timeout=30)
    assert run.status == "completed", run.error
    assert sorted(received) == sorted([GOOD, BAD])
    assert run.inputs == Cards([HIDDEN, HIDDEN], HIDDEN)
    ok, failed = run.value
    assert ok.ok and ok.value == HIDDEN
    assert not failed.ok and failed.value is None  # nothing there: None stays None
    assert failed.error.message == f"bad card {HIDDEN} for {HIDDEN}"
    for read in (run, await flow.get(run.id), await rf.get_run(run.id)):
        assert GOOD not in repr(read) and BAD not in repr(read) and "mk-0451" not in repr(read)
        assert "tok-" not in repr(read)


class Vault(msgspec.Struct):
    owner: str
    pin: Annotated[str, rf.Redacted]


class Plain(msgspec.Struct):
    user: str
    code: str


class Unlock(msgspec.Struct):
    code: Annotated[Literal["alpha-1", "beta-2"], rf.Redacted]


async def test_a_composed_childs_marks_hold_inside_the_parent(storage: rf.Storage) -> None:
    received: list[str] = []
    child = rf.Reactor(unique("redact-child"), inputs=Vault)

    @child.step
    async def open_vault(owner: str, pin: str) -> Annotated[str, rf.Redacted]:
        received.append(pin)
        return f"vault-of-{owner}-{pin}"

    @child.step
    async def audit(open_vault: str, pin: str) -> str:
        raise RuntimeError(f"audit refused {open_vault} (pin {pin})")

    parent = rf.Reactor(unique("redact-parent"), inputs=Plain)

    @parent.compose(child)
    async def vault(user: str, code: str) -> Vault:
        return Vault(user, code)  # an unmarked value passed to a marked field of the child

    run = await parent.run(user="ada", code="pw-31337")
    assert received == ["pw-31337"]
    assert run.status == "failed" and run.error is not None
    assert run.error.message == f"audit refused {HIDDEN} (pin {HIDDEN})"
    assert run.steps["vault.open_vault"].result == HIDDEN
    assert run.inputs == Plain("ada", "pw-31337")  # the parent's own field is not marked
    history = repr(run.history) + repr((await rf.get_run(run.id)).history)
    assert "pw-31337" not in history + run.error.traceback


async def test_a_rejected_payload_never_quotes_a_redacted_value(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("redact-payload"))

    @flow.interrupt
    async def unlock(payload: Unlock) -> str:
        return "open"

    paused = await flow.run()
    with pytest.raises(rf.PayloadValidationError) as caught:
        await flow.continue_(paused.id, step="unlock", payload={"code": "gamma-3"})
    assert "gamma-3" not in str(caught.value) and HIDDEN in str(caught.value)
    assert caught.value.__cause__ is None


async def test_a_halt_reason_is_scrubbed(storage: rf.Storage) -> None:
    flow = rf.Reactor(unique("redact-halt"), inputs=Login)

    @flow.step
    async def check(user: str, password: str) -> str:
        raise rf.Halt(f"{user} used the leaked password {password}")

    run = await flow.run(user="ada", password="leaked-pw-1")
    assert run.status == "halted"
    assert run.halt_reason == f"ada used the leaked password {HIDDEN}"
    assert "leaked-pw-1" not in repr(run) + repr(await rf.get_run(run.id))


@dataclass(frozen=True)
class Checked:
    pin: Annotated[str, rf.Redacted]

    def __post_init__(self) -> None:
        if not self.pin.isdigit():
            raise ValueError("digits only")


def test_masking_a_dataclass_whose_init_refuses_the_mask_copies_it() -> None:
    original = Checked("1234")
    shown = masked(original, mask_of(Checked))
    assert type(shown) is Checked and shown.pin == HIDDEN and original.pin == "1234"
