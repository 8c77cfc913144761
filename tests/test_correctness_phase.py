"""The correctness phase: grid, error metrics, tolerance, failure rows, a tiny end-to-end run under
Triton's interpreter, and the page rendered from synthetic runs."""
from pathlib import Path

import html
import re
import numpy as np
import pytest
import torch
from triton.runtime.errors import OutOfResources

from kernels import attention

from collect import correctness as phase
from collect.context import RunContext
from collect.jsonio import write_json_atomic
from collect.schema.correctness import CorrectnessFile
from render import fmt
from render.pages.correctness import CorrectnessPage
from render.pages.correctness.common import half_ulp, unit_roundoff
from render.runs import load_run
from render.site import Report
from render.validate import load_validated

from _synthetic_correctness import make_correctness_run
from synthetic import make_run, manifest

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")
ROOT = Path(__file__).resolve().parent.parent
CPU = torch.device("cpu")


# --- grid ------------------------------------------------------------------------------------


def test_full_grid_has_at_least_96_kernel_cases_with_ragged_lengths():
    full = phase.build_grid("full")
    kernel = [c for c in full if c.impl == "triton"]
    assert len(kernel) >= 96
    assert len(set(full)) == len(full), "a case appears twice"
    assert {1, 17, 1000, 4097} <= {c.seq_len for c in kernel}
    assert {c.dtype for c in kernel} == {"float16", "bfloat16"} and {c.causal for c in kernel} == {False, True}
    assert len({c.head_dim for c in kernel}) >= 2 and len({c.batch for c in kernel}) >= 2


def test_quick_grid_is_a_small_subset_of_full():
    quick, full = phase.build_grid("quick"), set(phase.build_grid("full"))
    assert 8 <= len(quick) <= 24
    assert set(quick) <= full
    assert {1, 17, 1000, 4097} <= {c.seq_len for c in quick}


def test_unknown_profile_is_a_clear_error():
    with pytest.raises(ValueError, match="quick' or 'full"):
        phase.build_grid("medium")


def test_every_candidate_config_is_used_and_a_variant_keeps_one_config():
    cases = phase.build_grid("full")
    # seven candidates against six variants per (head_dim, dtype): the rotation must not restart per group
    sizes = [16, 32, 64, 128, 256, 512, 1024]
    cands = [dict(BLOCK_M=m, BLOCK_N=16, num_warps=4, num_stages=2) for m in sizes]
    out = phase.assign_configs(cases, lambda d, dt: cands)
    assert all(c.impl == "triton" for c in out) and len(out) == sum(c.impl == "triton" for c in cases)
    for d in (64, 128):
        assert {out[c][0]["BLOCK_M"] for c in out if c.head_dim == d} == set(sizes)
    # every list is the full candidate list rotated, so the rest are fallbacks
    assert all(sorted(x["BLOCK_M"] for x in lst) == sizes for lst in out.values())
    by_variant = {}
    for c, lst in out.items():
        key = (c.head_dim, c.dtype, c.causal, phase.spec_class(c.seq_len))
        by_variant.setdefault(key, set()).add(lst[0]["BLOCK_M"])
    assert all(len(v) == 1 for v in by_variant.values())


def test_compile_tasks_cover_each_variant_once_with_a_tiny_stand_in():
    cases = phase.build_grid("full")
    cands = [dict(BLOCK_M=m, BLOCK_N=16, num_warps=4, num_stages=2) for m in (16, 32, 64)]
    configs = phase.assign_configs(cases, lambda d, dt: cands)
    tasks = phase.compile_tasks(cases, configs, "cuda:0")
    variants = {(c.dtype, c.causal, c.head_dim, phase.spec_class(c.seq_len)) for c in cases if c.impl == "triton"}
    assert len(tasks) == len(variants)
    assert all(t[0] == "cuda:0" and t[1] == "triton" and t[4] in (1, 16, 17) for t in tasks)
    assert {(t[2], t[3], t[5], phase.spec_class(t[4])) for t in tasks} == variants


def test_a_stand_in_compiles_the_path_its_real_shape_takes(monkeypatch):
    # The rules choose a path by length: a 17-key stand-in for a 4097-key case must not compile the
    # kernel of its own length.
    from kernels.attention import dispatch

    monkeypatch.setattr(dispatch, "route", lambda shape, dtype, device, causal=False: (
        ("gluon", {"version": "g1"}) if shape[2] >= 2048 else ("hopper", None)))
    cases = [phase.Case("triton", "float16", False, 1, 3, n, 64) for n in (17, 1024, 4097)]
    tasks = phase.compile_tasks(cases, {}, "cuda:0")
    assert sorted((t[4], t[7]) for t in tasks) == [(16, ("hopper", None)), (17, ("gluon", {"version": "g1"})),
                                                  (17, ("hopper", None))]
    assert all(t[7] is None for t in phase.compile_tasks(cases, {}, "cpu"))  # the interpreter has one path


def test_on_hopper_the_grid_runs_again_on_the_portable_path_with_the_portable_configs():
    cases = phase.build_grid("full", hopper=True)
    shipped = [c for c in cases if c.impl == "triton"]
    portable = [c for c in cases if c.impl == "triton-portable"]
    assert len(shipped) == len(portable) >= 96
    strip = lambda c: (c.dtype, c.causal, c.batch, c.heads, c.seq_len, c.head_dim)  # noqa: E731
    assert {strip(c) for c in shipped} == {strip(c) for c in portable}
    assert not {c.impl for c in phase.build_grid("full")} & {"triton-portable"}
    cands = [dict(BLOCK_M=64, BLOCK_N=16, num_warps=4, num_stages=2)]
    configs = phase.assign_configs(cases, lambda d, dt: cands, ("triton-portable",))
    assert set(configs) == set(portable)  # the Hopper path picks its own config
    tasks = phase.compile_tasks(cases, configs, "cuda:0")
    assert {t[1] for t in tasks} == {"triton", "triton-portable"}
    assert all(t[6] == [None] for t in tasks if t[1] == "triton")


