"""hisparse.gitutil: the one way the package runs git (real repositories, real git)."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from _regression_data import git as _git
from hisparse.errors import HisparseError
from hisparse.gitutil import git, git_or_none

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture()
def repo(tmp_path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    _git(root, "init", "-q")
    (root / "f.txt").write_text("one\n")
    _git(root, "add", "f.txt")
    _git(root, "commit", "-q", "-m", "first")
    return root


def test_git_returns_stdout(repo):
    head = _git(repo, "rev-parse", "HEAD")
    assert re.fullmatch(r"[0-9a-f]{40}", head)
    assert git(repo, "rev-parse", "HEAD") == head + "\n"  # stdout as git wrote it
    assert git_or_none(repo, "rev-parse", "HEAD") == head + "\n"
    assert git(str(repo), "status", "--porcelain") == ""


def test_a_failing_command_names_itself_the_repo_and_gits_message(repo):
    with pytest.raises(HisparseError) as e:
        git(repo, "rev-parse", "--verify", "no-such-rev")
    assert str(e.value).startswith(f"git rev-parse --verify no-such-rev failed in {repo}: ")
    assert "fatal" in str(e.value) or "Needed a single revision" in str(e.value)
    assert git(repo, "rev-parse", "--verify", "no-such-rev", check=False) == ""  # no raise, stdout as is
    assert git_or_none(repo, "rev-parse", "--verify", "no-such-rev") is None


def test_outside_a_checkout_and_without_git(tmp_path, monkeypatch):
    plain = tmp_path / "plain"
    plain.mkdir()
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))  # do not find a repo above tmp_path
    assert git_or_none(plain, "rev-parse", "HEAD") is None
    assert git_or_none(tmp_path / "missing", "rev-parse", "HEAD") is None
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no git on PATH: an answer, not a traceback
    assert git_or_none(plain, "rev-parse", "HEAD") is None
    assert git(plain, "status", check=False) == ""
    with pytest.raises(HisparseError, match=r"^git status failed in "):
        git(plain, "status")


# -- no module but gitutil runs git ------------------------------------------------------------------


def git_runs(source: str) -> list[int]:
    """Lines of ``source`` that run git themselves: a call whose first argument is a list or tuple
    starting with the string "git" (subprocess.run/check_output/Popen(["git", ...]), os.execvp...)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], (ast.List, ast.Tuple)):
            first = node.args[0].elts[:1]
            if first and isinstance(first[0], ast.Constant) and first[0].value == "git":
                lines.append(node.lineno)
    return sorted(lines)


def test_no_module_but_gitutil_runs_git():
    pkg = REPO / "hisparse"
    bad = [f"{p.relative_to(REPO)}:{line}" for p in sorted(pkg.rglob("*.py")) if p != pkg / "gitutil.py"
           for line in git_runs(p.read_text())]
    assert bad == [], "use hisparse.gitutil.git / git_or_none:\n" + "\n".join(bad)


def test_the_git_scanner_sees_a_planted_call():
    planted = ("import subprocess\n"
               "a = subprocess.run(['git', '-C', '.', 'status'], capture_output=True)\n"
               "b = subprocess.check_output(('git', 'log'))\n"
               "c = subprocess.run(['nvidia-smi'])\n")
    assert git_runs(planted) == [2, 3]
    assert git_runs((REPO / "hisparse" / "gitutil.py").read_text()) != []  # the helper itself is seen
