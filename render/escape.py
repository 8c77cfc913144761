"""Escaping for every string that comes from data or a tool, one function per place it lands.

Runs arrive from other people's GPUs, so a device name, a kernel name, an error text or a command
is untrusted. Pages are Markdown that Python-Markdown turns into HTML, and figures are Plotly JSON
that plotly.js draws, so a data string must be made inert for the context it is written into:

- `text(s)`: prose, table cells, headings, admonition bodies, HTML text and attribute values. HTML
  metacharacters and every character Markdown gives meaning to become numeric entities, and line
  breaks become spaces, so the string can neither open a tag nor a link, emphasis, code span or
  table cell, nor start a new block.
- `code(s)`: an inline code span. Written as an HTML ``<code>`` element with escaped content
  rather than backticks, because no run of backticks is safe against a string that holds them.
- `code_block(s)`: a preformatted block, kept on one Markdown line (newlines as ``&#10;``) so a
  blank line or a fence inside it cannot end it.
- `plot(s)`: Plotly text (legend names, hover text, axis and tick labels). plotly.js reads a small
  HTML subset there, with ``&lt;``, ``&gt;`` and ``&amp;`` decoded; quotes are shown as they are,
  which is why they are left alone (escaping them twice shows ``&quot;`` to readers).
"""
from __future__ import annotations

# HTML's metacharacters and those Markdown (and its extensions used here: tables, attr_list,
# admonitions, footnotes) gives meaning to, each to its numeric entity in one pass.
_SPECIAL = "&<>\"'\\`*_{}[]()#+-.!|~:^=$@"
_ENTITIES = {ord(c): f"&#{ord(c)};" for c in _SPECIAL}


def _one_line(s: object) -> str:
    return " ".join(str(s).split())


def text(s: object) -> str:
    """`s` as inert text in Markdown or HTML (text or a quoted attribute value)."""
    return _one_line(s).translate(_ENTITIES)


def code(s: object) -> str:
    """`s` as an inline code span."""
    return f"<code>{text(s)}</code>"


def code_block(s: object, language: str = "") -> str:
    """`s` as a preformatted block on a line of its own; `language` is ours, never data."""
    body = str(s).replace("\r\n", "\n").translate(_ENTITIES).replace("\n", "&#10;")
    cls = f' class="language-{language}"' if language else ""
    return f"<pre><code{cls}>{body}</code></pre>"


def plot(s: object) -> str:
    """`s` for a Plotly string (trace name, hover text, label)."""
    return str(s).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
