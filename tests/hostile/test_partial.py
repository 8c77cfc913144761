"""A phase the manifest still calls `running` crashed (or is still collecting): every page that shows
its data says the data is partial, and no page calls it complete."""
import json
import re

import pytest

from conftest import ROOT
from hostile import corpus
from render.site import Report
from test_site_build import nav_pages


@pytest.fixture
def crashed_bench(tmp_path):
    run_dir = corpus.copy_run(tmp_path)
    m = json.loads((run_dir / "manifest.json").read_text())
    for rec in m["phases"]:
        if rec["name"] == "bench":
            rec.update(status="running", duration_s=None, rows=None, error=None)
    (run_dir / "manifest.json").write_text(json.dumps(m))
    return Report.load(tmp_path)


def _render(report, md):
    return report.render_markdown((ROOT / "docs" / md).read_text(), md)


def test_pages_that_show_the_phase_say_it_is_partial(crashed_bench):
    for md in ("benchmarks.md", "byte-arithmetic.md"):
        out = _render(crashed_bench, md)
        assert re.search(r"!!! warning \"Partial data", out), f"{md} does not say its bench data is partial"
        assert "did not finish" in out


def test_home_and_reproduce_tables_call_it_partial(crashed_bench):
    home = _render(crashed_bench, "index.md")
    rows = [line for line in home.splitlines() if line.startswith("| `bench`")]
    assert rows and all("partial" in r and "collected in" not in r for r in rows), rows
    repro = _render(crashed_bench, "reproduce.md")
    assert re.search(r"<td>bench</td><td>partial", repro), "Reproduce's phase table does not call bench partial"


def test_no_page_calls_a_crashed_phase_complete(crashed_bench):
    for md in nav_pages():
        out = _render(crashed_bench, md)
        assert not re.search(r"\bbench\b[^\n]{0,80}\b(complete|completed)\b", out), md
        if md != "data-format.md":  # that page documents the statuses themselves
            # The raw status would show as a table cell or beside the phase's name; "running" in a kernel's notes
            # ("the running P V") is English, not the status.
            raw = re.search(r"(<td>|\|\s*)`?running`?(</td>|\s*\|)|\bbench\b[^.\n]{0,60}\brunning\b", out)
            assert raw is None, f"{md} shows the raw status 'running': {raw.group(0)!r}"


def test_an_older_runs_unfinished_phase_is_named_on_comparison_not_on_home(tmp_path):
    # The older run's bench stopped partway; the newer run, complete, is the one the report narrates.
    old = corpus.copy_run(tmp_path, "h200-20261201")
    m = json.loads((old / "manifest.json").read_text())
    for rec in m["phases"]:
        if rec["name"] == "bench":
            rec.update(status="partial", error="interrupted (Ctrl-C)")
    (old / "manifest.json").write_text(json.dumps(m))
    corpus.copy_run(tmp_path, "h200-20261202")
    report = Report.load(tmp_path)
    assert report.run.id == "h200-20261202"
    assert "Partial data" not in _render(report, "index.md")
    # Comparison names it where it describes the runs it compares, not as a warning over the narrated run's page
    compare = _render(report, "compare.md")
    assert "Partial data" not in compare
    assert "Run `h200-20261201` stopped during its bench phase, recorded as interrupted (Ctrl-C)." in compare


def test_comparison_counts_what_an_unfinished_phase_lacks_table_by_table(tmp_path):
    # The older run's profile stopped after saving its per-call rows but before its clock cross-check: the page
    # names that table, not "the cases after them", and the phases the collect never reached.
    old = corpus.copy_run(tmp_path, "h200-20261201")
    m = json.loads((old / "manifest.json").read_text())
    for rec in m["phases"]:
        if rec["name"] == "profile":
            rec.update(status="partial", error="interrupted (Ctrl-C)")
    m["phases"] = [rec for rec in m["phases"] if rec["name"] != "decode"]
    (old / "manifest.json").write_text(json.dumps(m))
    (old / "decode.json").unlink()
    prof = json.loads((old / "profile.json").read_text())
    full = len(prof["clock_check"])
    prof["clock_check"] = []
    (old / "profile.json").write_text(json.dumps(prof))
    corpus.copy_run(tmp_path, "h200-20261202")
    compare = _render(Report.load(tmp_path), "compare.md")
    assert (f"its <code>clock_check</code> table holds none of the {full} rows that run's does; every other table "
            "of the phase holds as many rows.") in compare
    assert "It has no decode phase: the collect stopped before it." in compare