def test_portable_rows_run_the_portable_path(monkeypatch):
    from kernels import attention

    seen = []
    real = attention.flash_attention
    monkeypatch.setattr(attention, "flash_attention", lambda *a, **kw: seen.append(kw.get("path")) or real(*a, **kw))
    q = k = v = torch.randn(1, 3, 17, 16)
    for impl in ("triton", "triton-portable"):
        phase._call(phase.Case(impl, "float16", False, 1, 3, 17, 16), q.half(), k.half(), v.half(), [None])
    assert seen == [None, "portable"]


# --- the cases that reach every kernel route ------------------------------------------------------


def _grid_routes(cases, dtype):
    """The (path, version) flash_attention's rules give each case of `dtype` on sm90, as dispatch routes it."""
    from kernels.attention import dispatch

    return {(path, (cfg or {}).get("version", "-")) for c in cases if c.dtype == dtype
            for path, cfg in [dispatch.rule_route(dispatch.SHAPE_RULES, c.head_dim, c.causal, c.seq_len,
                                                  batch_heads=c.batch * c.heads)]}


def _unreached(cases, dtype):
    """Rows of the sm90 route table (and the Hopper kernel's split causal schedule) no case of `dtype` takes."""
    from kernels.attention import dispatch

    mine = [c for c in cases if c.dtype == dtype]
    rows = {phase.route_row(c) for c in mine}
    missing = [i for i in range(len(dispatch.SHAPE_RULES) + 1) if i not in rows]
    hopper = [c for c in mine if phase.route_row(c) == len(dispatch.SHAPE_RULES)]
    if not any(c.causal and c.seq_len >= phase.hopper_split_from() for c in hopper):
        missing.append("hopper split")
    return missing


def test_the_full_grid_reaches_every_kernel_the_sm90_route_table_names():
    from kernels.attention import route_table

    cases = [c for c in phase.build_grid("full", hopper=True) if c.impl == "triton" and c.layout == "contiguous"]
    want = {(path, version) for _, path, version, _ in route_table.rows()}
    for dt in phase.DTYPES:
        assert _unreached(cases, dt) == [], f"{dt}: a route of the sm90 table that no correctness case reaches"
        assert _grid_routes(cases, dt) == want
    # the large-shape steps are reached only by the added cases, at both dtypes; the portable rows run them too
    added = [c for c in cases if c.route_case]
    assert {v for dt in phase.DTYPES for _, v in _grid_routes(added, dt)} >= {"g33", "g36"}
    assert len(added) == len({(c.dtype, phase.route_row(c), c.causal) for c in added})  # one case per route
    portable = {(c.dtype, c.shape, c.causal) for c in phase.build_grid("full", hopper=True) if c.impl == "triton-portable"}
    assert {(c.dtype, c.shape, c.causal) for c in added} <= portable
    assert not [c for c in phase.build_grid("quick", hopper=True) if c.route_case]


def test_a_new_rule_gets_its_case_and_a_rule_no_shape_reaches_is_named(monkeypatch):
    from kernels.attention import dispatch

    rules = dispatch.SHAPE_RULES
    longer = dispatch.ShapeRule("gluon", 64, False, min_len=16384, min_rows=2 ** 19, config=(("version", "g99"),))
    monkeypatch.setattr(dispatch, "SHAPE_RULES", (longer, *rules))
    cases = [c for c in phase.build_grid("full") if c.impl == "triton"]
    new = [c for c in cases if phase.route_row(c) == 0]
    assert [(c.seq_len, c.batch * c.heads * c.seq_len >= 2 ** 19) for c in new] == [(16385, True)] * 2
    assert _unreached(cases, "float16") == []
    # a rule that an earlier one shadows whatever the shape: no case can reach it, and the check says which
    shadowed = dispatch.ShapeRule("gluon", 64, True, min_len=4096, config=(("version", "g98"),))
    monkeypatch.setattr(dispatch, "SHAPE_RULES", (*rules, shadowed))
    assert _unreached([c for c in phase.build_grid("full") if c.impl == "triton"], "float16") == [len(rules)]


# The most float64 work the added cases may ask of the reference per dtype: a T4's float64 units (about a
# quarter of a TFLOP/s) do it in seconds.
ROUTE_REFERENCE_FLOPS = 1e12


def test_the_added_cases_stay_affordable_and_their_reference_fits_a_t4():
    added = [c for c in phase.build_grid("full") if c.route_case and c.dtype == "float16"]
    assert added and sum(4 * c.batch * c.heads * c.seq_len ** 2 * c.head_dim for c in added) <= ROUTE_REFERENCE_FLOPS
    for c in phase.build_grid("full", hopper=True):
        heads, rows = phase.reference_blocks(c.batch * c.heads, c.seq_len)
        assert heads * rows * c.seq_len * phase.REFERENCE_BYTES_PER_SCORE <= phase.REFERENCE_CHUNK_BYTES
        # its blocks, plus the inputs, output and reference in float64 (the error too), within a 16 GB T4
        tensors = 8 * c.batch * c.heads * c.seq_len * c.head_dim * 6
        assert phase.REFERENCE_CHUNK_BYTES + tensors < 8 * 2 ** 30, c


@pytest.mark.parametrize("causal", [False, True])
def test_the_reference_in_blocks_of_query_rows_is_the_whole_reference(monkeypatch, causal):
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 3, 37, 16, generator=g).half() for _ in range(3))
    whole = attention.reference_attention(q, k, v, causal=causal)
    monkeypatch.setattr(phase, "REFERENCE_CHUNK_BYTES", 37 * phase.REFERENCE_BYTES_PER_SCORE * 8)
    assert phase.reference_blocks(6, 37) == (1, 8)  # one head, 8 query rows at a time: a ragged last block
    blocks = phase.reference(q, k, v, causal)
    assert blocks.dtype == torch.float64 and torch.allclose(blocks, whole, rtol=0, atol=1e-13)


