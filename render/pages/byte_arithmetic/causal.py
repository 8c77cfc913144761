"""Causal masking, predicted and measured: Triton's causal speedup beside the block count, row by row."""
from __future__ import annotations

from functools import cached_property

import pandas as pd

from ... import fmt, model
from ...tables import table_html
from ...vocab import CLOCK_GAP, dtype_short, join, plural, path_label, shape_label
from .causal_verdicts import (CLOCKS_APART, DIFFERENT_KERNELS, MASK_MAX, VERDICTS, causal_verdict, compare_calls,
                              flash_verdict, mask_clock_gap, too_far_apart)
from .common import BytesSection


def _clock_note(w) -> str:
    """The table's clock cell: the two Triton calls' SM clocks where they ran more than CLOCK_GAP apart, and, for a
    ratio above what a mask can give, the ratio at one clock (as the finding below the table takes it, whatever the
    gap), so the cell and the sentence read the same."""
    gap = w["clock_gap"]
    if gap is None or gap != gap:
        return "not recorded"
    note = (f"within {fmt.pct(100 * CLOCK_GAP, 2)}" if gap <= CLOCK_GAP else
            f"{fmt.num(w['clk_f'], 4)} / {fmt.num(w['clk_c'], 4)} MHz, {fmt.pct(100 * gap)} apart")
    if w["measured"] > MASK_MAX:
        one_clock = w["measured"] * w["clk_f"] / w["clk_c"]
        note += (f"; about {fmt.ratio(one_clock)} at one clock: "
                 + (f"the clocks, not the mask, put the ratio above {MASK_MAX:g}×" if one_clock <= MASK_MAX else
                    f"still above {MASK_MAX:g}×"))
    return note


def _counted(verdict: str, n: int) -> str:
    """`n` rows of one verdict, as a count reads: '28 that ran different kernels ...', not '28 different kernels'."""
    if verdict == DIFFERENT_KERNELS:
        return f"{n} that ran {verdict}"
    if verdict == CLOCKS_APART:
        return f"{n} run {verdict}"
    if verdict == "beats the block count" and n != 1:
        return f"{n} beat the block count"
    return f"{n} {verdict}"


