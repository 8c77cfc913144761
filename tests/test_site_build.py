"""The site: builds --strict from committed data, works offline, fails loudly on bad data."""
import json
import re
import subprocess
import sys

import yaml
from pathlib import Path

import synthetic
from conftest import ROOT, mkdocs_build
from collect.schema import site_pages
from collect.schema.reader import GZIP_SUFFIX, read_json
from render.site import Report


def nav_pages():
    return [p.doc for p in site_pages()]  # the hook's nav (render/site.py nav)


def html_path(site, md):
    return site / ("index.html" if md == "index.md" else md.replace(".md", "/index.html"))


def test_every_nav_page_is_built(built_site):
    for md in nav_pages():
        assert html_path(built_site, md).exists(), md
    # and the site's navigation lists them in the registry's order
    links = re.findall(r'<a href="([^"#]*)" class="md-nav__link', (built_site / "index.html").read_text())
    assert links == ["." if md == "index.md" else md.replace(".md", "/") for md in nav_pages()]


def test_plotly_loaded_once_from_the_site_and_no_web_fonts(built_site):
    assert (built_site / "assets/javascripts/plotly.min.js").stat().st_size > 1_000_000
    for md in nav_pages():
        text = html_path(built_site, md).read_text()
        assert len(re.findall(r"<script[^>]+plotly\.min\.js", text)) == 1, md
        assert "cdn.plot.ly" not in text and "fonts.googleapis" not in text and "fonts.gstatic" not in text, md


def test_raw_json_is_published(built_site):
    # Every validated file of the narrated run, under its plain name (a file kept compressed is published as JSON).
    report = Report.load()
    assert len(report.run.files) > 1
    for p in report.run.files:
        name = p.name.removesuffix(GZIP_SUFFIX)
        assert json.loads((built_site / "data" / report.run.id / name).read_text()) == read_json(p)


def test_rendering_is_deterministic():
    page = (ROOT / "docs" / "hardware.md").read_text()
    a, b = Report.load().render_markdown(page), Report.load().render_markdown(page)
    assert a == b and 'id="fig-hardware-ceilings"' in a


def test_every_page_renders_the_missing_note_for_a_bare_run(tmp_path):
    """A run with only a manifest (env failed too) renders every page without error."""
    run_dir = synthetic.make_run(tmp_path, "bare-1")
    m = json.loads((run_dir / "manifest.json").read_text())
    m["phases"][0]["status"] = "failed"
    m["phases"][0]["error"] = "RuntimeError: synthetic"
    (run_dir / "manifest.json").write_text(json.dumps(m))
    report = Report.load(tmp_path)
    for md in nav_pages():
        out = report.render_markdown((ROOT / "docs" / md).read_text(), md)
        assert "{{" not in out and "{%" not in out
    assert "Not collected in this run" in report.render_markdown((ROOT / "docs" / "hardware.md").read_text())


def test_bad_data_fails_the_build_naming_file_and_field(tmp_path):
    run_dir = synthetic.make_run(tmp_path, "bad-1")
    m = json.loads((run_dir / "manifest.json").read_text())
    m["device"]["sm_count"] = "lots"
    (run_dir / "manifest.json").write_text(json.dumps(m))
    proc = mkdocs_build(tmp_path / "site", data_dir=tmp_path)
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "manifest.json" in out and "device.sm_count" in out and "'lots'" in out


def test_empty_data_fails_the_build_with_advice(tmp_path):
    proc = mkdocs_build(tmp_path / "site", data_dir=tmp_path)
    assert proc.returncode != 0 and "no runs found" in proc.stdout + proc.stderr


