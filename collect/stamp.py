"""The commit a collect records, where the tree it runs from cannot say so itself.

`make stamp` (python -m collect.stamp) writes `.collect-commit` in a checkout with git: its first line is the
commit and whether the tree had uncommitted changes ('<40 hex digits> <0|1>'), each line after it the git blob id
and path of one file that commit tracks. A collect on a GPU box handed a copy of the working tree reads it; where
every listed file still hashes to its blob id, the stamp is proven to describe the tree that runs, whatever a
git directory there says (run h200-20261205a's box held one from an older checkout, and the collect believed
it). Standard library only: the GPU image runs it.
"""
from __future__ import annotations

import argparse
import hashlib
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
STAMP = REPO_ROOT / ".collect-commit"
_COMMIT = re.compile(r"[0-9a-f]{40}")


@dataclass(frozen=True)
class Stamp:
    commit: str
    dirty: bool
    blobs: dict[str, str] = field(default_factory=dict)  # path -> git blob id at the commit; empty in older stamps


def blob_id(path: Path) -> str:
    """The id git gives a file's content (sha1 of 'blob <size>\\0' and the bytes)."""
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def read_stamp(path: Path = STAMP) -> Stamp | None:
    """The stamp at `path`, or None where there is none or its first line is malformed (a wrong commit is worse
    than none). Lines after the first that do not read as '<blob id> <path>' make the list empty: unprovable."""
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    words = lines[0].split() if lines else []
    if len(words) != 2 or not _COMMIT.fullmatch(words[0]) or words[1] not in ("0", "1"):
        return None
    blobs = {}
    for line in lines[1:]:
        blob, _, name = line.partition(" ")
        if not _COMMIT.fullmatch(blob) or not name:
            blobs = {}
            break
        blobs[name] = blob
    return Stamp(words[0], words[1] == "1", blobs)


def matches_tree(stamp: Stamp, root: Path = REPO_ROOT) -> bool:
    """Whether every file the stamped commit tracks is in `root` with the content it had there, and the stamp
    says the tree had no uncommitted change: then `root` runs exactly that commit's code. False for a stamp
    without its file list."""
    if stamp.dirty or not stamp.blobs:
        return False
    for name, blob in stamp.blobs.items():
        p = root / name
        try:
            if p.is_symlink() or blob_id(p) != blob:
                return False
        except OSError:
            return False
    return True


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=30)
    done.check_returncode()
    return done.stdout


def git_head(root: Path = REPO_ROOT) -> tuple[str, bool] | None:
    """HEAD and whether tracked files differ from it, where git can read the tree at `root`; None elsewhere."""
    try:
        return _git(root, "rev-parse", "HEAD").strip(), bool(_git(root, "status", "--porcelain",
                                                                  "--untracked-files=no").strip())
    except (OSError, subprocess.SubprocessError):
        return None


def write_stamp(path: Path = STAMP, root: Path = REPO_ROOT) -> Stamp:
    """Stamp the checkout at `root`: HEAD, whether tracked files differ from it, and HEAD's regular files."""
    head = git_head(root)
    if head is None:
        raise OSError(f"git cannot read a checkout at {root}")
    commit, dirty = head
    blobs = {}
    for entry in _git(root, "ls-tree", "-r", "-z", "HEAD").split("\0"):
        meta, _, name = entry.partition("\t")
        mode, kind, blob = (meta.split() + ["", "", ""])[:3]
        if kind == "blob" and mode in ("100644", "100755"):  # links and submodules are not files a copy hashes
            blobs[name] = blob
    if any("\n" in name for name in blobs):
        blobs = {}  # a path the line format cannot hold: the stamp stays, unprovable
    path.write_text(f"{commit} {int(dirty)}\n" + "".join(f"{b} {n}\n" for n, b in sorted(blobs.items())))
    return Stamp(commit, dirty, blobs)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m collect.stamp", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=STAMP, help="where to write the stamp (default: %(default)s)")
    args = ap.parse_args(argv)
    try:
        s = write_stamp(args.out)
    except (OSError, subprocess.SubprocessError) as e:
        print(f"stamp: this checkout's commit could not be read with git ({e}); run it in a git checkout.",
              file=sys.stderr)
        return 1
    print(f"stamp: {s.commit} {'with' if s.dirty else 'without'} uncommitted changes, {len(s.blobs)} files, in "
          f"{args.out} (carry it; a collect records this commit where its tree still matches)")
    if s.dirty:
        print("stamp: commit first: a collect from a tree with uncommitted changes cannot say what code ran.",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
