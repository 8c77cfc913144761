"""Plotly figures to HTML fragments: deterministic ids, one shared look, a caption on each."""
from __future__ import annotations

import re

import plotly.graph_objects as go
import plotly.io as pio

from . import escape

# Okabe-Ito: distinguishable for colour-blind readers and legible on light and dark backgrounds.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#999999"]
# Beyond the palette, where a figure needs more hues: each reads at 3:1 or more against both page themes,
# white and mkdocs-material's slate (#1e2129). Tol's wine (#882255), used here before, all but vanished on slate;
# a teal beside the palette's bluish green (SDPA's memory-efficient backend) could not be told from it.
PURPLE, BROWN = "#9467bd", "#8c6d31"
PAGE_BACKGROUNDS = ("#ffffff", "#1e2129")

# plotly_white cut to the parts a 2-D chart uses. The whole template (3-D scenes, maps, polar axes and
# defaults for 25 trace types) was deep-copied into every figure and written into every page: about
# a third of a figure's build time and 7 KB of each figure's HTML.
_LAYOUT_KEYS = ("autotypenumbers", "colorway", "font", "hovermode", "hoverlabel", "paper_bgcolor", "plot_bgcolor",
                "coloraxis", "colorscale", "xaxis", "yaxis", "shapedefaults", "annotationdefaults", "title")
_TRACE_KEYS = ("scatter", "bar", "heatmap", "histogram")


def _report_template() -> go.layout.Template:
    base = pio.templates["plotly_white"].to_plotly_json()
    return go.layout.Template(layout={k: v for k, v in base["layout"].items() if k in _LAYOUT_KEYS},
                              data={k: v for k, v in base["data"].items() if k in _TRACE_KEYS})


pio.templates["report"] = _report_template()
pio.templates.default = "report"  # figures start from it, so styled() need not copy a template again

_ID_SAFE = re.compile(r"[^a-z0-9-]+")


def figure_id(*parts: str) -> str:
    """A stable DOM id from page and figure names, so the same data builds the same site."""
    return "fig-" + _ID_SAFE.sub("-", "-".join(parts).lower()).strip("-")


def styled(fig: go.Figure, height: int = 420) -> go.Figure:
    """Transparent backgrounds: the page's light/dark theme script sets text and grid colours."""
    fig.update_layout(
        colorway=PALETTE,
        height=height,
        margin=dict(l=60, r=20, t=40, b=50),
        paper_bgcolor="rgba(0,0,0,0)",
        plot_bgcolor="rgba(0,0,0,0)",
        font=dict(family="system-ui, -apple-system, Segoe UI, Roboto, sans-serif", size=13),
        legend=dict(orientation="h", yanchor="bottom", y=_legend_y(fig, height), xanchor="left", x=0),
        hoverlabel=dict(namelength=-1),
    )
    return fig


TITLE_ROOM_PX = 30  # a subplot title's line above its plot, with a gap


def _legend_y(fig: go.Figure, height: int) -> float:
    """Where the legend's bottom sits (paper fraction): just above the plot, or above the top row's subplot
    titles where there are some (make_subplots anchors them on the plot's top edge), which a legend of
    several rows would otherwise cover."""
    titled = any(a.yref == "paper" and a.yanchor == "bottom" and (a.y or 0) >= 0.99 for a in fig.layout.annotations)
    plot_px = max(height - 90, 100)  # the height less styled()'s top and bottom margins
    return 1.0 + TITLE_ROOM_PX / plot_px if titled else 1.02


def figure_html(fig: go.Figure, fig_id: str, caption: str, height: int = 420) -> str:
    """The figure as a <figure> block; plotly.js itself is loaded once in the page head."""
    styled(fig, height)
    body = fig.to_html(
        full_html=False,
        include_plotlyjs=False,
        div_id=fig_id,
        # No toolbar: it floats over the legend's top right. Drag still zooms and a double click resets.
        config={"displaylogo": False, "responsive": True, "displayModeBar": False},
    )
    return (
        f'\n<figure class="report-figure" id="{fig_id}-figure">\n{body}\n'
        f"<figcaption>{escape.text(caption)}</figcaption>\n</figure>\n"
    )
