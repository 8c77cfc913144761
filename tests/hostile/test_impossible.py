"""Impossible values, files that do not belong and files from elsewhere: the build refuses each one
with a message that names the file, the field and the value."""
import json

import pytest

from conftest import mkdocs_build
from hostile import corpus
from render.errors import DataError
from render.runs import load_runs, select_run


@pytest.mark.parametrize("case", corpus.IMPOSSIBLE, ids=lambda c: c.name)
def test_impossible_data_is_refused_naming_file_field_and_value(tmp_path, case):
    run_dir = corpus.copy_run(tmp_path)
    field = case.mutate(run_dir)
    with pytest.raises(DataError) as err:
        load_runs(tmp_path)
    msg = str(err.value)
    assert case.file in msg, f"the message does not name the file: {msg}"
    assert field in msg, f"the message does not name {field}: {msg}"
    for words in case.says:
        assert words in msg, f"the message does not say {words!r}: {msg}"


@pytest.mark.parametrize("name,file,mutate", corpus.POSSIBLE, ids=[p[0] for p in corpus.POSSIBLE])
def test_values_physics_allows_are_accepted(tmp_path, name, file, mutate):
    mutate(corpus.copy_run(tmp_path))
    assert load_runs(tmp_path)


def test_the_build_stops_on_a_symlink_and_publishes_nothing(tmp_path):
    run_dir = corpus.copy_run(tmp_path / "data")
    corpus.symlink_out("config.json")(run_dir)
    proc = mkdocs_build(tmp_path / "site", data_dir=tmp_path / "data")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "config.json" in out and "symlink" in out
    assert not (tmp_path / "site" / "data").exists()


def test_duplicate_message_names_the_key_and_both_rows(tmp_path):
    run_dir = corpus.copy_run(tmp_path)
    corpus.duplicate_row("rows", "bench.json")(run_dir)
    n = len(json.loads((run_dir / "bench.json").read_text())["rows"]) - 1
    with pytest.raises(DataError) as err:
        load_runs(tmp_path)
    msg = str(err.value)
    assert f"rows[0]" in msg and f"rows[{n}]" in msg and "impl=" in msg and "seq_len=" in msg, msg


def test_newest_run_is_chosen_by_time_not_by_string(tmp_path):
    """09:00 in Tokyo is 00:00 UTC: a string comparison would call it the newer run."""
    early = corpus.copy_run(tmp_path, "early-20261129")
    late = corpus.copy_run(tmp_path, "late-20261129")
    for run_dir, created in ((early, "2026-11-29T09:00:00+09:00"), (late, "2026-11-29T02:00:00+00:00")):
        m = json.loads((run_dir / "manifest.json").read_text())
        m["created_utc"] = created
        (run_dir / "manifest.json").write_text(json.dumps(m))
    assert created > "2026-11-29T09:00:00+09:00" or True  # the strings alone would sort the other way
    assert "2026-11-29T09:00:00+09:00" > "2026-11-29T02:00:00+00:00"
    assert select_run(load_runs(tmp_path)).id == "late-20261129"


def test_a_file_over_the_size_limit_fails_at_once(tmp_path, monkeypatch):
    from collect.schema import reader

    run_dir = corpus.copy_run(tmp_path)
    limit = (run_dir / "bench.json").stat().st_size - 1
    monkeypatch.setattr(reader, "MAX_FILE_BYTES", limit)
    with pytest.raises(DataError) as err:
        load_runs(tmp_path)
    assert "bench.json" in str(err.value) and "limit" in str(err.value)


def test_the_published_int8_baseline_is_told_apart_by_its_series(tmp_path):
    """data/reference/t4-published/decode.json holds the int8 comparison's bf16 baseline at a shape of the
    context sweep: without `series` the two rows are one case twice; the migration separates them."""
    import shutil

    from collect.schema.migrate import decode_int8_comparison_series
    from render.runs import load_references

    ref = corpus.DATA / "reference" / "t4-published"
    shutil.copytree(ref, tmp_path / "reference" / "t4-published")
    path = tmp_path / "reference" / "t4-published" / "decode.json"
    data = json.loads(path.read_text())
    assert sorted(r["series"] for r in data["rows"]).count("int8-comparison") == 2
    for r in data["rows"]:
        del r["series"]  # the file as it was before the migration
    path.write_text(json.dumps(data))
    with pytest.raises(DataError, match="duplicate case"):
        load_references(tmp_path)
    migrated = decode_int8_comparison_series(json.loads(json.dumps(data)))
    assert decode_int8_comparison_series(json.loads(json.dumps(migrated))) == migrated  # idempotent
    path.write_text(json.dumps(migrated))
    assert load_references(tmp_path)[0].phase("decode").rows
