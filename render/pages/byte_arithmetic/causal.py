"""Causal masking, predicted and measured: Triton's causal speedup beside the block count, row by row."""
from __future__ import annotations

from functools import cached_property

import pandas as pd

from ... import fmt, model
from ...clock_reading import overshoot_words
from ...tables import table_html
from ...vocab import CLOCK_GAP, dtype_short, join, plural, path_label, shape_label
from .causal_verdicts import (CLOCKS_APART, DIFFERENT_KERNELS, MASK_MAX, VERDICTS, causal_verdict, compare_calls,
                              flash_verdict, mask_clock_gap, too_far_apart)
from .common import BytesSection

# Why a reading cannot size what a clock gap did to a ratio: it is the clock of the rest before the call
# (render/clock_reading.py), it swings by several percent from call to call, and times follow readings far less than
# inversely (the Hardware page). So no ratio is taken to one clock; a gap is only named.
READINGS_ARE_THE_REST = "they are of the rest before each call, not of the call"


def _known(x) -> bool:
    return x is not None and x == x


def _masked_reading_higher(w) -> bool | None:
    """Whether the masked call's clock reading lay more than CLOCK_GAP above the unmasked call's, the one way a clock
    gap could lift the ratio past what a mask can give; None where either reading was not recorded."""
    if not (_known(w["clk_f"]) and _known(w["clk_c"])) or not w["clk_f"]:
        return None
    return w["clk_c"] / w["clk_f"] - 1 > CLOCK_GAP


def _clock_note(w) -> str:
    """The table's clock cell: the two Triton calls' SM clock readings where they lay more than CLOCK_GAP apart, and,
    for a ratio above what a mask can give, whether the readings could account for it, in the words of the finding
    below the table."""
    gap = w["clock_gap"]
    if not _known(gap):
        return "not recorded"
    note = (f"within {fmt.pct(100 * CLOCK_GAP, 2)}" if gap <= CLOCK_GAP else
            f"{fmt.num(w['clk_f'], 4)} / {fmt.num(w['clk_c'], 4)} MHz, {fmt.pct(100 * gap)} apart")
    if w["measured"] > MASK_MAX:
        note += (f"; the masked call's reading is the higher, which may account for the ratio above {MASK_MAX:g}×, "
                 "by how much the readings cannot say" if _masked_reading_higher(w) else
                 f"; the readings do not account for the ratio above {MASK_MAX:g}×")
    return note


