"""The page's two kinds of chart: lines against a length with a device selector, and grouped bars per device."""
from __future__ import annotations

import plotly.graph_objects as go
import plotly.io as pio
from plotly.subplots import make_subplots

from ... import escape
from ...axes import log_ticks
from ...figures import figure_id, styled
from .common import CompareSection, Device


def _short(n: int) -> str:
    """Tick text for a power-of-two-ish length: 8192 -> '8k', 1000 -> '1000'."""
    return f"{n // 1024}k" if n >= 1024 and n % 1024 == 0 else str(n)


class Charts(CompareSection):
    """Line charts with a device selector and bar charts with one bar group per device, drawn from plain dicts."""

    def _selector(self, owners: list[int | None]) -> list[dict]:
        present = list(dict.fromkeys(o for o in owners if o is not None))
        if len(present) < 2:
            return []
        refs = {i for i in present if self.devices[i].published}

        def vis(keep: set[int]) -> list:
            return [True if o is None or o in keep else "legendonly" for o in owners]

        buttons = [dict(label="Devices drawn first", method="restyle", args=[{"visible": vis(self.shown)}]),
                   dict(label="All devices", method="restyle", args=[{"visible": vis(set(present))}])]
        for i in present:
            d = self.devices[i]
            keep = {i} | (refs if not d.published else set())
            extra = " and published figures" if keep != {i} else ""
            buttons.append(dict(label=escape.plot(d.label + extra), method="restyle", args=[{"visible": vis(keep)}]))
        return [dict(type="dropdown", buttons=buttons, active=0, showactive=True, direction="down", pad=dict(b=6),
                     bgcolor="rgba(127,127,127,0.12)", bordercolor="rgba(127,127,127,0.5)", font=dict(size=12))]

    def _line_figure(self, name: str, panels: list[tuple[str, str]], series, x: str, y: str, xtitle: str,
                     ytitle: str, hover: str, caption: str, ylog: bool = True, xlog: bool = True,
                     scale: float = 1.0) -> str:
        """One panel per entry of `panels`, one line per device; series(dev, key) -> rows or None."""
        cols = min(3, len(panels))
        nrows = -(-len(panels) // cols)
        # One y scale for every panel, so panels compare with each other as well as devices within a panel.
        fig = make_subplots(rows=nrows, cols=cols, subplot_titles=[t for _, t in panels], shared_yaxes="all",
                            horizontal_spacing=0.04, vertical_spacing=0.16)
        # Plain trace dicts, checked by plotly once as a whole figure would be too slow at 20 runs x 5 panels.
        traces, owners, missing, legend_done, xs, ys = [], [], [], set(), set(), []
        for i, d in enumerate(self.devices):
            drew = False
            for j, (key, _) in enumerate(panels):
                g = series(d, key)
                if g is None or g.empty:
                    continue
                g = g[g[y].notna()]
                if g.empty:
                    continue
                axis = "" if j == 0 else str(j + 1)  # make_subplots numbers a plain grid's axes row by row
                hover_rows = list(g["hover"]) if "hover" in g else [""] * len(g)
                traces.append(dict(
                    type="scatter", x=[int(v) for v in g[x]], y=[float(v) * scale for v in g[y]], xaxis=f"x{axis}",
                    yaxis=f"y{axis}", mode="lines+markers", name=d.name, legendgroup=f"d{i}",
                    showlegend=i not in legend_done, visible=True if i in self.shown else "legendonly",
                    line=dict(color=d.color, dash=d.dash, width=2), marker=d.marker(),
                    customdata=[escape.plot(h) for h in hover_rows],
                    hovertemplate=f"<b>{d.name}</b><br>{hover}%{{customdata}}<extra></extra>"))
                legend_done.add(i)
                owners.append(i)
                xs |= set(int(v) for v in g[x])
                ys += [float(v) * scale for v in g[y] if v and v > 0]
                drew = True
            if not drew:
                missing.append(d.label)
        if not owners:
            return f"_No device has data for this chart ({escape.text(caption.split('.')[0].lower())})._\n"
        ticks = dict(tickvals=sorted(xs), ticktext=[_short(v) for v in sorted(xs)]) if len(xs) <= 8 else {}
        # Every tick written out in full: Plotly's own log ticks label 2 and 5 inside a decade with the bare digit.
        decades = log_ticks(ys) if ylog else {}
        for j in range(len(panels)):
            r, c = j // cols + 1, j % cols + 1
            fig.update_xaxes(type="log" if xlog else "linear", title_text=xtitle if r == nrows else None, row=r, col=c,
                             **ticks)
            fig.update_yaxes(type="log" if ylog else "linear", title_text=ytitle if c == 1 else None, row=r, col=c,
                             **decades)
        legend_rows = -(-len(legend_done) // 2)
        top, bottom = 84, 70 + 24 * legend_rows
        height = 300 * nrows + top + bottom
        plot_h = height - top - bottom
        menus = self._selector(owners)
        for m in menus:  # in the top margin, above the panel titles
            m.update(x=0, xanchor="left", y=1 + (top - 4) / plot_h, yanchor="top")
        layout = dict(margin=dict(t=top, b=bottom),
                      legend=dict(orientation="h", xref="container", yref="container", x=0.01, xanchor="left",
                                  y=0.01, yanchor="bottom", groupclick="togglegroup"))
        html_out = self._render(name, fig, caption, height, layout, traces, menus)
        if missing:
            html_out += f"\n_Not in this chart (no data for it): {escape.text('; '.join(missing))}._\n"
        return html_out

    def _render(self, name: str, fig: go.Figure, caption: str, height: int, layout: dict,
                traces: list[dict] | None = None, menus: list[dict] | None = None) -> str:
        """Like Page.figure, with layout that must win over the shared style (legend below, selector above),
        and traces and selector menus as plain dicts (validating hundreds of them is what made 20 runs slow)."""
        styled(fig, height)
        fig.update_layout(**layout)
        spec = fig.to_dict()
        spec["data"] = list(spec.get("data", [])) + list(traces or [])
        if menus:
            spec["layout"]["updatemenus"] = menus
        fid = figure_id(self.slug, name)
        body = pio.to_html(spec, full_html=False, include_plotlyjs=False, div_id=fid, validate=False,
                           config={"displaylogo": False, "responsive": True})
        return (f'\n<figure class="report-figure" id="{fid}-figure">\n{body}\n'
                f"<figcaption>{escape.text(f'{caption} {self.conditions()}.')}</figcaption>\n</figure>\n")

    def _bars(self, name: str, fig: go.Figure, caption: str, n_devices: int, n_series: int) -> str:
        """Horizontal grouped bars, one group per device (first on top), legend below the plot."""
        fig.update_layout(barmode="group", bargap=0.25)
        fig.update_yaxes(autorange="reversed")
        legend_rows = -(-n_series // 2)
        top, bottom = 50, 60 + 24 * legend_rows
        height = top + bottom + max(120, 16 * n_series * n_devices + 24 * n_devices)
        layout = dict(margin=dict(t=top, b=bottom),
                      legend=dict(orientation="h", xref="container", yref="container", x=0.01, xanchor="left",
                                  y=0.01, yanchor="bottom"))
        return self._render(name, fig, caption, height, layout)

    def _device_ticks(self, devs: list[Device]) -> list[str]:
        return [escape.plot(d.label if not d.published else f"{d.run.device_name} (published)") for d in devs]

    @staticmethod
    def _hatch(devs: list[Device]) -> list[str]:
        """Published bars are cross-hatched, so they read as different even in greyscale."""
        return ["x" if d.published else "" for d in devs]
