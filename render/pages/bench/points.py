"""Single shapes: the shapes measured at one length (the inference shapes, head sizes between the tiles), one
table row each rather than a one-point curve."""
from __future__ import annotations

import pandas as pd

from ... import fmt
from ...tables import table_html
from ...vocab import facet_label, path_label, shape_label, side
from .offset import Offset


class Points(Offset):
    """Ours against the fastest other implementation at each single shape."""

    def points_finding(self) -> str:
        """The single shapes in one sentence: in how many cases ours is on par or faster than the fastest other
        implementation, and the worst case; '' where the run has none."""
        t = self._points()
        t = t[t["ratio"].notna()]
        if t.empty:
            return ""
        # Counted by the medians, as the page's opening counts: the table weighs the calls' spread case by case.
        level = t[t["ratio"].map(side) != "loss"]
        worst = t.loc[t["ratio"].idxmin()]
        return (f"At the single shapes, ours is on par with or faster than the fastest other implementation in "
                f"{len(level)} of {len(t)} cases by the medians; its lowest speed ratio is {fmt.ratio(worst['ratio'])}, "
                f"{facet_label(worst['dtype'], worst['causal'])} at {shape_label(worst['shape'])}, N={worst['n']}, "
                f"against {worst['who']}.")

    def _points(self) -> pd.DataFrame:
        rows = []
        for shape in self.b.point_shapes():
            for dtype, causal in self.facets(shape):
                (n, v), = self.versus_fastest(shape, dtype, causal).items()
                rows.append({"shape": shape, "n": n, "dtype": dtype, "causal": causal, "ours": v.ours, "fast": v.fast,
                             "who": v.who, "ratio": v.ratio, "side": v.side, "words": v.words,
                             "path": self.b.paths(shape, dtype, causal).get(n) if v.ours is not None else None})
        return pd.DataFrame(rows, columns=["shape", "n", "dtype", "causal", "ours", "fast", "who", "ratio", "side",
                                           "words", "path"])

    def points_table(self) -> str:
        """Each single shape: ours, the fastest other implementation and the ratio, per dtype and mask."""
        t = self._points()
        if t.empty:
            return ""
        out = pd.DataFrame({
            "shape": [f"{shape_label(s)}, N={n}" for s, n in zip(t["shape"], t["n"])],
            "facet": [facet_label(d, c) for d, c in zip(t["dtype"], t["causal"])],
            "ours": [fmt.ms(x) if x else "not measured" for x in t["ours"]],
            "path": [path_label(p) if isinstance(p, str) else "n/a" for p in t["path"]],
            "fast": [f"{fmt.ms(x)} ({w})" if x else "none ran" for x, w in zip(t["fast"], t["who"])],
            "words": [w + (", indicative" if r is not None and r == r and self.indicative(o) else "")
                      for w, r, o in zip(t["words"], t["ratio"], t["ours"])]})
        return table_html(out, {"shape": "Shape", "facet": "dtype, mask", "ours": "Triton (median device time)",
                                "path": "Triton's path", "fast": "fastest other (median)",
                                "words": "Triton vs fastest other"})
