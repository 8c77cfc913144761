"""Plain-Python rendering of a page's Markdown template over the data (no MkDocs needed)."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import jinja2

from collect.schema import site_pages

from . import escape, fmt
from .pages import page_contexts
from .runs import Run, load_runs, select_run

REPO_ROOT = Path(__file__).resolve().parent.parent
# $REPORT_DATA_DIR points the build at another data folder (tests, or someone else's runs).
DATA_DIR = Path(os.environ.get("REPORT_DATA_DIR") or REPO_ROOT / "data")
# Pages whose every sentence may draw on any phase: a partial phase is flagged on them too.
EVERY_PHASE_PAGES = ("home", "compare")
_USES = re.compile(r"\b([a-z_]+)\.[a-z_]+")


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
        # `esc` is render/escape.py: a template that prints a data string writes {{ esc.text(run.device_name) }}.
        return {"run": self.run, "runs": self.runs, "fmt": fmt, "esc": escape, **page_contexts(self.run, self.runs)}

    def render_markdown(self, source: str, page_name: str = "<page>") -> str:
        env = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True)
        context = self.context()
        try:
            out = env.from_string(source).render(**context)
        except jinja2.TemplateError as exc:
            line = getattr(exc, "lineno", None)
            where = f"{page_name}:{line}" if line else page_name
            raise jinja2.TemplateError(f"{where}: {exc}") from exc
        used = [context[name] for name in dict.fromkeys(_USES.findall(source)) if hasattr(context.get(name), "slug")]
        return after_title(out, self.partial_notes(used))

    def partial_notes(self, pages: list) -> str:
        """A warning for each phase of the narrated run a page narrates that stopped before its end (a crashed
        collect). Another run's unfinished phase is no warning at the top of a page: the Comparison page, which sets
        every run side by side, says what each such run lacks where it describes the runs it compares."""
        every = any(p.slug in EVERY_PHASE_PAGES for p in pages)
        wanted = {p.phase for p in pages if p.phase != "env"}
        notes = []
        for rec in self.run.manifest.phases:
            if rec.status == "partial" and (every or rec.name in wanted) and self.run.has(rec.name):
                notes.append(partial_note(self.run, rec))
        return "".join(notes)


def nav() -> list[dict[str, str]]:
    """MkDocs' `nav`: every page of the phase registry (collect/schema/registry.py) in its order, as
    {title: Markdown file}. The hook sets it, so mkdocs.yml lists no pages of its own to keep in step."""
    return [{p.title: p.doc} for p in site_pages()]


def partial_note(run: Run, rec) -> str:
    """The warning a page shows above data from a phase that did not finish."""
    rows = f"It saved {rec.rows} rows before it stopped" if rec.rows else "It saved rows before it stopped"
    why = (rec.error or "").strip().splitlines()
    return (f'!!! warning "Partial data: the {rec.name} phase of run {run.id} did not finish"\n'
            f"    {rows}; the cases after them are missing, so what this page says about that phase rests on "
            f"part of its grid. Why it stopped: {escape.code(why[0][:300]) if why else 'not recorded'}. "
            f"Continue it on the same GPU with {escape.code(f'python -m collect {rec.name} --run-id {run.id} --resume')}.\n\n")


def after_title(markdown: str, note: str) -> str:
    """`note` inserted after the page's first heading (or at the top when it has none)."""
    if not note:
        return markdown
    m = re.search(r"^# .*\n", markdown, flags=re.M)
    at = m.end() if m else 0
    return markdown[:at] + "\n" + note + markdown[at:]
