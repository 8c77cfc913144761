"""The Device comparison page: every run plus the published references, one chart per question, readable at scale."""
from __future__ import annotations

import html
import json
import re
import shutil

import pandas as pd
import pytest

from conftest import ROOT
from render.pages.compare import ComparePage
from render.pages.compare.common import MAX_SHOWN, PUBLISHED_WORDS
from render.runs import load_references, load_runs
from render.site import Report
from collect.schema import SCHEMA_VERSION
from test_home import bench_file, decode_file, write_run

LINE_CHARTS = ("bench_figure", "decode_figure")


def runs_in(tmp_path, n: int, references: bool = True):
    for i in range(n):
        write_run(tmp_path, f"r{i:02d}", device="NVIDIA H200" if i % 2 == 0 else "NVIDIA A100-SXM4-80GB",
                  created=f"2026-11-{10 + i:02d}T08:00:00+00:00")
    if references:
        shutil.copytree(ROOT / "data" / "reference", tmp_path / "reference")
    runs = load_runs(tmp_path)
    return ComparePage(runs[-1], runs, load_references(tmp_path))


def plot_data(fragment: str) -> list[dict]:
    """The traces of the one figure in an HTML fragment."""
    m = re.search(r'Plotly\.newPlot\(\s*"[^"]+",\s*(\[.*?\]),\s*\{', fragment, flags=re.S)
    assert m, "no Plotly.newPlot call"
    return json.loads(m.group(1))


def layout_of(fragment: str) -> str:
    return fragment[fragment.index("Plotly.newPlot"):]


def test_one_run_and_no_references(tmp_path):
    page = runs_in(tmp_path, 1, references=False)
    assert "No published figures" in page.banner() and "!!! warning" not in page.banner()
    for name in LINE_CHARTS:
        html = getattr(page, name)()
        assert "updatemenus" not in layout_of(html)  # one device: nothing to select
        assert all(t["visible"] is True for t in plot_data(html))
    assert "Triton vs naive" in page.summary_table() and "2.00× faster (N=2048)" in page.summary_table()
    for name in ("ceilings_figure", "profile_figure", "int8_figure"):
        assert 'class="report-figure"' in getattr(page, name)()


def test_decode_panels_name_the_cache_float_type_each_run_recorded(tmp_path):
    """A T4 decodes in fp16: its float caches are fp16 caches, not bf16 ones, in the panel titles too."""
    t4 = decode_file("r00")
    t4.dtype = "float16"
    write_run(tmp_path, "r00", device="Tesla T4", decode=t4)
    runs = load_runs(tmp_path)
    fig = ComparePage(runs[-1], runs, []).decode_figure()
    assert '"fp16, eager loop"' in fig and '"fp16, CUDA graph"' in fig and "bf16" not in fig
    write_run(tmp_path, "r01", created="2026-11-30T08:00:00+00:00")  # an H200 run in bf16 beside it
    runs = load_runs(tmp_path)
    fig = ComparePage(runs[-1], runs, []).decode_figure()
    assert re.search(r'"(fp16 or bf16|bf16 or fp16), eager loop"', fig), "the panel names both runs' float types"


def test_references_are_labelled_in_banner_legend_captions_and_hatching(tmp_path):
    page = runs_in(tmp_path, 2)
    banner = page.banner()
    assert '!!! warning "Tesla T4: published figures, not re-measured here"' in banner
    assert "github.com/akashg71/gpu-attention" in banner and "??? note" in banner
    tflops = page.bench_figure("tflops")
    names = [t["name"] for t in plot_data(tflops)]
    assert f"Tesla T4: {PUBLISHED_WORDS}" in names
    ref = [t for t in plot_data(tflops) if "Tesla T4" in t["name"]]
    assert ref and all(t["line"]["dash"] != "solid" and t["marker"]["symbol"] == "circle-open" for t in ref)
    decode = page.decode_figure()
    assert any("Tesla T4" in t["name"] for t in plot_data(decode))
    for html in (tflops, decode, page.ceilings_figure(), page.int8_figure()):
        caption = re.search(r"<figcaption>(.*?)</figcaption>", html, flags=re.S).group(1)
        assert "published, not re-measured here: t4-published (Tesla T4)" in caption
    int8 = plot_data(page.int8_figure())
    assert all(t["marker"]["pattern"]["shape"][-1] == "x" and t["marker"]["pattern"]["shape"][0] == "" for t in int8)
    assert "Tesla T4 (published)" in int8[0]["y"]
    table = page.summary_table()
    assert "published: t4-published" in table and "1.56× slower (N=8192)" in table


