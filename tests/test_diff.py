"""The diff of two runs and the noise floor: synthetic runs with a known change, pure noise, and a change
smaller than the floor each get the right verdict; diff(A, A) finds no change."""
from __future__ import annotations

import json
import random
import statistics
import subprocess
import sys

import pytest

from collect.bootstrap import BootstrapConfig, ratio_interval, resampled_median
from collect.diff import DiffConfig, compare, load_run_cases, run_cases
from collect.jsonio import write_json_atomic
from collect.noise import FEW_PAIRS, NotRepeats, measure
from collect.schema import PHASES, SCHEMA_VERSION
from collect.schema.bench import BenchFile, BenchRow
from collect.schema.diff import DiffFile, NoiseFloorFile
from collect.tools_cli import SUBCOMMANDS
from conftest import ROOT

import synthetic

FAST = DiffConfig(bootstrap=BootstrapConfig(resamples=400))
SHAPES = [(2, 8, n, d) for n in (512, 1024, 2048, 4096) for d in (64, 128)]


def bench_rows(seed: int, scale: dict[str, float] | None = None, noise: float = 0.01, n: int = 60,
               samples: bool = True, drift: float = 1.0) -> list[BenchRow]:
    """Rows of two implementations over SHAPES; each call time is its true time x `scale[impl]` x `drift`
    (a whole run's offset, as between machine leases) with `noise` relative scatter per call."""
    rng = random.Random(seed)
    rows = []
    for impl in ("triton", "naive"):
        for b, h, s, d in SHAPES:
            true = 1e-3 * s * d / 64 * (3 if impl == "naive" else 1) * (scale or {}).get(impl, 1.0) * drift
            xs = [round(true * (1 + rng.gauss(0, noise)), 4) for _ in range(n)]
            med = statistics.median(xs)
            rows.append(BenchRow(impl=impl, backend_requested=None, backend_used=None, dtype="float16", causal=False,
                                 batch=b, heads=h, seq_len=s, head_dim=d, status="ok", latency_ms_median=med,
                                 latency_ms_p10=min(xs), latency_ms_p90=max(xs), n_timed_runs=n,
                                 latency_samples_ms=xs if samples else None))
    return rows


def cases(run_id: str, rows, device: str = "NVIDIA H200", commit: str = "abc1234"):
    return run_cases(run_id, device, "v1", {"bench": BenchFile(SCHEMA_VERSION, run_id, "quick", "t", "t", 10, rows)},
                     {"bench": commit})


def verdicts(d: DiffFile, impl: str | None = None) -> set[str]:
    return {c.verdict for c in d.cases if impl is None or c.impl == impl}


def repeat_floor(step: float = 0.01) -> NoiseFloorFile:
    """A floor measured from three repeats of one commit whose runs sit `step` apart (about 1 + 2 * step)."""
    return measure([cases(f"r{i}", bench_rows(10 + i, drift=1 + step * i, noise=0.002)) for i in range(3)])


def test_a_five_percent_change_is_found_and_its_direction_named():
    a = cases("a", bench_rows(1))
    b = cases("b", bench_rows(2, scale={"triton": 0.95}))
    d = compare(a, b, repeat_floor(), FAST)
    assert verdicts(d, "triton") == {"faster"} and verdicts(d, "naive") == {"no change"}
    for c in d.cases:
        assert c.basis == "samples" and c.ratio_low <= c.ratio <= c.ratio_high
        assert c.ratio == pytest.approx(c.b_ms / c.a_ms)
    slower = compare(b, a, repeat_floor(), FAST)  # the same change seen the other way round
    assert verdicts(slower, "triton") == {"slower"}


def test_pure_noise_is_no_change():
    # Calls scattered by 5%, and a floor measured from repeats of that same scatter (the null experiment).
    # Two tests must agree, each at about 5% by chance: few pure-noise cases may pass both, and none by much.
    floor = measure([cases(f"r{i}", bench_rows(50 + i, noise=0.05)) for i in range(5)])
    judged = [c for s in range(20) for c in compare(cases("a", bench_rows(100 + s, noise=0.05)),
                                                    cases("b", bench_rows(200 + s, noise=0.05)), floor, FAST).cases]
    changed = [c for c in judged if c.verdict != "no change"]
    assert len(changed) <= 0.03 * len(judged)
    assert all(abs(c.ratio - 1) < 0.04 for c in changed)


