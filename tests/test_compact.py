"""Committed runs kept gzip-compressed (python -m collect compact): read as they were, published as plain JSON,
and refused by name when the compressed data is broken, too large inflated, or there twice."""
import gzip
import json
import shutil
import subprocess

import pytest

from collect import compact
from collect.lock import run_lock
from collect.schema import reader
from collect.schema.reader import DataFileError, read_json, stored_path
from hostile import corpus
from render.errors import DataError
from render.runs import load_run


@pytest.fixture
def run_dir(tmp_path):
    return corpus.copy_run(tmp_path)


def test_a_compacted_run_reads_back_the_same_and_keeps_its_manifest_plain(run_dir):
    before = load_run(run_dir)
    done = compact.compact_run(run_dir)
    assert sorted(c.path.name for c in done) == sorted(f + ".gz" for f in compact.phase_files()
                                                       if (f.removesuffix(".json") in before.phases))
    assert all(c.packed_bytes < c.plain_bytes for c in done)
    assert [f.name for f in run_dir.glob("*.json")] == ["manifest.json"]
    after = load_run(run_dir)
    assert after.phases == before.phases and after.manifest == before.manifest
    assert compact.compact_run(run_dir) == []  # nothing left to do


def test_compacting_is_deterministic(run_dir, tmp_path):
    twin = corpus.copy_run(tmp_path / "twin", run_id=run_dir.name)
    compact.compact_run(run_dir)
    compact.compact_run(twin)
    for f in run_dir.glob("*.gz"):
        assert f.read_bytes() == (twin / f.name).read_bytes()  # no timestamp: git sees no change


def test_a_run_a_collect_holds_is_not_compacted(run_dir):
    with run_lock(run_dir):
        with pytest.raises(DataFileError, match="another collect"):
            compact.compact_run(run_dir)
    assert (run_dir / "bench.json").is_file() and not (run_dir / "bench.json.gz").exists()


def test_both_copies_of_a_file_are_refused_by_name(run_dir):
    (run_dir / "bench.json.gz").write_bytes(gzip.compress((run_dir / "bench.json").read_bytes()))
    with pytest.raises(DataError, match=r"bench\.json.*also kept compressed as bench\.json\.gz"):
        load_run(run_dir)


def test_broken_gzip_is_refused_naming_the_file(run_dir):
    data = (run_dir / "bench.json").read_bytes()
    (run_dir / "bench.json").unlink()
    packed = gzip.compress(data)
    (run_dir / "bench.json.gz").write_bytes(packed[: len(packed) // 2])
    with pytest.raises(DataError, match=r"bench\.json\.gz: the gzip data is cut short"):
        load_run(run_dir)
    (run_dir / "bench.json.gz").write_bytes(packed + b"trailing")
    with pytest.raises(DataError, match=r"bench\.json\.gz: the gzip data is cut short or has bytes after its end"):
        load_run(run_dir)
    (run_dir / "bench.json.gz").write_bytes(b"not gzip at all")
    with pytest.raises(DataError, match=r"bench\.json\.gz: not a valid gzip file"):
        load_run(run_dir)


def test_a_small_file_that_inflates_past_the_limit_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(reader, "MAX_FILE_BYTES", 1 << 20)
    bomb = tmp_path / "bench.json.gz"
    bomb.write_bytes(gzip.compress(b" " * (8 << 20), compresslevel=9))  # 8 MiB of spaces in a few KB
    assert bomb.stat().st_size < 64 << 10
    with pytest.raises(DataFileError, match=r"bench\.json\.gz: .* over the 1 MiB limit"):
        read_json(bomb)


def test_stored_path_finds_either_form(tmp_path):
    assert stored_path(tmp_path, "decode.json") is None
    (tmp_path / "decode.json.gz").write_bytes(gzip.compress(json.dumps({"a": 1}).encode()))
    assert stored_path(tmp_path, "decode.json") == tmp_path / "decode.json.gz"
    assert read_json(tmp_path / "decode.json.gz") == {"a": 1}


@pytest.mark.skipif(shutil.which("git") is None or not (corpus.DATA.parent / ".git").exists(),
                    reason="needs the git checkout: the rule is about committed runs")
def test_the_committed_runs_are_kept_compressed():
    # Every device call carries the tree in 64 MiB; plain runs had grown to 51 MB of it (2026-12-05). A run someone
    # has just collected here and not committed is not held to it.
    tracked = subprocess.run(["git", "ls-files", "--", "data/runs"], cwd=corpus.DATA.parent, capture_output=True,
                             text=True, check=True).stdout.split()
    assert any(t.endswith(".json.gz") for t in tracked)
    plain = [t for t in tracked if t.rsplit("/", 1)[-1] in compact.phase_files()]
    assert not plain, f"run `make compact` before committing: {plain[:5]}"


def test_a_collect_into_a_compacted_run_is_refused_before_it_writes(run_dir):
    from collect.runner import refuse_compacted

    refuse_compacted(run_dir)  # plain: a collect may resume it
    compact.compact_run(run_dir)
    with pytest.raises(ValueError, match=r"kept compressed \(bench\.json\.gz.*another --run-id"):
        refuse_compacted(run_dir)