def test_many_runs_start_with_a_readable_subset_and_a_selector(tmp_path):
    page = runs_in(tmp_path, 9)
    html = page.bench_figure("tflops")
    traces = plot_data(html)
    drawn = {t["name"] for t in traces if t["visible"] is True}
    assert len(drawn) == MAX_SHOWN
    assert f"Tesla T4: {PUBLISHED_WORDS}" in drawn and "NVIDIA H200 (r08)" in drawn  # reference and narrated run
    assert "NVIDIA H200 (r00)" not in drawn  # the oldest starts hidden, one click away in the legend
    labels = re.findall(r'"label":"([^"]+)"', layout_of(html))
    assert labels[:2] == ["Devices drawn first", "All devices"]
    assert "NVIDIA A100-SXM4-80GB (r01) and published figures" in labels
    assert f"Tesla T4: {PUBLISHED_WORDS}" in labels
    assert f"first draw {MAX_SHOWN} of them" in page.banner()
    # The count is of series (runs and published sets), which the banner's device count is not.
    assert "With 10 series to draw (one per run and per set of published figures)" in page.banner()


def test_twenty_runs_stay_under_a_megabyte(tmp_path):
    for i in range(20):
        write_run(tmp_path, f"r{i:02d}", created=f"2026-11-{1 + i:02d}T08:00:00+00:00")
    shutil.copytree(ROOT / "data" / "reference", tmp_path / "reference")
    out = Report.load(tmp_path).render_markdown((ROOT / "docs" / "compare.md").read_text(), "compare.md")
    assert len(out.encode()) < 1_000_000
    assert out.count('class="report-figure"') == 8  # the run history and seven device charts


def test_a_run_without_the_study_shape_is_named_as_missing(tmp_path):
    write_run(tmp_path, "r00", bench=bench_file("r00", shape=(4, 32, 128)))
    write_run(tmp_path, "r01", created="2026-11-30T08:00:00+00:00")
    runs = load_runs(tmp_path)
    page = ComparePage(runs[-1], runs, [])
    html = page.bench_figure("latency")
    assert "Not in this chart (no data for it): NVIDIA H200 (r00)" in html
    assert "n/a" in page.summary_table()


def test_unknown_metric_is_a_clear_error(tmp_path):
    page = runs_in(tmp_path, 1, references=False)
    with pytest.raises(ValueError, match="metric must be one of tflops, latency, memory"):
        page.bench_figure("bandwidth")


def test_a_published_dram_total_counts_when_the_split_is_unknown():
    assert ComparePage._dram(pd.Series({"dram_bytes": 2.098e9, "dram_read_bytes": None})) == 2.098e9
    # a measured call's read plus written, on the basis every page uses (its 4 MiB output is below what it wrote)
    study = {"batch": 2, "heads": 8, "seq_len": 2048, "head_dim": 64, "dtype": "float16"}
    assert ComparePage._dram(pd.Series({"dram_read_bytes": 6e8, "dram_write_bytes": 4e8, **study})) == 1e9
    assert ComparePage._dram(pd.Series({"dram_read_bytes": None, "dram_write_bytes": None})) is None


def test_the_site_page_loads_references_from_the_data_folder(tmp_path):
    write_run(tmp_path, "r00", phases=())
    shutil.copytree(ROOT / "data" / "reference", tmp_path / "reference")
    out = Report.load(tmp_path).render_markdown((ROOT / "docs" / "compare.md").read_text(), "compare.md")
    assert "Tesla T4: published figures, not re-measured here" in out and "{{" not in out


def _versioned(tmp_path, versions_and_ms, devices=None):
    """Runs, each recording the kernel version it ran, ours at the given device time (SDPA at 1 ms); on one device
    unless `devices` names each run's."""
    from collect.manifest_io import read_manifest
    from collect.jsonio import write_json_atomic

    for i, (version, ms) in enumerate(versions_and_ms):
        run_dir = write_run(tmp_path, f"r{i}", created=f"2026-11-{10 + i:02d}T08:00:00+00:00",
                            device=devices[i] if devices else "NVIDIA H200",
                            bench=bench_file(f"r{i}", triton_ms=ms, sdpa_ms=1.0), phases=("bench",))
        m = read_manifest(run_dir / "manifest.json")
        m.kernel_version = version
        write_json_atomic(run_dir / "manifest.json", m)
    runs = load_runs(tmp_path)
    return ComparePage(runs[-1], runs, [])


def test_the_history_follows_the_kernel_versions_in_the_order_the_runs_were_collected(tmp_path):
    page = _versioned(tmp_path, [("v1-old", 1.25), ("v1-old", 1.20), ("v2-new", 0.95), ("v3-last", 0.80)])
    h = page.history
    assert list(h["version"]) == ["v1-old", "v1-old", "v2-new", "v3-last"]
    assert h["d64"].tolist() == pytest.approx([0.8, 1 / 1.2, 1 / 0.95, 1.25])
    # the calls' spread is the ratio of their p10s and that of their p90s, as on the Benchmarks page
    assert h["d64_p10"].tolist() == pytest.approx(h["d64"].tolist()) and h["d64_p90"].tolist() == pytest.approx(h["d64"].tolist())
    text = page.findings_first()
    # one opponent in every run: it is the yardstick, and the sentence says it was the fastest other throughout
    assert page.yardstick == "sdpa-flash"
    assert ("0.800× to 0.833× the speed of FlashAttention-2 (SDPA), the fastest other implementation in every run, "
            "with v1-old and at 1.25× with v3-last") in text
    assert "3 kernel versions in all" in text and "d=128" not in text  # no run measured d=128
    assert "v2-new" in page.history_table() and "(narrated)" in page.history_table()
    assert "Ours vs FlashAttention-2 (SDPA)" not in page.history_table()  # the same columns twice would say nothing
    fig = plot_data(page.history_figure())
    assert [t["name"] for t in fig] == ["d=64 (B=2, H=8), against the fastest other: FlashAttention-2 (SDPA)"]
    assert len(fig[0]["x"]) == 4


