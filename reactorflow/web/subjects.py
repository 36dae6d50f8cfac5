"""The JSON routes of data subjects: erase one (`POST /api/subjects:forget`, an `operate`
token; the subject travels in the body, never in the URL, which proxies log), and the
erasures' audit records (`GET /api/subjects/erasures`)."""

from __future__ import annotations

from starlette.requests import Request

from reactorflow.jsonforms import erasure_form
from reactorflow.runtime.subjects.forget import forget_subject, list_erasures
from reactorflow.web.api import body_of, page_limit
from reactorflow.web.responses import JSON, BadRequest


async def forget(request: Request) -> JSON:
    """Erase the subject named by the body's `"subject"` (`rf.forget_subject`): answers
    `{"runs": <runs touched>}` (0: unknown, or erased already)."""
    body = await body_of(request)
    subject = body.get("subject")
    if not isinstance(subject, str) or not subject:
        raise BadRequest('the body must name the subject: {"subject": "<as the reactor\'s '
                         'subject= template renders it>"}')
    return JSON({"runs": await forget_subject(subject)})


async def erasures(request: Request) -> JSON:
    """The newest erasures (`?limit=`, 50 by default): `{"erasures": [...]}`."""
    limit = page_limit(request.query_params.get("limit"))
    return JSON({"erasures": [erasure_form(e) for e in await list_erasures(limit)]})
