"""Shared behaviour of a page's template context: figures, captions, the missing-data note."""
from __future__ import annotations

import plotly.graph_objects as go

from .. import escape
from ..figures import figure_html, figure_id
from ..runs import Run


class Page:
    """A page's Jinja2 context object. Subclasses add methods the Markdown calls."""

    slug = "page"
    phase = "env"

    def __init__(self, run: Run, runs: list[Run]):
        self.run = run
        self.runs = runs

    @property
    def data(self):
        return self.run.phase(self.phase)

    @property
    def available(self) -> bool:
        return self.run.has(self.phase)

    @property
    def device_name(self) -> str:
        """The device's name as inert Markdown text (it comes from the run's data)."""
        return escape.text(self.run.device_name)

    @property
    def profile_name(self) -> str:
        return escape.text(self.run.manifest.profile)

    def missing(self) -> str:
        """Admonition shown in place of a phase this run did not collect (or that failed)."""
        rec = self.run.phase_record(self.phase)
        if rec is not None and rec.status == "unsupported":
            # Collecting again on this GPU would record the same: name the reason, not a command that cannot help.
            # A phase's reason is written to follow a colon (collect/device_choices.iterations_unsupported).
            reason = f": {escape.text(rec.reason.strip().rstrip('.'))}" if rec.reason and rec.reason.strip() else ""
            return (f'!!! note "Not supported on this GPU"\n'
                    f"    Run `{self.run.id}` has no `{self.phase}` data; the phase does not apply to "
                    f"{self.device_name}{reason}.\n")
        why = ""
        if rec is not None and rec.status == "failed":
            first = (rec.error or "").strip().splitlines()
            why = f" The phase failed: {escape.code(first[0][:300]) if first else 'no error recorded'}."
        return (
            f'!!! warning "Not collected in this run"\n'
            f"    Run `{self.run.id}` has no `{self.phase}` data.{why} "
            f"Collect it on a GPU with `python -m collect {self.phase} --run-id {self.run.id} --resume`.\n"
        )

    def conditions(self) -> str:
        """Who measured what, on what: the tail of every caption."""
        m = self.run.manifest
        dev = m.device.name if m.device else "unknown GPU"
        return f"Run {self.run.id} on {dev}, profile {m.profile}"  # plain text: figure_html escapes captions

    def figure(self, name: str, fig: go.Figure, caption: str, height: int = 420) -> str:
        return figure_html(fig, figure_id(self.slug, name), f"{caption} {self.conditions()}.", height)
