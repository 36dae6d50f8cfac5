"""`rf.Reactor(subject=...)` is checked at the declaration line, as a gate key template is: a
clear `rf.DefinitionError` names the reactor and what is wrong; the subject is rendered from
the inputs at run time and stored only as its digest."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import msgspec
import pytest

import reactorflow as rf
from reactorflow.runtime.subjects.digests import run_subject, subject_digest


class Order(msgspec.Struct):
    customer_id: str
    region: str = "eu"


@pytest.mark.parametrize(("subject", "message"), [
    ("{customer}", "reactor 'subj.bad': subject='{customer}' names 'customer', which is not "
                   "one of the reactor's inputs (customer_id, region)"),
    ("{customer.id}", "names 'customer', which is not one of the reactor's inputs"),
    ("customers", "names no input: every run would share one subject"),
    ("{customer_id", "is not a valid template"),
    ("", "must be a template over the inputs"),
    (42, "must be a template over the inputs"),
])
def test_a_bad_subject_is_refused_at_the_declaration(subject: object, message: str) -> None:
    with pytest.raises(rf.DefinitionError) as caught:
        rf.Reactor("subj.bad", inputs=Order, subject=subject)  # type: ignore[arg-type]
    assert message in str(caught.value)
    assert caught.value.reactor == "subj.bad"


def test_a_reactor_without_inputs_has_no_input_to_name() -> None:
    with pytest.raises(rf.DefinitionError, match=r"not one of the reactor's inputs \(none\)"):
        rf.Reactor("subj.bare", subject="{customer_id}")


def test_the_subject_is_rendered_from_the_inputs_and_digested() -> None:
    reactor = rf.Reactor("subj.good", inputs=Order, subject="{region}:{customer_id}")
    assert reactor.subject == "{region}:{customer_id}"
    digest = run_subject(reactor, Order("c42"))
    assert digest == subject_digest("eu:c42")
    assert digest is not None and len(digest) == 64 and "c42" not in digest
    assert run_subject(rf.Reactor("subj.none", inputs=Order), Order("c42")) is None


@pytest.mark.parametrize("bad", ["", None, 42])
def test_a_subject_must_be_a_non_empty_str(bad: object) -> None:
    with pytest.raises(rf.ReactorflowError, match="a subject is a non-empty str"):
        subject_digest(bad)  # type: ignore[arg-type]


def test_a_subject_reactor_is_known_once_declared_and_until_it_is_gone() -> None:
    """Element and unit jobs read their run's meta only while `subjects_declared()`: its
    answer is kept per declaration generation, and a declaration, or a forgotten one, is seen
    at once. In a fresh interpreter, so that no other test's reactors are declared."""
    script = textwrap.dedent("""
        import msgspec, reactorflow as rf
        from reactorflow.definition import naming
        from reactorflow.runtime.subjects.data_keys import subjects_declared

        class Order(msgspec.Struct):
            customer_id: str

        plain = rf.Reactor("decl.plain", inputs=Order)
        assert not subjects_declared()
        assert not subjects_declared()  # (kept)
        personal = rf.Reactor("decl.personal", inputs=Order, subject="{customer_id}")
        assert subjects_declared()
        naming.forget(personal)
        assert not subjects_declared()
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