def test_a_change_inside_the_measured_noise_floor_is_no_change_though_its_interval_excludes_one():
    # Repeats of one commit that drift by up to 4% between leases: the floor of each class is about 1.04.
    noise = repeat_floor(0.02)
    assert [c.floor for c in noise.classes] == pytest.approx([1.04] * len(noise.classes), rel=5e-3)
    a, b = cases("a", bench_rows(20, noise=0.002)), cases("b", bench_rows(21, scale={"triton": 1.03}, noise=0.002))
    tight = compare(a, b, cfg=FAST)  # without the floor the default (5%) holds it back too ...
    assert verdicts(tight, "triton") == {"no change"}
    loose = compare(a, b, cfg=DiffConfig(bootstrap=FAST.bootstrap, default_floor=1.01))  # ... a 1% floor would not
    assert verdicts(loose, "triton") == {"slower"}
    d = compare(a, b, noise, FAST)
    triton = [c for c in d.cases if c.impl == "triton"]
    assert all(c.ratio_low > 1 for c in triton), "the samples alone would call it a change"
    assert {c.verdict for c in triton} == {"no change"} and {c.floor_source for c in d.cases} == {"measured"}
    assert any("repeat runs" in n for n in d.notes)
    bigger = compare(a, cases("c", bench_rows(22, scale={"triton": 1.08}, noise=0.002)), noise, FAST)
    assert verdicts(bigger, "triton") == {"slower"}


@pytest.mark.parametrize("seed", range(3))
def test_a_run_against_itself_changes_nothing(seed):
    rows = bench_rows(seed, noise=0.2 * seed + 0.01)
    d = compare(cases("a", rows), cases("a2", rows), cfg=FAST)
    assert verdicts(d) == {"no change"} and all(c.ratio == 1 for c in d.cases)
    assert not d.only_a and not d.only_b


def test_without_samples_the_diff_says_so_and_judges_by_the_floor_alone():
    a = cases("a", bench_rows(1, samples=False))
    b = cases("b", bench_rows(2, scale={"triton": 0.8}))
    d = compare(a, b, cfg=FAST)
    assert {c.basis for c in d.cases} == {"medians"} and all(c.ratio_low is None for c in d.cases)
    assert verdicts(d, "triton") == {"faster"} and verdicts(d, "naive") == {"no change"}
    assert any("no samples" in n and "a kept none" in n for n in d.notes)
    assert any("default factor 1.05" in n for n in d.notes)


def test_two_gpus_give_ratios_and_no_verdict():
    d = compare(cases("a", bench_rows(1)), cases("b", bench_rows(2, scale={"triton": 0.5}), device="NVIDIA A100"),
                cfg=FAST)
    assert not d.same_device and verdicts(d) == {"ratio only"}
    assert any("two GPUs" in n for n in d.notes)


def test_cases_in_one_run_only_are_listed_apart_with_the_other_runs_status():
    rows_b = bench_rows(2)
    rows_b[0].status, rows_b[0].latency_ms_median, rows_b[0].latency_samples_ms = "oom", None, None
    d = compare(cases("a", bench_rows(1)[:-1]), cases("b", rows_b), cfg=FAST)
    assert [u.other_status for u in d.only_a] == ["oom"]
    assert [u.label for u in d.only_b] == ["naive fp16 full B2 H8 N4096 d128"] and d.only_b[0].other_status is None
    assert len(d.cases) == len(rows_b) - 2


def test_samples_that_disagree_with_the_stored_median_are_not_resampled():
    rows = bench_rows(1)
    rows[0].latency_samples_ms = [x * 2 for x in rows[0].latency_samples_ms]
    d = compare(cases("a", rows), cases("b", bench_rows(2)), cfg=FAST)
    assert [c.basis for c in d.cases].count("medians") == 1


