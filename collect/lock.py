"""One collect at a time per run folder: an exclusive flock on the folder's lock file, held by the process.

Two collects writing one run lose rows: each merges its saved rows against its own stale copy, one's
manifest record overwrites the other's, and one's start-up cleanup deletes the other's temp file. The
kernel drops a flock when its process ends, however it ends, so a collect killed with kill -9 leaves
nothing to clean up and `--resume` can continue at once. The lock file stays (removing it would let a
third collect lock a new file while the second still holds the old one); it holds the last holder's pid.
"""
from __future__ import annotations

import fcntl
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from .schema.common import RUN_LOCK


class RunLocked(RuntimeError):
    """Another process is collecting into this run."""


@contextmanager
def run_lock(run_dir: Path) -> Iterator[None]:
    """Hold the run's lock for the body, or raise RunLocked naming the process that holds it."""
    run_dir.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(run_dir / RUN_LOCK, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | os.O_CLOEXEC, 0o644)
    except OSError as exc:  # a symlink or a folder in its place: not ours to follow or remove
        raise RunLocked(f"{run_dir / RUN_LOCK}: cannot open this run's lock file ({exc.strerror}); nothing was "
                        "written. Remove what is there, or collect into another --run-id.") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "not yet recorded"
            raise RunLocked(f"{run_dir}: another collect (pid {holder}) is writing into this run; two at once would "
                            "lose each other's rows. Wait for it to end, or collect into another --run-id.") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock
