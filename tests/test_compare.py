"""The Device comparison page: every run plus the published references, one chart per question, readable at scale."""
from __future__ import annotations

import json
import re
import shutil

import pandas as pd
import pytest

from conftest import ROOT
from render.pages.compare import MAX_SHOWN, PUBLISHED_WORDS, ComparePage
from render.runs import load_references, load_runs
from render.site import Report
from test_home import bench_file, write_run

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
    assert out.count('class="report-figure"') == 7


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
    assert ComparePage._dram(pd.Series({"dram_read_bytes": 6e8, "dram_write_bytes": 4e8})) == 1e9
    assert ComparePage._dram(pd.Series({"dram_read_bytes": None, "dram_write_bytes": None})) is None


def test_the_site_page_loads_references_from_the_data_folder(tmp_path):
    write_run(tmp_path, "r00", phases=())
    shutil.copytree(ROOT / "data" / "reference", tmp_path / "reference")
    out = Report.load(tmp_path).render_markdown((ROOT / "docs" / "compare.md").read_text(), "compare.md")
    assert "Tesla T4: published figures, not re-measured here" in out and "{{" not in out
