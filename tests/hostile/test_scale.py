"""A run with ten times the committed rows, all distinct cases: every row validates, none is dropped,
and every page renders (how long that takes is measured by scripts/measure_build_scale.py)."""
import importlib.util
import json

from conftest import ROOT
from hostile import corpus
from render.site import Report
from test_site_build import nav_pages


def _scale_script():
    spec = importlib.util.spec_from_file_location("measure_build_scale", ROOT / "scripts" / "measure_build_scale.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_ten_times_the_rows_keeps_every_row_and_renders_every_page(tmp_path):
    scale = _scale_script()
    src = corpus.source_run()
    counts = scale.copy_run(src, tmp_path / "runs", src.name, 0, 10)
    report = Report.load(tmp_path)
    run = report.run
    for name, tables in scale.MEASURED.items():
        if not (src / name).exists():
            continue
        original = json.loads((src / name).read_text())
        phase = name.removesuffix(".json")
        for table in tables:
            assert len(getattr(run.phase(phase), table)) == 10 * len(original.get(table) or []), (name, table)
        assert counts[name] == 10 * sum(len(original.get(t) or []) for t in tables)
    for md in nav_pages():
        out = report.render_markdown((ROOT / "docs" / md).read_text(), md)
        assert "{{" not in out, md
