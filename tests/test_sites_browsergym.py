"""The docs page "The arena from plain BrowserGym" (docs/manual/browsergym.md) runs as written: its
Python block, a scripted agent on one Trac task through `gym.make` with no awm driver, harness or model,
ends the task with reward 1.0 on the real site."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "manual" / "browsergym.md"

pytestmark = [pytest.mark.sites, pytest.mark.browser]


def test_the_plain_browsergym_page_runs_as_written(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.S)
    assert len(blocks) == 1, "the page has one Python block: the whole script"
    script = tmp_path / "plain_browsergym.py"
    script.write_text(blocks[0])
    done = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "reward 1.0, ended: True" in done.stdout, done.stdout + done.stderr[-2000:]
