"""Plain-Python rendering of a page's Markdown template over the data (no MkDocs needed)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import jinja2

from . import fmt
from .pages import page_contexts
from .runs import Run, load_runs, select_run

import os

REPO_ROOT = Path(__file__).resolve().parent.parent
# $REPORT_DATA_DIR points the build at another data folder (tests, or someone else's runs).
DATA_DIR = Path(os.environ.get("REPORT_DATA_DIR") or REPO_ROOT / "data")


@dataclass
class Report:
    """All runs, the narrated one, and the Jinja2 environment pages render in."""

    runs: list[Run]
    run: Run

    @classmethod
    def load(cls, data_dir: Path = DATA_DIR, wanted: str | None = None) -> "Report":
        runs = load_runs(data_dir)
        return cls(runs=runs, run=select_run(runs, wanted))

    def context(self) -> dict:
        return {"run": self.run, "runs": self.runs, "fmt": fmt, **page_contexts(self.run, self.runs)}

    def render_markdown(self, source: str, page_name: str = "<page>") -> str:
        env = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True)
        try:
            return env.from_string(source).render(**self.context())
        except jinja2.TemplateError as exc:
            line = getattr(exc, "lineno", None)
            where = f"{page_name}:{line}" if line else page_name
            raise jinja2.TemplateError(f"{where}: {exc}") from exc
