"""A form in the dashboard enforces what the schema requires: each form built from a JSON Schema
(an interrupt's payload, a skipped step's result, a rewind's changed inputs) refuses a value the
schema forbids (a required field missing, a wrong type, a whole number that is not, a bound,
a pattern, a list's items, a map's values, a field the type does not declare) with a message
naming the field, before any request is sent (counted with page.on("request")); and the server,
sent the same value past the form, refuses it too, naming the field."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import msgspec
import pytest

import reactorflow as rf
from tests.browser.conftest import Dashboard, require_playwright, screenshot_dir
from tests.browser.test_dashboard import _open_run, _status
from tests.operate.flows import BILLING_FIXED_ENV, invoices

require_playwright()
pytestmark = pytest.mark.slow


class Limits(msgspec.Struct):
    code: Annotated[str, msgspec.Meta(pattern="^[A-Z]")]  # found anywhere: "AB-7" fits
    count: Annotated[int, msgspec.Meta(ge=1, le=10)]
    ratio: Annotated[float, msgspec.Meta(gt=0, lt=1)]
    by: str
    tags: list[str] = []
    caps: dict[str, int] = {}


rules = rf.Reactor("ops.form-rules")


@rules.interrupt(max_attempts=50)  # the server's refusals below count attempts
async def limits(payload: Limits) -> Limits:
    return payload


@rules.step
async def summary(limits: Limits) -> str:
    return f"{limits.code} x{limits.count} at {limits.ratio} by {limits.by} {limits.tags}"


def _count_requests(board: Dashboard) -> list[str]:
    """Every request the page sends from now on but reads (GET): "POST /api/runs/..."."""
    sent: list[str] = []
    board.page.on("request", lambda r: sent.append(f"{r.method} {r.url}")
                  if r.method != "GET" else None)
    return sent


async def _post(board: Dashboard, path: str, body: Any) -> tuple[int, dict[str, Any]]:
    """POST `body` to the API as the page's own token, past every form: (status, answer)."""
    answer: list[Any] = await board.page.evaluate(
        """async ([path, body]) => {
          const r = await fetch(path, { method: "POST", body: JSON.stringify(body),
            headers: { "Content-Type": "application/json", Accept: "application/json",
                       Authorization: "Bearer " + sessionStorage.getItem("reactorflow-token") } });
          return [r.status, await r.json()];
        }""", [path, body])
    return answer[0], answer[1]


async def _refused(form: Any, *names: str) -> str:
    """The form's message, once it refused: it names each field given."""
    message = form.locator("p.error")
    await message.filter(has_text="Fix the highlighted fields.").wait_for()
    text = await message.text_content() or ""
    for name in names:
        assert name in text, (name, text)
    assert ".;" not in text, text  # each field's reason without the browser's full stop
    await message.evaluate("node => { node.textContent = ''; }")
    return text


