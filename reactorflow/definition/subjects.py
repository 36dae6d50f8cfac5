"""`subject=`: which data subject a reactor's runs are about, a `str.format` template over the
reactor's inputs (as a gate key is, `definition.gates.template_fields`). Checked here, at the
declaration line; rendered and digested at run time (`runtime/subjects/`). Nothing here does
I/O."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reactorflow.definition.gates import template_fields
from reactorflow.errors import DefinitionError


def check_subject(subject: Any, *, reactor: str, available: Sequence[str]) -> str | None:
    """Check `rf.Reactor(subject=...)`; returns the template (None: the runs have no subject).

    A redacted input may be formatted: the subject is never stored in clear (only its digest).

    Args:
        subject: The template, e.g. `"{customer_id}"`, or None.
        reactor: The reactor's name (named in the error).
        available: The reactor's input names.

    Raises:
        DefinitionError: not a non-empty string, not a valid template, a template with no
            field, or a field that is not one of the inputs (the message lists them).
    """
    if subject is None:
        return None
    where = f"reactor {reactor!r}: subject={subject!r}"
    if not isinstance(subject, str) or not subject:
        raise DefinitionError(f"{where} must be a template over the inputs such as "
                              "'{customer_id}'", reactor=reactor)
    try:
        fields = template_fields(subject)
    except ValueError as exc:
        raise DefinitionError(f"{where} is not a valid template: {exc}", reactor=reactor) from exc
    if not fields:
        raise DefinitionError(
            f"{where} names no input: every run would share one subject; name the input that "
            "identifies the person, such as '{customer_id}'", reactor=reactor)
    for _, root in fields:
        if root not in available:
            raise DefinitionError(
                f"{where} names {root!r}, which is not one of the reactor's inputs "
                f"({', '.join(available) or 'none'})", reactor=reactor)
    return subject