def test_the_order_statistic_draw_is_the_resampled_median():
    # Against the slow way: resample with replacement, take the median; both odd and even counts.
    for n in (7, 8):
        xs = sorted(random.Random(n).lognormvariate(0, 0.3) for _ in range(n))
        fast_rng, slow_rng = random.Random(1), random.Random(2)
        fast = sorted(resampled_median(xs, fast_rng) for _ in range(20000))
        slow = sorted(statistics.median(slow_rng.choices(xs, k=n)) for _ in range(20000))
        for q in (0.1, 0.25, 0.5, 0.75, 0.9):
            assert fast[int(q * 20000)] == pytest.approx(slow[int(q * 20000)], rel=0.03)


def test_intervals_are_deterministic_and_cover_the_true_ratio():
    rng = random.Random(5)
    a = [1 + rng.gauss(0, 0.05) for _ in range(80)]
    b = [1.1 + rng.gauss(0, 0.05) for _ in range(80)]
    cfg = BootstrapConfig(resamples=1000)
    lo, hi = ratio_interval(a, b, cfg, "k")
    assert (lo, hi) == ratio_interval(a, b, cfg, "k") and lo < 1.1 < hi and lo > 1.0
    assert ratio_interval(a, b, BootstrapConfig(resamples=1000, seed=7), "k") != (lo, hi)


def test_noise_floor_refuses_runs_that_are_not_repeats():
    rows = bench_rows(1)
    with pytest.raises(NotRepeats, match="one commit"):
        measure([cases("a", rows), cases("b", rows, commit="def5678")])
    with pytest.raises(NotRepeats, match="one GPU"):
        measure([cases("a", rows), cases("b", rows, device="NVIDIA A100")])
    with pytest.raises(NotRepeats, match="at least two"):
        measure([cases("a", rows)])


def test_no_phase_is_named_like_a_subcommand():
    assert not {p.name for p in PHASES} & set(SUBCOMMANDS)


def _write_run(data_dir, run_id, rows, commit="abc1234"):
    run_dir = synthetic.make_run(data_dir, run_id)
    m = json.loads((run_dir / "manifest.json").read_text())
    m.update(git_commit=commit, git_dirty=False, kernel_version="v1")
    m["phases"].append({"name": "bench", "status": "complete", "file": "bench.json", "git_commit": commit})
    (run_dir / "manifest.json").write_text(json.dumps(m))
    write_json_atomic(run_dir / "bench.json", BenchFile(SCHEMA_VERSION, run_id, "quick", "t", "t", 10, rows))
    return run_dir


def test_the_command_line_measures_a_floor_then_diffs_and_writes_files_the_site_validates(tmp_path):
    from render.validate import load_validated

    for i in range(3):
        _write_run(tmp_path, f"rep-{i}", bench_rows(30 + i, drift=1 + 0.01 * i))
    _write_run(tmp_path, "after", bench_rows(40, scale={"triton": 0.9}), commit="def5678")
    run = lambda *a: subprocess.run([sys.executable, "-m", "collect", *a, "--data", str(tmp_path)], cwd=ROOT,  # noqa: E731
                                    capture_output=True, text=True, timeout=120)
    noise = run("noise")
    assert noise.returncode == 0, noise.stderr
    floor = load_validated(tmp_path / "noise" / "h200.json", NoiseFloorFile)
    assert floor.run_ids == ["rep-0", "rep-1", "rep-2"] and floor.git_commit == "abc1234"
    diff = run("diff", "rep-0", "after", "--resamples", "300")
    assert diff.returncode == 0, diff.stderr
    assert "below 1, B is faster" in diff.stdout and "16 cases in both runs: 8 faster, 0 slower, 8 no change" in diff.stdout
    d = load_validated(tmp_path / "diffs" / "rep-0-vs-after.json", DiffFile)
    assert d.noise_floor_runs == floor.run_ids and {c.floor_source for c in d.cases} == {"measured"}
    assert load_run_cases(tmp_path / "runs" / "after").kernel_version == "v1"
    missing = run("diff", "rep-0", "nowhere")
    assert missing.returncode == 2 and "no run 'nowhere'" in missing.stderr