def test_a_route_cases_stand_in_keeps_its_length_where_the_path_chooses_by_it(monkeypatch):
    from kernels.attention import dispatch

    monkeypatch.setattr(dispatch, "route", lambda shape, dtype, device, causal=False: ("hopper", None))
    regular = phase.Case("triton", "float16", True, 1, 3, 4097, 16)
    added = phase.Case("triton", "float16", True, 1, 3, 8193, 16, route_case=True)
    assert [t[4] for t in phase.compile_tasks([regular, added], {}, "cuda:0")] == [17, 8193]
    # with a fixed config (the portable rows) the length chooses nothing: the tiny stand-in is enough
    cfg = [dict(BLOCK_M=16, BLOCK_N=16, num_warps=4, num_stages=1)]
    assert [t[4] for t in phase.compile_tasks([added], {added: cfg}, "cuda:0")] == [17]


def test_a_row_records_the_path_step_and_backend_that_ran():
    row = phase.CorrectnessRow(impl="triton", dtype="float16", causal=True, batch=1, heads=3, seq_len=17,
                               head_dim=64, status="ok")
    phase._describe_run(row, dict(path="gluon", version="g36", BLOCK_M=192), None)
    assert (row.kernel_path, row.kernel_step, row.backend_used) == ("gluon", "g36", None)
    phase._describe_run(row, dict(path="hopper", features="warp_spec+causal_split"), None)
    assert (row.kernel_path, row.kernel_step) == ("hopper", None)
    sdpa = phase.CorrectnessRow(impl="sdpa", dtype="float16", causal=True, batch=1, heads=3, seq_len=17,
                                head_dim=64, status="ok")
    phase._describe_run(sdpa, None, "cudnn")
    assert (sdpa.kernel_path, sdpa.backend_used) == (None, "cudnn")


def test_the_schema_7_step_changes_only_the_version():
    from collect.schema import migrate

    before = {"schema_version": 6, "rows": [{"impl": "triton", "config": "gluon path"}]}
    out = migrate.to_version_7(dict(before))
    assert out == {**before, "schema_version": 7} and migrate.to_version_7(dict(out)) == out
    assert phase.SCHEMA_VERSION >= 7  # later steps go through this one (test_diff.py pins the latest)


def test_precompile_runs_its_workers_and_reports_failures(capsys):
    good = phase.Case("triton", "float16", True, 1, 3, 40, 16)
    bad = phase.Case("triton", "float16", False, 1, 3, 64, 16)
    configs = {bad: [dict(BLOCK_M=24, BLOCK_N=16)]}  # not a power of two: the kernel refuses it
    assert phase.precompile([good, bad], configs, CPU, workers=2) == 1
    assert "compiled 2 kernel variants with 2 processes" in capsys.readouterr().err


# --- tolerances and metrics ------------------------------------------------------------------


def test_tolerance_is_a_multiple_of_the_unit_roundoff():
    fp16, bf16 = phase.tolerance_for("float16"), phase.tolerance_for("bfloat16")
    assert (fp16.mantissa_bits, bf16.mantissa_bits) == (10, 7)
    assert fp16.unit_roundoff == 2.0**-11 and bf16.unit_roundoff == 2.0**-8
    assert fp16.tol_abs == fp16.tol_rel == phase.TOL_FACTOR * 2.0**-11
    assert bf16.tol_abs == phase.TOL_FACTOR * 2.0**-8
    # the page's own u (from bit counts) agrees with numpy's and torch's description of the formats
    assert unit_roundoff("float16") == float(np.finfo(np.float16).eps) / 2 == fp16.unit_roundoff
    assert unit_roundoff("bfloat16") == bf16.unit_roundoff
    with pytest.raises(ValueError, match="unknown dtype"):
        unit_roundoff("float8")


def test_error_metrics_find_a_known_error_and_where_it_is():
    g = torch.Generator().manual_seed(0)
    v = torch.randn(1, 2, 5, 4, generator=g, dtype=torch.float64)
    ref = torch.randn(1, 2, 5, 4, generator=g, dtype=torch.float64)
    out = ref.clone()
    out[0, 1, 3, 2] += 0.01
    out[0, 0, 0, 1] -= 0.004
    tol = phase.tolerance_for("float16")
    m = phase.error_metrics(out, ref, v, tol)
    assert m["max_abs_err"] == pytest.approx(0.01, rel=1e-9)
    assert m["worst_query"] == 3
    assert m["max_abs_ref"] == pytest.approx(float(ref.abs().max()))
    assert m["max_rel_err"] == pytest.approx(0.01 / float(ref.abs().max()), rel=1e-9)
    assert m["first_row_max_abs_err"] == pytest.approx(0.004, rel=1e-9)
    assert m["first_row_max_abs_v"] == pytest.approx(float(v[..., 0, :].abs().max()))
    def usage(e, at):
        return e / (tol.tol_abs + tol.tol_rel * abs(float(ref[at])))

    assert m["tol_usage"] == pytest.approx(max(usage(0.01, (0, 1, 3, 2)), usage(0.004, (0, 0, 0, 1))))
    assert m["passed"] is False and m["reason"] is None


