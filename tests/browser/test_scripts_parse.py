"""Every script the dashboard serves parses (`node --check`): one redeclared name, as two
features merged side by side may leave, stops the whole page, login form included."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

STATIC = Path(__file__).resolve().parents[2] / "reactorflow" / "web" / "static"
NODE = shutil.which("node")


@pytest.mark.skipif(NODE is None, reason="node is not installed (apt-get install nodejs)")
@pytest.mark.parametrize("script", sorted(p.name for p in STATIC.rglob("*.js")
                                          if ".min." not in p.name and "vendor" not in p.parts))
def test_each_dashboard_script_parses(script: str) -> None:
    assert NODE is not None
    path = next(STATIC.rglob(script))
    checked = subprocess.run([NODE, "--check", str(path)], capture_output=True, text=True,
                             timeout=30, check=False)
    assert checked.returncode == 0, checked.stderr
