"""Which commit a collect records where its tree cannot say so itself: the stamp `make stamp` writes, proven
against the tree's files before it is believed over a git directory that may belong to another checkout."""
from __future__ import annotations

import subprocess
import sys

import pytest

from collect import runner, stamp


def _stamp_file(tmp_path, head: str, blobs: dict[str, bytes], dirty: bool = False):
    """A tree of files and a stamp listing them, as write_stamp would for a commit holding those contents."""
    lines = [f"{head} {int(dirty)}"]
    for name, data in blobs.items():
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        lines.append(f"{stamp.blob_id(p)} {name}")
    path = tmp_path / ".collect-commit"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_blob_id_is_gits():
    done = subprocess.run(["git", "hash-object", "--stdin"], input=b"attention\n", capture_output=True)
    if done.returncode != 0:
        pytest.skip("git is not installed")
    import tempfile
    from pathlib import Path
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "f"
        p.write_bytes(b"attention\n")
        assert stamp.blob_id(p) == done.stdout.decode().strip()


def test_a_stamp_is_read_and_a_malformed_one_is_refused(tmp_path):
    path = tmp_path / ".collect-commit"
    assert stamp.read_stamp(path) is None  # none written
    path.write_text("a" * 40 + " 0\n")
    assert stamp.read_stamp(path) == stamp.Stamp("a" * 40, False, {})
    path.write_text("b" * 40 + " 1\n" + "c" * 40 + " kernels/x.py\n")
    assert stamp.read_stamp(path) == stamp.Stamp("b" * 40, True, {"kernels/x.py": "c" * 40})
    for bad in ("a" * 39 + " 0", "A" * 40 + " 0", "a" * 40, "a" * 40 + " yes", "a" * 40 + " 0 extra", ""):
        path.write_text(bad)
        assert stamp.read_stamp(path) is None, bad
    path.write_text("a" * 40 + " 0\nnot-a-blob kernels/x.py\n")  # a broken list proves nothing
    assert stamp.read_stamp(path).blobs == {}


def test_a_stamp_matches_only_the_tree_it_was_made_from(tmp_path):
    path = _stamp_file(tmp_path, "d" * 40, {"a.py": b"x = 1\n", "sub/b.py": b"y = 2\n"})
    s = stamp.read_stamp(path)
    assert stamp.matches_tree(s, tmp_path)
    (tmp_path / "untracked.txt").write_text("an output")  # files the commit does not track do not matter
    assert stamp.matches_tree(s, tmp_path)
    (tmp_path / "sub/b.py").write_text("y = 3\n")
    assert not stamp.matches_tree(s, tmp_path)
    (tmp_path / "sub/b.py").write_text("y = 2\n")
    (tmp_path / "a.py").unlink()
    assert not stamp.matches_tree(s, tmp_path)
    assert not stamp.matches_tree(stamp.Stamp("d" * 40, False, {}), tmp_path)  # no list: nothing proven
    assert not stamp.matches_tree(stamp.Stamp("d" * 40, True, s.blobs), tmp_path)


def _no_git(args, **kw):
    return subprocess.CompletedProcess(args, 128, "", "fatal: not a git repository")


def _stale_git(commit: str):
    """git as a GPU box's copy answered it: an older checkout's HEAD, with changes."""
    def run(args, **kw):
        out = commit + "\n" if "rev-parse" in args else " M kernels/x.py\n"
        return subprocess.CompletedProcess(args, 0, out, "")
    return run


@pytest.fixture
def tree(tmp_path, monkeypatch):
    monkeypatch.delenv("COLLECT_GIT_COMMIT", raising=False)
    monkeypatch.setattr(runner, "REPO_ROOT", tmp_path)
    path = _stamp_file(tmp_path, "c" * 40, {"kernels/x.py": b"v = 58\n"})
    monkeypatch.setattr(runner, "STAMP", path)
    return tmp_path


def test_a_matching_stamp_outranks_a_stale_git_directory(tree, monkeypatch):
    monkeypatch.setattr(stamp.subprocess, "run", _stale_git("f" * 40))
    assert runner.git_info() == ("c" * 40, False)
    (tree / "kernels/x.py").write_text("v = 59\n")  # the tree changed after the stamp: git's reading stands
    assert runner.git_info() == ("f" * 40, True)


def test_without_git_the_collect_records_the_stamp(tree, monkeypatch):
    monkeypatch.setattr(stamp.subprocess, "run", _no_git)
    assert runner.git_info() == ("c" * 40, False)
    (tree / "kernels/x.py").write_text("v = 59\n")
    assert runner.git_info() == ("c" * 40, True)  # the stamped commit, with changes it does not hold
    monkeypatch.setenv("COLLECT_GIT_COMMIT", "d" * 40)  # an explicit commit still wins
    assert runner.git_info()[0] == "d" * 40


def test_a_clean_git_checkout_is_believed_first(tree, monkeypatch):
    def clean(args, **kw):
        return subprocess.CompletedProcess(args, 0, "e" * 40 + "\n" if "rev-parse" in args else "", "")
    monkeypatch.setattr(stamp.subprocess, "run", clean)
    assert runner.git_info() == ("e" * 40, False)


def test_make_stamp_stamps_this_checkout(tmp_path):
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=runner.REPO_ROOT, capture_output=True, text=True)
    if head.returncode != 0:
        pytest.skip("not a git checkout")
    out = tmp_path / "stamp"
    done = subprocess.run([sys.executable, "-m", "collect.stamp", "--out", str(out)], cwd=runner.REPO_ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    s = stamp.read_stamp(out)
    assert s.commit == head.stdout.strip()
    listed = subprocess.run(["git", "ls-tree", "-r", "HEAD"], cwd=runner.REPO_ROOT, capture_output=True,
                            text=True).stdout.splitlines()
    files = {line.split("\t", 1)[1]: line.split()[2] for line in listed if line.split()[0] in ("100644", "100755")}
    assert s.blobs == files  # every regular file of HEAD, links left out
    assert stamp.matches_tree(s, runner.REPO_ROOT) == (not s.dirty)
