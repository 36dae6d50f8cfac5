"""Sessions: tests, browser, lint, typecheck, bench, docs, demo (`nox -s <name>`)."""

from __future__ import annotations

import nox

nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["lint", "typecheck", "tests"]

PYTHON = "3.11"


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """The whole suite, against a redis-server it starts itself."""
    session.install("-e", ".[test]")
    session.run("python", "-m", "pytest", *session.posargs)


@nox.session(python=PYTHON)
def browser(session: nox.Session) -> None:
    """The dashboard in headless Chromium: Debian's `chromium` package (apt-get install
    chromium), driven by Playwright; no browser is downloaded (never `playwright install`)."""
    session.install("-e", ".[browser]")
    session.run("python", "-m", "pytest", "tests/browser", *session.posargs)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    session.install("ruff>=0.6")
    session.run("ruff", "check", "reactorflow", "tests", "benchmarks", "examples", "noxfile.py")


@nox.session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    session.install("-e", ".", "mypy>=1.11")
    session.run("mypy", "--strict", "reactorflow")


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Benchmarks, each printed beside its baseline (DBOS is installed here only)."""
    session.install("-e", ".", "dbos>=1.0")
    session.run("python", "-m", "benchmarks", *session.posargs)


@nox.session(python=PYTHON)
def docs(session: nox.Session) -> None:
    session.install("-e", ".", "mkdocs>=1.6")
    session.run("mkdocs", "build", "--strict", "--site-dir", "site")


@nox.session(python=PYTHON)
def demo(session: nox.Session) -> None:
    session.install(".")
    session.run("python", "-m", "reactorflow", "demo")
