"""The glossary keeps up with the code: every step of our Gluon kernels is described."""
from __future__ import annotations

import re
from pathlib import Path

from kernels.attention.gluon_versions import GLUON_VERSIONS


def test_the_glossary_names_every_gluon_step():
    text = (Path(__file__).resolve().parent.parent / "docs" / "glossary.md").read_text()
    named = set(re.findall(r"\bg\d+\b", text))
    # "g2 to g7" names every step between; expand such ranges before checking.
    for lo, hi in re.findall(r"\bg(\d+) to g(\d+)\b", text):
        named |= {f"g{i}" for i in range(int(lo), int(hi) + 1)}
    missing = [v.name for v in GLUON_VERSIONS if v.name not in named]
    assert not missing, f"docs/glossary.md does not describe {missing}"
