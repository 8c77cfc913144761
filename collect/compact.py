"""`python -m collect compact RUN...`: keep a finished run's phase files gzip-compressed in the repository.

Why: every device call carries the whole working tree in at most 64 MiB, and the committed runs are most of it
(51 MB of indented JSON in 28 runs on 2026-12-05, about 2.4 MB more a full collect), which had begun to crowd out
what a call must carry beside them (FlashAttention-4's parts). Compressed, the same runs took 6.3 MB. The
manifest stays plain (tools read it first, and it is small); each phase file is read back through the validated
reader before the plain one is removed, so nothing is lost, and every reader takes either form
(collect/schema/reader.py `stored_path`). Standard library only.
"""
from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from .lock import RunLocked, run_lock
from .schema.common import RUN_LOCK
from .schema.reader import GZIP_SUFFIX, DataFileError, pack, read_checked, read_json, stored_path
from .schema import FILE_SPECS

@dataclass(frozen=True)
class Compacted:
    path: Path          # the .gz written
    plain_bytes: int
    packed_bytes: int


def phase_files() -> list[str]:
    """The data files a run may keep compressed: every phase's but the manifest."""
    return [s.filename for s in FILE_SPECS.values() if s.phase != "env"]


def compact_run(run_dir: str | os.PathLike) -> list[Compacted]:
    """Compress each plain phase file of one finished run, then remove the plain file. Refuses a run a collect is
    writing (it holds the run's lock) or a file that does not read back; files already compressed are left."""
    run_dir = Path(run_dir)
    if not (run_dir / "manifest.json").is_file():
        raise DataFileError(f"{run_dir}: no manifest.json; name a run folder (data/runs/<run-id>) or a run id.")
    if not os.path.lexists(run_dir / RUN_LOCK):  # a committed run: no collect has written it here
        return _compact_files(run_dir)
    try:
        with run_lock(run_dir):  # a collect writing into it holds this lock
            return _compact_files(run_dir)
    except RunLocked as exc:
        raise DataFileError(str(exc)) from None


def _compact_files(run_dir: Path) -> list[Compacted]:
    done = []
    for name in phase_files():
        plain = stored_path(run_dir, name)
        if plain is None or plain.name.endswith(GZIP_SUFFIX):
            continue
        data, text = read_checked(plain)  # refuses a broken file by name before anything is written
        raw = text.encode("utf-8")  # the file's bytes: the reader decoded them as strict UTF-8
        packed = plain.with_name(plain.name + GZIP_SUFFIX)
        temp = plain.with_name(f".{packed.name}.tmp")  # the name an interrupted write leaves (collect/jsonio.py)
        temp.write_bytes(pack(raw))
        os.replace(temp, packed)
        try:
            same = read_json(packed) == data
        except DataFileError:
            same = False
        if not same:
            packed.unlink()
            raise DataFileError(f"{plain}: its compressed copy did not read back the same; the plain file is kept.")
        plain.unlink()
        done.append(Compacted(packed, len(raw), packed.stat().st_size))
    return done


def compact_main(argv: list[str], data_dir: Path) -> int:
    ap = argparse.ArgumentParser(prog="python -m collect compact",
                                 description="Keep finished runs' phase files gzip-compressed (the manifest stays "
                                             "plain). Every reader takes either form; the site publishes plain JSON.")
    ap.add_argument("runs", nargs="*", metavar="RUN",
                    help="run ids under DATA/runs or run folders (default: every run in DATA/runs)")
    ap.add_argument("--data", type=Path, default=data_dir, help=f"the data folder (default: {data_dir})")
    a = ap.parse_args(argv)
    root = a.data / "runs"
    dirs = [Path(r) if Path(r).is_dir() else root / r for r in a.runs] or sorted(
        p for p in root.iterdir() if p.is_dir() and not p.is_symlink() and not p.name.startswith("."))
    before = after = 0
    try:
        for d in dirs:
            for c in compact_run(d):
                before, after = before + c.plain_bytes, after + c.packed_bytes
                print(f"{c.path}: {c.plain_bytes / 1e6:.2f} MB -> {c.packed_bytes / 1e6:.2f} MB", file=sys.stderr)
    except (DataFileError, OSError) as exc:
        print(f"collect compact: {exc}", file=sys.stderr)
        return 2
    print(f"collect compact: {len(dirs)} runs, {before / 1e6:.1f} MB of phase files now {after / 1e6:.1f} MB",
          file=sys.stderr)
    return 0