def test_the_derived_files_bound_every_number_and_string_and_appear_on_the_data_format_page():
    import dataclasses
    import typing

    from collect.schema.registry import DERIVED
    from render.pages.dataformat import DataFormatPage, _walk

    classes: list = []
    for spec in DERIVED:
        _walk(spec.schema, classes)
    loose = []
    for cls in classes:
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            args = [a for a in typing.get_args(hints[f.name]) if a is not type(None)] or [hints[f.name]]
            if args[0] in (int, float) and "bounds" not in f.metadata and f.name != "schema_version":
                loose.append(f.name)
            if "str" in str(hints[f.name]) and not (f.metadata.get("max_len") or f.metadata.get("choices")):
                loose.append(f.name)
    assert loose == []
    text = DataFormatPage.derived(DataFormatPage.__new__(DataFormatPage))
    assert all(f'id="{c.__name__.lower()}"' in text for c in classes)


def paced_rows(seed: int, host_f: float = 1.0, gpu_f: float = 1.0) -> list[BenchRow]:
    """bench_rows with a pace: our kernel's N<=1024 calls host-bound (loops three times their device time, a host
    time to explain it) and scaled by `host_f`, its longer ones GPU-bound and scaled by `gpu_f`; naive GPU-bound."""
    import dataclasses

    out = []
    for r in bench_rows(seed, noise=0.002):
        host = r.impl == "triton" and r.seq_len <= 1024
        f = (host_f if host else gpu_f) if r.impl == "triton" else 1.0
        t = r.latency_ms_median * f
        out.append(dataclasses.replace(
            r, latency_ms_median=t, latency_ms_p10=r.latency_ms_p10 * f, latency_ms_p90=r.latency_ms_p90 * f,
            latency_samples_ms=[x * f for x in r.latency_samples_ms], loop_ms_median=t * (3.0 if host else 1.02),
            host_us_median=t * 1e3 if host else 5.0))
    return out


def test_the_noise_floor_splits_each_class_by_pace_so_a_host_bound_length_cannot_hide_a_gpu_bound_change():
    # Four repeats of one commit: the host-bound lengths swing by up to 20% with the host, the GPU-bound ones do not.
    repeats = [cases(f"r{i}", paced_rows(60 + i, host_f=f)) for i, f in enumerate((1.0, 1.1, 0.92, 1.05))]
    noise = measure(repeats)
    ours = {c.host_bound: c for c in noise.classes if (c.impl, c.head_dim) == ("triton", 64)}
    assert set(ours) == {None, False, True} and ours[None].cases == 4 and ours[False].cases == ours[True].cases == 2
    assert ours[None].pairs == 24 and ours[False].pairs == ours[True].pairs == 12 >= FEW_PAIRS
    assert ours[False].floor < 1.01 < 1.15 < ours[True].floor and ours[None].floor > 1.1
    assert not any(c.host_bound for c in noise.classes if c.impl == "naive")  # naive never ran host-bound
    assert any("split a class by pace" in n for n in noise.notes)
    # v2: 3% faster where the GPU sets the pace, the host unchanged
    a, b = cases("a", paced_rows(70)), cases("b", paced_rows(71, gpu_f=0.97))
    d = compare(a, b, noise, FAST)
    gpu = [c for c in d.cases if c.impl == "triton" and c.host_bound is False]
    assert len(gpu) == 4 and {(c.floor_source, c.verdict) for c in gpu} == {("paced", "faster")}
    assert {c.verdict for c in d.cases if c.host_bound} == {"no change"}
    assert any("held to the floor of their class and pace" in n for n in d.notes)
    # the same repeats pooled over both paces, as before schema 8: the host's swings hide the change
    pooled = NoiseFloorFile(**{**noise.__dict__, "classes": [c for c in noise.classes if c.host_bound is None]})
    hidden = compare(a, b, pooled, FAST)
    assert {(c.floor_source, c.verdict) for c in hidden.cases if c.case in {g.case for g in gpu}} == \
        {("measured", "no change")}
    # three repeats: 6 pairs for each of our kernel's paces, too few for floors of their own, so only its class's
    # pooled floor is written (naive's four GPU-bound cases give 12, enough)
    thin = measure(repeats[:3])
    assert {c.host_bound for c in thin.classes if c.impl == "triton"} == {None}
    assert {c.host_bound for c in thin.classes if c.impl == "naive"} == {None, False}


