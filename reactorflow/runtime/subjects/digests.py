"""A run's subject: the reactor's `subject=` template rendered over the run's inputs, and the
digest reactorflow stores instead of it (subjects are often e-mail addresses: their text is
never stored, logged or shown)."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from reactorflow.errors import InputValidationError, ReactorflowError
from reactorflow.records import summary

if TYPE_CHECKING:
    from reactorflow.definition.table import Declared

DOMAIN = b"reactorflow.subject\x00"
"""What every subject digest is taken over first (so it matches no other SHA-256 use)."""


def subject_digest(subject: str) -> str:
    """The digest a subject is stored under: SHA-256 over `DOMAIN` and its UTF-8 text, in hex.

    Raises:
        ReactorflowError: `subject` is not a non-empty `str` (nothing is done).
    """
    if not isinstance(subject, str) or not subject:
        raise ReactorflowError(
            "a subject is a non-empty str (what the reactor's subject= template renders, "
            "such as a customer id), not "
            + ("an empty str" if subject == "" else f"a {type(subject).__name__}"))
    return hashlib.sha256(DOMAIN + subject.encode("utf-8", "surrogatepass")).hexdigest()


def run_subject(reactor: Declared, inputs: Any) -> str | None:
    """The digest of the subject of a run of `reactor` with `inputs` (None: the reactor
    declares no subject).

    Raises:
        InputValidationError: the template cannot be rendered over these inputs, or renders
            an empty subject (the field is `subject`; nothing is stored).
    """
    template = reactor.subject
    if template is None:
        return None
    try:
        values = {name: inputs[name] if isinstance(inputs, dict) else getattr(inputs, name)
                  for name in reactor.input_names if not isinstance(inputs, dict)
                  or name in inputs}
        text = template.format(**values)
    except Exception as exc:
        raise InputValidationError(reactor.name, "subject",
                                   f"the template {template!r} cannot be rendered: "
                                   f"{summary(exc)}") from exc
    if not text:
        raise InputValidationError(reactor.name, "subject",
                                   f"the template {template!r} renders an empty subject")
    return subject_digest(text)
