"""Read a built page as a reader does: its prose outside tables, figures and code, split into sentences,
with the measured figures (a number with a unit, × or %) each sentence carries."""
from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

# Elements whose text is not prose: data laid out for scanning, code, formulas, page chrome.
SKIP = {"table", "figure", "pre", "code", "script", "style", "svg", "nav", "header", "footer", "math"}
BLOCKS = {"p", "li", "h1", "h2", "h3", "h4", "h5", "h6", "div", "dd", "dt", "blockquote", "ul", "ol", "br"}
VOID = {"br", "img", "hr", "input", "meta", "link", "wbr"}

UNITS = (r"(?:ms|µs|us|ns|s|[kMGTP]?B/s|[kMGTP]?FLOP/s|FLOP per (?:DRAM )?byte|FLOP/byte|FLOP/B|[KMGT]iB|[kMGT]B|B"
         r"|MHz|GHz|W|[mµn]?J|°C|tokens/s|TFLOPs?|GFLOPs?|cycles)")
# A number, then ×10ⁿ (one figure in scientific notation), or ×, %, or a unit after an optional space.
FIGURE = re.compile(r"(?<![\w.=])\d[\d,]*(?:\.\d+)?(?:×10[⁻⁰¹²³⁴⁵⁶⁷⁸⁹]+|\s?(?:×|%|" + UNITS + r"(?![\w/])))")
SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[A-Z(*\"'“])")


class _Prose(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.depth_skip = 0
        self.in_article = 0
        self.blocks: list[str] = []
        self.cur: list[str] = []

    def _flush(self):
        text = " ".join("".join(self.cur).split())
        if text:
            self.blocks.append(text)
        self.cur = []

    def handle_starttag(self, tag, attrs):
        cls = dict(attrs).get("class") or ""
        if tag == "article":
            self.in_article += 1
        if not self.in_article or tag in VOID:
            if tag == "br":
                self._flush()
            return
        if self.depth_skip or tag in SKIP or "headerlink" in cls or "arithmatex" in cls or "report-table" in cls:
            self.depth_skip += 1
            return
        if tag in BLOCKS:
            self._flush()

    def handle_endtag(self, tag):
        if tag == "article":
            self._flush()
            self.in_article -= 1
            return
        if not self.in_article or tag in VOID:
            return
        if self.depth_skip:
            self.depth_skip -= 1
            return
        if tag in BLOCKS:
            self._flush()

    def handle_data(self, data):
        if self.in_article and not self.depth_skip:
            self.cur.append(data)


def prose_blocks(html: str) -> list[str]:
    p = _Prose()
    p.feed(html)
    p.close()
    return p.blocks


def sentences(text: str) -> list[str]:
    return [s.strip() for s in SENTENCE_END.split(text) if s.strip()]


def figures(sentence: str) -> list[str]:
    return [m.group(0) for m in FIGURE.finditer(sentence)]


def page_sentences(html: str) -> list[str]:
    return [s for b in prose_blocks(html) for s in sentences(b)]


def site_sentences(site: Path) -> dict[str, list[str]]:
    """Every built page's sentences, keyed by the page's path in the site."""
    out = {}
    for page in sorted(Path(site).rglob("index.html")):
        rel = str(page.relative_to(site))
        if rel.startswith(("data/", "search/", "assets/")):
            continue
        out[rel] = page_sentences(page.read_text(encoding="utf-8"))
    return out


def over_limit(site: Path, limit: int = 4) -> tuple[int, int, list[tuple[str, int, str]]]:
    """(sentences over the limit, sentences in all, the offenders as (page, figures, sentence))."""
    total, bad = 0, []
    for page, ss in site_sentences(site).items():
        for s in ss:
            total += 1
            n = len(figures(s))
            if n > limit:
                bad.append((page, n, s))
    return len(bad), total, bad