async def test_the_payload_form_refuses_what_the_schema_forbids(dashboard: Dashboard) -> None:
    paused = await rules.run()
    await dashboard.sign_in()
    await _open_run(dashboard, paused.id)
    page = dashboard.page
    form = page.locator("form[data-interrupt='limits']")
    submit = form.get_by_role("button", name="Continue")
    valid = {"code": "AB-7", "count": "3", "ratio": "0.5", "by": "ann", "tags": '["x"]',
             "caps": '{"a": 1}'}
    sent = _count_requests(dashboard)
    await submit.click()  # untouched: every required field is named
    text = await _refused(form, "code:", "count:", "ratio:", "by:")
    assert "tags:" not in text and "caps:" not in text  # optional, with their defaults
    for name, value in valid.items():
        await form.get_by_label(name).fill(value)
    cases = [("count", "2.5", "count: must be a whole number"),
             ("count", "11", "count: must be \u2264 10"),
             ("count", "0", "count: must be \u2265 1"),
             ("ratio", "1", "ratio: must be < 1"),
             ("ratio", "0", "ratio: must be > 0"),
             ("code", "ab-7", "code: must match ^[A-Z]"),
             ("by", "", "by: "),
             ("tags", '{"not": "a list"}', "tags: must be a list, not an object"),
             ("tags", '["ok", 3]', "tags[1]: must be a string, not a number"),
             ("tags", "[ok]", "tags: not JSON"),
             ("caps", '{"a": "x"}', "caps.a: must be a whole number, not a string"),
             ("caps", "[1]", "caps: must be an object, not a list")]
    for name, bad, said in cases:
        field = form.get_by_label(name)
        await field.fill(bad)
        await submit.click()
        await _refused(form, said)
        await field.fill(valid[name])
    assert sent == [] and dashboard.dialogs == []  # refused by the form: nothing was sent
    assert (await rules.get(paused.id)).status is rf.Status.PAUSED

    # the server, sent the same values past the form, refuses each, naming the field
    path = f"api/runs/{paused.id}/continue"
    good = {"code": "AB-7", "count": 3, "ratio": 0.5, "by": "ann"}
    for change, named in [({"count": 2.5}, "count"), ({"count": 11}, "count"),
                          ({"ratio": 1}, "ratio"), ({"code": "ab"}, "code"),
                          ({"tags": {"not": "a list"}}, "tags"),
                          ({"caps": {"a": "x"}}, "caps[...]"),  # (msgspec's path of a map value)
                          ({"by": None}, "by"), ({"bogus": 1}, "bogus")]:
        for route in (path + "/check", path):  # the check, and continue_ itself
            status, answer = await _post(dashboard, route, {"step": "limits",
                                                            "payload": {**good, **change}})
            assert status == 422 and answer["error"] == "PayloadValidationError", answer
            assert answer["fields"]["field"] == named, answer
            assert f": {named}: " in answer["message"], answer
        assert (await rules.get(paused.id)).status is rf.Status.PAUSED
    status, answer = await _post(dashboard, path, {"step": "limits"})
    assert status == 422 and '"payload"' in answer["message"]


async def test_a_pattern_is_found_anywhere_in_the_text(dashboard: Dashboard) -> None:
    """JSON Schema's pattern is searched for, not matched against the whole text (an HTML
    pattern attribute would refuse "AB-7" for "^[A-Z]")."""
    paused = await rules.run()
    await dashboard.sign_in()
    await _open_run(dashboard, paused.id)
    form = dashboard.page.locator("form[data-interrupt='limits']")
    for name, value in {"code": "AB-7", "count": "3", "ratio": "0.5", "by": "ann"}.items():
        await form.get_by_label(name).fill(value)
    await form.get_by_role("button", name="Continue").click()
    await _status(dashboard, "completed")
    assert (await rules.get(paused.id)).value == "AB-7 x3 at 0.5 by ann []"
    assert len(dashboard.dialogs) == 1


async def test_the_skip_form_refuses_what_the_result_type_forbids(dashboard: Dashboard) -> None:
    held = await invoices.run(customer="ACME")
    assert held.status is rf.Status.HELD
    await dashboard.sign_in()
    await _open_run(dashboard, held.id)
    page = dashboard.page
    await page.get_by_role("button", name="Skip step").click()
    form = page.locator("form[data-skip='bill']")
    submit = form.get_by_role("button", name="Skip step")
    await form.get_by_label("ref").wait_for()
    sent = _count_requests(dashboard)
    await submit.click()
    await _refused(form, "ref:", "amount:")
    await form.get_by_label("ref").fill("M-7")
    for bad, said in [("0", "amount: must be > 0"), ("-3", "amount: must be > 0")]:
        await form.get_by_label("amount").fill(bad)
        await submit.click()
        await _refused(form, said)
    assert sent == [] and dashboard.dialogs == []
    path = f"api/runs/{held.id}/skip-step"
    for result, named in [({"ref": "M-7", "amount": 0}, "amount"),
                          ({"ref": 7, "amount": 1.5}, "ref"), ({"amount": 1.5}, "ref"),
                          ({"ref": "M-7", "amount": "1.5"}, "amount")]:
        status, answer = await _post(dashboard, path, {"step": "bill", "result": result})
        assert status == 422 and answer["error"] == "ResultValidationError", answer
        assert answer["fields"]["field"] == named and f": {named}: " in answer["message"]
    status, answer = await _post(dashboard, path, {"step": "bill"})
    assert status == 422 and '"result"' in answer["message"]
    assert (await invoices.get(held.id)).status is rf.Status.HELD


