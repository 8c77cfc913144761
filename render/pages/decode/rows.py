"""All rows: every decode row per model, and the rows that did not run."""
from __future__ import annotations

import pandas as pd

from ... import escape, fmt
from ...tables import table_html
from ...vocab import join, plural
from .data import STEP_SHORT, WHOLE_CALL_VARIANTS, DecodeData, _ok, launch_header, launch_words


class Rows(DecodeData):
    """The per-model rows tables and the failures table."""

    def all_rows_intro(self) -> str:
        """What the tables below hold: every row the phase planned, or, where it stopped before its end, every row it
        saved; and where a spent time budget skipped rows, that each table counts them beneath it."""
        text = ("Every row the phase saved before it stopped, per model." if self.cut_short() else
                "Every row the phase planned, per model.")
        if (self.rows["status"] == "skipped").any():
            text = (text[:-1] + ", except those a spent time budget skipped: each table counts them beneath it.")
        return (text + " A row whose status is not `ok` gives its reason under "
                "[Rows that did not run](#rows-that-did-not-run).")

    def rows_table(self, model: str) -> str:
        """A model's rows; those a spent time budget skipped are counted beneath, not listed (the table of rows that
        did not run lists them, with why)."""
        f = self.rows[self.rows["model"] == model].copy()
        skipped = int((f["status"] == "skipped").sum())
        f = f[f["status"] != "skipped"]
        order = {v: i for i, v in enumerate(self.variants())}
        f["_o"] = f["variant"].map(order)
        f = f.sort_values(["batch", "context", "_o"])
        # A row that did not run says so here; its reason is in the table of rows that did not run, once per
        # group, rather than repeated in every row a time budget skipped.
        opt = lambda fn: (lambda x: "" if not _ok(x) else fn(x))  # noqa: E731
        columns = {"batch": "Batch", "context": "Context", "variant": "Variant", "step_impl": "Step computed by",
                   "attention_launch": "Attention launch", "step_ms_median": "Step (loop time)",
                   "tokens_per_s": "Tokens/s", "achieved_over_floor": "× floor", "kernels_per_step": "Kernels per step",
                   "peak_mem_bytes": "Peak memory", "kv_cache_bytes": "KV cache", "distinct_tokens": "Distinct tokens",
                   "status": "Status"}
        if not self.has_launch_choices():
            del columns["attention_launch"]
        else:
            columns["attention_launch"] = launch_header(launch_words(x) for x in f["attention_launch"] if _ok(x))
        whole = f[f["variant"].isin(WHOLE_CALL_VARIANTS) & f["peak_mem_bytes"].notna()]
        caption = ("Distinct tokens: how many different token ids the row's loop generated (random weights often "
                   "repeat one token, which makes matching tokens a weaker check)")
        caption += (f"; peak memory covers the timed steps; for {self.label(whole.iloc[0].variant)}, a whole call, its "
                    "prefill included" if len(whole) else "")
        # A row that did not run computed no step: its step_impl names the one asked for (data.NOT_RUN), not one that ran.
        f.loc[f["status"] != "ok", "step_impl"] = None
        f["variant"] = f["variant"].map(self.label)
        rest = (f"\n{plural(skipped, 'more row')} of {escape.text(model)} {'was' if skipped == 1 else 'were'} skipped "
                "for time: see [Rows that did not run](#rows-that-did-not-run).\n" if skipped else "")
        return table_html(f, columns, caption=caption,
            formats={"step_ms_median": opt(fmt.ms), "tokens_per_s": opt(fmt.num),
                     "achieved_over_floor": opt(fmt.ratio), "kernels_per_step": opt(lambda x: f"{x:.0f}"),
                     "peak_mem_bytes": opt(fmt.bytes_), "kv_cache_bytes": opt(fmt.bytes_),
                     "distinct_tokens": opt(lambda x: str(int(x))),
                     "step_impl": opt(lambda x: STEP_SHORT.get(x, str(x))),
                     "attention_launch": opt(launch_words)}) + rest

    def failures_table(self) -> str:
        bad = self.rows[self.rows["status"] != "ok"]
        if bad.empty:
            return "Every decode row ran."
        # Each reason once, on the first of its lines: a spent time budget skips dozens of rows of many variants for
        # the same reason. Below it, one line per model and variant with the shapes it cut.
        out = []
        for (s, r), g in bad.groupby(["status", bad["reason"].fillna("")], sort=False):
            for k, ((m, v), h) in enumerate(g.groupby(["model", "variant"], sort=False)):
                out.append({"status": s if k == 0 else "", "n": len(g) if k == 0 else None,
                            "reason": r if k == 0 else "", "model": m, "variant": self.label(v),
                            "where": join(f"b{b}/c{c}" for b, c in zip(h["batch"], h["context"]))})
        return table_html(pd.DataFrame(out), {"status": "Status", "n": "Rows", "reason": "Reason", "model": "Model",
                                              "variant": "Variant", "where": "Batch / context"},
                          formats={"n": lambda n: "" if pd.isna(n) else f"{n:.0f}"})