def test_a_run_without_a_recorded_version_takes_its_iterations_final_version(tmp_path):
    from collect.jsonio import write_json_atomic
    from collect.schema.iterations import IterationsFile

    run_dir = write_run(tmp_path, "r0", phases=("bench",))
    write_json_atomic(run_dir / "iterations.json", IterationsFile(
        schema_version=SCHEMA_VERSION, run_id="r0", profile="quick", timing_method="synthetic", goal_ratio=1.0,
        final_version="v9-final", hopper_available=False, hopper_reason="synthetic", versions=[], rows=[]))
    run = load_runs(tmp_path)[0]
    assert run.manifest.kernel_version is None and run.kernel_version == "v9-final"


def test_the_diff_section_compares_against_the_last_run_of_another_kernel_version(tmp_path):
    # v1 at 1.25 ms, again at 1.20 ms, then v2 at 0.95 ms: the before is the newer v1 run, r1.
    page = _versioned(tmp_path, [("v1-old", 1.25), ("v1-old", 1.20), ("v2-new", 0.95)])
    assert page.before.id == "r1"
    d = page.diff
    triton = [c for c in d.cases if c.impl == "triton"]
    assert triton and {c.verdict for c in triton} == {"faster"}
    assert all(c.ratio == pytest.approx(0.95 / 1.20) for c in triton)
    assert {c.verdict for c in d.cases if c.impl != "triton"} == {"no change"}
    text = page.diff_summary()
    assert "`r1` (`v1-old`)" in text and f"{len(triton)} ran faster" in text and "none slower" in text
    assert triton[0].label in text and "no noise floor has been measured" in text.lower()
    fig = plot_data(page.diff_figure())
    assert {t["name"] for t in fig} == {"faster", "no change"}
    assert sorted(y for t in fig for y in t["y"]) == pytest.approx([c.ratio for c in sorted(d.cases, key=lambda c: c.ratio)])


def test_without_an_earlier_kernel_version_the_diff_section_says_there_is_no_before(tmp_path):
    page = _versioned(tmp_path, [("v1-old", 1.25), ("v1-old", 1.20)])
    assert page.before is None and "no before to compare with" in page.diff_summary() and page.diff_figure() == ""


def _fa4_runs(tmp_path, plan):
    """Runs (kernel version, whether it timed FlashAttention-4, device), ours at 1 ms, FlashAttention-2 (SDPA) at
    1.1 ms and FlashAttention-4, where timed, at 0.8 ms; the last narrated."""
    import dataclasses

    from collect.jsonio import write_json_atomic
    from collect.manifest_io import read_manifest
    from collect.schema.bench import BenchFile

    for i, (version, with_fa4, device) in enumerate(plan):
        bf = bench_file(f"r{i}", triton_ms=1.0, sdpa_ms=1.1)
        if with_fa4:
            fa4 = [dataclasses.replace(r, impl="fa4", backend_requested=None, backend_used=None,
                                       latency_ms_median=r.latency_ms_median * 0.8, latency_ms_p10=r.latency_ms_p10 * 0.8,
                                       latency_ms_p90=r.latency_ms_p90 * 0.8, tflops=r.tflops / 0.8)
                   for r in bf.rows if r.impl == "sdpa-flash"]
            bf = BenchFile(**{**bf.__dict__, "rows": bf.rows + fa4})
        run_dir = write_run(tmp_path, f"r{i}", device=device, created=f"2026-11-{10 + i:02d}T08:00:00+00:00", bench=bf,
                            phases=("bench",))
        m = read_manifest(run_dir / "manifest.json")
        m.kernel_version = version
        write_json_atomic(run_dir / "manifest.json", m)
    runs = load_runs(tmp_path)
    return ComparePage(runs[-1], runs, [])


def test_across_two_gpus_the_diff_section_says_so_once_and_describes_no_verdict_it_did_not_give(tmp_path):
    """Runs h200-20261205b and h100-20261205b: every case "ratio only". The summary said the two GPUs twice (its
    sentence, then the diff's note word for word), and the paragraph under it spoke of "the verdicts above" and of a
    default floor "said above", neither of which was there."""
    page = _versioned(tmp_path, [("v1-old", 1.20), ("v2-new", 0.95)], devices=["NVIDIA A100-SXM4-80GB", "NVIDIA H200"])
    assert not page.diff.same_device and {c.verdict for c in page.diff_cases} == {"ratio only"}
    summary = page.diff_summary()
    assert summary.count("two GPUs") == 1 and any("two GPUs" in n for n in page.diff.notes)
    # the predecessor ships another kernel version, so a ratio across two GPUs is never only the GPUs'
    assert "not a change of code" not in summary and "carry the change of code as well (`v1-old` to `v2-new`" in summary
    method = page.diff_method()
    assert "A verdict needs two runs of one GPU, which these two are not" in method
    assert "above" not in method  # nothing above holds a verdict or a floor to point to
    assert "One run or both kept no time per call behind their medians, so no ratio has an interval." in method
    fig = page.diff_figure()
    assert "noise floor" not in json.dumps(plot_data(fig)) and "in one colour" in fig


def test_on_one_gpu_the_diff_paragraph_points_to_the_verdicts_and_the_floor_note_it_has(tmp_path):
    import dataclasses

    from render import fmt

    page = _versioned(tmp_path, [("v1-old", 1.20), ("v2-new", 0.95)])
    method = page.diff_method()
    assert "computes the verdicts above the same way" in method and "A verdict needs" not in method
    # no noise file: every case defaulted, and the diff's own note says so above the paragraph
    assert any("default" in n for n in page.diff.notes) and "no noise floor has been measured" in \
        page.diff_summary().lower()
    assert "held to a default floor, as the note above says." in method
    # without such a note the paragraph gives the default floor and its count itself
    page.__dict__["diff"] = dataclasses.replace(page.diff, notes=[])
    n = len(page.diff_cases)
    assert (f"held to a default floor of {fmt.ratio(page.diff.default_floor)} ({n} cases here)."
            in page.diff_method())
    fig = page.diff_figure()
    assert "noise floor" in json.dumps(plot_data(fig)) and "coloured by verdict" in fig


def test_a_run_that_measured_flashattention_4_names_it_as_the_rival(tmp_path):
    """The history's rival changes where one run measured FA4 and the others did not: the table and the
    sentence say against whom each ratio was taken."""
    page = _fa4_runs(tmp_path, (("v1", False, "NVIDIA H200"), ("v2", False, "NVIDIA H200"), ("v2", True, "NVIDIA H200")))
    table = page.history_table()
    assert "1.10× (p10s 1.10×, p90s 1.10×), against FlashAttention-2 (SDPA)" in table
    assert "0.880× (p10s 0.880×, p90s 0.880×), against FlashAttention-4" in table
    # FlashAttention-2 ran in every run: ours is followed against it too, so the change of opponent in r2 does not
    # read as a slower kernel
    assert page.yardstick == "sdpa-flash" and "Ours vs FlashAttention-2 (SDPA), d=64" in table
    said = page._history_sentence("d64", 2, 8, 64)
    assert "at 1.10× the speed of FlashAttention-2 (SDPA), which every run timed, with v1 and at 1.10× with v2" in said
    first = page.findings_first()
    assert ("The fastest other implementation changed with what each run could measure: FlashAttention-2 (SDPA) in 2 "
            "runs (the first r0) and FlashAttention-4 in 1 run (the first r2).") in first
    assert "Against the fastest other implementation, ours ran at 0.880× to 1.10× at d=64 with v2." in first
    fig = plot_data(page.history_figure())
    names = [t["name"] for t in fig]
    assert names == ["d=64 (B=2, H=8), against the fastest other: FlashAttention-2 (SDPA)",
                     "d=64 (B=2, H=8), against the fastest other: FlashAttention-4",
                     "d=64 (B=2, H=8), against FlashAttention-2 (SDPA) (every run timed it)"]
    # where FlashAttention-2 was the fastest other its filled marker is that comparison: no ring repeats it, and its
    # cell points to the one beside rather than repeat the figures
    assert len(fig[2]["x"]) == 1 and fig[2]["x"] == fig[1]["x"]
    assert table.count("as beside: it was the fastest other") == 2
    assert fig[0]["marker"]["symbol"] != fig[1]["marker"]["symbol"]  # a change of opponent shows in the marker
    glance = page.summary_table()
    assert "against FlashAttention-4 (N=2048)" in glance and "against FlashAttention-2 (SDPA) (N=2048)" in glance
    # the forward-pass chart's hover names the quickest other implementation whichever it is, by the page's names
    hovers = {c for t in plot_data(page.bench_figure("tflops")) for c in t.get("customdata") or []}
    assert " (FlashAttention-4)" in hovers and " (FlashAttention-2 (SDPA))" in hovers


def test_the_yardstick_is_an_opponent_every_run_in_the_table_timed_whatever_its_device(tmp_path):
    """One H100 run that timed FlashAttention-4 among H200 runs that did not (the committed runs: nine H200 runs
    without it): the table shows every run, so its yardstick is one every run timed, not the narrated device's."""
    page = _fa4_runs(tmp_path, (("v1", False, "NVIDIA H200"), ("v1", False, "NVIDIA H200"),
                                ("v2", True, "NVIDIA H100 80GB HBM3")))
    assert page.yardstick == "sdpa-flash"
    table = page.history_table()
    yard = [re.findall(r"<td>(.*?)</td>", row)[5] for row in re.findall(r"<tr><td>.*?</tr>", table)]
    assert yard == ["as beside: it was the fastest other"] * 2 + ["1.10× (p10s 1.10×, p90s 1.10×)"]
    assert "Every run timed FlashAttention-2 (SDPA), the quickest in the narrated run of the opponents every run timed" \
        in table
    ring = plot_data(page.history_figure())[-1]
    assert ring["name"] == "d=64 (B=2, H=8), against FlashAttention-2 (SDPA) (every run timed it)" and len(ring["x"]) == 1


