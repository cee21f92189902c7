"""hisparse.files: atomic writes (temp file in the same directory, fsync, os.replace), on real files."""
from __future__ import annotations

import os
import stat

import pytest

from hisparse import files
from hisparse.results import model


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_text_and_bytes_land_whole_and_parents_are_made(tmp_path):
    text = tmp_path / "a" / "b" / "page.html"
    assert files.write_atomic(text, "héllo\n") == text
    assert text.read_bytes() == "héllo\n".encode("utf-8")
    png = tmp_path / "plot.png"
    files.write_atomic(png, b"\x89PNG\r\n\x1a\n\x00")
    assert png.read_bytes() == b"\x89PNG\r\n\x1a\n\x00"
    files.write_atomic(png, b"new")  # replaces
    assert png.read_bytes() == b"new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "plot.png"]  # no temp file left


def test_the_temp_file_is_synced_in_the_same_directory_before_the_rename(tmp_path, monkeypatch):
    calls = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(files.os, "fsync", lambda fd: (calls.append(("fsync", fd)), real_fsync(fd))[1])
    monkeypatch.setattr(files.os, "replace", lambda a, b: (calls.append(("replace", a, b)), real_replace(a, b))[1])
    target = tmp_path / "run.json"
    files.write_atomic(target, "{}")
    assert [c[0] for c in calls] == ["fsync", "replace"]
    src, dst = calls[1][1], calls[1][2]
    # same directory: os.replace is then a rename within one filesystem, atomic for readers
    assert os.path.dirname(src) == str(tmp_path) and os.path.basename(src).startswith(".run.json.")
    assert dst == target


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temp(tmp_path, monkeypatch):
    target = tmp_path / "run.json"
    target.write_text("old\n")

    def broken(*_):
        raise OSError("disk full")

    monkeypatch.setattr(files.os, "replace", broken)
    with pytest.raises(OSError, match="disk full"):
        files.write_atomic(target, "new\n")
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]


def test_permissions_are_kept_or_those_of_a_plain_new_file(tmp_path):
    target = tmp_path / "page.html"
    target.write_text("old")
    os.chmod(target, 0o640)
    files.write_atomic(target, "new")
    assert _mode(target) == 0o640  # an existing file keeps its mode
    plain = tmp_path / "plain"
    plain.write_text("")  # what open() gives a new file here (umask), not mkstemp's 0600
    files.write_atomic(tmp_path / "fresh", "x")
    assert _mode(tmp_path / "fresh") == _mode(plain)


def test_json_is_indented_with_a_newline_and_refuses_what_json_cannot_hold(tmp_path):
    target = tmp_path / "d.json"
    files.write_json_atomic(target, {"a": 1, "b": [1.5, None]})
    assert target.read_text() == '{\n "a": 1,\n "b": [\n  1.5,\n  null\n ]\n}\n'
    with pytest.raises(ValueError):
        files.write_json_atomic(target, {"a": float("nan")})  # NaN is not JSON
    with pytest.raises(TypeError):
        files.write_json_atomic(target, {"a": object()})
    assert target.read_text().startswith('{\n "a": 1,')  # untouched by the refused writes
    assert [p.name for p in tmp_path.iterdir()] == ["d.json"]


def test_the_results_writer_uses_the_shared_helper():
    # results.model kept the name (its callers and tests import it from there); one implementation
    assert model.write_json_atomic is files.write_json_atomic
