"""Escaping for every string that comes from data or a tool, one function per place it lands.

Runs arrive from other people's GPUs, so a device name, a kernel name, an error text or a command
is untrusted. Pages are Markdown that Python-Markdown turns into HTML, and figures are Plotly JSON
that plotly.js draws, so a data string must be made inert for the context it is written into:

- `text(s)`: prose, table cells, headings, admonition bodies, HTML text and attribute values. HTML
  metacharacters and the characters Markdown (with this site's extensions) reads inside a line become
  entities, a first character that could start a block (a list, a rule, a heading) too, and line
  breaks become spaces: the string can neither open a tag nor a link, emphasis, code span, math or
  table cell, nor start a new block. Dots, dashes and brackets mid-line stay readable in the HTML.
- `code(s)`: an inline code span. Written as an HTML ``<code>`` element with escaped content
  rather than backticks, because no run of backticks is safe against a string that holds them.
- `code_block(s)`: a preformatted block, kept on one Markdown line (newlines as ``&#10;``) so a
  blank line or a fence inside it cannot end it.
- `plot(s)`: Plotly text (legend names, hover text, axis and tick labels). plotly.js reads a small
  HTML subset there, with ``&lt;``, ``&gt;`` and ``&amp;`` decoded; quotes are shown as they are,
  which is why they are left alone (escaping them twice shows ``&quot;`` to readers).
"""
from __future__ import annotations

import re

# HTML's metacharacters (named, as html.escape writes them) and what Markdown and this site's
# extensions (tables, attr_list, md_in_html, arithmatex, footnotes) read inside a line.
_SPECIAL = "\\`*{}[]#|$~^@"
_ENTITIES = {ord("&"): "&amp;", ord("<"): "&lt;", ord(">"): "&gt;", ord('"'): "&quot;", ord("'"): "&#x27;",
             **{ord(c): f"&#{ord(c)};" for c in _SPECIAL}}
# An underscore between two letters or digits cannot open or close emphasis (Python-Markdown's smart
# emphasis), so `flash_fwd_kernel` stays as typed; every other underscore is escaped.
_LOOSE_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
# A line that starts like this is a list item, a rule, a setext underline or an admonition; escaping
# its first character is enough (Markdown finds blocks before it decodes entities).
_BLOCK_START = re.compile(r"^(?:[-+](?=\s)|\d+[.)](?=\s|$)|[-=](?=[-=\s]*$)|[!?]{3})")


def _one_line(s: object) -> str:
    return " ".join(str(s).split())


def text(s: object) -> str:
    """`s` as inert text in Markdown or HTML (text or a quoted attribute value)."""
    out = _LOOSE_UNDERSCORE.sub("&#95;", _one_line(s).translate(_ENTITIES))
    return f"&#{ord(out[0])};{out[1:]}" if _BLOCK_START.match(out) else out


def note(s: object) -> str:
    """`s`, a note from the data, as a Markdown note admonition of its own."""
    return f"\n!!! note\n    {text(s)}\n"


def code(s: object) -> str:
    """`s` as an inline code span."""
    return f"<code>{text(s)}</code>"


def code_block(s: object, language: str = "") -> str:
    """`s` as a preformatted block on a line of its own; `language` is ours, never data."""
    body = str(s).replace("\r\n", "\n").translate(_ENTITIES).replace("_", "&#95;").replace("\n", "&#10;")
    cls = f' class="language-{language}"' if language else ""
    return f"<pre><code{cls}>{body}</code></pre>"


def plot(s: object) -> str:
    """`s` for a Plotly string (trace name, hover text, label)."""
    return str(s).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
