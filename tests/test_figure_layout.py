"""The shared figure style (render/figures.py): where the legend goes."""
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from render.figures import styled


def test_a_legend_sits_above_the_top_row_subplot_titles_and_just_above_a_plain_plot():
    plain = styled(go.Figure(go.Scatter(x=[0, 1], y=[0, 1])), height=420)
    assert plain.layout.legend.y == 1.02
    titled = make_subplots(rows=2, cols=2, subplot_titles=("a", "b", "c", "d"))
    titled.add_trace(go.Scatter(x=[0, 1], y=[0, 1]), row=1, col=1)
    styled(titled, height=720)
    top_title = max(a.y for a in titled.layout.annotations)
    # 30 px of the 630 px plot: the titles' line fits between the plot and the legend's bottom.
    assert titled.layout.legend.y > top_title + 0.04