def test_a_case_of_unrecorded_pace_is_held_to_its_class_and_an_old_noise_file_still_reads(tmp_path):
    from collect.tools_cli import read_noise

    noise = measure([cases(f"r{i}", paced_rows(80 + i, host_f=f)) for i, f in enumerate((1.0, 1.1, 0.92, 1.05))])
    d = compare(cases("a", bench_rows(81, noise=0.002)), cases("b", bench_rows(82, noise=0.002)), noise, FAST)
    assert {c.host_bound for c in d.cases} == {None} and {c.floor_source for c in d.cases} == {"measured"}
    # a schema-7 noise file: no host_bound on its classes; it migrates and its floors are the pooled ones
    old = json.loads(json.dumps(noise, default=lambda o: o.__dict__))
    old["schema_version"] = 7
    old["classes"] = [{k: v for k, v in c.items() if k != "host_bound"} for c in old["classes"] if c["host_bound"] is None]
    path = tmp_path / "h200.json"
    path.write_text(json.dumps(old))
    read = read_noise(path)
    assert read.schema_version == SCHEMA_VERSION == 11 and {c.host_bound for c in read.classes} == {None}
    d = compare(cases("a", paced_rows(70)), cases("b", paced_rows(71, gpu_f=0.97)), read, FAST)
    assert {c.floor_source for c in d.cases} == {"measured"}


def test_the_schema_8_step_changes_only_the_version():
    from collect.schema import migrate

    before = {"schema_version": 7, "classes": [{"phase": "bench", "impl": "triton", "floor": 1.1}]}
    out = migrate.to_version_8(json.loads(json.dumps(before)))
    assert out == {**before, "schema_version": 8} and migrate.to_version_8(json.loads(json.dumps(out))) == out
    # schemas 9 (the bench rows' power at the limit), 10 (the persistent step's traced split) and 11 (each phase's
    # clock method, in manifests only) add optional fields: on any other file the latest step changes the version alone
    assert migrate.LATEST(json.loads(json.dumps(before))) == {**before, "schema_version": 11} and SCHEMA_VERSION == 11


def test_a_compacted_file_migrates_in_place_and_stays_compressed_the_way_compact_writes_it(tmp_path):
    import gzip

    from collect.schema.reader import GZIP_LEVEL as LEVEL
    from collect.schema import migrate

    doc = {"schema_version": 8, "rows": [{"impl": "triton", "note": "\u00b5s"}]}
    path = tmp_path / "bench.json.gz"
    path.write_bytes(gzip.compress((json.dumps(doc, indent=1) + "\n").encode(), compresslevel=LEVEL, mtime=0))
    assert migrate.main(["to_version_9", str(path)]) == 0
    text = gzip.decompress(path.read_bytes()).decode()
    assert json.loads(text) == {**doc, "schema_version": 9} and text.isascii()
    again = path.read_bytes()
    migrate.main(["to_version_9", str(path)])  # idempotent: the same bytes
    assert path.read_bytes() == again == gzip.compress(text.encode(), compresslevel=LEVEL, mtime=0)


def test_the_diff_and_the_pages_judge_pace_by_one_rule():
    from collect.pace import host_bound, row_host_bound
    from render import vocab

    assert vocab.host_bound is host_bound
    assert row_host_bound("bench", {"latency_ms_median": 0.02, "loop_ms_median": 0.06, "host_us_median": 18.0}) is True
    assert row_host_bound("bench", {"latency_ms_median": 12.8, "loop_ms_median": 16.1, "host_us_median": 36.0}) is False
    assert row_host_bound("iterations", {"latency_ms_median": 0.02}) is None
    assert row_host_bound("decode", {"kernel_ms_per_step": 2.0, "step_ms_median": 10.0}) is True
    assert row_host_bound("decode", {"kernel_ms_per_step": 9.0, "step_ms_median": 10.0}) is False