async def test_the_rewind_form_checks_the_changed_inputs(
        dashboard: Dashboard, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BILLING_FIXED_ENV, "1")
    done = await invoices.run(customer="ACME")
    assert done.status is rf.Status.COMPLETED
    await dashboard.sign_in()
    await _open_run(dashboard, done.id)
    page = dashboard.page
    await page.get_by_role("button", name="Rewind", exact=True).click()
    form = page.locator(f"form[data-rewind='{done.id}']")
    await form.get_by_text("the input fields: customer, amount").wait_for()
    submit = form.get_by_role("button", name="Rewind")
    sent = _count_requests(dashboard)
    await submit.click()
    await _refused(form, "to:")
    await form.get_by_label("to step").select_option("bill")
    inputs = form.get_by_label("changed inputs")
    for bad, said in [('{"amount": "lots"}', "inputs: amount: must be a number, not a string"),
                      ('{"customer": 7}', "inputs: customer: must be a string, not a number"),
                      ('{"customr": "x"}', "inputs: customr: not a field of Invoice"),
                      ("[1]", "inputs: a JSON object of the changed fields")]:
        await inputs.fill(bad)
        await submit.click()
        await _refused(form, said)
    assert sent == [] and dashboard.dialogs == []
    path = f"api/runs/{done.id}/rewind"
    for changed, named in [({"amount": "lots"}, "amount"), ({"customer": 7}, "customer"),
                           ({"customr": "x"}, "customr")]:
        status, answer = await _post(dashboard, path, {"to": "bill", "inputs": changed})
        assert status == 422 and answer["error"] == "InputValidationError", answer
        assert answer["fields"]["field"] == named and f": {named}: " in answer["message"]
    status, answer = await _post(dashboard, path, {"to": "bill", "inputs": [1]})
    assert status == 422 and '"inputs"' in answer["message"]
    status, answer = await _post(dashboard, path, {"inputs": {"amount": 1.0}})
    assert status == 422 and '"to"' in answer["message"]
    run = await invoices.get(done.id)
    assert run.status is rf.Status.COMPLETED and run.steps["draft"].attempts == 1


class Line(msgspec.Struct):
    # Python's named group: no browser compiles it, so the form leaves the pattern to the
    # server, and still checks the rest
    sku: Annotated[str, msgspec.Meta(pattern="(?P<kind>[A-Z])-", max_length=6)]
    qty: Annotated[int, msgspec.Meta(ge=1)]


class Order(msgspec.Struct):
    lines: list[Line]


orders = rf.Reactor("ops.form-orders")


@orders.interrupt(max_attempts=50)
async def order(payload: Order) -> Order:
    return payload


@orders.step
async def counted(order: Order) -> int:
    return sum(line.qty for line in order.lines)


