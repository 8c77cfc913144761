"""MkDocs hook, kept thin: render each page's Jinja2 over data/, ship plotly.js, watch data/.

The rendering itself lives in render/site.py and is testable without MkDocs.
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # the hook is loaded by path; make the repo's packages importable
    sys.path.insert(0, str(ROOT))

from mkdocs.exceptions import PluginError  # noqa: E402
from mkdocs.structure.files import File  # noqa: E402

from render.errors import DataError  # noqa: E402
from render.provenance import provenance  # noqa: E402
from render.site import DATA_DIR, Report  # noqa: E402

_report: Report | None = None


def on_config(config):
    global _report
    try:
        _report = Report.load(DATA_DIR, (config.get("extra") or {}).get("run") or None)
    except DataError as exc:
        raise PluginError(f"report data: {exc}") from None
    config["extra"]["report_run"] = _report.run.id
    config["extra"]["report_provenance"] = provenance(_report.run)
    return config


def on_files(files, config):
    import plotly

    js = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    files.append(File.generated(config, "assets/javascripts/plotly.min.js", abs_src_path=str(js)))
    for run in _report.runs if _report else []:
        for path in sorted(run.path.glob("*.json")):
            files.append(File.generated(config, f"data/{run.id}/{path.name}", abs_src_path=str(path)))
    return files


def on_page_markdown(markdown, page, config, files):
    try:
        return _report.render_markdown(markdown, page.file.src_uri)
    except DataError as exc:
        raise PluginError(f"report data: {exc}") from None
    except Exception as exc:
        raise PluginError(f"{page.file.src_uri}: rendering failed: {type(exc).__name__}: {exc}") from exc


def on_serve(server, config, builder):
    server.watch(str(DATA_DIR))
    server.watch(str(ROOT / "render"))
    return server
