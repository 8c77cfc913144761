"""render/escape.py in every context a data string lands in, through the site's own Markdown setup."""
import html
import re

import plotly.graph_objects as go
import pytest

from hostile import corpus
from render import escape
from render.figures import figure_html
from render.tables import table_html

P = corpus.payload(7)
SHOWN = " ".join(P.split())  # what a reader should see: every character, line breaks as spaces

# Where pages put a data string, with {} for it.
TEXT_CONTEXTS = {
    "paragraph": "The device is {}.",
    "list item": "- on {}, it ran",
    "emphasis": "**{}**",
    "link text": "[{}](other.md)",
    "heading": "## Run on {}",
    "table cell": "| a | b |\n|---|---|\n| {} | x |",
    "admonition title": '!!! note "{}: published"\n    Body.',
    "admonition body": "!!! note\n    Measured on {}.",
    "collapsed block": '??? info "{}"\n    Body.',
    "html attribute": '<span title="{}">x</span>',
    "html block": '<div class="x" markdown="1">\n{}\n</div>',
}


def _visible(h: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", h)).split())


@pytest.mark.parametrize("where", TEXT_CONTEXTS)
def test_text_is_inert_in_every_markdown_context(where):
    out = corpus.markdown_to_html(TEXT_CONTEXTS[where].format(escape.text(P)))
    assert corpus.leaks(out) == []
    if where != "html attribute":
        assert SHOWN in _visible(out).replace("¶", "").strip() or SHOWN in _visible(out), out


@pytest.mark.parametrize("where", ["paragraph", "list item", "table cell", "admonition body"])
def test_code_is_one_inline_code_span(where):
    out = corpus.markdown_to_html(TEXT_CONTEXTS[where].format(escape.code(P)))
    assert corpus.leaks(out) == []
    spans = re.findall(r"<code>(.*?)</code>", out, flags=re.S)
    assert len(spans) == 1 and " ".join(html.unescape(spans[0]).split()) == SHOWN


@pytest.mark.parametrize("indent", ["", "    "])
def test_code_block_cannot_be_closed_by_a_fence_or_a_blank_line(indent):
    block = escape.code_block(P + "\n\n```\nafter", "bash")
    out = corpus.markdown_to_html(f"!!! note\n{indent}{block}\n\nNext." if indent else f"{block}\n\nNext.")
    assert corpus.leaks(out) == []
    pres = re.findall(r"<pre><code[^>]*>(.*?)</code></pre>", out, flags=re.S)
    assert len(pres) == 1 and html.unescape(pres[0]) == P + "\n\n```\nafter"


def test_code_block_keeps_newlines():
    assert "&#10;" in escape.code_block("a\nb") and "\n" not in escape.code_block("a\nb\r\nc")


def test_plot_text_is_literal_in_plotly_and_cannot_end_the_script():
    fig = go.Figure(go.Scatter(x=[1, 2], y=[3, 4], name=escape.plot(P), hovertext=[escape.plot(P), escape.plot("a\"b'c")]))
    fig.update_layout(xaxis_title=escape.plot(P))
    out = figure_html(fig, "fig-test", f"Caption of {P}")
    assert corpus.leaks(out) == []
    script = re.search(r"<script[^>]*>(.*)</script>", out, flags=re.S).group(1)
    assert "</script" not in script.lower() and "<!--" not in script
    strings = list(corpus._strings(corpus._plotly_calls(script)))
    assert 'a"b\'c' in strings  # quotes reach plotly as typed: escaping them would show &quot; to readers


def test_plot_labels_with_quotes_are_not_escaped_twice():
    assert escape.plot('NVIDIA "H200" <x> & y') == 'NVIDIA "H200" &lt;x&gt; &amp; y'


def test_figure_caption_is_inert_inside_an_admonition():
    fig = go.Figure(go.Scatter(x=[1], y=[1]))
    block = figure_html(fig, "fig-cap", f"Measured on {P}")
    out = corpus.markdown_to_html("!!! note\n" + "\n".join("    " + line for line in block.splitlines()))
    assert corpus.leaks(out) == []


def test_table_cells_and_caption_are_inert_and_not_escaped_twice():
    import pandas as pd

    out = table_html(pd.DataFrame([{"name": P, "n": 1}]), {"name": "Name", "n": "N"}, caption=P)
    for where in ("", "!!! note\n    "):
        md = corpus.markdown_to_html(where + out.strip().replace("\n", " "))
        assert corpus.leaks(md) == []
    assert "&amp;lt;" not in out and "&amp;#" not in out


def test_text_of_non_strings_and_empty():
    assert html.unescape(escape.text(3.5)) == "3.5" and escape.text("") == ""
    assert html.unescape(escape.text("a\n\n# b")) == "a # b"  # one line: no new block can start


def test_note_is_one_admonition_whose_body_is_the_inert_text():
    out = corpus.markdown_to_html("Before." + escape.note(P) + escape.note("second") + "\nAfter.")
    assert corpus.leaks(out) == []
    assert out.count('class="admonition note"') == 2 and SHOWN in _visible(out)
