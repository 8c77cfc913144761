"""The data contract: round trip, and every kind of bad data stops with file + field + value."""
import json
from pathlib import Path

import pytest

import synthetic
from collect.jsonio import to_jsonable, write_json_atomic
from collect.schema import FILE_SPECS, SCHEMA_VERSION
from collect.schema.manifest import Manifest
from render.errors import DataError
from render.runs import load_runs, select_run
from render.validate import load_validated

REPO_DATA = Path(__file__).resolve().parent.parent / "data" / "runs"


def test_manifest_round_trip(tmp_path):
    m = synthetic.manifest("rt-1")
    path = write_json_atomic(tmp_path / "manifest.json", m)
    back = load_validated(path, Manifest)
    assert back == m
    assert json.loads(path.read_text())["schema_version"] == SCHEMA_VERSION


def _placeholder(tp):
    import typing

    origin = typing.get_origin(tp)
    if origin is list:
        return []
    if origin is dict:
        return {}
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if args:
        return _placeholder(args[0])
    return {str: "x", int: 0, float: 0.0, bool: False}.get(tp)


def _allowed(f, value):
    """The placeholder moved inside the field's declared bounds and form."""
    if f.metadata.get("utc_time"):
        return "2026-11-29T08:00:00+00:00"
    if f.metadata.get("choices"):
        return f.metadata["choices"][0]
    if "bounds" in f.metadata and isinstance(value, (int, float)):
        return type(value)(f.metadata["bounds"][0] + 1)
    return value