def _clocked(tmp_path, plan):
    """Runs on one device, each (ours' median SM clock, FlashAttention-2's, its time over ours) at every row."""
    import dataclasses

    from collect.schema.bench import BenchFile

    for i, (ours_mhz, theirs_mhz, ratio) in enumerate(plan):
        bf = bench_file(f"r{i}", triton_ms=1.0, sdpa_ms=ratio)
        rows = [dataclasses.replace(r, sm_clock_mhz=ours_mhz if r.impl == "triton" else theirs_mhz) for r in bf.rows]
        write_run(tmp_path, f"r{i}", created=f"2026-11-{10 + i:02d}T08:00:00+00:00",
                  bench=BenchFile(**{**bf.__dict__, "rows": rows}), phases=("bench",))
    runs = load_runs(tmp_path)
    return ComparePage(runs[-1], runs, [])


def test_history_cells_at_clock_readings_far_apart_say_which_read_higher_and_nothing_more(tmp_path):
    """Run h200-20261203i at d=128: ours read 1899 MHz, FlashAttention-4 1677 MHz. The history cell says which read
    higher by Home's rule (vocab.clock_caveat), without a verdict rescaled by the readings; the caption says why."""
    page = _clocked(tmp_path, [(1900.0, 1860.0, 0.974), (1900.0, 1680.0, 0.974), (1700.0, 1900.0, 1.2)])
    table = page.history_table()
    cells = re.findall(r"<td>([^<]*against FlashAttention-2 \(SDPA\)[^<]*)</td>", table)
    assert len(cells) == 3
    # clocks 2% apart: within the gap, no mark
    assert cells[0].endswith("against FlashAttention-2 (SDPA)")
    # ours 13% above theirs, or below: the mark alone, no verdict at equal clocks
    assert cells[1].endswith("; ours at a higher clock reading") and cells[2].endswith("; ours at a lower clock reading")
    assert "equal clocks" not in table
    assert ("at a higher (lower) clock reading: ours had a median SM clock reading more than 3% above (below) the "
            "other's, a lean the verdict may owe to the clock; a reading is of the rest before each call, so it does "
            "not say by how much") in html.unescape(table)
    hover = [h for t in plot_data(page.history_figure()) for h in t["hovertext"]]
    assert any("ours at a higher clock reading" in h for h in hover) and not any("equal clocks" in h for h in hover)
    # no clock far apart: no mark and no caption for it
    plain = _clocked(tmp_path / "plain", [(1900.0, 1890.0, 0.974), (1900.0, 1900.0, 1.2)]).history_table()
    assert "clock" not in plain
    # every reading under the device's 1980 MHz maximum: the marks stand without a word on the readings' error
    assert "The clock readings are of the rest" not in table


def test_history_clock_marks_say_how_far_a_marked_runs_readings_pass_the_devices_maximum(tmp_path):
    """On run h100-20261205b some readings lie 5.2% above the device's maximum SM clock, more than the 3% gap a mark
    rests on: the caption says so, naming the marked run with the largest overshoot, and counts only marked runs."""
    page = _clocked(tmp_path, [(2100.0, 1870.0, 0.974), (2040.0, 1900.0, 0.974), (2100.0, 2090.0, 1.2)])
    table = page.history_table()
    # r2 reads above the maximum too, but its clocks are 0.5% apart: no mark there, so it is not counted
    assert ("The clock readings are of the rest before each call, not of the call: in both marked runs some read "
            "above the device&#x27;s reported maximum SM clock, by up to 6.1% (run r0), so there a gap of that size or "
            "less need not be one between the calls&#x27; own clocks"
            in table)


def _copies(tmp_path, plan, references: bool = True):
    """Runs (device, copy bandwidth median, p10, p90 in TB/s), each with the default bench."""
    from collect.jsonio import write_json_atomic
    from collect.manifest_io import read_manifest

    for i, (device, med, p10, p90) in enumerate(plan):
        run_dir = write_run(tmp_path, f"r{i}", device=device, created=f"2026-11-{10 + i:02d}T08:00:00+00:00",
                            phases=("bench",))
        m = read_manifest(run_dir / "manifest.json")
        c = next(c for c in m.measured_ceilings if c.name == "copy_bandwidth")
        c.per_s_median, c.per_s_p10, c.per_s_p90 = med * 1e12, p10 * 1e12, p90 * 1e12
        write_json_atomic(run_dir / "manifest.json", m)
    if references:
        shutil.copytree(ROOT / "data" / "reference", tmp_path / "reference")
    runs = load_runs(tmp_path)
    return ComparePage(runs[-1], runs, load_references(tmp_path) if references else [])