async def test_a_record_inside_a_json_field_is_checked_field_by_field(
        dashboard: Dashboard) -> None:
    """A JSON field holding records: each refusal names the item and its field (the schema's
    $ref followed, an undeclared field refused), and a pattern this browser cannot compile is
    left to the server while the field's other rules are still checked here."""
    paused = await orders.run()
    await dashboard.sign_in()
    await _open_run(dashboard, paused.id)
    form = dashboard.page.locator("form[data-interrupt='order']")
    submit = form.get_by_role("button", name="Continue")
    lines = form.get_by_label("lines")
    sent = _count_requests(dashboard)
    for bad, said in [('[{"sku": "A-1", "qty": 0}]', "lines[0].qty: must be \u2265 1"),
                      ('[{"sku": "A-1", "qty": 1}, {"sku": "B-2", "qty": 1, "bogus": 1}]',
                       "lines[1].bogus: not a field of Line"),
                      ('[{"sku": "A-12345", "qty": 1}]', "lines[0].sku: at most 6 characters"),
                      ('[{"qty": 1}]', "lines[0].sku: required"),
                      ('[{"sku": 7, "qty": "x"}]', "lines[0].sku: must be a string, not a number"),
                      ('{"sku": "A-1"}', "lines: must be a list, not an object")]:
        await lines.fill(bad)
        await submit.click()
        await _refused(form, said)
    assert sent == [] and dashboard.dialogs == []
    # the pattern, left to the server: its check refuses, naming the field; nothing continues
    await lines.fill('[{"sku": "ab", "qty": 1}]')
    await submit.click()
    message = form.locator("p.error")
    await message.filter(has_text="sku").wait_for()
    assert "Fix the highlighted fields." not in (await message.text_content() or "")
    assert dashboard.dialogs == [] and len(sent) == 1  # the check only: nothing was continued
    assert sent[0].startswith("POST ") and sent[0].endswith(f"/api/runs/{paused.id}/continue/check")
    await lines.fill('[{"sku": "A-1", "qty": 2}, {"sku": "xB-", "qty": 3}]')
    await submit.click()
    await _status(dashboard, "completed")
    assert (await orders.get(paused.id)).value == 5


class Street(msgspec.Struct):
    street: str
    zip: Annotated[str, msgspec.Meta(min_length=3)]


class Delivery(msgspec.Struct):
    who: str
    ship_to: Street | None = None  # optional, and may be null


deliveries = rf.Reactor("ops.form-deliveries")


@deliveries.interrupt
async def deliver(payload: Delivery) -> Delivery:
    return payload


@deliveries.step
async def where(deliver: Delivery) -> str:
    return f"{deliver.who} at {deliver.ship_to.street if deliver.ship_to else 'the counter'}"


async def test_an_optional_record_is_left_out_until_it_is_ticked(dashboard: Dashboard,
                                                                  tmp_path: Path) -> None:
    """An optional nested record asks for nothing until its box is ticked (its required fields
    are the record's, not the payload's): unticked it is sent as null; ticked, its own required
    fields and bounds are enforced, naming them under the record."""
    await dashboard.sign_in()
    first, second = await deliveries.run(), await deliveries.run()
    page = dashboard.page
    await _open_run(dashboard, first.id)
    form = page.locator("form[data-interrupt='deliver']")
    include = form.get_by_role("checkbox", name="ship_to")
    assert not await include.is_checked()
    assert await form.get_by_role("textbox", name="street").is_disabled()
    await form.get_by_role("textbox", name="who").fill("ann")
    await include.check()  # ticked, filled, then unticked: left out again
    await form.get_by_role("textbox", name="street").fill("1 Main St")
    await include.uncheck()
    await form.get_by_role("button", name="Continue").click()
    await _status(dashboard, "completed")
    assert (await deliveries.get(first.id)).value == "ann at the counter"
    assert len(dashboard.dialogs) == 1 and '"ship_to": null' in dashboard.dialogs[0]

    await _open_run(dashboard, second.id)
    form = page.locator("form[data-interrupt='deliver']")
    submit = form.get_by_role("button", name="Continue")
    await form.get_by_role("textbox", name="who").fill("bob")
    await form.screenshot(path=str(screenshot_dir(tmp_path) / "dashboard-optional-record.png"))
    await form.get_by_role("checkbox", name="ship_to").check()
    sent = _count_requests(dashboard)
    await submit.click()
    text = await _refused(form, "ship_to.street:", "ship_to.zip:")
    assert "who:" not in text
    await form.get_by_role("textbox", name="street").fill("2 Quay")
    await form.get_by_role("textbox", name="zip").fill("12")
    await submit.click()
    await _refused(form, "ship_to.zip: at least 3 characters")
    assert sent == []
    await form.get_by_role("textbox", name="zip").fill("123")
    await submit.click()
    await _status(dashboard, "completed")
    assert (await deliveries.get(second.id)).value == "bob at 2 Quay"
