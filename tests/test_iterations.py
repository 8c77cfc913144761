"""The iterations phase and its page on the CPU: the case list, the bookkeeping of the case loop
(unsupported Hopper versions, bf16, budget, failures, occupancy), the data file's round trip
through validation, and the page's computed words. Speed is measured by `make collect`."""
import dataclasses
import html
import json
import re
from pathlib import Path

import jinja2
import pytest

import synthetic
from committed import latest_run
from collect import iterations as it
from collect.iterations import Case, Measurement, build_cases, measure_cases
from collect.timing import CallTimes, DeviceTiming, summarize
from collect.jsonio import write_json_atomic
from collect.schema.occupancy import SmLimits
from collect.schema import SCHEMA_VERSION
from collect.schema.iterations import IterationRow, IterationsFile, KernelVersionInfo, PredictedRange
from render import escape, fmt
from render.pages.iterations import IterationsPage
from render.pages.iterations.journey import measured_text, verdict
from render.runs import Run
from render.validate import load_validated

ROOT = Path(__file__).resolve().parent.parent
VERSIONS = [("v0-portable", ("non-causal", "causal")), ("v1-tma", ("non-causal", "causal")),
            ("v2-split", ("causal",))]


def case(impl="v1-tma", dtype="float16", causal=False, n=4096, **_ignored):
    return Case(impl, dtype, causal, 4, 32, n, 128)