def test_error_metrics_pass_within_tolerance_and_fail_on_nan():
    ref = torch.full((1, 1, 3, 2), 2.0, dtype=torch.float64)
    tol = phase.tolerance_for("bfloat16")
    inside = ref + 0.9 * (tol.tol_abs + tol.tol_rel * 2.0)
    m = phase.error_metrics(inside, ref, ref, tol)
    assert m["passed"] is True and m["tol_usage"] == pytest.approx(0.9)
    just_out = ref + 1.1 * (tol.tol_abs + tol.tol_rel * 2.0)
    assert phase.error_metrics(just_out, ref, ref, tol)["passed"] is False
    nan = ref.clone()
    nan[0, 0, 1, 0] = float("nan")
    m = phase.error_metrics(nan, ref, ref, tol)
    assert m["passed"] is False and m["max_abs_err"] is None and "1 of 6" in m["reason"]


# --- rows that did not run -------------------------------------------------------------------

TINY = phase.Case("triton", "float16", True, 1, 3, 17, 16)


def test_an_exception_becomes_an_error_row(monkeypatch):
    def boom(*a, **k):
        raise RuntimeError("illegal memory access")

    monkeypatch.setattr(attention, "flash_attention", boom)
    row = phase.run_case(TINY, CPU, phase.tolerance_for("float16"))
    assert row.status == "error" and "RuntimeError: illegal memory access" in row.reason
    assert row.passed is None and row.max_abs_err is None


def test_out_of_memory_becomes_an_oom_row(monkeypatch):
    def oom(*a, **k):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(attention, "flash_attention", oom)
    row = phase.run_case(TINY, CPU, phase.tolerance_for("float16"))
    assert row.status == "oom" and "out of memory" in row.reason


def test_a_config_that_does_not_fit_falls_back_then_is_unsupported(monkeypatch):
    real = attention.flash_attention
    big = dict(BLOCK_M=128, BLOCK_N=128, num_warps=8, num_stages=3)
    small = dict(BLOCK_M=16, BLOCK_N=16, num_warps=4, num_stages=1)

    def picky(q, k, v, causal=False, sm_scale=None, *, config=None, **kw):
        if config and config["BLOCK_M"] == 128:
            raise OutOfResources(300000, 232448, "shared memory")
        return real(q, k, v, causal, sm_scale, config=config, **kw)

    monkeypatch.setattr(attention, "flash_attention", picky)
    row = phase.run_case(TINY, CPU, phase.tolerance_for("float16"), [big, small])
    assert row.status == "ok" and row.passed and "BLOCK_M=16" in row.config
    row = phase.run_case(TINY, CPU, phase.tolerance_for("float16"), [big])
    assert row.status == "unsupported" and "shared memory" in row.reason


def test_bf16_on_a_pre_ampere_gpu_is_unsupported_with_the_reason(monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a, **k: (7, 5))
    case = phase.Case("triton", "bfloat16", False, 1, 3, 17, 64)
    row = phase.run_case(case, torch.device("cuda", 0), phase.tolerance_for("bfloat16"))
    assert row.status == "unsupported" and "7.5" in row.reason and row.passed is None


# --- end to end under the interpreter --------------------------------------------------------


def test_run_writes_a_file_that_validates(tmp_path, monkeypatch):
    cases = [phase.Case("triton", "float16", True, 1, 3, 17, 16), phase.Case("triton", "bfloat16", False, 2, 3, 1, 16),
             phase.Case("naive", "float16", True, 1, 3, 17, 16), phase.Case("sdpa", "float16", True, 1, 3, 17, 16)]
    monkeypatch.setattr(phase, "build_grid", lambda profile, hopper=False, ported=(): cases)
    ctx = RunContext(run_id="tiny-20261129", out_dir=tmp_path, profile="quick", manifest=manifest("tiny-20261129"),
                     phase="correctness", filename="correctness.json")
    result = phase.run(ctx)
    ctx.flush_checkpoint()  # the runner writes the rows a spaced checkpoint deferred (collect/runner.py)
    data = load_validated(tmp_path / "correctness.json", CorrectnessFile)
    assert [r.status for r in data.rows] == ["ok"] * 4 and len(result.rows) == 4
    causal, single, naive, sdpa = data.rows
    assert causal.passed and causal.max_abs_err > 0 and causal.worst_query_keys == causal.worst_query + 1
    assert causal.first_row_max_abs_err == 0.0  # query 0 sees one key: its output is v[0] itself
    assert causal.config and "BLOCK_M" in causal.config
    # the interpreter runs the portable kernel: its path is recorded, and no Gluon step
    assert (causal.kernel_path, causal.kernel_step, causal.backend_used, causal.route_case) == ("portable", None, None,
                                                                                              False)
    assert single.max_abs_err == 0.0 and single.passed
    assert naive.impl == "naive" and naive.config is None and naive.passed and naive.kernel_path is None
    assert sdpa.backend_used and sdpa.kernel_path is None
    assert {t.dtype for t in data.tolerances} == {"float16", "bfloat16"}


# --- the page --------------------------------------------------------------------------------


def _page(tmp_path, **kw) -> CorrectnessPage:
    run = load_run(make_correctness_run(tmp_path, **kw))
    return CorrectnessPage(run, [run])


def test_page_figures_have_their_ids(tmp_path):
    page = _page(tmp_path)
    heat, lines = page.heatmap_figure(), page.error_vs_seq_figure()
    # The caption counts the drawn points it leaves out, not every exact case of the grid.
    left_out = int((page._lines()["max_abs_err"] == 0).sum())
    assert (f"{left_out} point" in lines) == (left_out > 0) and "with an error of exactly zero" not in lines
    assert 'id="fig-correctness-error-heatmap"' in heat and "exact" in heat
    assert 'id="fig-correctness-error-vs-seq"' in lines
    # The u lines are drawn on the normwise panel alone, and the caption says where they are.
    import re as _re
    assert _re.findall(r'"name":"u \(fp16\)".*?"yaxis":"(y\d*)"', lines) == ["y2"]
    assert "dashed lines in the normwise panel mark each dtype's unit roundoff u" in html.unescape(lines)
    assert "synthetic-20261129" in heat and "NVIDIA H200" in lines


