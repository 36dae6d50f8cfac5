"""The documentation runs: every ```python block of README.md and docs/, every example, the demo.

Each Markdown file's blocks run in order in one fresh module namespace, inside one event loop
(top-level `await` is allowed), on a fresh `MemoryStorage`. A block preceded by the HTML comment
`<!-- no-run -->` is skipped (kept for things that cannot run here, such as Redis settings or an
error raised at a decorator line). A block preceded by `<!-- run-as-script -->` is a complete
program (it starts its own event loop): it runs on its own, as `python -c`. All files run in this
one process, so a reactor name may be used by only one file.
"""

from __future__ import annotations

import ast
import inspect
import os
import re
import subprocess
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

import reactorflow as rf
from reactorflow import config

ROOT = Path(__file__).resolve().parent.parent
NO_RUN = "<!-- no-run -->"
AS_SCRIPT = "<!-- run-as-script -->"
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>```+|~~~+)\s*(?P<info>[^\s`]*)")
SUBPROCESS_TIMEOUT = 120
DOC_TIMEOUT = 60  # seconds for all the blocks of one Markdown file


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # 1-based line of the first line of code
    code: str
    script: bool = False  # a complete program, run on its own


def markdown_files() -> list[Path]:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]
    return [path for path in files if path.is_file()]


def python_blocks(path: Path) -> list[Block]:
    """The runnable ```python blocks of a Markdown file, in order."""
    blocks: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    previous = ""  # the last non-blank line outside a block
    index = 0
    while index < len(lines):
        match = FENCE.match(lines[index])
        if match is None:
            if lines[index].strip():
                previous = lines[index].strip()
            index += 1
            continue
        fence, indent, info = match["fence"], match["indent"], match["info"].lower()
        body: list[str] = []
        index += 1
        start = index + 1
        while index < len(lines) and not lines[index].strip().startswith(fence):
            text = lines[index]
            body.append(text[len(indent):] if text.startswith(indent) else text.lstrip())
            index += 1
        index += 1  # the closing fence
        if info in ("python", "py") and previous != NO_RUN:
            blocks.append(Block(path, start, "\n".join(body) + "\n", previous == AS_SCRIPT))
        previous = ""
    return blocks


def _documents() -> list[Path]:
    return [path for path in markdown_files() if python_blocks(path)]


def run_blocks(path: Path, blocks: list[Block]) -> None:
    """Execute a file's blocks in order in one module namespace and one event loop."""
    name = "docs_" + re.sub(r"\W", "_", str(path.relative_to(ROOT)))
    module = types.ModuleType(name)
    module.__file__ = str(path)
    sys.modules[name] = module  # msgspec and typing resolve annotations through the module

    async def main() -> None:
        with anyio.fail_after(DOC_TIMEOUT):
            for block in blocks:
                # Pad so that line numbers in tracebacks are the Markdown file's own.
                source = "\n" * (block.line - 1) + block.code
                code = compile(source, str(path), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
                result = eval(code, module.__dict__)
                if inspect.iscoroutine(result):
                    await result

    blocks = [block for block in blocks if not block.script]
    rf.configure(storage=rf.MemoryStorage())
    try:
        anyio.run(main)
    finally:
        config.reset()
        sys.modules.pop(name, None)


def test_the_docs_have_code_to_run() -> None:
    documented = {path.relative_to(ROOT).as_posix() for path in _documents()}
    for expected in ("README.md", "docs/getting-started.md", "docs/concepts.md",
                     "docs/interrupts.md", "docs/composition.md"):
        assert expected in documented


@pytest.mark.parametrize("path", _documents(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_markdown_code_blocks_run(path: Path) -> None:
    run_blocks(path, python_blocks(path))


def test_the_reference_has_an_entry_for_every_public_name() -> None:
    text = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^#+ `rf\.(\w+)`", text, flags=re.MULTILINE))
    missing = sorted(set(rf.__all__) - documented)
    assert not missing, f"docs/reference.md has no `### `rf.<name>`` entry for {missing}"


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env.pop(config.REDIS_URL_ENV, None)  # the examples and the demo use the embedded default
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=_environment(), capture_output=True, text=True,
        timeout=SUBPROCESS_TIMEOUT, check=False,
    )


SCRIPTS = [block for path in markdown_files() for block in python_blocks(path) if block.script]


def test_the_readme_snippet_is_a_complete_program() -> None:
    assert any(block.path.name == "README.md" for block in SCRIPTS)


@pytest.mark.slow
@pytest.mark.parametrize("block", SCRIPTS,
                         ids=lambda b: f"{b.path.relative_to(ROOT).as_posix()}:{b.line}")
def test_script_blocks_run_as_programs(block: Block) -> None:
    done = _run("-c", block.code)
    assert done.returncode == 0, f"{block.path.name}:{block.line} exited {done.returncode}:\n" \
                                 f"{done.stderr}"


EXAMPLES = sorted((ROOT / "examples").glob("*.py"))


def test_there_are_examples() -> None:
    assert len(EXAMPLES) >= 3


@pytest.mark.slow
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_runs(path: Path) -> None:
    done = _run(str(path.relative_to(ROOT)))
    assert done.returncode == 0, f"{path.name} exited {done.returncode}:\n{done.stderr}"
    assert done.stdout.strip(), f"{path.name} printed nothing"


@pytest.mark.slow
def test_demo_runs() -> None:
    done = _run("-m", "reactorflow", "demo")
    assert done.returncode == 0, done.stderr
    for expected in ("COMPLETED", "FAILED", "undo", "flowchart TD"):
        assert expected in done.stdout, f"{expected!r} missing from the demo's output"