class Causal(BytesSection):
    """The causal rows, their table and the finding that checks the block count against each."""

    @cached_property
    def causal(self) -> pd.DataFrame:
        """Triton's measured causal speedup beside the block-count prediction, per shape, dtype and N, each row
        with the model's verdict on it."""
        out = []
        for shape in self.shapes():
            for dtype in dict.fromkeys(dt for dt, _ in self.bench.facets(shape)):
                full = self._timed(shape, dtype, False)
                caus = self._timed(shape, dtype, True)
                flash_f = self._timed(shape, dtype, False, "sdpa-flash")
                flash_c = self._timed(shape, dtype, True, "sdpa-flash")
                configs = self._configs(shape, dtype)
                paths = {c: self.bench.paths(shape, dtype, c) for c in (False, True)}
                for n in [n for n in full.index if n in caus.index]:
                    cfg_c, cfg_f = configs.get((True, n), {}), configs.get((False, n), {})
                    bm, bn = cfg_c.get("BLOCK_M"), cfg_c.get("BLOCK_N")
                    pred = model.predicted_causal_speedup(n, bm, bn) if bm and bn else None
                    f, c = full.loc[n], caus.loc[n]
                    measured, overlap, clk_f, clk_c = compare_calls(f, c)
                    gap = mask_clock_gap(clk_f, clk_c)
                    apart = too_far_apart(gap)
                    fl = (compare_calls(flash_f.loc[n], flash_c.loc[n])
                          if n in flash_f.index and n in flash_c.index else (None, False, None, None))
                    path_c, path_f = paths[True].get(n), paths[False].get(n)
                    # Runs that did not record a path on both sides cannot tell: they count as one kernel.
                    same_path = path_c is None or path_f is None or path_c == path_f
                    out.append({
                        "shape": shape, "dtype": dtype, "n": n, "measured": measured, "predicted": pred,
                        # Unmasked first, as the ratio and the clocks column take them.
                        "paths": (path_label(path_c or path_f) if (path_c or path_f) else None) if same_path else
                        f"{path_label(path_f)} / {path_label(path_c)}",
                        "t": -(-n // bm) if bm else None, "bm": bm, "bn": bn, "same_config": cfg_c == cfg_f,
                        "diag": model.causal_diagonal_visits(n, bm, bn) if pred else None,
                        "visited": model.causal_blocks_visited(n, bm, bn)[0] if pred else None,
                        "tiles": shape[0] * shape[1] * -(-n // bm) if bm else None,
                        "most_visits": -(-n // bn) if bn else None,
                        "flash": fl[0], "flash_verdict": flash_verdict(fl[0], fl[1], too_far_apart(mask_clock_gap(fl[2], fl[3]))),
                        "overlap": bool(overlap), "clk_f": clk_f, "clk_c": clk_c, "clock_gap": gap, "clocks_apart": apart,
                        "verdict": causal_verdict(measured, pred, bool(overlap), same_path, apart),
                    })
        return pd.DataFrame(out, columns=["shape", "dtype", "n", "measured", "predicted", "paths", "t", "bm", "bn",
                                          "same_config", "diag", "visited", "tiles", "most_visits", "flash", "flash_verdict",
                                          "overlap", "clk_f", "clk_c", "clock_gap", "clocks_apart", "verdict"])

    def _timed(self, shape, dtype, causal, impl: str = "triton") -> pd.DataFrame:
        f = self.bench.facet_rows(self.bench.ok, shape, dtype, causal)
        f = f[(f["impl"] == impl) & f["latency_ms_median"].notna()]
        if "sm_clock_mhz" not in f:  # runs from before the bench phase read clocks
            f = f.assign(sm_clock_mhz=None)
        return f.set_index("seq_len")[["latency_ms_median", "latency_ms_p10", "latency_ms_p90",
                                       "sm_clock_mhz"]].sort_index()

    def _configs(self, shape, dtype) -> dict:
        t = self.bench.facet_rows(self.bench.ok, shape, dtype, True)
        t = pd.concat([t, self.bench.facet_rows(self.bench.ok, shape, dtype, False)])
        t = t[t["impl"] == "triton"]
        return {(c, n): cfg for c, n, cfg in zip(t["causal"], t["seq_len"], t["kernel_config"])}

    @property
    def flash_measured(self) -> bool:
        """Whether any causal row has FlashAttention-2 (SDPA) measured beside it (not on a GPU SDPA's flash backend
        declines, such as a T4, where its rows are unsupported)."""
        return not self.causal.empty and bool(self.causal["flash"].notna().any())

    def causal_table(self) -> str:
        df = self.causal
        if df.empty:
            return "No seq_len has both a causal and a non-causal Triton measurement."
        df = df.assign(shape_l=df["shape"].map(shape_label), dt=df["dtype"].map(dtype_short),
                       blocks=[f"{int(a)}×{int(b)}" if a == a and a else "not recorded" for a, b in zip(df["bm"], df["bn"])])
        r = lambda v: "n/a" if v is None or v != v else fmt.ratio(v)  # noqa: E731
        df = df.assign(paths=df["paths"].fillna("not recorded"), clocks=[_clock_note(x) for _, x in df.iterrows()],
                       flash_verdict=df["flash_verdict"].fillna("n/a"))
        columns = {"shape_l": "Shape", "dt": "dtype", "n": "N", "paths": "path (unmasked / masked)",
                   "blocks": "BLOCK_M×BLOCK_N (causal)",
                   "t": "T query blocks", "predicted": "predicted (key blocks: all / visited)", "measured": "Triton measured",
                   "verdict": "the block count", "clocks": "Triton's SM clocks (unmasked / masked)",
                   "flash": "FlashAttention-2 (SDPA) measured", "flash_verdict": "FlashAttention-2 (SDPA): the mask"}
        if not self.flash_measured:  # two columns of n/a say nothing: the page's text says FlashAttention-2 did not run
            columns = {k: v for k, v in columns.items() if k not in ("flash", "flash_verdict")}
        return table_html(df, columns,
                          {"predicted": r, "measured": r, "flash": r, "t": lambda v: "n/a" if v != v or v is None else int(v)})

    def causal_finding(self) -> str:
        """The block count checked against every row: which rows it explains and which it does not."""
        df = self.causal
        if df.empty:
            return "The causal speedup cannot be measured: no length has both a causal and a non-causal Triton run."
        known = df[df["predicted"].notna()]
        if known.empty:
            return ("The Triton rows do not record their tile sizes, so T, and with it the prediction, is unknown; "
                    f"the measured causal speedup was {fmt.ratio(df['measured'].min())} to "
                    f"{fmt.ratio(df['measured'].max())}, against the limit of 2× that (T+1)/(2T) tends to.")
        counts = known["verdict"].value_counts()
        parts = [_counted(v, int(counts[v])) for v in VERDICTS if v in counts]
        out = [f"Checked row by row against the block count: {join(parts)} (of {len(known)} rows)."]
        short = known[known["verdict"] == "short of the block count"]
        if len(short):
            worst = short.loc[(short["measured"] / short["predicted"]).idxmin()]
            out.append(
                f"A shortfall is what the count leaves out. At N={worst['n']} ({shape_label(worst['shape'])}), "
                f"{int(worst['diag'])} of the {int(worst['visited'])} key tiles each head visits straddle the "
                "diagonal: they cost a full tile and keep about half of it.")
            average = worst["visited"] / worst["t"]
            out.append(
                f"The last query tile visits all {int(worst['most_visits'])} key tiles, "
                f"{fmt.ratio(worst['most_visits'] / average)} the average of {fmt.num(average, 3)}, and "
                f"{int(worst['tiles']):,} query tiles share {self.device.sm_count} SMs, so the longest ones "
                f"{'set the finishing time' if worst['tiles'] < 4 * self.device.sm_count else 'are partly hidden behind shorter ones'}; "
                "per-tile costs (loading the Q tile, storing O) and the launch do not shrink with masking at all.")
        slower = known[known["verdict"].isin(["slower with the mask", "within the timing spread"])
                       & (known["measured"] < 1)]
        if len(slower):
            clear = slower[slower["verdict"] == "slower with the mask"]
            text = (f"Doing less work cannot by itself make a run slower, yet the causal run is slower in "
                    f"{len(slower)} of {len(known)} rows (N={join(sorted(set(slower['n'])))}).")
            if len(clear) < len(slower):
                text += (f" In {len(slower) - len(clear)} of them the p10 to p90 spreads of the two timings overlap, so "
                         "the difference is inside the run-to-run spread.")
            if len(clear):
                text += (f" In {len(clear)} the spreads do not overlap: the block count does not explain "
                         f"{'that row' if len(clear) == 1 else 'those rows'}, which point at a cost that the mask "
                         "adds rather than removes (a different kernel variant or schedule for the causal case).")
            out.append(text)
        over = known[known["verdict"] == "beats the block count"]
        if len(over):
            top = over.loc[(over["measured"] / over["predicted"]).idxmax()]
            differ = over[~over["same_config"]]
            text = (f"{plural(len(over), 'row')} beat{'s' if len(over) == 1 else ''} the bound the count sets, "
                    f"up to {fmt.ratio(top['measured'])} against {fmt.ratio(top['predicted'])} at N={top['n']} "
                    f"({shape_label(top['shape'])}, {dtype_short(top['dtype'])}), which skipping tiles alone cannot "
                    "do.")
            text += (f" The causal case ran a different tile config in {len(differ)} of them." if len(differ) else
                     " The same tile config ran both ways, so the block count does not explain "
                     f"{'it' if len(over) == 1 else 'them'}.")
            out.append(text)
        out += self._clock_sentences(df) + self._flash_sentences(df)
        return " ".join(out)

    def _clock_sentences(self, df: pd.DataFrame) -> list[str]:
        """Which rows compare Triton calls run at SM clocks more than CLOCK_GAP apart, the widest gap, and, for
        any ratio above what a mask can give, whether the clocks account for it."""
        out = []
        known = [(g, i) for i, g in zip(df.index, df["clock_gap"]) if g is not None and g == g]
        apart = [(g, i) for g, i in known if g > CLOCK_GAP]
        if apart:
            g, i = max(apart)
            w = df.loc[i]
            out.append(f"In {len(apart)} of {plural(len(known), 'row')} the unmasked and masked Triton calls had "
                       f"median SM clock readings more than {fmt.pct(100 * CLOCK_GAP, 2)} apart (clocks are read, never set; "
                       f"the table marks them), widest at {self._row_label(w)}: {fmt.num(w['clk_f'], 4)} MHz unmasked "
                       f"against {fmt.num(w['clk_c'], 4)} MHz masked.")
            out.append("A compute-bound call's time scales about inversely with its clock, so those ratios carry the "
                       "gap and are not read as the mask's saving.")
        widest = max(apart)[1] if apart else None
        for i, w in df[df["measured"] > MASK_MAX].iterrows():
            # Three decimals: a ratio just past the bound must not print as the bound itself ('2.00×').
            label = (f"{'In that row' if i == widest else 'At ' + self._row_label(w)} the measured ratio of "
                     f"{w['measured']:.3f}× is more than the {MASK_MAX:g}× any mask can give, since skipping "
                     "tiles at most halves the work")
            out.append(f"{label}. {self._one_clock_clause(w)}")
        return out

    @staticmethod
    def _one_clock_clause(w) -> str:
        """Whether the two calls' clocks account for a ratio past MASK_MAX: the ratio taken to one clock, computed
        wherever both clocks were recorded, however close they lie (a gap under CLOCK_GAP can still carry a ratio
        just past the bound back under it)."""
        lead = "The two calls ran different kernels, and " if w["verdict"] == DIFFERENT_KERNELS else ""
        clk_f, clk_c = w["clk_f"], w["clk_c"]
        if clk_f is None or clk_c is None or clk_f != clk_f or clk_c != clk_c or not clk_c:
            said = "their SM clocks were not both recorded, so whether the clocks account for it is unknown."
        else:
            # A compute-bound call's time scales about inversely with its clock: at the unmasked call's clock the
            # masked call would take clk_c / clk_f times as long.
            one_clock = w["measured"] * clk_f / clk_c
            at_one = fmt.ratio_vs(one_clock, MASK_MAX)
            # one_clock <= MASK_MAX < measured only where clk_c > clk_f: the clock that carries the excess is the
            # masked call's.
            said = (f"the masked call's higher clock, not the mask, accounts for the excess: at one clock the ratio "
                    f"would be about {at_one}, under {MASK_MAX:g}×." if one_clock <= MASK_MAX else
                    f"their clocks do not account for it: at one clock the ratio would still be about {at_one}.")
        return lead + said if lead else said[0].upper() + said[1:]

    def _flash_sentences(self, df: pd.DataFrame) -> list[str]:
        """FlashAttention-2 (SDPA) held to the same rule: a mask that skips work cannot make it slower."""
        slower = df[df["flash_verdict"] == "slower with the mask"]
        if slower.empty:
            return []
        w = slower.loc[slower["flash"].idxmin()]
        where = (f"at {self._row_label(w)}" if len(slower) == 1 else
                 f"in {len(slower)} rows, most at {self._row_label(w)}")
        return [f"FlashAttention-2 (SDPA) is slower with the mask {where}: {fmt.ratio(w['flash'])}, outside the p10 to p90 "
                f"spreads of the two timings and at SM clocks within {fmt.pct(100 * CLOCK_GAP, 2)} of each other. "
                "That is a cost the mask adds rather than removes, which no count of skipped tiles explains."]

    @staticmethod
    def _row_label(w) -> str:
        return f"N={w['n']} ({shape_label(w['shape'])}, {dtype_short(w['dtype'])})"
