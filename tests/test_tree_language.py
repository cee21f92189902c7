"""The tree speaks of its commits, dates, machines and run files, and of nothing around the work that
produced them. A grep over every tracked file for PATTERNS keeps it so, and a planted control per
pattern proves the grep would catch a violation."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

_ORDINALS = ("first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|thirteenth|"
             "fourteenth|fifteenth|sixteenth|seventeenth|eighteenth|nineteenth|twentieth|twenty-[a-z]+|thirtieth")
# From the fifth on, "the <ordinal>" alone names a working period (lower ordinals are ordinary words).
_HIGH = _ORDINALS.split("|fifth|", 1)[1]
PATTERNS = {
    "ordinal period": rf"\b({_ORDINALS})[ -]sessions?\b",
    "relative period": r"\b(previous|next|earlier|later) sessions?\b",
    "bare high ordinal": rf"\bthe (fifth|{_HIGH})\b",
    "machinery": r"device (calls?|tool|time|budget)|METHOD\.md|64 MiB carry|carry limit|start refusals?",
}
FORBIDDEN = re.compile("|".join(f"(?:{p})" for p in PATTERNS.values()), re.IGNORECASE)
# One string per pattern that must be caught (assembled, so this file does not plant them itself).
CONTROLS = {
    "ordinal period": "measured in the " + "fifteenth" + " session",
    "relative period": "run it in the " + "next" + " session",
    "bare high ordinal": "until the " + "twentieth" + ", each probe",
    "machinery": "one " + "device" + " call of 600 s",
}


def offending(root: Path, paths: list[str]) -> list[str]:
    """`path:line: text` for each line of ``paths`` (relative to ``root``) that FORBIDDEN matches."""
    hits = []
    for rel in paths:
        try:
            text = (root / rel).read_text(encoding="utf-8")
        except (UnicodeDecodeError, IsADirectoryError, FileNotFoundError):
            continue  # binary files and submodules carry no prose
        for n, line in enumerate(text.splitlines(), 1):
            if FORBIDDEN.search(line):
                hits.append(f"{rel}:{n}: {line.strip()[:160]}")
    return hits


def tracked_files() -> list[str]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip(f"not a git checkout: {out.stderr.strip()}")
    this = str(Path(__file__).resolve().relative_to(REPO))
    return [p for p in out.stdout.split("\0") if p and p != this]


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_the_planted_control_is_caught(tmp_path, name):
    (tmp_path / "planted.md").write_text(f"fine line\n{CONTROLS[name]}\nfine line\n")
    assert re.search(PATTERNS[name], CONTROLS[name], re.IGNORECASE)
    assert offending(tmp_path, ["planted.md"]) == [f"planted.md:2: {CONTROLS[name]}"]


def test_ordinary_words_pass():
    for ok in ("the first call", "a second run", "the timed session", "until the fourth step",
               "device memory", "the call's device buffer"):
        assert not FORBIDDEN.search(ok), ok


def test_no_tracked_file_counts_working_periods_or_names_the_machinery():
    hits = offending(REPO, tracked_files())
    assert not hits, "write dates, commits, machines and run files instead:\n" + "\n".join(hits)
