"""Which commit a collect records where its tree was copied without .git: the stamp `make stamp` writes."""
from __future__ import annotations

import subprocess

from collect import runner


def test_a_stamp_is_read_and_a_malformed_one_is_refused(tmp_path):
    stamp = tmp_path / ".collect-commit"
    assert runner.read_stamp(stamp) == (None, None)  # none written
    stamp.write_text("a" * 40 + " 0\n")
    assert runner.read_stamp(stamp) == ("a" * 40, False)
    stamp.write_text("b" * 40 + " 1\n")
    assert runner.read_stamp(stamp) == ("b" * 40, True)
    for bad in ("a" * 39 + " 0", "A" * 40 + " 0", "a" * 40, "a" * 40 + " yes", "a" * 40 + " 0 extra"):
        stamp.write_text(bad)
        assert runner.read_stamp(stamp) == (None, None), bad


def test_without_git_the_collect_records_the_stamp(tmp_path, monkeypatch):
    monkeypatch.delenv("COLLECT_GIT_COMMIT", raising=False)
    stamp = tmp_path / ".collect-commit"
    stamp.write_text("c" * 40 + " 0\n")
    monkeypatch.setattr(runner, "STAMP", stamp)
    monkeypatch.setattr(runner, "REPO_ROOT", tmp_path)  # no .git here: git rev-parse fails

    def no_git(args, **kw):
        return subprocess.CompletedProcess(args, 128, "", "fatal: not a git repository")

    monkeypatch.setattr(runner.subprocess, "run", no_git)
    assert runner.git_info() == ("c" * 40, False)
    monkeypatch.setenv("COLLECT_GIT_COMMIT", "d" * 40)  # an explicit commit still wins
    assert runner.git_info()[0] == "d" * 40


def test_make_stamp_writes_this_checkouts_head(tmp_path):
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=runner.REPO_ROOT, capture_output=True, text=True)
    if head.returncode != 0:
        import pytest
        pytest.skip("not a git checkout")
    done = subprocess.run(["make", "-s", "stamp"], cwd=runner.REPO_ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert runner.read_stamp(runner.STAMP)[0] == head.stdout.strip()