def fake_times(ms, n=60):
    t = summarize([ms * 0.99, ms, ms * 1.01] * (n // 3))
    return CallTimes(device=DeviceTiming(t, 1980.0, 1900.0, 1980.0), host=summarize([0.05] * 10), loop=t)


def fake_measure(ms=2.0, regs=168, smem=197024, warps=12, log=None):
    def measure(c):
        if log is not None:
            log.append(c)
        return Measurement(times=fake_times(ms), config="128x128/w4/s2",
                           warp_specialized=True, n_regs=regs, n_spills=0, shared_bytes=smem, num_warps=warps,
                           max_abs_diff=1e-4, warmup_s=1.0)
    return measure


def run_cases(cases, measure, **kw):
    seen = []
    kw.setdefault("requires_hopper", lambda name: name != "v0-portable")
    kw.setdefault("hopper_ok", True)
    rows = measure_cases(cases, measure, seen.append, free=lambda: None, **kw)
    assert seen == rows  # each row is handed over as soon as it exists
    return rows


# --- the case list -------------------------------------------------------------------------


def test_cases_cover_the_goal_set_in_budget_order():
    cases = build_cases("full", VERSIONS, endpoints=("v0-portable", "v1-tma"))
    d128 = {(n, dt, c) for n in (4096, 16384) for dt in ("float16", "bfloat16") for c in (False, True)}
    d64 = {(n, dt, c) for n in (2048, 4096, 8192, 16384) for dt in ("float16", "bfloat16") for c in (False, True)}
    assert {(c.seq_len, c.dtype, c.causal) for c in cases if c.head_dim == 128} == d128
    assert {(c.seq_len, c.dtype, c.causal) for c in cases if c.head_dim == 64} == d64
    assert {(c.batch, c.heads, c.head_dim) for c in cases} == {(4, 32, 128), (2, 8, 64)}
    # cheaper shapes first; within a case the yardsticks (SDPA, FlashAttention-4) before our versions.
    def work(c):
        return c.batch * c.heads * c.seq_len ** 2 * c.head_dim
    assert [work(c) for c in cases] == sorted(work(c) for c in cases)
    first = [c.impl for c in cases if (c.seq_len, c.dtype, c.causal, c.head_dim) == (4096, "float16", False, 128)]
    assert first == ["sdpa-cudnn", "sdpa-flash", "fa4", "v0-portable", "v1-tma"]


def test_every_version_runs_at_the_journey_shapes_and_only_the_endpoints_at_d64():
    cases = build_cases("full", VERSIONS, endpoints=("v0-portable", "v1-tma"))
    assert {c.causal for c in cases if c.impl == "v2-split"} == {True}
    assert {c.head_dim for c in cases if c.impl == "v2-split"} == {128}
    assert len([c for c in cases if c.impl == "v1-tma"]) == 8 + 16
    assert {c.impl for c in cases if c.head_dim == 64} == {"sdpa-cudnn", "sdpa-flash", "fa4", "v0-portable", "v1-tma"}


def test_a_version_that_changes_only_d64_is_timed_at_the_d64_goal_shapes():
    versions = [*VERSIONS, ("v9-d64-only", ("non-causal", "causal"), (64,)), ("v8-both", ("causal",), (64, 128))]
    cases = build_cases("full", versions, endpoints=("v0-portable",))
    only = [c for c in cases if c.impl == "v9-d64-only"]
    assert {c.head_dim for c in only} == {64} and len(only) == 4 * 2 * 2  # every d=64 length, dtype and masking
    # a version that changes the journey's head size too stays at the journey shapes
    assert {c.head_dim for c in cases if c.impl == "v8-both"} == {128}


def test_g9_is_timed_at_the_d64_causal_goal_shapes_beside_g8_its_baseline():
    from kernels.attention import versions as V

    cases = it._cases("full")
    g9 = {(c.dtype, c.causal, c.batch, c.heads, c.seq_len, c.head_dim) for c in cases if c.impl == "v22-gluon-lpt"}
    assert g9 == {(dt, True, 2, 8, n, 64) for dt in it.DTYPES for n in (2048, 4096, 8192, 16384)}
    base = V.get_version("v22-gluon-lpt").baseline
    assert g9 <= {(c.dtype, c.causal, c.batch, c.heads, c.seq_len, c.head_dim) for c in cases if c.impl == base}


def test_compile_tasks_follow_the_path_each_goal_shape_takes():
    # A per-shape version compiles, per goal shape, the kernel that shape's rule picks (the proxy's
    # own length would pick another); a version of one path compiles once per dtype, mask and d.
    cases = build_cases("full", VERSIONS, endpoints=("v0-portable", "v1-tma"))
    route = lambda c, dev: ("gluon", {"version": "g5"}) if c.seq_len >= 8192 else ("hopper", None)  # noqa: E731
    tasks = it.compile_tasks(cases, True, lambda name: True, "cuda:0", route=route)
    keys = [(t[0], t[1], t[2], t[3], repr(t[5])) for t in tasks]
    assert len(keys) == len(set(keys)) and all(t[4] == "cuda:0" for t in tasks)
    v1 = {(t[1], t[2], t[3], repr(t[5])) for t in tasks if t[0] == "v1-tma"}
    assert len(v1) == 2 * 2 * 2 * 2  # dtype x mask x d, each with both routes (both d reach N >= 8192)
    # without the Hopper path only the versions that do not need it are compiled
    no_hopper = it.compile_tasks(cases, False, lambda name: name != "v0-portable", "cuda:0", route=route)
    assert no_hopper and {t[0] for t in no_hopper} == {"v0-portable"}


def test_a_version_routes_as_it_shipped_or_as_flash_attention_chooses():
    from kernels.attention import versions as V

    v15 = Case("v15-per-shape", "float16", False, 2, 8, 2048, 64)
    assert it.version_route(v15, "cuda:0") == ("portable", None)  # v15's own rules, frozen
    assert it.version_route(dataclasses.replace(v15, head_dim=128), "cuda:0") == ("gluon", {"version": "g3"})
    assert it.version_route(dataclasses.replace(v15, impl="v1-tma"), "cuda:0") is None  # one path
    # v17's rules, frozen likewise when v21 moved them on
    v17 = dataclasses.replace(v15, impl="v17-per-shape")
    assert it.version_route(v17, "cuda:0") == ("portable", None)  # N=2048 non-causal: the portable kernel
    assert it.version_route(dataclasses.replace(v17, seq_len=4096), "cuda:0") == ("gluon", {"version": "g1"})
    assert it.version_route(dataclasses.replace(v17, causal=True, seq_len=16384), "cuda:0") == ("portable", None)
    assert it.version_route(dataclasses.replace(v17, causal=True, head_dim=128), "cuda:0") == ("gluon",
                                                                                               {"version": "g5"})
    assert it.version_route(dataclasses.replace(v17, seq_len=1024), "cuda:0") == ("hopper", None)  # no rule
    # v17 is flash_attention's own choice: under the CPU interpreter that is the portable path
    assert V.get_version(V.FINAL_VERSION).routes is None
    assert it.version_route(dataclasses.replace(v15, impl=V.FINAL_VERSION), "cuda:0") == ("portable", None)


def test_quick_profile_is_one_case_per_masking():
    cases = build_cases("quick", VERSIONS, endpoints=("v1-tma",))
    assert {(c.seq_len, c.dtype, c.head_dim) for c in cases} == {(4096, "float16", 128), (2048, "float16", 64)}


def test_unknown_profile_is_refused():
    with pytest.raises(ValueError, match="profile"):
        build_cases("exhaustive", VERSIONS)


def test_flops_halve_when_causal():
    assert case(causal=True).flops == case().flops / 2 == 2 * 4 * 32 * 4096 ** 2 * 128


# --- the case loop ---------------------------------------------------------------------------


def test_ok_rows_carry_rate_resources_and_occupancy():
    lim = SmLimits()  # H100/H200 limits
    (row,) = run_cases([case()], fake_measure(ms=2.0), limits=lim)
    assert row.status == "ok" and row.n_timed_runs == 60 and row.host_us_median == pytest.approx(50.0)
    assert row.tflops == pytest.approx(case().flops / 2e-3 / 1e12)
    assert (row.registers_per_thread, row.shared_mem_bytes, row.warps_per_block) == (168, 197024, 12)
    # 12 warps x 168 registers fill the register file; 197 KB leaves room for one block too.
    assert row.blocks_per_sm == 1 and row.occupancy_pct == pytest.approx(100 * 12 / 64)
    assert "registers" in row.occupancy_limiter and "shared memory" in row.occupancy_limiter


def test_without_device_limits_occupancy_stays_empty():
    (row,) = run_cases([case()], fake_measure(), limits=None)
    assert row.status == "ok" and row.occupancy_pct is None and row.blocks_per_sm is None


def test_hopper_versions_are_unsupported_elsewhere_and_not_measured():
    log = []
    cases = [case("v0-portable"), case("v1-tma"), case("sdpa-cudnn")]
    rows = run_cases(cases, fake_measure(log=log), hopper_ok=False, hopper_reason="compute capability 7.5")
    assert [r.status for r in rows] == ["ok", "unsupported", "ok"]
    assert "compute capability 7.5" in rows[1].reason
    assert [c.impl for c in log] == ["v0-portable", "sdpa-cudnn"]


def test_bf16_without_support_is_unsupported():
    rows = run_cases([case(dtype="bfloat16")], fake_measure(), supports_bf16=False)
    assert rows[0].status == "unsupported" and "bfloat16" in rows[0].reason


def test_cases_after_the_deadline_are_kept_as_not_run():
    ticks = iter([0.0, 10.0, 20.0])
    rows = run_cases([case(n=4096), case(n=16384), case(causal=True)], fake_measure(), deadline=15.0,
                     clock=lambda: next(ticks))
    assert [r.status for r in rows] == ["ok", "ok", "skipped"]
    assert rows[2].reason.startswith("not run") and it.BUDGET_ENV in rows[2].reason


class OutOfResources(Exception):
    """Stands in for triton.runtime.errors.OutOfResources (matched by name)."""


@pytest.mark.parametrize("exc, kind, status, words", [
    (RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"), "version", "oom", "out of memory"),
    (OutOfResources("out of resource: shared memory, Required: 300000"), "version", "unsupported", "shared memory"),
    (RuntimeError("No available kernel. Aborting execution."), "sdpa", "unsupported", "No available kernel"),
    (ValueError("boom"), "version", "error", "ValueError: boom"),
    (it.WrongOutput("output differs from SDPA's by up to 1.3"), "version", "error", "WrongOutput: output differs"),
])
def test_a_failure_is_its_own_row(exc, kind, status, words):
    def measure(c):
        if c.seq_len == 4096:
            raise exc
        return fake_measure()(c)

    impl = "sdpa-cudnn" if kind == "sdpa" else "v1-tma"
    rows = run_cases([case(impl, kind=kind), case(impl, kind=kind, n=16384)], measure)
    assert rows[0].status == status and words in rows[0].reason
    assert rows[1].status == "ok"  # the next case still ran


def test_budget_from_the_environment(monkeypatch):
    monkeypatch.setenv(it.BUDGET_ENV, "0")
    assert it.budget_seconds("full") is None
    monkeypatch.setenv(it.BUDGET_ENV, "12.5")
    assert it.budget_seconds("full") == 12.5
    monkeypatch.setenv(it.BUDGET_ENV, "soon")
    with pytest.raises(ValueError, match=it.BUDGET_ENV):
        it.budget_seconds("full")
    monkeypatch.delenv(it.BUDGET_ENV)
    assert it.budget_seconds("full") == it.BUDGET_S["full"]


def test_run_needs_a_gpu(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    ctx = it.RunContext(run_id="t-1", out_dir=tmp_path, profile="quick", manifest=synthetic.manifest("t-1"))
    with pytest.raises(RuntimeError, match="CUDA GPU"):
        it.run(ctx)


def test_capture_records_and_restores():
    class Jit:
        def run(self, *a, **k):
            return ("kernel", a)

    fn = Jit()
    with it.CaptureCompiled([fn]) as cap:
        assert fn.run(1) == ("kernel", (1,))
        fn.run(2)
    assert cap.first == ("kernel", (1,)) and len(cap.kernels) == 2
    assert "run" not in fn.__dict__  # the class's method is back


def test_kernel_facts_reads_a_compiled_kernel():
    class Md:
        shared, num_warps = 1024, 12

    class Kernel:
        n_regs, n_spills, metadata = 168, 0, Md()
        asm = {"ptx": "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {...}"}

    assert it.kernel_facts(Kernel()) == dict(n_regs=168, n_spills=0, shared_bytes=1024, num_warps=12,
                                             tensor_cores=True)
    # a kernel whose code multiplies on the FMA units (what Triton 3.6 emits for tl.dot on sm75)
    Kernel.asm = {"ptx": "fma.rn.f32 %f1, %f2, %f3, %f4;"}
    assert it.kernel_facts(Kernel())["tensor_cores"] is False
    assert it.kernel_facts(None) == {}


# --- the versions' stories and the data file ------------------------------------------------


def test_registry_versions_become_documented_records():
    from kernels.attention import versions as V

    infos = [it.version_info(v) for v in V.VERSIONS.values()]
    assert [i.name for i in infos] == list(V.VERSIONS)
    v0 = infos[0]
    assert v0.path == "portable" and v0.features == "" and v0.baseline == "sdpa"
    assert v0.configs == {"non-causal": "128x64/w8/s4", "causal": "128x64/w8/s3"}
    assert all(p.low <= p.high for i in infos for p in i.predicted)
    assert [i.name for i in infos if i.role == "t4-fix"] == ["v2-wide"]


def sample_file(run_id="synthetic-20261129", final="v2-ws", hopper=True) -> IterationsFile:
    versions = [
        KernelVersionInfo(name="v0-portable", path="portable", features="", change="portable kernel",
                          prediction="about 0.8x", predicted_at="2026-11-29", baseline="sdpa",
                          predicted=[PredictedRange("non-causal", 0.78, 0.86)], configs={"non-causal": "128x64/w8/s4"}),
        KernelVersionInfo(name="v1-wide", path="hopper", features="tma", change="fewer, wider loads <b>",
                          prediction="+5%", predicted_at="2026-11-29", baseline="v0-portable",
                          predicted=[PredictedRange("non-causal", 1.03, 1.08)], role="t4-fix"),
        KernelVersionInfo(name="v2-ws", path="hopper", features="warp_spec", change="warp specialization",
                          prediction="+20%", predicted_at="2026-11-29", baseline="v1-wide",
                          predicted=[PredictedRange("non-causal", 1.1, 1.2)]),
    ]
    tf = {"sdpa-cudnn": 650.0, "sdpa-flash": 340.0, "v0-portable": 520.0, "v1-wide": 470.0, "v2-ws": 600.0}
    rows = []
    for n in (4096, 16384):
        for impl, t in tf.items():
            c = Case(impl, "float16", False, 4, 32, n, 128)
            t = t * (1.0 if n == 4096 else 1.05 if impl == "v2-ws" else 0.95)  # v2-ws beats 0.9x only at 16384
            m = Measurement(times=fake_times(c.flops / (t * 1e12) * 1e3),
                            config=None if c.is_sdpa else "128x128/w4/s2",
                            n_regs=None if c.is_sdpa else 168, n_spills=0, shared_bytes=197024,
                            num_warps=12, warp_specialized=impl == "v2-ws")
            rows.append(it.ok_row(c, m, SmLimits()))
    rows.append(dataclasses.replace(it._base_row(Case("v2-ws", "float16", True, 4, 32, 4096, 128),
                                                  "error", "not run: budget"), reason="not run: <budget>"))
    return IterationsFile(schema_version=SCHEMA_VERSION, run_id=run_id, profile="full", timing_method="events",
                          goal_ratio=0.9, final_version=final, hopper_available=hopper,
                          hopper_reason="" if hopper else "compute capability 7.5", versions=versions, rows=rows,
                          notes=["a <note>"])


def test_data_file_round_trips_through_strict_validation(tmp_path):
    f = sample_file()
    path = tmp_path / "iterations.json"
    write_json_atomic(path, f)
    back = load_validated(path, IterationsFile)
    assert back == f


def test_bad_data_is_rejected_with_the_field_named(tmp_path):
    import json

    f = sample_file()
    path = tmp_path / "iterations.json"
    write_json_atomic(path, f)
    data = json.loads(path.read_text())
    data["rows"][0]["n_timed_runs"] = 3.0  # strict: an int field rejects a float
    path.write_text(json.dumps(data))
    with pytest.raises(Exception, match="n_timed_runs"):
        load_validated(path, IterationsFile)


# --- the page --------------------------------------------------------------------------------


def page_for(f: IterationsFile | None) -> IterationsPage:
    run_id = "synthetic-20261129"
    run = Run(id=run_id, path=Path("/nonexistent"), manifest=synthetic.manifest(run_id),
              phases={} if f is None else {"iterations": f})
    return IterationsPage(run, [run])


@pytest.mark.parametrize("measured, low, high, word", [
    (1.05, 1.03, 1.08, "as predicted"), (1.10, 1.03, 1.08, "better than predicted"),
    (0.90, 1.03, 1.08, "worse than predicted"), (None, 1.0, 1.1, "not measured"),
    (1.025, 1.03, 1.08, "as predicted (within the 1% slack)"),  # outside the range: the row must say why it holds
    (1.085, 1.03, 1.08, "as predicted (within the 1% slack)"),
])
def test_verdict_words(measured, low, high, word):
    assert verdict(measured, low, high) == word


def test_a_factor_in_the_slack_prints_apart_from_both_edges():
    # 1.0068 against a range ending at 1.00 prints as 1.01 at three figures: the slack's own edge, and outside
    # the printed range with no sign of why it held.
    assert measured_text(1.0068, 0.82, 1.00) == "1.007×"
    assert measured_text(1.0062, 1.05, 1.10) == "1.01×"  # far from every edge: three figures are enough
    assert measured_text(None, 1.0, 1.1) == "not measured"


def test_the_verdicts_state_their_slack_and_count_the_rows_in_it():
    f = sample_file()
    f.versions[2].predicted = [PredictedRange("non-causal", 1.1, 1.20)]
    page = page_for(f)
    assert "within 1% beyond either end" in page.verdict_rule() and "read so" not in page.verdict_rule()
    # v2-ws over v1-wide: the geomean of 600/470 and 630/446.5 is 1.342; a range ending at 1.33 leaves it in the slack.
    f.versions[2].predicted = [PredictedRange("non-causal", 1.1, 1.33)]
    page = page_for(f)
    assert "In this run, 1 verdict reads so." in page.verdict_rule()
    assert "2 held" in page.findings_first()  # the opening counts it held; the rule above says it was in the slack
    assert "as predicted (within the 1% slack)" in page.journey_table()


def test_the_verdict_rule_names_the_misses_the_goals_wider_band_would_turn():
    """The 1% slack and the goal's 3% band are two fixed sizes: the rule says so, and names each verdict that misses
    its range by less than the band (v2-ws measures 1.342 over v1-wide, as above)."""
    f = sample_file()
    f.versions[2].predicted = [PredictedRange("non-causal", 1.1, 1.31)]  # 2.4% past 1.31: a miss, inside 3%
    rule = page_for(f).verdict_rule()
    assert "both are fixed choices, not measured in any run" in rule
    assert ("1 verdict of this run misses its range by less than 3%, and would read as predicted under the band: "
            f"{f.versions[2].name} (non-causal).") in rule
    f.versions[2].predicted = [PredictedRange("non-causal", 1.1, 1.25)]  # 7% past: a miss under either size
    rule = page_for(f).verdict_rule()
    assert "No verdict of this run misses its range by less than 3%." in rule
    f.versions[2].predicted = [PredictedRange("non-causal", 1.1, 1.40)]  # held: nothing to turn
    assert "No verdict of this run misses its range by less than 3%." in page_for(f).verdict_rule()


def test_goal_finding_counts_the_cases_met():
    text = page_for(sample_file()).goal_finding()
    # v2-ws: 600/650 = 0.92 at N=4096 (met); at 16384, 630/617.5 >= 0.9 (met): 2 of 2. The median,
    # about 0.97, is over the goal of 0.9 and no case is below 0.87: reached.
    assert "reaches 0.900× in 2 of 2 cases" in text and "no case below 0.870×: the goal is reached" in text
    assert "at least as fast as every other implementation measured in 1 of 2 cases" in text
    # The opening states the goal's own verdict (median and floor), not a count of cases.
    first = page_for(sample_file()).findings_first()
    assert "reaches its goal on this page's timing" in first and "over 2 goal cases" in first
    assert "misses its goal" in page_for(sample_file(final="v1-wide")).findings_first()


def test_goal_finding_names_the_misses():
    f = sample_file(final="v1-wide")
    text = page_for(f).goal_finding()
    assert "reaches 0.900× in 0 of 2 cases" in text and "falls short at" in text and "the goal is missed" in text
    assert fmt.ratio(470 / 650) in text


def test_journey_table_sets_measurement_beside_prediction():
    page = page_for(sample_file())
    html_table = page.journey_table()
    # v1-wide vs v0: 470/520 = 0.90 (predicted 1.03-1.08); v2-ws vs v1-wide: 600/470 = 1.28 at 4096.
    assert "worse than predicted" in html_table and "better than predicted" in html_table
    story = page.story_table()  # each version's words, once
    assert "&lt;b&gt;" in story and "<b>" not in story  # tool and author strings are escaped


def test_wide_loads_finding_reports_either_way():
    text = html.unescape(page_for(sample_file()).wide_loads_finding())
    assert "v1-wide" in text and "slower" in text and "worse than predicted" in text


def test_ceiling_and_limits_findings_use_the_data():
    page = page_for(sample_file())
    assert fmt.flops(7.5e14) in page.ceiling_finding()
    limits = page.limits_finding()
    assert "168 registers a thread" in limits and "1 block of 12 warps per SM" in limits
    # The goal is reached (median and floor): no "where it falls short", whatever a single case shows.
    assert "falls short" not in limits
    missed = html.unescape(_with_bench_and_profile(sample_file(final="v1-wide")).limits_finding())
    assert missed.startswith("Where it falls short, the compiled kernel alone cannot name the bottleneck. ")
    assert "  " not in missed


def test_tables_and_figure_render():
    page = page_for(sample_file())
    assert "SDPA cuDNN" in page.ratio_table() and "128x128/w4/s2" in page.resources_table()
    fig = page.tflops_figure()
    assert 'id="fig-iterations-tflops"' in fig and "matmul ceiling" in fig


def test_summary_notes_escape_and_mention_a_missing_hopper():
    text = page_for(sample_file(hopper=False)).summary()
    assert "compute capability 7.5" in html.unescape(text) and escape.text("<note>") in text and "<note>" not in text


def test_summary_says_which_versions_ran_where_when_not_all_ran_everywhere():
    full = sample_file()
    assert page_for(full).coverage() == ""  # every version at every case: nothing to say
    f = sample_file()
    f.rows = [r for r in f.rows if not (r.impl == "v1-wide" and r.seq_len == 16384)]
    text = page_for(f).coverage()
    # the shorter list is named: the one version missing there, or the few that ran
    assert text == "Every timed version ran at N=4096 (d=128, fp16). Every timed version but v1-wide ran at N=16384 " \
                   "(d=128, fp16)."
    assert text in page_for(f).summary()
    f.rows = [r for r in f.rows if not (r.impl == "v2-ws" and r.seq_len == 16384)]
    assert page_for(f).coverage() == ("Every timed version ran at N=4096 (d=128, fp16). Only v0-portable was timed "
                                      "beside the other implementations at N=16384 (d=128, fp16).")


def test_missing_phase_renders_the_notice():
    page = page_for(None)
    assert not page.available
    assert "Not collected in this run" in page.missing()


def test_template_renders_with_and_without_data():
    source = (ROOT / "docs" / "iterations.md").read_text()
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    out = env.from_string(source).render(iterations=page_for(sample_file()), fmt=fmt)
    assert "fig-iterations-tflops" in out and "Not collected" not in out
    out = env.from_string(source).render(iterations=page_for(None), fmt=fmt)
    assert "Not collected in this run" in out


# --- cross-checks against the bench and profile phases of the same run -----------------------


def _with_bench_and_profile(f: IterationsFile, ours_tflops: float = 560.0) -> IterationsPage:
    from collect.schema.bench import BenchFile, BenchRow
    from collect.schema.profile import ImplRow, KernelRow, ProfileFile, StallRow

    rows = []
    for n in (4096, 16384):
        for impl, t in (("sdpa-cudnn", 650.0), ("sdpa-flash", 340.0), ("triton", ours_tflops)):
            rows.append(BenchRow(impl=impl, backend_requested=None, backend_used=None, dtype="float16", causal=False,
                                 batch=4, heads=32, seq_len=n, head_dim=128, status="ok", tflops=t,
                                 latency_ms_median=1e3 / t))  # a bench row with a rate has a time too
    bench = BenchFile(schema_version=SCHEMA_VERSION, run_id="synthetic-20261129", profile="full",
                      timing_method="back to back, L2 flushed", backend_choice_method="x", min_timed_runs=50, rows=rows)
    shape = dict(batch=4, heads=32, seq_len=4096, head_dim=128, dtype="float16", causal=True)
    impls = [ImplRow(case_id=f"goal-{i}", group="main", impl=i, status="ok", **shape) for i in ("sdpa-cudnn", "triton")]
    kernels = [KernelRow(case_id="goal-triton", impl="triton", launch=0, kernel_name="_hopper_fwd_ws_persistent"),
               KernelRow(case_id="goal-sdpa-cudnn", impl="sdpa-cudnn", launch=0, kernel_name="cudnn_sdpa")]
    stalls = [StallRow(case_id="goal-triton", launch=0, reason="long_scoreboard", warps_per_issue=2.4),
              StallRow(case_id="goal-triton", launch=0, reason="barrier", warps_per_issue=1.6),
              StallRow(case_id="goal-sdpa-cudnn", launch=0, reason="barrier", warps_per_issue=1.7),
              StallRow(case_id="goal-sdpa-cudnn", launch=0, reason="long_scoreboard", warps_per_issue=0.6)]
    prof = ProfileFile(schema_version=SCHEMA_VERSION, run_id="synthetic-20261129", status="ok", impls=impls,
                       kernels=kernels, stalls=stalls)
    run_id = "synthetic-20261129"
    run = Run(id=run_id, path=Path("/nonexistent"), manifest=synthetic.manifest(run_id),
              phases={"iterations": f, "bench": bench, "profile": prof})
    return IterationsPage(run, [run])


def test_bench_crosscheck_gives_the_bench_verdict_and_where_the_methods_disagree():
    # This page: v2-ws at 600/650 = 0.92 (N=4096) and 0.98 (16384); the bench: 560/650 = 0.86 at both.
    page = _with_bench_and_profile(sample_file())
    text = page.bench_crosscheck()
    assert "0.900× or more of the fastest other implementation in 0 of 2 cases, against this page's 2 of 2" in text
    assert fmt.ratio(560 / 650) in page.crosscheck_table()
    # The goal is a median and a floor: reached on this page's ratios (0.95 median), missed on the bench's (0.86),
    # and the measurements differ by more than the noise band.
    assert "On the bench phase's measurement the goal is missed, on this page's reached" in text
    # Both cases sit below the floor on the bench's measurement and above it on this page's: the wider names them.
    assert ("the widest of the 2 cases that decide it, they differ by 0.159, more than the noise band of 0.03"
            in text)
    assert "same clock" in text and "keeps the GPU busy" not in text  # both phases time calls one way
    agree = _with_bench_and_profile(sample_file(), ours_tflops=605.0).bench_crosscheck()
    assert "in 2 of 2 cases" in agree and "On the bench phase's measurement" not in agree
    assert "differs between the two" not in agree
    assert "no second measurement" in page_for(sample_file()).bench_crosscheck()


def test_limits_finding_reads_the_profilers_stall_reasons_when_the_goal_is_missed():
    text = html.unescape(_with_bench_and_profile(sample_file(final="v1-wide")).limits_finding())
    assert "long_scoreboard" in text and "2.40; theirs 0.60" in text and "where theirs is barrier (1.70)" in text
    assert "mbarriers" in text  # the warp-specialized kernel: the waits are on TMA arrivals
    assert "no profile of a goal shape" in page_for(sample_file(final="v1-wide")).limits_finding()


def test_a_version_not_timed_is_named_in_the_summary():
    f = sample_file()
    f.versions.append(KernelVersionInfo(name="v3-old", path="hopper", features="x", change="c", prediction="p",
                                        predicted_at="2026-11-29", baseline="v2-ws"))
    text = html.unescape(page_for(f).summary())
    # counted, not named: the collapsed table of notes names each, and the tables leave it out
    assert "timed 3 versions" in text and "1 further version is recorded with its story but not timed" in text
    assert "v3-old" not in text
    page = page_for(f)
    assert "v3-old" not in page.journey_table() and "v3-old" not in page.ratio_table()
    assert "v3-old" in page.story_table()


def test_two_shapes_at_one_length_stay_two_cases():
    """d=64 (B=2, H=8) and d=128 (B=4, H=32) both run at N=4096: their rows must never be read for each other."""
    f = sample_file()
    small = []
    for impl, tf in (("sdpa-cudnn", 400.0), ("v2-ws", 300.0)):  # the d=128 rows run at 650 and 600 TFLOP/s
        c = Case(impl, "float16", False, 2, 8, 4096, 64)
        small.append(it.ok_row(c, Measurement(times=fake_times(c.flops / (tf * 1e12) * 1e3)), SmLimits()))
    f.rows = small + f.rows
    page = page_for(f)
    cases = [c for c in page.cases() if c.n == 4096 and not c.causal]
    assert {c.head_dim for c in cases} == {64, 128}
    d64 = next(c for c in cases if c.head_dim == 64)
    d128 = next(c for c in cases if c.head_dim == 128)
    assert page.ratio("v2-ws", *d64) == pytest.approx(300 / 400, rel=1e-3)
    assert page.ratio("v2-ws", *d128) == pytest.approx(600 / 650, rel=1e-3)
    # labels and figure series name the shape once there are two
    assert "d=64" in page.label(d64) and "d=128" in page.label(d128)
    assert "ours N=4096, d=64" in page.tflops_figure() and "ours N=4096, d=128" in page.tflops_figure()


def test_a_gluon_step_written_after_the_final_version_reads_on_the_page_as_g8_does():
    """g9 (v22) in the newest committed H200 run's page, its rows g8's causal rows 1.15x faster: named by its kernel,
    measured against g8 at the shapes both ran, and its story and compiled resources shown."""
    from kernels.attention import versions as V

    run = latest_run("iterations.json", prefix="h200")
    name, base = "v22-gluon-lpt", V.get_version("v22-gluon-lpt").baseline
    f = run.phases["iterations"]
    rows = [r for r in f.rows if r.impl != name]
    faster = [dataclasses.replace(r, impl=name, latency_ms_median=r.latency_ms_median / 1.15, tflops=r.tflops * 1.15)
              for r in rows if r.impl == base and r.causal and r.status == "ok"]
    f = dataclasses.replace(f, versions=[v for v in f.versions if v.name != name] + [it.version_info(V.get_version(name))],
                            rows=rows + faster)
    run = dataclasses.replace(run, phases={**run.phases, "iterations": f})
    page = IterationsPage(run, [run])

    def row(table):
        # the row of the version itself, not a later one measured against it (g10's names v22 as its baseline)
        (tr,) = [tr for tr in re.findall(r"<tr>.*?</tr>", table, flags=re.S)
                 if re.match(rf"<tr>\s*<td[^>]*>\s*(<[^>]+>\s*)*{re.escape(name)}\s*<", tr)]
        return " ".join(html.unescape(re.sub("<[^>]+>", " ", tr)).split())

    assert row(page.journey_table()) == (f"{name} Gluon tile kernel {base} causal: 1.13× to 1.18× causal: 1.15× "
                                         "(geometric mean of 8 cases) causal: as predicted")
    assert "Gluon g9: g8's one-warpgroup tile at d=64" in row(page.story_table())
    assert "128x128/w4/s2" in row(page.resources_table())


def test_gluon_warp_specialized_steps_are_recorded_as_such():
    # The producer/consumer Gluon steps are warp-specialized; g1 and the other paths are not.
    assert it._gluon_warp_specialized({"path": "gluon", "version": "g3"}) is True
    assert it._gluon_warp_specialized({"path": "gluon", "version": "g5"}) is True
    assert it._gluon_warp_specialized({"path": "gluon", "version": "g1"}) is False
    assert it._gluon_warp_specialized({"path": "portable"}) is False


def test_a_prediction_that_names_its_cases_is_measured_there_alone():
    """v0-portable's prediction restates one case (fp16, N=4096, d=128): a mean over every goal case would judge
    it on cases it never spoke of."""
    f = sample_file()
    for r in f.rows:  # v0-portable nearer cuDNN at N=16384 only: 0.95 there, 0.80 at the predicted case
        if r.impl == "v0-portable" and r.seq_len == 16384:
            r.tflops = 0.95 * 650 * 0.95
    page = page_for(f)
    v0 = page.version("v0-portable")
    assert page.measured_prediction(v0, v0.predicted[0]) == pytest.approx(520 / 650)
    assert page.speedup("v0-portable", "sdpa", False) == pytest.approx((520 / 650 * 0.95) ** 0.5)  # pooled
    table = page.journey_table()
    assert "non-causal at fp16, N=4096, d=128: 0.780× to 0.860×" in table and "non-causal: 0.800×" in table
    assert "fp16, N=4096, d=128" in page.verdict_rule()
    # The same words written on another date are another prediction: nothing limits it, so it pools.
    v0.predicted_at = "2026-12-02"
    assert page.measured_prediction(v0, v0.predicted[0]) == pytest.approx((520 / 650 * 0.95) ** 0.5)
    assert "name the cases" not in page.verdict_rule()


def test_the_cases_a_prediction_names_are_the_ones_its_words_name():
    from kernels.attention import versions as V
    from render.pages.iterations.journey import PREDICTION_CASES, cases_label

    for (name, date), only in PREDICTION_CASES.items():
        v = V.VERSIONS[name]
        assert v.predicted_at == date
        words = cases_label({k: x for k, x in only.items() if k != "head_dim"})  # d=128: see PREDICTION_CASES
        assert f"({words})" in v.prediction


def _clocked(f: IterationsFile, ours_at_16384: float) -> IterationsFile:
    """Every call at 1,980 MHz but the final version's at N=16384."""
    for r in f.rows:
        r.sm_clock_mhz = ours_at_16384 if (r.impl == f.final_version and r.seq_len == 16384) else 1980.0
    return f


def test_the_goal_finding_names_a_clock_gap_behind_a_ratio():
    text = html.unescape(page_for(_clocked(sample_file(), 1800.0)).goal_finding())
    assert ("In 1 of 2 goal cases v2-ws and the fastest other implementation had median SM clock readings more than 3% apart"
            in text)
    assert "The widest gap is at fp16, non-causal, N=16384: ours at 1,800 MHz, SDPA cuDNN at 1,980 MHz." in text
    assert "SM clock" not in page_for(_clocked(sample_file(), 1950.0)).goal_finding()  # 1.5% apart: nothing to say
    assert "SM clock" not in page_for(sample_file()).goal_finding()  # clocks not recorded


def test_the_crosscheck_names_the_clock_gap_where_the_two_measurements_differ_most():
    # This page: v2-ws at 0.92 (N=4096) and 1.02 (16384); the bench: 0.86 at both, so they differ most at 16384.
    page = _with_bench_and_profile(_clocked(sample_file(), 1800.0))
    for r in page.run.phases["bench"].rows:
        r.sm_clock_mhz = 1950.0 if r.impl == "triton" else 1980.0
    text = html.unescape(page.bench_crosscheck())
    assert ("There this page's two calls had median SM clock readings 9.1% apart (ours at 1,800 MHz, SDPA cuDNN at "
            "1,980 MHz), the bench phase's 1.5% apart." in text)
    assert "minutes apart and, at that case, at different SM clocks" in text
    calm = html.unescape(_with_bench_and_profile(_clocked(sample_file(), 1980.0)).bench_crosscheck())
    assert "There this page's" not in calm and "different SM clocks" not in calm


def test_the_goal_finding_counts_the_cases_that_clear_the_goal_by_less_than_the_noise():
    # v2-ws: 600/650 = 0.923 clears 0.9 by less than 0.03; 630/617.5 = 1.02 clears it by more.
    text = page_for(sample_file()).goal_finding()
    assert "reaches 0.900× in 2 of 2 cases, 1 of them by less than the 3% noise band." in text
    f = sample_file()
    f.goal_ratio = 0.85
    assert "reaches 0.850× in 2 of 2 cases." in page_for(f).goal_finding()


def test_a_version_that_runs_several_kernels_gets_a_row_for_each():
    f = sample_file()
    for r in f.rows:  # v2-ws runs another tile config at N=16384, not warp-specialized there
        if r.impl == "v2-ws" and r.seq_len == 16384:
            r.config, r.warp_specialized = "64x128/w8/s3", False
    page = page_for(f)
    table = page.resources_table()
    assert "<td>N=4096 (d=128, fp16)</td>" in table and "<td>N=16384 (d=128, fp16)</td>" in table
    assert "64x128/w8/s3" in table and table.count("<td>v2-ws</td>") == 2
    assert table.count("<td>every case it ran</td>") == 2  # v0-portable and v1-wide: one kernel each
    limits = html.unescape(page.limits_finding())
    assert "v2-ws compiles a different kernel at different shapes" in limits
    assert "at fp16, non-causal, N=4096, B=4, H=32, d=128, config" in limits
    assert "compiles a different kernel" not in page_for(sample_file()).limits_finding()


# --- each prediction against the baseline its words name (review C: W1, M5) ---------------------------------


def _with_fa4(f: IterationsFile, tflops: float = 800.0, ns=(4096, 16384)) -> IterationsFile:
    """FlashAttention-4 beside the sample's SDPA backends, faster than both where it runs."""
    for n in ns:
        c = Case("fa4", "float16", False, 4, 32, n, 128)
        f.rows.append(it.ok_row(c, Measurement(times=fake_times(c.flops / (tflops * 1e12) * 1e3)), SmLimits()))
    return f


@pytest.mark.parametrize("words, against, factor, word", [
    ("about 0.8x cuDNN", "SDPA cuDNN", 520 / 650, "as predicted"),
    # cuDNN named in passing, the yardstick in words: the widest named is the one
    ("timed beside cuDNN and flash: 0.78-0.86x the fastest SDPA backend", "the fastest SDPA backend", 520 / 650,
     "as predicted"),
    ("0.78-0.86x the fastest other implementation", "the fastest other implementation", 520 / 800,
     "worse than predicted"),
    ("about 0.8x", "the fastest other implementation", 520 / 800, "worse than predicted"),  # none named: the goal's
])
def test_a_prediction_is_judged_against_the_yardstick_its_words_name(words, against, factor, word):
    f = _with_fa4(sample_file())
    f.versions[0].prediction = words
    page = page_for(f)
    v0 = page.version("v0-portable")
    assert page.measured_prediction(v0, v0.predicted[0]) == pytest.approx(factor, rel=1e-3)
    row = next(tr for tr in re.findall(r"<tr>.*?</tr>", page.journey_table(), flags=re.S) if "v0-portable" in tr)
    assert f"<td>{escape.text(against)}</td>" in row and f"non-causal: {word}" in html.unescape(row)


def test_the_committed_predictions_name_the_yardsticks_their_authors_measured_against():
    """The predictions written before FlashAttention-4 was timed beside ours name cuDNN or the fastest SDPA backend."""
    from kernels.attention import versions as V
    from render.pages.iterations.journey import prediction_baseline

    want = {"v0-portable": "cudnn", "v11-gluon": "cudnn", "v12-gluon-ws": "cudnn", "v13-gluon-overlap": "cudnn",
            "v14-gluon-pingpong": "cudnn", "v15-per-shape": "cudnn", "v17-per-shape": "fastest-sdpa",
            "v20-gluon-one-warpgroup": "fastest-sdpa", "v21-per-shape": "fastest-sdpa"}
    for v in V.VERSIONS.values():
        if v.baseline == "sdpa":
            assert prediction_baseline(v) == want.get(v.name, "fastest-other"), v.name
        else:
            assert prediction_baseline(v) == v.baseline


def test_a_baseline_without_rows_is_said_so_not_swapped():
    f = _with_fa4(sample_file())
    f.versions[0].prediction, f.versions[0].predicted_at = "about 0.8x cuDNN", "2026-12-02"  # every case: see above
    f.rows = [r for r in f.rows if not (r.impl == "sdpa-cudnn" and r.seq_len == 16384)]
    page = page_for(f)
    table = html.unescape(page.journey_table())
    assert ("non-causal: 0.800× (1 case: fp16, N=4096, B=4, H=32, d=128); no SDPA cuDNN row at 1 other case it ran"
            in table)
    f.rows = [r for r in f.rows if r.impl != "sdpa-cudnn"]
    table = html.unescape(page_for(f).journey_table())
    assert "non-causal: no SDPA cuDNN row where it ran" in table and "non-causal: not measured" in table


def test_a_verdict_on_fewer_cases_than_its_prediction_covers_says_so_and_the_opening_counts_it():
    f = sample_file()
    f.rows = [r for r in f.rows if not (r.impl == "v1-wide" and r.seq_len == 16384)]
    page = page_for(f)
    table = html.unescape(page.journey_table())
    assert "non-causal: worse than predicted (narrower: on 1 of its 2 goal cases)" in table
    assert "1 case: fp16, N=4096, B=4, H=32, d=128" in table
    # v2-ws ran both of its cases, against v1-wide at one: its verdict rests on one of two too
    assert "1 of 2 goal cases" not in html.unescape(page_for(sample_file()).journey_table())
    assert "2 of the 3 rest on fewer goal cases than the prediction covers" in html.unescape(page.findings_first())
    assert "rest on fewer" not in page_for(sample_file()).findings_first()


def test_a_prediction_written_after_a_first_measurement_is_flagged_and_counted():
    f = sample_file()
    f.versions[1].prediction = "Written after, not before, its first measurement: +5%."
    page = page_for(f)
    first = html.unescape(page.findings_first())
    assert "1 prediction was written after a first measurement of the version (it did not hold)" in first
    row = next(tr for tr in re.findall(r"<tr>.*?</tr>", page.journey_table(), flags=re.S) if ">v1-wide<" in tr)
    assert "written after a first measurement" in row
    assert "written after a first" not in page_for(sample_file()).findings_first()


def test_a_routing_versions_prediction_written_after_its_kernels_were_measured_is_weaker_evidence_too():
    # v7 and v10 of the committed runs: "Written after v9 was measured, before v10 itself ran": not after a
    # measurement of the version, but its factors are those of the kernels it routes to.
    f = sample_file()
    f.versions[1].prediction = ("The better of v0 and v2 in each case: +5%. Written after v0 was measured, before v1 "
                                "itself ran.")
    page = page_for(f)
    first = html.unescape(page.findings_first())
    assert "1 prediction was written after the kernels its version routes to were measured" in first
    assert "written after a first measurement" not in first
    row = next(tr for tr in re.findall(r"<tr>.*?</tr>", page.journey_table(), flags=re.S) if ">v1-wide<" in tr)
    assert "written after the kernels it runs were measured" in row
    # a prediction written before anything ran says neither
    assert "routes to were measured" not in html.unescape(page_for(sample_file()).findings_first())


# --- FlashAttention-4 named as itself (W2), ratios near the floor (U1), clocks (M6) ---------------------------


def test_flashattention4_is_not_labelled_sdpa_and_the_goal_names_its_rival():
    page = page_for(_with_fa4(sample_file(), ns=(16384,)))
    row = next(tr for tr in re.findall(r"<tr>.*?</tr>", page.ratio_table(), flags=re.S) if "FlashAttention-4" in tr)
    assert "another project&#x27;s kernel" in row and "SDPA" not in row
    text = html.unescape(page.goal_finding())
    assert ("The fastest other implementation was SDPA cuDNN in 1 of 2 cases; FlashAttention-4 in 1: non-causal at "
            "N=16384 (d=128, fp16).") in text
    assert "was SDPA cuDNN in every case" in html.unescape(page_for(sample_file()).goal_finding())
    template = (ROOT / "docs" / "iterations.md").read_text()
    assert "## Against the fastest other implementation and the matmul ceiling" in template


def test_a_ratio_near_the_floor_prints_the_side_it_falls_on():
    from render.pages.iterations.common import goal_ratio_text

    assert goal_ratio_text(0.9697, 1.0) == "0.9697×" and goal_ratio_text(0.9703, 1.0) == "0.9703×"
    assert goal_ratio_text(0.95, 1.0) == "0.950×"  # far from both: three figures
    f = sample_file()
    for r in f.rows:  # v2-ws at N=16384 just under the 0.870 floor of a 0.9 goal
        if r.impl == "v2-ws" and r.seq_len == 16384:
            r.tflops = 0.8697 * 650 * 0.95
    page = page_for(f)
    assert "0.8697×" in page.ratio_table() and "0.8697×" in page.goal_finding()
    assert "0.8697×" in _with_bench_and_profile(f).crosscheck_table()


def test_the_clock_gap_says_which_way_it_may_lean_the_ratio_and_not_by_how_much():
    # v2-ws at N=16384: 630/617.5 = 1.020, ours read 1,800 MHz against 1,980: theirs read higher.
    low = html.unescape(page_for(_clocked(sample_file(), 1800.0)).goal_finding())
    assert ("The higher reading was theirs, so the ratio there may understate ours; a reading is of the rest before "
            "each call, so it does not say by how much.") in low
    high = html.unescape(page_for(_clocked(sample_file(), 2400.0)).goal_finding())
    assert "The higher reading was ours, so the ratio there may flatter ours" in high
    assert "equal clocks" not in low + high and "floor" not in high.split("The higher reading")[1]


def test_the_ceiling_finding_names_the_masking_and_the_clocks_behind_the_shares():
    f = _clocked(_with_fa4(sample_file(), tflops=700.0), 1980.0)
    page = page_for(f)
    text = html.unescape(page.ceiling_finding())
    assert "In fp16, non-causal, at N=16384" in text and "median SM clocks" not in text  # the matmul's clock unknown
    ceil = page.run.manifest.measured_ceilings[1]
    page = page_for(f)
    page.run.manifest.measured_ceilings[1] = dataclasses.replace(ceil, sm_clock_mhz=2200.0)
    text = html.unescape(page.ceiling_finding())
    # each clock named by its dtype and its call: the finding sets one dtype's calls after another's; the readings say
    # which way the shares may lean, and no share is rescaled per cycle by them
    assert ("The fp16 calls had median SM clock readings of 1,980 MHz (v2-ws) and 1,980 MHz (FlashAttention-4), the fp16 "
            "matmul 2,200 MHz: lower than the matmul's, so the shares may understate what the calls do per "
            "cycle.") in text and "Those calls" not in text
    assert "Per clock cycle" not in text and "does more than the matmul" not in text
    assert "the shares are not rescaled by it" in text


# --- occupancy in the Profiling page's words (M7) ---------------------------------------------------------------


def test_a_persistent_kernel_at_one_block_per_sm_is_limited_by_its_design_and_full_occupancy_by_nothing():
    from render.vocab import FULL_OCCUPANCY, PERSISTENT_LIMIT

    f = sample_file()
    page = page_for(f)
    assert PERSISTENT_LIMIT not in page.resources_table()  # v2-ws: a warp-specialized grid, not a persistent one
    assert "registers, shared memory" in page.resources_table()
    f.versions[2].features = "warp_spec+persistent"
    page = page_for(f)
    assert PERSISTENT_LIMIT in page.resources_table() and "persistent grid: one block per SM is its design" in \
        page.limits_finding()
    f.versions[2].path, f.versions[2].features = "gluon", "gluon g3"  # the Gluon warp-specialized kernel always is
    assert PERSISTENT_LIMIT in page_for(f).resources_table()
    # a per-shape version that ran the same compiled kernel takes its grid from it
    f.versions.append(KernelVersionInfo(name="v3-per-shape", path="per-shape", features="per shape", change="rules",
                                        prediction="as v2", predicted_at="2026-11-29", baseline="v2-ws"))
    f.rows += [dataclasses.replace(r, impl="v3-per-shape") for r in f.rows if r.impl == "v2-ws" and r.status == "ok"]
    table = page_for(f).resources_table()
    row = next(tr for tr in re.findall(r"<tr>.*?</tr>", table, flags=re.S) if ">v3-per-shape<" in tr)
    assert PERSISTENT_LIMIT in row
    for r in f.rows:
        if r.impl == "v0-portable":
            r.occupancy_pct, r.blocks_per_sm, r.occupancy_limiter = 100.0, 8, "registers, warps"
    assert FULL_OCCUPANCY in page_for(f).resources_table()


# --- the profile's stall comparison against the page's own rival (M11) ----------------------------------------


def test_the_stall_comparison_is_against_the_rival_the_page_measures_ours_against():
    from collect.schema.profile import ImplRow, KernelRow, ProfileFile, StallRow

    f = sample_file()
    for impl, t in (("sdpa-cudnn", 600.0), ("fa4", 700.0), ("v2-ws", 750.0)):
        c = Case(impl, "float16", True, 4, 32, 4096, 128)
        f.rows.append(it.ok_row(c, Measurement(times=fake_times(c.flops / (t * 1e12) * 1e3)), SmLimits()))
    f.rows = [r for r in f.rows if not (r.impl == "v2-ws" and r.causal and r.status != "ok")]
    shape = dict(batch=4, heads=32, seq_len=4096, head_dim=128, dtype="float16", causal=True)
    ms = {"triton": 1.0, "sdpa-cudnn": 1.2, "fa4": 0.9}
    impls = [ImplRow(case_id=f"goal-{i}", group="main", impl=i, status="ok", duration_ms=t,
                     kernel_step="g28" if i == "triton" else None, **shape) for i, t in ms.items()]
    kernels = [KernelRow(case_id=f"goal-{i}", impl=i, launch=0, kernel_name=n, duration_ms=ms[i], issue_slots_pct=s,
                         registers_per_thread=r, smem_per_block_bytes=b)
               for i, n, s, r, b in (("triton", "_g1_kernel", 45.6, 157, 73768), ("sdpa-cudnn", "cudnn_sdpa", 50.0, 168, 1),
                                     ("fa4", "flash_fwd_sm90", 43.7, 128, 91136))]
    stalls = [StallRow(case_id=f"goal-{i}", launch=0, reason=r, warps_per_issue=w)
              for i, r, w in (("triton", "wait", 1.35), ("sdpa-cudnn", "barrier", 1.1), ("fa4", "wait", 1.45))]
    prof = ProfileFile(schema_version=SCHEMA_VERSION, run_id="synthetic-20261129", status="ok", impls=impls,
                       kernels=kernels, stalls=stalls)
    run = Run(id="synthetic-20261129", path=Path("/nonexistent"), manifest=synthetic.manifest("synthetic-20261129"),
              phases={"iterations": f, "profile": prof})
    text = html.unescape(IterationsPage(run, [run]).stall_comparison())
    assert ("where it runs the Gluon tile kernel (g28; 157 registers a thread, 72.0 KiB of shared memory a block), "
            "beside FlashAttention-4, the fastest other implementation there on this page's clock.") in text
    assert ("There ours runs at 0.900× of their speed under Nsight Compute and at 1.07× on this page's clock: the "
            "two clocks rank them differently.") in text
    assert "FlashAttention-4's 1.45 (issuing included), with the issue slots busy 45.6% and 43.7% of cycles" in text
    assert "SDPA cuDNN" not in text


def _missed_with_profile(ours_causal_tflops: float, same_kernel: bool) -> IterationsPage:
    """v1-wide as the final version, short of the 0.9x goal (470 of 650 TFLOP/s non-causal), with a causal goal case
    profiled beside FlashAttention-4 (700 TFLOP/s there) where it runs at `ours_causal_tflops`; `same_kernel`: its
    causal kernel is the non-causal one, so the compiled facts describe no one case."""
    from collect.schema.profile import ImplRow, KernelRow, ProfileFile, StallRow

    f = sample_file(final="v1-wide")
    kernel = dict(config="128x128/w4/s2", n_regs=168, n_spills=0, shared_bytes=197024, num_warps=12,
                  warp_specialized=False) if same_kernel else {}
    for impl, t in (("sdpa-cudnn", 600.0), ("fa4", 700.0), ("v1-wide", ours_causal_tflops)):
        c = Case(impl, "float16", True, 4, 32, 4096, 128)
        m = Measurement(times=fake_times(c.flops / (t * 1e12) * 1e3), **(kernel if impl == "v1-wide" else {}))
        f.rows.append(it.ok_row(c, m, SmLimits()))
    shape = dict(batch=4, heads=32, seq_len=4096, head_dim=128, dtype="float16", causal=True)
    impls = [ImplRow(case_id=f"goal-{i}", group="main", impl=i, status="ok", duration_ms=1.0, **shape)
             for i in ("triton", "fa4")]
    kernels = [KernelRow(case_id=f"goal-{i}", impl=i, launch=0, kernel_name=n, duration_ms=1.0)
               for i, n in (("triton", "_g1_kernel"), ("fa4", "flash_fwd_sm90"))]
    stalls = [StallRow(case_id=f"goal-{i}", launch=0, reason="wait", warps_per_issue=1.4) for i in ("triton", "fa4")]
    prof = ProfileFile(schema_version=SCHEMA_VERSION, run_id="synthetic-20261129", status="ok", impls=impls,
                       kernels=kernels, stalls=stalls)
    run = Run(id="synthetic-20261129", path=Path("/nonexistent"), manifest=synthetic.manifest("synthetic-20261129"),
              phases={"iterations": f, "profile": prof})
    return IterationsPage(run, [run])


@pytest.mark.parametrize("ours, same_kernel, lead", [
    # Run h200-20261205f: the goal missed, but ours 1.089x and 1.047x at the two cases the paragraph describes
    (750.0, True, "The compiled kernel alone cannot name the bottleneck where it falls short, and the case this "
                  "paragraph describes is not among them: there it reaches the goal of 0.900×."),
    (600.0, True, "Where it falls short, the compiled kernel alone cannot name the bottleneck."),
    # the compiled facts at its worst case (non-causal, short there), the profile at the causal one (ahead)
    (750.0, False, "The compiled kernel alone cannot name the bottleneck where it falls short; of the cases this "
                   "paragraph describes, it falls short only at fp16, non-causal, N=16384."),
])
def test_the_limits_lead_in_says_whether_the_cases_it_introduces_fall_short(ours, same_kernel, lead):
    page = _missed_with_profile(ours, same_kernel)
    text = html.unescape(page.limits_finding())
    assert text.startswith(lead + " ")
    causal = page.ratio("v1-wide", "float16", True, 4096, 4, 32, 128)
    assert (causal >= 0.9) == (ours == 750.0)  # the profiled case's standing is the one the lead-in judged
    assert ("Where it falls short" in text) == (ours < 700 * 0.9)
    assert ("compiles a different kernel" in text) != same_kernel


def test_the_largest_step_and_setback_say_how_many_goal_cases_they_rest_on():
    f = sample_file()
    full = html.unescape(page_for(f).steps_sentence())
    assert "The largest step was" in full and "TFLOP/s on 2 goal cases" in full
    assert "The largest step" not in page_for(f).findings_first()  # the opening keeps to three sentences
    f.rows = [r for r in f.rows if not (r.impl == "v1-wide" and r.seq_len == 16384)]
    assert "on 1 goal case" in html.unescape(page_for(f).steps_sentence())


def _row(impl, causal, n, tflops_=500.0, b=4, h=32, d=128):
    c = Case(impl, "float16", causal, b, h, n, d)
    m = Measurement(times=fake_times(c.flops / (tflops_ * 1e12) * 1e3), config=None if c.is_sdpa else "128x128/w4/s2",
                    n_regs=None if c.is_sdpa else 168, n_spills=0, shared_bytes=197024, num_warps=12,
                    warp_specialized=False)
    return it.ok_row(c, m, SmLimits())


def test_where_versions_ran_names_a_version_that_ran_one_masking_there():
    # v1-wide runs non-causal only at N=4096 and not at all at 16384; v0 and v2 run both maskings at 4096. "Ran at
    # N=4096" alone would let the ratio table's "not run" in v1-wide's causal column contradict the summary.
    f = sample_file()
    f.rows = [r for r in f.rows if not (r.impl == "v1-wide" and r.seq_len == 16384) and r.status == "ok"]
    f.rows += [_row(i, True, 4096) for i in ("sdpa-cudnn", "v0-portable", "v2-ws")]
    said = html.unescape(page_for(f).coverage())
    assert "Every timed version ran at N=4096 (d=128, fp16). There v1-wide ran non-causal only." in said
    # at N=16384 no version ran causal: one masking there is the run's, not a version's, and goes unsaid
    assert said.endswith("Every timed version but v1-wide ran at N=16384 (d=128, fp16).")


def test_each_shape_is_given_with_its_own_lengths_and_the_caption_in_order_of_n():
    # d=128 at N=4096 and 16384 (the cases list them first), d=64 at N=2048 only: no shape is claimed at every N.
    f = sample_file()
    f.rows += [_row(i, False, 2048, b=2, h=8, d=64) for i in ("sdpa-cudnn", "v0-portable", "v2-ws")]
    page = page_for(f)
    shapes = "B=4, H=32, d=128 at N=4096 and 16384; B=2, H=8, d=64 at N=2048"
    assert f"Its shapes: {shapes}; fp16; causal and not." in html.unescape(page.summary())
    assert f"(dotted); {shapes}; 4·B·H·N²·d FLOP" in html.unescape(page.tflops_figure())


def test_the_crosscheck_differences_print_a_minus_sign_and_no_negative_zero():
    from render.pages.iterations.crosscheck import _signed

    assert (_signed(-0.0002), _signed(0.0004), _signed(-0.006), _signed(0.025)) == ("0.000", "0.000", "−0.006", "+0.025")
    table = html.unescape(_with_bench_and_profile(sample_file()).crosscheck_table())
    assert "−0.0" in table and "-0." not in table  # the bench's 0.86 against this page's 0.92 and 0.98


def test_a_ranking_that_rests_on_a_call_slowed_under_the_profiler_says_so():
    """Run h100-20261205b: ours 0.935x of FlashAttention-4 under Nsight Compute, 1.08x on our clock, where ours ran
    slower under the profiler; the Profiling page names the slowed call (render/profiler_clock.py), this page too."""
    from collect.schema.profile import ClockCheckRow

    def page_with(ours_device_ms):
        page = _missed_with_profile(750.0, True)
        prof = page.run.phases["profile"]
        for r in prof.impls:  # FlashAttention-4 ahead under the profiler, behind on this page's clock
            r.duration_ms = 0.045 if r.impl == "fa4" else 0.05
        shape = dict(batch=4, heads=32, seq_len=4096, head_dim=128, dtype="float16", causal=True)
        prof.clock_check = [
            ClockCheckRow(case_id=f"goal-{i}", impl=i, kernels=1, ncu_ms=ncu, device_ms=dev, device_over_ncu=dev / ncu,
                          gap_ms=dev - ncu, **shape)
            for i, ncu, dev in (("triton", 0.05, ours_device_ms), ("fa4", 0.045, 0.048))]
        return html.unescape(page.limits_finding())

    # ours read 2 us shorter on our clock than under Nsight Compute: a short single kernel slowed there
    slowed = page_with(0.048)
    assert "the two clocks rank them differently, and ours ran slower under Nsight Compute than on our clock" in slowed
    # ours read 3 us longer on our clock (the events around it): nothing slowed, the ranking stands as measured
    plain = page_with(0.053)
    assert "the two clocks rank them differently." in plain and "ran slower under Nsight Compute" not in plain


def test_a_phase_unsupported_on_the_gpu_says_why_instead_of_how_to_collect_it(tmp_path):
    """On a T4 the iterations phase is recorded unsupported (its versions after v0 are Hopper kernels); collecting it
    again there would record the same, so the page names the reason, not a command."""
    from collect.schema.manifest import PhaseRecord
    from render.site import Report

    run_dir = synthetic.make_run(tmp_path, "t4-1", name="Tesla T4")
    m = json.loads((run_dir / "manifest.json").read_text())
    reason = ("the recorded kernel versions after v0 are Hopper kernels, and this run cannot take the Hopper path: "
              "compute capability 7.5 is not 9.x. The portable kernel's own figures are on the Benchmarks page.")
    m["phases"].append(dataclasses.asdict(PhaseRecord(name="iterations", status="unsupported", reason=reason)))
    (run_dir / "manifest.json").write_text(json.dumps(m))
    out = IterationsPage(Report.load(tmp_path, "t4-1").run, []).missing()
    assert "Not supported on this GPU" in out and "python -m collect" not in out
    assert ("has no `iterations` data; the phase does not apply to Tesla T4: the recorded kernel versions after v0 "
            "are Hopper kernels") in out and out.rstrip().endswith("on the Benchmarks page.")
    # a phase that was simply not collected still says how to collect it
    synthetic.make_run(tmp_path, "h-1")
    assert "python -m collect iterations --run-id h-1 --resume" in IterationsPage(Report.load(tmp_path, "h-1").run,
                                                                                    []).missing()
