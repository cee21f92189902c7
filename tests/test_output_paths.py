"""hisparse.files' guards on what a command writes (issue 40): a bad output path is an OutputPathError
naming the path and the way out, never a traceback; an existing file is kept without force; an
output that is an input is refused; a name is claimed once; names that become paths are one safe
component. Each bad path is tried next to a planted control that must be written."""
from __future__ import annotations

import os
import threading

import pytest

from hisparse import files
from hisparse.errors import OutputPathError


def _read_only_folder():
    """A folder this process cannot write, even as root: /sys is a read-only mount in containers."""
    if os.path.isdir("/sys") and not files.same_file("/sys", "/"):
        try:
            files.write_atomic("/sys/hisparse-probe.json", "x")
        except OutputPathError:
            return "/sys"
        os.unlink("/sys/hisparse-probe.json")
    pytest.skip("no read-only folder here")


def test_bad_output_paths_are_refused_naming_the_path_and_the_way_out(tmp_path):
    good = tmp_path / "out" / "report.json"
    files.write_atomic(good, "x")  # planted control: a new path in a new folder is written
    assert good.read_text() == "x"

    a_file = tmp_path / "plain.txt"
    a_file.write_text("mine")
    cases = {
        "a directory": (tmp_path, "it is a directory"),
        "a device": ("/dev/null", "not a regular file"),
        "under a file": (a_file / "report.json", "is a file, not a folder"),
        "deep under a file": (a_file / "sub" / "report.json", "is a file, not a folder"),
        "read-only": (os.path.join(_read_only_folder(), "report.json"), "cannot write the output there"),
    }
    for what, (path, reason) in cases.items():
        with pytest.raises(OutputPathError) as e:
            files.write_atomic(path, "x")
        assert str(path) in str(e.value) and reason in str(e.value), what
        assert "choose" in str(e.value) or "name a file path" in str(e.value), what  # the way out
    assert a_file.read_text() == "mine" and os.path.exists("/dev/null") and not os.path.isfile("/dev/null")


def test_an_existing_file_is_kept_without_force_and_an_input_even_with_it(tmp_path):
    new = tmp_path / "new.json"
    assert files.check_new_output(new, force=False) == new  # control: a new name passes
    mine = tmp_path / "mine.json"
    mine.write_text("keep")
    with pytest.raises(OutputPathError, match="already exists.*--force"):
        files.check_new_output(mine, force=False, option="--json")
    assert files.check_new_output(mine, force=True) == mine
    head = tmp_path / "head.json"
    head.write_text("{}")
    spelled_otherwise = tmp_path / "." / "head.json"
    with pytest.raises(OutputPathError, match="also an input"):
        files.check_new_output(spelled_otherwise, force=True, inputs=(tmp_path / "base.json", head))


def test_a_folder_holding_pngs_is_kept_without_force(tmp_path):
    empty = tmp_path / "plots"
    assert files.check_output_dir(empty, force=False, pattern="*.png") == empty  # control: new folder
    empty.mkdir()
    (empty / "notes.txt").write_text("not a figure")
    files.check_output_dir(empty, force=False, pattern="*.png")  # control: no PNG there
    (empty / "mine.png").write_bytes(b"\x89PNG")
    with pytest.raises(OutputPathError, match="mine.png.*--force"):
        files.check_output_dir(empty, force=False, pattern="*.png")
    files.check_output_dir(empty, force=True, pattern="*.png")
    with pytest.raises(OutputPathError, match="is a file, not a folder"):
        files.check_output_dir(empty / "notes.txt", force=True)


def test_a_name_is_claimed_by_one_of_many_at_once(tmp_path):
    path = tmp_path / "runs" / "r.json"
    won, lost = [], []
    start = threading.Barrier(8)

    def claim():
        start.wait()
        try:
            files.claim_new(path)
            won.append(1)
        except FileExistsError:
            lost.append(1)

    threads = [threading.Thread(target=claim) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert (len(won), len(lost)) == (1, 7)


@pytest.mark.parametrize("name, safe", [
    ("h200-sxm", "h200-sxm"),  # control: a usual name is unchanged
    ("node_1.example.org", "node_1.example.org"),
    ("../../escape", "escape"),
    ("a/b", "a-b"),
    ("..", "unknown"),
    ("", "unknown"),
    ("host name", "host-name"),
])
def test_names_that_become_paths_are_one_safe_component(name, safe):
    assert files.safe_name(name) == safe