def test_half_an_ulp_is_the_rounding_step_of_the_binade():
    u = unit_roundoff("float16")
    assert half_ulp(3.4, "float16") == half_ulp(2.0, "float16") == 2 * u  # [2, 4): a step of 4u
    assert half_ulp(1.999, "float16") == u and half_ulp(-0.188, "float16") == u / 8
    assert half_ulp(3.4, "bfloat16") == 2 * unit_roundoff("bfloat16")


def test_the_rounding_check_can_fail_and_says_so(tmp_path):
    # synthetic causal errors sit at floor_in_u * u of outputs of 3.0, whose half-ulp is 2u
    near = _page(tmp_path / "a", floor_in_u=0.6)
    mid = _page(tmp_path / "b", floor_in_u=1.0)
    far = _page(tmp_path / "c", floor_in_u=40.0)
    assert "No case's error is larger than rounding its largest output" in near.rounding_finding()
    assert "No case exceeds 2" in mid.rounding_finding() and "reaches 1.50 at most" in mid.rounding_finding()
    text = far.rounding_finding()
    causal = len(far.rounding_cases().query("causal"))
    assert f"**{causal} of {len(far.rounding_cases())} cases exceed 2**" in text and "No case" not in text
    # the opening carries the same verdict, and calls the figures what they are
    assert near.findings_first().count("what rounding the output to the format costs") == 1
    assert "about one rounding" in mid.findings_first()
    assert "**more than the format's rounding explains**" in far.findings_first()
    # the ulp is said before the section that defines it
    assert "half an ulp (a unit in the last place: the format's spacing at the output's magnitude)" in near.findings_first()
    assert "median of" in near.rounding_finding() and "floor: median" not in near.rounding_table()


def test_row0_finding_follows_the_data(tmp_path):
    exact = _page(tmp_path / "a", row0_in_u=0.0).row0_finding()
    assert "comes out **exact** in fp16 and bf16" in exact and exact.count("**exact**") == 1  # one sentence, both dtypes
    one = _page(tmp_path / "b", row0_in_u=0.5).row0_finding()
    assert "no more than one rounding" in one
    assert "more than one rounding" in _page(tmp_path / "c", row0_in_u=3.0).row0_finding()
    late_page = _page(tmp_path / "d", causal_worst=500)
    late = late_page.row0_finding()
    longest = int(late_page.rounding_cases().query("causal")["seq_len"].max())
    assert f"never later than query 500, in cases of up to {longest} queries" in late
    assert "past the first" not in late_page.findings_first()  # no threshold the page never defines


def test_where_the_largest_causal_error_sits_is_a_query_not_a_median_between_two(tmp_path):
    # An even count split between queries 1 and 2 has a median of 1.5, which names no query; one case late.
    run_dir = make_correctness_run(tmp_path)
    data = load_validated(run_dir / "correctness.json", CorrectnessFile)
    causal = [r for r in data.rows if r.impl == "triton" and r.layout == "contiguous" and r.causal and r.seq_len > 1]
    assert len(causal) % 2 == 0
    for i, r in enumerate(causal):
        r.worst_query = 1 if i < len(causal) // 2 else 2
    causal[-1].worst_query = min(40, causal[-1].seq_len - 1)
    write_json_atomic(run_dir / "correctness.json", data)
    run = load_run(run_dir)
    page = CorrectnessPage(run, [run])
    text = page.row0_finding()
    assert "1.5" not in text and "1.5" not in page.rounding_table()
    assert f"sits at query 1 or earlier in {len(causal) // 2} of {len(causal)} cases" in text
    assert f"never later than query {causal[-1].worst_query}" in text


def test_summary_counts_passes_failures_and_unsupported(tmp_path):
    page = _page(tmp_path / "a")
    # the opening counts the passes; the summary and the failures section do not say it twice more
    assert "pass" not in page.summary() and page.failures() == "None."
    assert not page.grid.empty and (page.grid["passed"] == True).all()  # noqa: E712
    bad = _page(tmp_path / "b", fail=2, unsupported_bf16=True)
    text = bad.summary()
    n = len(bad.grid)
    passed = int((bad.grid["passed"] == True).sum())  # noqa: E712
    assert f"**{passed} of {n} pass**" in text and "2 ran and exceeded" in text and "unsupported" in text
    assert "1.70× the tolerance" in bad.failures() and "compute capability" in bad.failures()


def test_seq_trend_uses_words_from_the_data(tmp_path):
    text = _page(tmp_path).seq_trend_finding()
    assert "fp16, non-causal: the largest error **shrinks" in text
    assert "fp16, causal: the largest error **stays within" in text


def test_errors_and_ratios_keep_three_figures():
    from render.pages.correctness.common import sci

    # A value that rounds up to a round number keeps its three figures, as its neighbours print.
    assert [sci(x) for x in (0.009995, 0.00999, 0.0123456, 4.88e-4, 999.7)] == \
        ["0.0100", "9.99×10⁻³", "0.0123", "4.88×10⁻⁴", "1.00×10³"]


def test_seq_trend_ratios_near_one_are_not_rounded_to_one(tmp_path):
    # Two figures printed a change of 1.8% as '×1'; three show it.
    text = _page(tmp_path).seq_trend_finding()
    assert "(×1)" not in text and "(×1.0)" not in text
    for ratio in __import__("re").findall(r"\(×([0-9.]+)\)", text):
        assert len(ratio.replace(".", "").lstrip("0")) == 3, ratio


def test_template_renders_and_a_missing_phase_says_so(tmp_path):
    source = (ROOT / "docs" / "correctness.md").read_text()
    run = load_run(make_correctness_run(tmp_path / "with"))
    out = Report(runs=[run], run=run).render_markdown(source, "correctness.md")
    assert 'id="fig-correctness-error-heatmap"' in out and "{{" not in out
    assert "T4" in out and "naive" in out
    bare = load_run(make_run(tmp_path / "without"))
    out = Report(runs=[bare], run=bare).render_markdown(source, "correctness.md")
    assert "Not collected in this run" in out and "fig-correctness" not in out


