"""Every file in scripts/ is a maintained tool: `--help` prints its usage and exits 0 without doing its
work (a one-off probe script belongs in git history, not here; README and docs/ say where each is used)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(p for p in (REPO / "scripts").iterdir() if p.suffix in (".sh", ".py"))


def test_scripts_holds_only_shell_and_python_tools():
    assert {p.suffix for p in (REPO / "scripts").iterdir() if p.is_file()} <= {".sh", ".py"}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_help_prints_usage_and_exits_0(script: Path):
    cmd = ["bash", str(script), "--help"] if script.suffix == ".sh" else [sys.executable, str(script), "--help"]
    r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.strip().splitlines()) >= 2, r.stdout  # the header, not an empty line


def test_every_script_is_named_in_the_readme_docs_tests_or_another_script():
    """A documented use or a test: the README, docs/, CI, a test or another script names each one."""
    files = [REPO / "README.md", REPO / ".ci" / "run", *(REPO / "docs").glob("*.md"),
             *(p for p in (REPO / "tests").rglob("*.py") if p.name != Path(__file__).name), *SCRIPTS]
    texts = {p: p.read_text(errors="replace") for p in files if p.is_file()}
    missing = [s.name for s in SCRIPTS if not any(f"scripts/{s.name}" in t for p, t in texts.items() if p != s)]
    assert not missing, missing