def test_copy_bandwidth_ranks_devices_not_runs_and_counts_published_figures_apart(tmp_path):
    """The committed H200 runs copy within 0.1% of one another: naming the quickest run ranked one GPU's runs inside
    their noise. Each device is the range of its runs, fastest device first; the published T4 is no measured run."""
    page = _copies(tmp_path, [("NVIDIA H200", 4.2528, 4.246, 4.260), ("NVIDIA A100-SXM4-80GB", 1.80, 1.79, 1.81),
                              ("NVIDIA H200", 4.2513, 4.245, 4.258), ("NVIDIA H200", 4.2230, 4.216, 4.229)])
    said = page._device_sentences()
    assert said[0] == ("Copy bandwidth by device, fastest first: the NVIDIA H200 at 4.22 TB/s to 4.25 TB/s over its 3 "
                       "runs and the NVIDIA A100-SXM4-80GB at 1.80 TB/s in its one run.")
    assert "r0" not in said[0] and "no ranking" not in said[0]
    assert said[1] == ("At the study shape, our Triton kernel beats naive PyTorch at the longest length both ran in all "
                       "4 measured runs with data, but not in the published figures for the Tesla T4 (t4-published).")
    # two devices whose runs overlap: listed by their medians, but not ranked
    tied = _copies(tmp_path / "tied", [("NVIDIA H200", 4.0, 3.9, 4.1), ("NVIDIA A100-SXM4-80GB", 3.95, 3.9, 4.0)],
                   references=False)._device_sentences()
    assert tied[0].endswith("; the runs of the NVIDIA H200 and the NVIDIA A100-SXM4-80GB overlap, so their order is no "
                            "ranking.")
    # one device: its runs' range, no ranking at all
    one = _copies(tmp_path / "one", [("NVIDIA H200", 4.25, 4.24, 4.26), ("NVIDIA H200", 4.22, 4.21, 4.23)],
                  references=False)._device_sentences()
    assert one[0] == "The NVIDIA H200 copies memory at 4.22 TB/s to 4.25 TB/s over its 2 runs."


def test_every_implementation_is_ours_a_rival_or_context():
    """One classification (render/vocab.py) for every implementation a run can hold: the diff's "our own code",
    the Benchmarks page's "fastest other implementation" and the Correctness page's comparison rows read it."""
    from collect.correctness import PORTED
    from collect.schema.decode import ALL_VARIANTS
    from kernels.attention import IMPLEMENTATIONS
    from render.vocab import is_ours, is_rival

    ours = {"triton", "triton-portable", *PORTED, "v0-portable", "v21-per-shape", "eager", "graph", "persistent",
            "int8-graph", "int8-dequant", "int8-kernel"}
    rivals = {"fa4", "sdpa", "sdpa-flash", "sdpa-cudnn", "sdpa-efficient"}
    context = {"naive", "sdpa-math", "hf", "hf-eager", "hf-generate", "hf-compiled"}  # baselines, never rivals
    assert set(IMPLEMENTATIONS) | set(PORTED) | set(ALL_VARIANTS) <= ours | rivals | context
    assert {i for i in ours | rivals | context if is_ours(i)} == ours
    assert {i for i in ours | rivals | context if is_rival(i)} == rivals


def _paced_runs(tmp_path):
    """Three repeats of v1 at one commit, then a v1 run and a v2 run. Our kernel's host-bound lengths (N=512 and 1024:
    loops three times the device time, a host time to explain it) swing by up to 20% between repeats, its GPU-bound
    ones by a few tenths of a percent; v2 is 3% faster where the GPU sets the pace and, on a slower host, 30% slower
    where the host does. The noise file is measured from the repeats as `python -m collect noise` measures it."""
    import dataclasses

    import synthetic_report as S
    from collect.diff import load_run_cases
    from collect.jsonio import write_json_atomic
    from collect.manifest_io import read_manifest
    from collect.noise import default_path, measure
    from collect.schema.bench import BenchFile
    from collect.schema.common import tflops

    def scaled(host_f, gpu_f):
        rows = []
        for r in S.bench_rows(ns=(512, 1024, 2048, 4096, 8192, 16384), host_us=30.0,
                              loop_factor=lambda impl, n: 3.0 if n <= 1024 else 1.0):
            f = (host_f if r.seq_len <= 1024 else gpu_f) if r.impl == "triton" else 1.0
            t = r.latency_ms_median * f
            rows.append(dataclasses.replace(r, latency_ms_median=t, latency_ms_p10=r.latency_ms_p10 * f,
                                            latency_ms_p90=r.latency_ms_p90 * f, loop_ms_median=r.loop_ms_median * f,
                                            loop_ms_p10=r.loop_ms_p10 * f, loop_ms_p90=r.loop_ms_p90 * f,
                                            tflops=tflops(r.flops, t)))
        return rows

    plan = [("r0", "v1", 1.0, 1.0), ("r1", "v1", 1.1, 1.002), ("r2", "v1", 0.92, 0.999), ("r3", "v1", 1.0, 1.0),
            ("r4", "v2", 1.3, 0.97)]
    for i, (rid, version, host_f, gpu_f) in enumerate(plan):
        bf = BenchFile(schema_version=SCHEMA_VERSION, run_id=rid, profile="quick", timing_method="synthetic",
                       backend_choice_method="synthetic", min_timed_runs=50, rows=scaled(host_f, gpu_f))
        run_dir = write_run(tmp_path, rid, created=f"2026-11-{10 + i:02d}T08:00:00+00:00", bench=bf, phases=("bench",))
        m = read_manifest(run_dir / "manifest.json")
        m.kernel_version, m.git_commit, m.git_dirty = version, "abc1234", False
        write_json_atomic(run_dir / "manifest.json", m)
    noise = measure([load_run_cases(tmp_path / "runs" / rid) for rid in ("r0", "r1", "r2")])
    write_json_atomic(default_path(tmp_path, "NVIDIA H200"), noise)
    runs = load_runs(tmp_path)
    return ComparePage(runs[-1], runs, []), noise


