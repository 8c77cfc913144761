"""Every committed run names a commit this repository has: the Reproduce page tells readers to check it out."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from committed import RUNS

ROOT = RUNS.parent.parent


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)


def _full_history() -> bool:
    probe = _git("rev-parse", "--is-shallow-repository")
    return probe.returncode == 0 and probe.stdout.strip() == "false"


@pytest.mark.skipif(not _full_history(), reason="needs a git checkout with its whole history")
@pytest.mark.parametrize("run", sorted(p.name for p in RUNS.iterdir() if (p / "manifest.json").exists()))
def test_a_committed_runs_commits_are_in_the_history(run):
    m = json.loads((RUNS / run / "manifest.json").read_text())
    commits = {m.get("git_commit")} | {p.get("git_commit") for p in m.get("phases", [])}
    for commit in sorted(c for c in commits if c):
        assert _git("cat-file", "-e", f"{commit}^{{commit}}").returncode == 0, (
            f"{run}: git_commit {commit} is not a commit of this repository; correct the manifest to the commit "
            "that ran (and say so in its notes)")