def test_summary_names_the_head_dims_run_only_at_small_n_and_u_check_flags_disagreement(tmp_path):
    page = _page(tmp_path / "a")
    assert "head_dim 16, 32 and 256 only at seq_len 1, 17 and 128" in page.summary()
    # The case count follows from the axes only with the batch size that ran at some head_dims alone.
    reg = page.regular
    only = sorted(set(reg[reg["batch"] == 2]["head_dim"]))
    assert only != sorted(set(reg["head_dim"]))
    assert f"batch 2 only at head_dim {__import__('render.vocab', fromlist=['join']).join(only)}" in page.summary()
    assert page.u_check() == ""  # a self-check that holds is not a finding
    # The grid's own ragged lengths, and apart from them the added cases' (off the grid's axes, as the summary says)
    ragged = page.ragged_lengths()
    assert "The lengths 1, 17, 1000 and 4097 in this run's grid are not multiples of 16" in ragged
    assert "(below) add the ragged lengths 2049 and 8193, which the grid does not include" in ragged
    run_dir = make_correctness_run(tmp_path / "b")
    data = load_validated(run_dir / "correctness.json", CorrectnessFile)
    wrong = data.tolerances[0]  # derived for a format one bit shorter than fp16, consistently with itself
    wrong.mantissa_bits, wrong.unit_roundoff = wrong.mantissa_bits - 1, wrong.unit_roundoff * 2
    wrong.tol_abs = wrong.tol_rel = wrong.factor * wrong.unit_roundoff
    write_json_atomic(run_dir / "correctness.json", data)
    run = load_run(run_dir)
    assert "**disagrees** with the bit counts for fp16" in CorrectnessPage(run, [run]).u_check()


def test_paths_summary_names_the_path_and_checks_the_portable_grid(tmp_path):
    page = _page(tmp_path / "h", hopper=True)
    text = page.paths_summary()
    n = len(page.portable)
    assert "chose the **Hopper TMA kernel**" in text and f"The same {n} cases" in text and f"all {n} pass" in text
    assert "triton-portable" in text
    # in the page's own notation (sci), as the floor table prints the same errors
    assert "worst absolute errors bf16" in text and "fp16 8.79×10⁻⁴" in text
    # the portable rows are not PyTorch comparison rows
    assert "triton-portable" not in page.comparison()
    bad = _page(tmp_path / "b", hopper=True, portable_fail=2).paths_summary()
    assert f"**{n - 2} of {n} pass**" in bad and "1.90× the tolerance" in bad
    # no path recorded (older runs): nothing to say
    assert _page(tmp_path / "o").paths_summary() == ""


def test_the_page_names_the_steps_the_rows_ran_or_says_they_are_unknown(tmp_path):
    old = _page(tmp_path / "o", hopper=True)
    assert "was not recorded in this run, so which of the Gluon kernel's steps the grid exercised is unknown" in \
        old.paths_summary()
    page = _page(tmp_path / "r", hopper=True, recorded=True)
    text = page.paths_summary()
    join = __import__('render.vocab', fromlist=['join']).join
    order = lambda xs: sorted(xs, key=lambda x: (len(x), x))  # noqa: E731
    steps = order({s for s in page.regular["kernel_step"].dropna()})
    only_added = order(set(page.added["kernel_step"].dropna()) - set(steps))
    # The grid's sentence names the grid's steps alone: g33, g36 and g41 are reached by the added route cases only.
    assert {"g33", "g36", "g41"} == set(only_added) and not {"g33", "g36", "g41"} & set(steps)
    assert f"the grid exercised the Gluon steps {join(steps)}, besides the Hopper TMA kernel." in text
    assert (f"Only the cases added to reach the kernel routes of larger shapes (below) ran the Gluon steps "
            f"{join(only_added)}.") in text
    assert "Gluon tile kernel" in text and "Gluon warp-specialized kernel" in text  # named by the step's kernel
    # A step the grid also ran is the grid's, not the added cases' alone.
    run_dir = make_correctness_run(tmp_path / "s", hopper=True, recorded=True)
    data = load_validated(run_dir / "correctness.json", CorrectnessFile)
    grid = [r for r in data.rows if r.impl == "triton" and not r.route_case and r.kernel_path == "gluon"]
    grid[0].kernel_step = "g33"
    write_json_atomic(run_dir / "correctness.json", data)
    run = load_run(run_dir)
    shared = CorrectnessPage(run, [run]).steps_exercised()
    assert "g33" in shared[:shared.index("Only the cases added")]
    assert shared[shared.index("Only the cases added"):].endswith("ran the Gluon steps g36 and g41.")
    # Without added cases (a quick profile) there is nothing reached by them alone to name.
    quick = _page(tmp_path / "q", hopper=True, recorded=True, profile="quick")
    assert "Only the cases added" not in quick.steps_exercised() and "exercised the Gluon steps" in quick.steps_exercised()
    assert "which the grid does not include" not in quick.ragged_lengths()