def test_host_bound_cases_are_told_apart_and_held_to_a_floor_of_their_own_pace(tmp_path):
    import dataclasses

    from collect.diff import compare, load_run_cases

    page, noise = _paced_runs(tmp_path)
    assert page.before.id == "r3"
    ours = {c.label: c for c in page.diff_cases if c.impl == "triton"}
    gpu = [c for c in ours.values() if c.host_bound is False]
    host = [c for c in ours.values() if c.host_bound]
    assert len(gpu) == 4 and len(host) == 2
    # held to the floor of its own pace the 3% gain shows ...
    assert {c.verdict for c in gpu} == {"faster"} and all(c.floor_source == "paced" and c.floor < 1.01 for c in gpu)
    # ... which the class's floor pooled over both paces, set by the host's swings, hides
    pooled = dataclasses.replace(noise, classes=[k for k in noise.classes if k.host_bound is None])
    a, b = (load_run_cases(tmp_path / "runs" / r) for r in ("r3", "r4"))
    assert {c.verdict for c in compare(a, b, pooled).cases if c.case in {g.case for g in gpu}} == {"no change"}
    # too few pairs for a floor of their own pace: the class's pooled floor holds the host-bound cases
    assert {(c.floor_source, c.verdict) for c in host} == {("measured", "slower")} and host[0].floor > 1.1
    text = page.diff_summary()
    assert "Our kernel as it ships (Triton (ours)), where the GPU set the pace: of its 4 cases both runs measured, " \
           "4 ran faster in `r4`, none slower" in text
    assert "Its 2 host-bound cases are counted with the host's below." in text
    # ours moved 3% while the implementations it is measured against stayed: ours' change, beyond what moved them
    assert "ours moved beyond what moved them" in text and "moved about as much" not in text
    assert "Across every implementation, " in text  # the host-bound count is not read as ours
    assert "ran host-bound in one run or both" in text and "held to the floor of their class and pace" in text
    fig = plot_data(page.diff_figure())
    assert "slower, host-bound" in {t["name"] for t in fig}
    assert all(t["marker"]["symbol"] == ("circle-open" if "host-bound" in t["name"] else "circle") for t in fig)


