"""The HTTP API of subjects through the real app: `POST /api/subjects:forget` erases (an
`operate` token; a `read` token is refused and nothing changes; a body without a subject is
422), the erasure is recorded under the token's name, `GET /api/subjects/erasures` lists it,
and the erased run reads `"<erased>"` through `GET /api/runs/{id}`."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

import reactorflow as rf
from reactorflow.runtime.subjects.digests import subject_digest
from reactorflow.web import create_app
from tests.operate.test_web_roles import bearer
from tests.subjects import flows

READ, OPERATE = "SECRET-read-1a2b", "SECRET-operate-3c4d"
TOKENS = {"viewer": {"role": "read", "token": READ},
          "dpo": {"role": "operate", "token": OPERATE}}


@pytest.fixture
async def http(sealed: rf.Storage, monkeypatch: pytest.MonkeyPatch
               ) -> AsyncIterator[httpx.AsyncClient]:
    monkeypatch.delenv("REACTORFLOW_DASHBOARD_TOKEN", raising=False)
    transport = httpx.ASGITransport(app=create_app(tokens=TOKENS))
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        yield client


async def test_an_operate_token_forgets_a_subject(http: httpx.AsyncClient) -> None:
    done = await flows.receipts.run(customer_id="w1", email="w1@example.com")
    paused = await flows.signups.run(customer_id="w1", email="w1@example.com")

    refused = await http.post("/api/subjects:forget", json={"subject": "w1"},
                              headers=bearer(READ))
    assert refused.status_code == 403
    assert (await rf.get_run(done.id)).inputs.email == "w1@example.com"  # nothing changed
    bad = await http.post("/api/subjects:forget", json={"who": "w1"}, headers=bearer(OPERATE))
    assert bad.status_code == 422 and "the body must name the subject" in bad.json()["message"]

    erased = await http.post("/api/subjects:forget", json={"subject": "w1"},
                             headers=bearer(OPERATE))
    assert erased.status_code == 200 and erased.json() == {"runs": 2}
    shown = (await http.get(f"/api/runs/{done.id}", headers=bearer(READ))).json()
    assert shown["inputs"] == "<erased>" and shown["value"] == "<erased>"
    cancelled = (await http.get(f"/api/runs/{paused.id}", headers=bearer(READ))).json()
    assert (cancelled["status"], cancelled["cancel_reason"]) == ("cancelled", "subject erased")

    listed = (await http.get("/api/subjects/erasures", headers=bearer(READ))).json()
    [record] = listed["erasures"]
    assert record["subject_digest"] == subject_digest("w1")
    assert (record["actor"], record["runs"], record["cancelled"]) == ("dpo", 2, [paused.id])