def _predicted_cell(w) -> str:
    """The prediction with the counts it divides: one head's key-block visits without the mask over those with it,
    so a reader can check it against the tiles rather than against 2T/(T+1), which holds only for square tiles."""
    if not _known(w["predicted"]):
        return "n/a"
    return f"{fmt.ratio(w['predicted'])} ({int(w['all_blocks'])} / {int(w['visited'])})"


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
                        "all_blocks": model.causal_blocks_visited(n, bm, bn)[1] if pred else None,
                        "tiles": shape[0] * shape[1] * -(-n // bm) if bm else None,
                        "most_visits": -(-n // bn) if bn else None,
                        "flash": fl[0], "flash_verdict": flash_verdict(fl[0], fl[1], too_far_apart(mask_clock_gap(fl[2], fl[3]))),
                        "overlap": bool(overlap), "clk_f": clk_f, "clk_c": clk_c, "clock_gap": gap, "clocks_apart": apart,
                        "verdict": causal_verdict(measured, pred, bool(overlap), same_path, apart),
                    })
        return pd.DataFrame(out, columns=["shape", "dtype", "n", "measured", "predicted", "paths", "t", "bm", "bn",
                                          "same_config", "diag", "visited", "all_blocks", "tiles", "most_visits", "flash", "flash_verdict",
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
                       flash_verdict=df["flash_verdict"].fillna("n/a"),
                       predicted_cell=[_predicted_cell(x) for _, x in df.iterrows()])
        columns = {"shape_l": "Shape", "dt": "dtype", "n": "N", "paths": "path (unmasked / masked)",
                   "blocks": "BLOCK_M×BLOCK_N (causal)",
                   "t": "T query blocks", "predicted_cell": "predicted (key blocks: all / visited)",
                   "measured": "Triton measured",
                   "verdict": "the block count", "clocks": "Triton's SM clock readings (unmasked / masked)",
                   "flash": "FlashAttention-2 (SDPA) measured", "flash_verdict": "FlashAttention-2 (SDPA): the mask"}
        if not self.flash_measured:  # two columns of n/a say nothing: the page's text says FlashAttention-2 did not run
            columns = {k: v for k, v in columns.items() if k not in ("flash", "flash_verdict")}
        # A ratio just past the bound must not print as the bound itself ('2.00×') beside a cell that says it is above.
        past = lambda v: "n/a" if v is None or v != v else fmt.ratio_vs(v, MASK_MAX)  # noqa: E731
        return table_html(df, columns,
                          {"measured": past, "flash": r, "t": lambda v: "n/a" if v != v or v is None else int(v)},
                          caption=self._causal_caption(df))

    @staticmethod
    def _causal_caption(df: pd.DataFrame) -> str:
        """What the predicted column divides: the count on the tiles the masked call used, which is 2T/(T+1) only
        where those tiles are square."""
        known = df[df["predicted"].notna()]
        square = bool((known["bm"] == known["bn"]).all())
        return ("Predicted: the key blocks one head's T query blocks visit without the mask over those they visit "
                "with it (all / visited), counted on the masked call's BLOCK_M×BLOCK_N tiles"
                + ("." if square else
                   "; where BLOCK_M and BLOCK_N differ, it is not 2T/(T+1) for the row's T."))

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
        """Which rows compare Triton calls whose SM clock readings lay more than CLOCK_GAP apart, the widest gap, and,
        for any ratio above what a mask can give, whether the readings could account for it; where the readings pass
        the device's reported maximum, the clause that says what a reading is."""
        out = []
        known = [(g, i) for i, g in zip(df.index, df["clock_gap"]) if _known(g)]
        apart = [(g, i) for g, i in known if g > CLOCK_GAP]
        if apart:
            g, i = max(apart)
            w = df.loc[i]
            out.append(f"In {len(apart)} of {plural(len(known), 'row')} the unmasked and masked Triton calls had "
                       f"median SM clock readings more than {fmt.pct(100 * CLOCK_GAP, 2)} apart (clocks are read, never set; "
                       f"the table marks them), widest at {self._row_label(w)}: {fmt.num(w['clk_f'], 4)} MHz unmasked "
                       f"against {fmt.num(w['clk_c'], 4)} MHz masked.")
            out.append("A call's time can follow its clock, so those ratios may carry the gap, and they are not read "
                       "as the mask's saving.")
        widest = max(apart)[1] if apart else None
        for i, w in df[df["measured"] > MASK_MAX].iterrows():
            # Three decimals: a ratio just past the bound must not print as the bound itself ('2.00×').
            label = (f"{'In that row' if i == widest else 'At ' + self._row_label(w)} the measured ratio of "
                     f"{w['measured']:.3f}× is more than the {MASK_MAX:g}× any mask can give, since skipping "
                     "tiles at most halves the work")
            out.append(f"{label}. {self._past_two_clause(w)}")
        if out:
            words = overshoot_words(self._compared_readings(df), self.device).strip()
            out += [words] if words else []
        return out

    def _compared_readings(self, df: pd.DataFrame) -> pd.DataFrame:
        """The Triton rows the causal table compares, masked and unmasked, with their clock readings."""
        t = self.bench.ok
        t = t[t["impl"] == "triton"]
        keys = set(zip(df["shape"], df["dtype"], df["n"]))
        return t[[k in keys for k in zip(t["shape"], t["dtype"], t["seq_len"])]]

    @staticmethod
    def _past_two_clause(w) -> str:
        """Whether the two calls' clock readings could account for a ratio past MASK_MAX: only a masked call read more
        than CLOCK_GAP faster could, and even then the readings cannot size it, so no ratio is rescaled by them."""
        lead = "The two calls ran different kernels, and " if w["verdict"] == DIFFERENT_KERNELS else ""
        higher = _masked_reading_higher(w)
        if higher is None:
            said = "their SM clocks were not both recorded, so whether the clocks account for it is unknown."
        elif higher:
            said = (f"the masked call's clock reading was the higher, {fmt.num(w['clk_c'], 4)} MHz against "
                    f"{fmt.num(w['clk_f'], 4)} MHz unmasked ({fmt.pct(100 * w['clock_gap'])} apart): that may account "
                    f"for the excess, but the readings cannot say by how much, since {READINGS_ARE_THE_REST}.")
        else:
            said = (f"the clock readings do not account for it: the masked call's reading ({fmt.num(w['clk_c'], 4)} MHz) was "
                    f"not more than {fmt.pct(100 * CLOCK_GAP, 2)} above the unmasked call's "
                    f"({fmt.num(w['clk_f'], 4)} MHz).")
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