def test_the_page_and_collect_diff_give_the_committed_newest_run_pair_the_same_verdicts(tmp_path):
    """One computation: `python -m collect diff` on the newest committed run and its predecessor (the pair the Compare
    page narrates, render.run_diff.predecessor) gives every case the pace, floor and verdict the page shows."""
    import subprocess
    import sys

    from render.run_diff import predecessor
    from render.validate import load_validated
    from collect.schema.diff import DiffFile

    runs = load_runs(ROOT / "data")
    page = ComparePage(runs[-1], runs, [])
    before = predecessor(page.run, runs)
    assert before is not None and page.before.id == before.id
    out = tmp_path / "diff.json"
    cli = subprocess.run([sys.executable, "-m", "collect", "diff", before.id, page.run.id, "--json", str(out)],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert cli.returncode == 0, cli.stderr
    made = load_validated(out, DiffFile)
    shown = {c.case: (c.host_bound, c.floor_source, c.floor, c.verdict) for c in page.diff_cases}
    assert shown == {c.case: (c.host_bound, c.floor_source, c.floor, c.verdict) for c in made.cases}
    assert any(v[1] == "paced" for v in shown.values()) and made.notes == page.diff.notes


def test_a_long_call_whose_loop_runs_hot_is_not_host_bound():
    from collect import pace
    from render.vocab import host_bound

    assert host_bound is pace.host_bound  # one rule: the pages read collect's
    # a 12.8 ms call whose loop ran 26% slower with 36 us of host time: the power limit, not the host
    assert host_bound(12.8, 16.1, 0.036) is False
    # a 19 us call at the same loop ratio with 18 us of host time: the host can explain it
    assert host_bound(0.019, 0.0276, 0.018) is True
    assert host_bound(0.019, 0.0276) is True and host_bound(0.019, 0.02, 0.5) is False
    assert host_bound(None, 0.02) is None


def test_cases_of_unrecorded_pace_are_not_counted_as_gpu_bound(tmp_path, monkeypatch):
    """model.generate's decode loops keep no kernel time, so neither run can say whether the host set their pace:
    their changes (0.40-0.59x the time between runs g and a, the host's doing) are tallied apart from the GPU-bound
    cases, not with them."""
    import dataclasses

    from render.pages.compare.before_after import BeforeAfter

    page = _versioned(tmp_path, [("v1-old", 1.20), ("v2-new", 0.95)])
    base = next(c for c in page.diff.cases if c.impl != "triton")
    gpu = dataclasses.replace(base, host_bound=False, ratio=1.0, verdict="no change")
    generate = dataclasses.replace(base, case="decode/hf-generate", label="decode gpt2 hf-generate B4 ctx1000",
                                   host_bound=None, ratio=0.5, verdict="faster")
    monkeypatch.setattr(BeforeAfter, "diff_cases", property(lambda self: [gpu, gpu, generate]))
    text = page._others_sentence()
    assert "GPU-bound: none faster, none slower and 2 unchanged." in text
    assert "of unrecorded pace" in text and "1 faster" in text
    assert "decode gpt2 hf-generate B4 ctx1000 (0.500× the time)" in text
    assert text.index("GPU-bound") < text.index("unrecorded")


def test_the_devices_figure_counts_a_call_s_dram_bytes_as_the_profiling_page_does():
    # An output still in L2 when the counters stop shows as a few bytes written: the devices figure counts the writes
    # as at least the output, as Home and the Profiling page do, so the same call has one figure on every page.
    from render import model

    row = pd.Series({"dram_read_bytes": 1.2e7, "dram_write_bytes": 1e3, "batch": 2, "heads": 8, "seq_len": 2048,
                     "head_dim": 64, "dtype": "float16"})
    assert ComparePage._dram(row) == model.call_dram_bytes(row) == 1.2e7 + model.output_bytes(2048, 64, 2, 16)


def test_ours_moving_as_much_as_the_unchanged_implementations_is_the_machines_shift(tmp_path):
    """Run h200-20261205f against h200-20261205b: ours 0.986 at the median, cuDNN 0.990, FlashAttention-4 0.987; the
    page had credited the version with 27 cases faster. Where the implementations whose code did not change moved
    as much (within ours' noise floor), the sentence says the shift is the machine's."""
    import dataclasses
    import types

    from render.pages.compare.before_after import BeforeAfter

    page, _ = _paced_runs(tmp_path)
    mine = [c for c in page.diff_cases if c.impl == "triton" and c.host_bound is False]
    others = [c for c in page.diff_cases if c.impl != "triton" and c.host_bound is False and not c.impl.startswith("triton")]
    assert mine and others
    shifted = [dataclasses.replace(c, ratio=mine[0].ratio) for c in others]  # they moved with ours
    words = BeforeAfter._beside_unchanged(types.SimpleNamespace(diff_cases=[*mine, *shifted]), mine)
    assert "moved about as much" in words and "the shift is the machine's or a library's" in words
    stayed = [dataclasses.replace(c, ratio=1.0) for c in others]
    words = BeforeAfter._beside_unchanged(types.SimpleNamespace(diff_cases=[*mine, *stayed]), mine)
    assert "ours moved beyond what moved them" in words and "about as much" not in words
    assert BeforeAfter._beside_unchanged(types.SimpleNamespace(diff_cases=mine), mine) == ""  # nothing to set beside


def test_the_decode_chart_names_panels_whose_runs_ran_different_steps_and_those_the_host_paces():
    from render.pages.compare import ComparePage
    from render.runs import load_runs

    runs = load_runs(ROOT / "data")
    page = ComparePage(runs[-1], runs, [])
    caption = html.unescape(page.decode_figure())
    steps = {}
    for r in runs:
        d = r.phase("decode")
        if d is None:
            continue
        for row in d.rows:
            if row.model == "gpt2" and row.variant == "persistent" and row.status == "ok" and row.step_impl:
                steps.setdefault(row.step_impl, set()).add(r.id)
    if len(steps) > 1:  # the committed runs hold both persistent steps
        assert "the bf16, persistent step panel's runs ran different steps (" in caption.lower()
        for impl, ids in steps.items():
            assert f"{impl} in {len(ids)} run" in caption
    assert "time the host's CPU as much as the GPU" in caption and "transformers loop" in caption


def test_the_history_figure_outlines_runs_on_another_gpu_than_most():
    from render.runs import load_runs

    runs = load_runs(ROOT / "data")
    page = ComparePage(runs[-1], runs, [])
    fig = page.history_figure()
    devices = set(page.history["device"])
    if len(devices) < 2:
        return
    usual = page.history["device"].mode().iloc[0]
    assert f"outlined: runs on another GPU than most runs' ({usual})" in html.unescape(fig)
    widths = [w for t in plot_data(fig) if t.get("marker", {}).get("symbol") != "circle-open"
              for w in t["marker"]["line"]["width"]]
    assert 2 in widths and 0 in widths