def test_the_added_cases_have_their_own_table_and_stay_off_the_grids_axes(tmp_path):
    page = _page(tmp_path / "r", hopper=True, recorded=True)
    added = page.added
    assert len(added) == 8 and added["route_case"].all()
    text = page.route_cases()
    assert "every kernel it can choose here is checked against the reference: all 8 pass" in text
    assert "(g33)" in text and "(g36)" in text and "(g41)" in text and "43" in text
    summary = page.summary()
    assert "seq_len 1, 17, 128, 1000, 2048 and 4097;" in summary and "batch 1 and 2;" in summary
    assert "and on 8 cases added to reach the kernels only larger shapes take" in summary
    assert 8193 not in set(page._lines()["seq_len"]) and 2049 not in set(page._cell_frame()["seq_len"])
    # their errors count among the rest everywhere else: the pass count, the rounding check, every case
    assert f"passes {len(page.grid)} of {len(page.grid)} cases" in page.findings_first()
    assert 8193 in set(page.rounding_cases()["seq_len"]) and "kernel" in page.cases_table()
    # every case shows its error in half-ulps, so the cases above one can be read off the table
    worst = page.rounding_cases()["ulp_ratio"].max()
    assert "÷ ½ ulp of max |ref|" in html.unescape(page.cases_table()) and f"<td>{fmt.num(worst)}</td>" in \
        page.cases_table()
    # a run from before the added cases, or a quick one, says what it did not check
    assert "has no cases added to reach the kernel routes" in _page(tmp_path / "q", profile="quick").route_cases()


def test_the_tolerance_says_why_it_is_4u_and_what_scale_of_values_it_assumes(tmp_path):
    page = _page(tmp_path / "a")
    rule = page.tolerance_rule()
    assert "rounds twice" in rule and "4u leaves a factor of 2 above that" in rule and "u·Σⱼ pⱼ|vⱼ|" in rule
    assert "assumes values of about unit size" in rule and "standard normal, for which the mean of |v| is" in rule
    slack = page.tolerance_slack()
    c = page.rounding_cases()
    r = c.loc[c["max_abs_ref"].idxmin()]
    u = unit_roundoff(r["dtype"])
    halves = (phase.TOL_FACTOR * u * (1 + r["max_abs_ref"])) / half_ulp(r["max_abs_ref"], r["dtype"])
    assert f"N={int(r['seq_len'])}" in slack and f"is {fmt.num(halves, 2)} half-ulps of it" in slack
    # It is the tolerance that allows that many, named as such; it is sized for unit values, not set by them.
    assert "the tolerance at the largest output is" in slack and "set by the values averaged" not in slack
    run_dir = make_correctness_run(tmp_path / "b")
    data = load_validated(run_dir / "correctness.json", CorrectnessFile)
    data.inputs = "q, k, v uniform in [-100, 100]"
    write_json_atomic(run_dir / "correctness.json", data)
    run = load_run(run_dir)
    assert "does not describe its inputs as standard normal" in CorrectnessPage(run, [run]).tolerance_rule()


def test_the_comparison_names_sdpas_backend_where_recorded(tmp_path):
    assert "SDPA chose its cudnn backend for all 12 of its rows" in _page(tmp_path / "a", sdpa_backend="cudnn").comparison()
    assert "Which backend SDPA chose for these rows was not recorded in this run" in _page(tmp_path / "b").comparison()


def test_the_comparison_table_drops_columns_that_say_nothing_row_by_row(tmp_path):
    # Every PyTorch row ran and none gives a reason: a status column of 'ok' and an empty reason column go.
    heads = [html.unescape(h) for h in re.findall(r"<th(?:\s[^>]*)?>(.*?)</th>", _page(tmp_path / "a").comparison())]
    assert "max |err|" in heads and "status" not in heads and "reason" not in heads


def test_identical_errors_with_sdpa_point_to_shared_arithmetic_only_past_half_an_ulp(tmp_path):
    # Causal errors at 0.6 u of outputs of 3.0 (half an ulp 2u) are 0.3 half-ulps, non-causal ones at most one: the
    # exact value rounded would give them, so identical errors may be read as both rounding exactly.
    within = _page(tmp_path / "a", other_factor=1.0)
    text = within.rounding_finding()
    assert "makes exactly the kernel's largest error in 12 of 12 shared cases" in text
    assert "as both returning the exact value rounded to the format there would give" in text
    assert "share their arithmetic" not in text
    # At 1.0 u the causal errors are 1.5 half-ulps: identical errors there show shared arithmetic, not exact rounding.
    over_page = _page(tmp_path / "b", other_factor=1.0, floor_in_u=1.0)
    over = over_page.rounding_finding()
    rows = over_page.rows
    shared = rows[(rows["impl"] == "sdpa") & (rows["seq_len"] > 1)]
    n_over = int(shared["causal"].sum())
    assert n_over and n_over < len(shared)
    assert f"in {n_over} of those cases that error is more than half an ulp of the largest output" in over
    assert "so there the two compute the same inexact value, which points to shared arithmetic" in over
    # the cases within half an ulp say nothing of the arithmetic: the exact value rounded gives the same error there
    assert (f"in the other {len(shared) - n_over}, within half an ulp, both returning the exact value rounded would "
            "give the same error") in over
    assert "share their arithmetic" not in over
    # Different errors are said as such.
    assert "makes a different largest error in every shared case" in _page(tmp_path / "c").rounding_finding()


def test_comparison_says_identical_errors_rather_than_one_times(tmp_path):
    assert "naive's normwise error is 2× the kernel's (median over 12 shared cases)" in _page(tmp_path / "a").comparison()
    same = _page(tmp_path / "b", other_factor=1.0).comparison()
    assert "sdpa's normwise error is identical to the kernel's in all 12 shared cases" in same and "1×" not in same


def test_ported_builds_run_the_grid_and_say_what_a_t4_cannot_run():
    ported = tuple(phase.PORTED)
    cases = phase.build_grid("full", hopper=True, ported=ported)
    for impl in ported:  # ragged and tile-multiple lengths, every head size up to 128, and the view cases
        mine = [c for c in cases if c.impl == impl]
        assert {c.seq_len for c in mine} >= {1, 17, 1000, 4097}
        assert {c.head_dim for c in mine} == {16, 32, 64, 128, 80, 96}
        assert {c.layout for c in mine} == set(phase.LAYOUTS) and {c.causal for c in mine} == {False, True}
    why = phase._ported_unsupported
    assert "T4" in why(phase.Case("triton-portable-sm75", "bfloat16", False, 1, 3, 17, 64))
    assert why(phase.Case("triton-portable-sm80", "bfloat16", False, 1, 3, 17, 64)) is None
    assert "head_dim" in why(phase.Case("triton-turing-sm75", "float16", False, 1, 3, 17, 256))
    assert why(phase.Case("triton-turing-sm75", "float16", True, 1, 3, 17, 128)) is None


