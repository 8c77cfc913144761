"""MkDocs hook, kept thin: render each page's Jinja2 over data/, ship plotly.js and the validated
data files, watch data/, and give MkDocs the navigation of the phase registry.

The rendering itself lives in render/site.py and is testable without MkDocs. `mkdocs build` stops
on bad data with the message; `mkdocs serve` never does: it keeps serving the last data that
validated (or, before any did, a page that says what is wrong) with the error at the top of every
page, and rebuilds once the file is fixed.
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # the hook is loaded by path; make the repo's packages importable
    sys.path.insert(0, str(ROOT))

from mkdocs.exceptions import PluginError  # noqa: E402
from mkdocs.structure.files import File  # noqa: E402

from render import escape  # noqa: E402
from render.errors import DataError  # noqa: E402
from render.provenance import provenance  # noqa: E402
from render.site import DATA_DIR, Report, after_title, nav  # noqa: E402

_command = "build"
_report: Report | None = None  # the last data that validated
_error: str | None = None  # why the current data does not (serve only)


def on_startup(command, dirty):
    global _command
    _command = command


def _serving() -> bool:
    return _command == "serve"


def on_config(config):
    global _report, _error
    config["nav"] = nav()  # the pages and their order come from the phase registry, not from mkdocs.yml
    try:
        _report, _error = Report.load(DATA_DIR, (config.get("extra") or {}).get("run") or None), None
    except DataError as exc:
        if not _serving():
            raise PluginError(f"report data: {exc}") from None
        _error = str(exc)
        print(f"report data: {exc}\n(serving the last data that validated until this is fixed)", file=sys.stderr)
    config["extra"]["report_run"] = _report.run.id if _report else None
    config["extra"]["report_provenance"] = provenance(_report.run) if _report else None
    return config


def on_files(files, config):
    import plotly

    js = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    files.append(File.generated(config, "assets/javascripts/plotly.min.js", abs_src_path=str(js)))
    # Only the narrated run's files are published raw (the Data format page links them; every run's are in the
    # repository), as the text that validated: the path may since have become another file (serve keeps the
    # last good data while a file is broken), even a FIFO that would block the copy.
    for run in [_report.run] if _report else []:
        for name, text in run.published():
            files.append(File.generated(config, f"data/{run.id}/{name}", content=text))
    return files


def error_note(message: str, stale: bool) -> str:
    """The data error at the top of a page while serving (the message quotes data: escaped)."""
    what = ("This page shows the last data that validated." if stale
            else "No run has validated yet, so there is nothing to show.")
    return (f'!!! failure "The data does not validate"\n'
            f"    {escape.text(what)} Fix the file and save it: the site rebuilds by itself.\n\n"
            f"    {escape.code_block(message)}\n\n")


def on_page_markdown(markdown, page, config, files):
    if _report is None:
        return f"# {escape.text(page.title or 'Report')}\n\n" + error_note(_error or "no data", stale=False)
    try:
        out = _report.render_markdown(markdown, page.file.src_uri)
    except DataError as exc:
        if not _serving():
            raise PluginError(f"report data: {exc}") from None
        return error_note(str(exc), stale=False)
    except Exception as exc:
        if not _serving():
            raise PluginError(f"{page.file.src_uri}: rendering failed: {type(exc).__name__}: {exc}") from exc
        return error_note(f"{page.file.src_uri}: rendering failed: {type(exc).__name__}: {exc}", stale=False)
    return after_title(out, error_note(_error, stale=True)) if _error else out


def on_serve(server, config, builder):
    server.watch(str(DATA_DIR))
    server.watch(str(ROOT / "render"))
    return server