def test_render_never_imports_torch():
    code = ("import sys; from render.site import Report; import render.pages as p; r = Report.load(); "
            "r.context(); bad = [m for m in ('torch', 'triton') if m in sys.modules]; "
            "print(bad); sys.exit(1 if bad else 0)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# ---- quality gates ------------------------------------------------------------------------------

UNIT = r"(ms|us|µs|GB/s|TB/s|GB|MB|GiB|MiB|KiB|TFLOP/s|TFLOPs|FLOP/s|tokens/s|%|x|×)"


def typed_numbers(text: str) -> list[str]:
    """Numbers with a unit in page prose, outside template expressions and code."""
    stripped = re.sub(r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}|```.*?```|`[^`]*`", "", text, flags=re.S)
    return [m.group(0) for m in re.finditer(r"\b\d+(\.\d+)?\s?" + UNIT + r"(?![A-Za-z])", stripped)]


def test_typed_number_check_catches_a_typed_number():
    assert typed_numbers("The kernel ran at 12.5 TFLOP/s and used 3 GiB.") == ["12.5 TFLOP/s", "3 GiB"]
    assert typed_numbers("It ran at {{ fmt.flops(x) }} in `0.5 ms` code.") == []


def test_no_measured_number_is_typed_into_docs():
    hits = {p.name: typed_numbers(p.read_text()) for p in sorted((ROOT / "docs").glob("**/*.md"))}
    assert {k: v for k, v in hits.items() if v} == {}


def test_pages_are_small_enough(built_site):
    for md in nav_pages():
        size = html_path(built_site, md).stat().st_size
        assert size <= 1_000_000, f"{md} is {size} bytes; keep a page under 1 MB (fewer traces, facets or dropdowns)"


def test_every_figure_has_a_caption_and_every_plot_is_a_figure(built_site):
    for md in nav_pages():
        text = html_path(built_site, md).read_text()
        figures = re.findall(r'<figure class="report-figure".*?</figure>', text, flags=re.S)
        for fig in figures:
            cap = re.search(r"<figcaption>(.*?)</figcaption>", fig, flags=re.S)
            assert cap and len(cap.group(1).strip()) > 20, f"{md}: a figure without a real caption"
        assert text.count("Plotly.newPlot") == len(figures), f"{md}: a plot outside a captioned figure"


def test_no_broken_internal_links(built_site):
    cfg = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)
    site_url = cfg["site_url"][-1] if isinstance(cfg["site_url"], list) else cfg["site_url"]  # !ENV [VAR, default]
    prefix = "/" + site_url.split("://", 1)[-1].split("/", 1)[-1].strip("/")
    broken = []
    for page in built_site.rglob("*.html"):
        for href in re.findall(r'(?:href|src)="([^"#?]+)', page.read_text()):
            if re.match(r"^[a-z]+:", href) or href.startswith("//"):
                continue
            if href.startswith("/"):  # 404.html links absolutely, under site_url's path
                href = str(built_site) + "/" + href[len(prefix):].lstrip("/") if href.startswith(prefix) else href
                target = Path(href)
            else:
                target = (page.parent / href).resolve()
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{page.relative_to(built_site)} -> {href}")
    assert broken == []


def test_the_narrated_run_is_the_newest_whose_every_phase_completed(tmp_path):
    """A newer bench-only repeat, or a collect stopped partway, stays in the history but is not narrated."""
    from collect.schema import PHASES
    from render.runs import is_complete, load_runs, select_run

    def run(run_id, created, names, last="complete"):
        d = synthetic.make_run(tmp_path, run_id, created=created)
        m = json.loads((d / "manifest.json").read_text())
        m["phases"] = [dict(m["phases"][0], name=n, status="complete" if n != names[-1] else last, file=None)
                       for n in names]
        (d / "manifest.json").write_text(json.dumps(m))

    every = [p.name for p in PHASES]
    run("full-20261201", "2026-12-01T08:00:00+00:00", every)
    run("stopped-20261202", "2026-12-02T08:00:00+00:00", every, last="partial")
    run("repeat-20261203", "2026-12-03T08:00:00+00:00", ["env", "bench"])
    runs = load_runs(tmp_path)
    assert [r.id for r in runs][-1] == "repeat-20261203" and [is_complete(r) for r in runs] == [True, False, False]
    assert select_run(runs).id == "full-20261201"
    assert select_run(runs, "repeat-20261203").id == "repeat-20261203"  # asked for by name, any run narrates