def test_every_phase_schema_round_trips_an_empty_file(tmp_path):
    """Each phase file dataclass, with no rows, survives write -> validate unchanged."""
    import dataclasses
    import typing

    checked = 0
    for spec in FILE_SPECS.values():
        try:
            cls = spec.dataclass()
        except ModuleNotFoundError:
            continue
        hints = typing.get_type_hints(cls)
        kwargs = {f.name: _allowed(f, _placeholder(hints[f.name])) for f in dataclasses.fields(cls)
                  if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
        kwargs.update(schema_version=SCHEMA_VERSION, run_id="rt")
        obj = cls(**kwargs)
        path = write_json_atomic(tmp_path / spec.filename, obj)
        assert load_validated(path, cls) == obj
        checked += 1
    assert checked >= 2


def test_nan_is_written_as_null(tmp_path):
    m = synthetic.manifest("nan-1")
    m.clocks[0].sm_clock_mhz = float("nan")
    assert to_jsonable(m)["clocks"][0]["sm_clock_mhz"] is None


def _write_bad(tmp_path, mutate):
    run_dir = synthetic.make_run(tmp_path, "bad-1")
    path = run_dir / "manifest.json"
    data = json.loads(path.read_text())
    text = mutate(data)
    path.write_text(text if isinstance(text, str) else json.dumps(data))
    return path


@pytest.mark.parametrize(
    "mutate, field, value",
    [
        (lambda d: '{"schema_version": 1, "run_id": ', None, "line 1"),
        (lambda d: d.pop("created_utc") and None, "created_utc", "(missing)"),
        (lambda d: d["device"].__setitem__("sm_count", "many"), "device.sm_count", "'many'"),
        (lambda d: d["measured_ceilings"][0].__setitem__("per_s_median", 3.5) or
         json.dumps(d).replace("3.5", "NaN"), "measured_ceilings[0].per_s_median", "nan"),
        (lambda d: d["measured_ceilings"][1].__setitem__("per_s_median", 1.5) or
         json.dumps(d).replace("1.5", "Infinity"), "measured_ceilings[1].per_s_median", "inf"),
        (lambda d: d.__setitem__("schema_version", 99), "schema_version", "99"),
        (lambda d: d["clocks"][0].__setitem__("sm_clock_mhz", True), "clocks[0].sm_clock_mhz", "True"),
        (lambda d: d.__setitem__("surprise", 1), "surprise", "1"),
    ],
    ids=["broken-json", "missing-field", "wrong-type", "nan", "infinity", "unknown-version", "bool-for-number", "unknown-field"],
)
def test_malformed_manifest_names_file_field_and_value(tmp_path, mutate, field, value):
    path = _write_bad(tmp_path, mutate)
    with pytest.raises(DataError) as err:
        load_runs(tmp_path)
    msg = str(err.value)
    assert str(path) in msg
    if field:
        assert f"field {field}" in msg
    assert value in msg


@pytest.mark.parametrize("version, fix", [(SCHEMA_VERSION - 1, f"migrate to_version_{SCHEMA_VERSION}"),
                                          (SCHEMA_VERSION + 1, "git pull"), ("9", "Re-collect the run")])
def test_a_run_of_another_schema_version_says_how_to_read_it(tmp_path, version, fix):
    """An older run (collected before a pull) migrates, and the message says how; a newer one needs newer code; a
    version that is no version gets the plain advice."""
    path = _write_bad(tmp_path, lambda d: d.__setitem__("schema_version", version))
    with pytest.raises(DataError) as err:
        load_runs(tmp_path)
    assert str(path) in str(err.value) and fix in str(err.value)


def test_an_older_run_reads_once_the_message_s_command_has_migrated_it(tmp_path):
    import re

    from collect.schema import migrate

    run_dir = synthetic.make_run(tmp_path, "old-1")
    for f in run_dir.glob("*.json*"):
        data = json.loads(f.read_text())
        f.write_text(json.dumps({**data, "schema_version": SCHEMA_VERSION - 1}))
    with pytest.raises(DataError) as err:
        load_runs(tmp_path)
    command = re.search(r"python -m collect\.schema\.migrate (\S+) (\S+)", str(err.value))
    assert command and command.group(2) == f"{run_dir}/*.json*"
    assert migrate.main([command.group(1), *map(str, run_dir.glob("*.json*"))]) == 0
    assert load_runs(tmp_path)


def test_empty_data_dir_is_a_clear_error(tmp_path):
    with pytest.raises(DataError, match="no runs found"):
        load_runs(tmp_path)


def test_run_folder_without_manifest(tmp_path):
    (tmp_path / "runs" / "lonely").mkdir(parents=True)
    with pytest.raises(DataError, match="no manifest.json"):
        load_runs(tmp_path)


def test_run_id_must_match_folder(tmp_path):
    run_dir = synthetic.make_run(tmp_path, "a-1")
    run_dir.rename(run_dir.parent / "b-1")
    with pytest.raises(DataError, match="does not match the folder name"):
        load_runs(tmp_path)


def test_run_selection(tmp_path, monkeypatch):
    synthetic.make_run(tmp_path, "old-1", created="2026-01-01T00:00:00+00:00")
    synthetic.make_run(tmp_path, "new-1", created="2026-06-01T00:00:00+00:00")
    runs = load_runs(tmp_path)
    monkeypatch.delenv("REPORT_RUN", raising=False)
    assert select_run(runs).id == "new-1"
    assert select_run(runs, "old-1").id == "old-1"
    monkeypatch.setenv("REPORT_RUN", "old-1")
    assert select_run(runs, "new-1").id == "old-1"
    monkeypatch.setenv("REPORT_RUN", "nope")
    with pytest.raises(DataError, match="not in data/runs"):
        select_run(runs)


def _record_classes():
    """Every dataclass reachable from the phase file specs, with the field that holds it."""
    import dataclasses
    import typing

    seen, todo = {}, [s.dataclass() for s in FILE_SPECS.values()]
    while todo:
        cls = todo.pop()
        if cls in seen:
            continue
        seen[cls] = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            tp = seen[cls][f.name]
            args = [a for a in typing.get_args(tp) if a is not type(None)] or [tp]
            if dataclasses.is_dataclass(args[0]):
                todo.append(args[0])
    return seen


def test_every_number_in_the_schema_declares_its_bounds():
    """A new measured field must say what values are possible (render/ rejects the rest)."""
    import dataclasses

    unbounded = []
    for cls, hints in _record_classes().items():
        for f in dataclasses.fields(cls):
            args = [a for a in __import__("typing").get_args(hints[f.name]) if a is not type(None)] or [hints[f.name]]
            if args[0] in (int, float) and "bounds" not in f.metadata and f.name != "schema_version":
                unbounded.append(f"{cls.__name__}.{f.name}")
    assert unbounded == []


def test_every_table_of_rows_declares_its_case_key():
    import dataclasses
    import typing

    missing = []
    for cls, hints in _record_classes().items():
        for f in dataclasses.fields(cls):
            tp = hints[f.name]
            args = typing.get_args(tp)
            if typing.get_origin(tp) is list and args and dataclasses.is_dataclass(args[0]):
                key = getattr(args[0], "CASE_KEY", None)
                if key is None or any(k not in {x.name for x in dataclasses.fields(args[0])} for k in key):
                    missing.append(f"{cls.__name__}.{f.name}")
    assert missing == []


@pytest.mark.parametrize("samples, ok", [([0.5, 0.51, 0.49], True), ([0.5, -0.1, 0.49], False), ([0.5, 1e30], False)])
def test_each_stored_sample_is_held_to_the_bounds_of_a_time(samples, ok):
    from collect.schema.bench import BenchRow
    from render.validate import check_declared

    row = BenchRow(impl="naive", backend_requested=None, backend_used=None, dtype="float16", causal=False, batch=1,
                   heads=1, seq_len=128, head_dim=64, status="ok", latency_ms_median=0.5, latency_ms_p10=0.49,
                   latency_ms_p90=0.51, latency_samples_ms=samples)
    problem = check_declared(row)
    assert (problem is None) == ok
    if not ok:
        assert "latency_samples_ms" in problem and "item 1" in problem


def test_rows_timed_on_the_one_clock_share_its_fields_declared_once():
    import dataclasses

    from collect.schema.bench import BenchRow
    from collect.schema.common import clock_fields, with_fields
    from collect.schema.iterations import IterationRow

    for cls in (BenchRow, IterationRow):
        names = [f.name for f in dataclasses.fields(cls)]
        at = names.index("reason") + 1
        assert names[at:at + len(clock_fields())] == list(clock_fields()), cls.__name__
    with pytest.raises(TypeError):  # a shared field declared again in the record
        @with_fields(clock_fields(), after="reason")
        class Twice:
            reason: str = ""
            flops: float = 0.0


def test_a_diff_case_and_a_noise_class_share_the_class_fields_declared_once():
    import dataclasses

    from collect.schema.diff import DiffCase, NoiseClass, class_fields

    block = list(class_fields("", ""))
    assert list(NoiseClass.CASE_KEY) == [*block, "host_bound"]  # a class's floor pooled, or of one pace
    assert {dataclasses.fields(c)[-1].name for c in (NoiseClass, DiffCase)} == {"host_bound"}  # optional, so last
    assert [f.name for f in dataclasses.fields(NoiseClass)][:len(block)] == block  # first, as the JSON has them
    assert [f.name for f in dataclasses.fields(DiffCase)][:2 + len(block)] == ["case", "label", *block]
    rules = lambda cls: {f.name: {k: v for k, v in f.metadata.items() if k != "doc"}  # noqa: E731
                         for f in dataclasses.fields(cls) if f.name in block}
    assert rules(NoiseClass) == rules(DiffCase)


def test_an_l2_hit_rate_a_little_over_100_is_ncus_own_and_kept(tmp_path):
    import shutil

    from collect.schema.reader import read_json, stored_path

    run = tmp_path / "runs" / "h200-20261203e"
    shutil.copytree(REPO_DATA / run.name, run)
    stored = stored_path(run, "profile.json")  # committed runs may keep it compressed
    data = read_json(stored)
    assert max(k["l2_hit_rate_pct"] or 0 for k in data["kernels"]) > 100  # as Nsight Compute reported it
    load_runs(tmp_path)  # the committed run reads back
    data["kernels"][0]["l2_hit_rate_pct"] = 106.0  # past counter noise: a broken file, named with its field
    stored.unlink()
    (run / "profile.json").write_text(json.dumps(data))
    with pytest.raises(DataError, match=r"kernels\[0\]\.l2_hit_rate_pct"):
        load_runs(tmp_path)