def test_ported_portable_rows_take_the_target_gpus_own_candidates():
    import torch

    from kernels.attention import candidate_configs

    t4 = phase.ported_candidates("sm75")(64, "float16")
    want = candidate_configs((7, 5), 64, torch.float16, 64 * 1024)
    assert [(c["BLOCK_M"], c["BLOCK_N"], c["num_warps"], c["num_stages"]) for c in t4] == \
           [(c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.num_warps, c.num_stages) for c in want]
    cases = phase.build_grid("quick", ported=("triton-portable-sm75",))
    configs = phase.assign_configs(cases, phase.ported_candidates("sm75"), ("triton-portable-sm75",))
    assert configs and all(c.impl == "triton-portable-sm75" for c in configs)
    used = {tuple(sorted(cfgs[0].items())) for cfgs in configs.values()}
    assert len(used) > 1  # the rotation exercises several of the T4's candidates


def test_the_page_says_what_the_ported_builds_proved_and_what_their_gpu_cannot_run(tmp_path):
    import json as _json

    from collect.schema.correctness import CorrectnessRow

    run_dir = make_correctness_run(tmp_path)
    data = _json.loads((run_dir / "correctness.json").read_text())

    def row(impl, n, **kw):
        base = dict(impl=impl, dtype="float16", causal=True, batch=2, heads=3, seq_len=n, head_dim=64, status="ok",
                    built_for=impl.rsplit("-", 1)[1], ran_on="sm90", tensor_cores="turing" in impl,
                    max_abs_err=1e-3, tol_usage=0.2, passed=True, fits_target=True, target_shared_bytes=8192)
        base.update(kw)
        return {k: v for k, v in vars(CorrectnessRow(**base)).items()}

    data["rows"] += [row("triton-turing-sm75", 17), row("triton-turing-sm75", 1000, tol_usage=1.5, passed=False),
                     row("triton-turing-sm75", 17, dtype="bfloat16", status="unsupported", passed=None,
                         tol_usage=None, max_abs_err=None, tensor_cores=None,
                         reason="a T4 (sm75) has no bfloat16 arithmetic in these kernels: its builds run float16"),
                     row("triton-portable-sm75", 128, head_dim=256, fits_target=False, target_shared_bytes=98304,
                         reason="_attn_fwd needs 98304 bytes of shared memory per block; sm75 allows 65536")]
    (run_dir / "correctness.json").write_text(_json.dumps(data))
    run = load_run(run_dir)
    page = CorrectnessPage(run, [run])
    summary = page.ported_summary()
    assert summary.startswith("Some cases of the ported builds failed")
    assert "Turing tensor-core kernel, a T4&#x27;s build (sm75)" in summary and "1 of 2" in summary
    notes = page.ported_notes()
    assert "1 case not run: a T4 (sm75) has no bfloat16" in notes
    assert "at d=256 passes here but would not launch on its GPU" in notes and "sm75 allows 65536" in notes
    assert "turing" not in page.comparison()  # ported rows are our kernel, not a PyTorch comparison
    # Cases not run include the Turing kernel's own head_dim limit, which is no GPU's: the header does not say "GPU".
    assert "<th>Cases not run (why below)</th>" in summary and "Cases its GPU cannot run" not in summary


def test_the_hardware_page_predicts_a_t4_from_its_datasheet_and_only_elsewhere():
    from committed import latest_run
    from render.pages.hardware import HardwarePage

    run = latest_run("manifest.json")
    page = HardwarePage(run, [run])
    t = page.t4_prediction_rows().set_index("impl")
    # the T4 datasheet: 65 TFLOP/s fp16 tensor, 8.1 TFLOP/s fp32: the FMA floor is 65/8.1 the tensor one
    assert t.loc["ours-portable", "floor_ms"] / t.loc["sdpa", "floor_ms"] == pytest.approx(65 / 8.1)
    assert t.loc["naive", "bound"] == "DRAM bytes" and t.loc["ours-turing", "bound"] == "FLOPs"
    assert "A prediction, not a measurement" in page.t4_prediction() and "8.02×" in page.t4_prediction()


def test_run_order_runs_each_variants_cases_once_it_is_compiled():
    from collect.correctness import Case, run_order

    sdpa = Case("sdpa", "float16", False, 1, 2, 64, 16)
    a = Case("triton", "float16", False, 1, 2, 64, 16)
    a_again = Case("triton", "float16", False, 2, 2, 64, 16)  # another batch, the same variant
    b = Case("triton", "float16", True, 1, 2, 64, 16)

    class Pool:
        def __init__(self, finished):
            self.finished = finished

        def covers(self, label):
            return label == "correctness"

        def as_done(self, label):
            yield from self.finished

    cases = [a, sdpa, b, a_again]
    # PyTorch's rows first (they compile nothing of ours), then each variant's cases as it finishes.
    assert list(run_order(cases, {}, torch.device("cpu"), Pool([1, 0]))) == [sdpa, b, a, a_again]
    # A pool that stalled after one variant: the rest run afterwards, in the grid's order.
    assert list(run_order(cases, {}, torch.device("cpu"), Pool([1]))) == [sdpa, b, a, a_again]
    assert list(run_order(cases, {}, torch.device("cpu"), Pool([]))) == [sdpa, a, a_again, b]
