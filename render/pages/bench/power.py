"""At the power limit: the bench phase's power case (collect/bench_power.py), each implementation run back to back
at one long case, with the board's power, its SM clock and the energy each call spent.

At the limit the board's power is fixed, so a call's time is its energy over that power, and its energy is the
cycles it needs times the energy each cycle spends: a kernel can need more cycles than another and still draw
less per cycle, which the driver repays with a higher clock. The section splits each comparison into those two
factors, from the rows alone."""
from __future__ import annotations

from functools import cached_property

import pandas as pd
import plotly.graph_objects as go

from ... import escape, fmt
from ...axes import log_ticks
from ...figures import PALETTE
from ...tables import table_html
from ...vocab import facet_label, impl_label, join, shape_label
from .common import FUSED, BenchSection

# A board drawing at least this share of its enforced limit is at the limit: the driver holds it a few watts under.
AT_LIMIT = 0.97
# Two energies (or cycle counts, or clocks) within this relative band are "about the same": the counter's window
# spans a few seconds, and repeats of one kernel moved by about this much.
SAME_BAND = 0.005


def _mhz(x) -> str:
    """A clock in whole MHz ('1,504'): NVML's samples are whole, their mean is not, and a tenth of a MHz says nothing."""
    return f"{x:,.0f}" if fmt.known(x) else "n/a"


def _change(x: float, more: str, less: str) -> str:
    """A relative change as words: '2.1% more', '0.8% less', or 'about the same' inside SAME_BAND."""
    if abs(x - 1) <= SAME_BAND:
        return "about the same"
    return f"{fmt.pct(abs(x - 1) * 100, 2)} {more if x > 1 else less}"


class Power(BenchSection):
    """The power case's rows, and what they say about ours against the quickest other implementation there."""

    @cached_property
    def _power(self) -> pd.DataFrame:
        r = self.rows
        if "energy_mj_per_call" not in r:
            return r.iloc[0:0]
        t = r[(r["status"] == "ok") & r["energy_mj_per_call"].notna()].copy()
        for col in ("board_power_w", "power_limit_w", "power_sm_clock_mhz", "power_loop_ms", "energy_mj_per_call"):
            t[col] = pd.to_numeric(t[col], errors="coerce")  # a column of nulls alone comes as objects
        # Cycles per call at the limit: back-to-back time times the clock the driver held (NVML's mean).
        t["mcycles"] = t["power_loop_ms"] * t["power_sm_clock_mhz"] / 1e3
        t["uj_per_kcycle"] = t["energy_mj_per_call"] / t["mcycles"]  # mJ per Mcycle = nJ per cycle
        return t.sort_values("energy_mj_per_call")

    @staticmethod
    def _at_limit(row) -> bool:
        return fmt.known(row["power_limit_w"]) and row["board_power_w"] >= AT_LIMIT * row["power_limit_w"]

    def power_rows(self) -> bool:
        """Whether this run measured the power case (runs before schema 9 did not)."""
        return not self._power.empty

    def power_absent(self) -> str:
        """Why this run has no power case, for the section that stays so that links to it (the glossary's) hold:
        the bench phase's own note where it wrote one (no energy counter, no case of ours, the budget spent), else
        that the run predates the power case."""
        notes = [n for n in (getattr(self.data, "notes", None) or []) if n.startswith("Power at the limit")]
        if notes:
            return f"This run has no power measurement. {escape.text(notes[0])}"
        return ("This run has no power measurement: its bench phase did not run the power case (runs collected "
                "before schema 9 had none).")

    def power_row(self, impl: str, shape, dtype: str, causal: bool, n: int) -> pd.Series | None:
        """The power phase's row of `impl` at one case (shape as (batch, heads, head_dim)), None where it did not run it."""
        t = self._power
        if t.empty:
            return None
        b, h, d = shape
        row = t[(t["impl"] == impl) & (t["batch"] == b) & (t["heads"] == h) & (t["head_dim"] == d)
                & (t["dtype"] == dtype) & (t["causal"] == causal) & (t["seq_len"] == n)]
        return None if row.empty else row.iloc[0]

    def power_cycles(self, impl: str, shape, dtype: str, causal: bool, n: int) -> float | None:
        """Cycles per call back to back, in Mcycles, of `impl` at one case of the power phase: its back-to-back time
        times the clock the driver held during the loop (a clock of the calls, unlike a rested call's reading, which is
        of the rest before it). None where the power phase did not run that case for it."""
        r = self.power_row(impl, shape, dtype, causal, n)
        if r is None or not fmt.known(r["mcycles"]):
            return None
        return float(r["mcycles"])

    def _ours_and_rival(self):
        t = self._power
        ours = t[t["impl"] == FUSED]
        others = t[t["impl"] != FUSED]
        if ours.empty or others.empty:
            return None, None
        return ours.iloc[0], others.loc[others["power_loop_ms"].idxmin()]

    def _case_words(self) -> str:
        r = self._power.iloc[0]
        return (f"{shape_label((r['batch'], r['heads'], r['head_dim']))}, N={r['seq_len']}, "
                f"{facet_label(r['dtype'], bool(r['causal']))}")

    def power_finding(self) -> str:
        """Whether the board was at its limit, and ours against the quickest other implementation there: the
        energy per call, split into cycles per call and energy per cycle."""
        t = self._power
        if t.empty:
            return ""
        limit = t["power_limit_w"].dropna()
        at = t[[self._at_limit(r) for _, r in t.iterrows()]]
        names = [escape.text(impl_label(i)) for i in t["impl"]]
        clocks = t["power_sm_clock_mhz"].dropna()
        if len(at) == len(t):
            opening = (f"Run back to back at {self._case_words()}, every implementation measured here held the board "
                       f"at its power limit ({fmt.span(t['board_power_w'].min(), t['board_power_w'].max())} W of "
                       f"{fmt.num(limit.max())} W)"
                       + (f", and the driver lowered the SM clock to {fmt.span(clocks.min(), clocks.max(), _mhz)} MHz"
                          if not clocks.empty else "")
                       + ", so the implementations rank by the energy they spend per call.")
        elif at.empty:
            opening = (f"Run back to back at {self._case_words()}, none of {join(names)} reached the board's power "
                       f"limit ({fmt.span(t['board_power_w'].min(), t['board_power_w'].max())} W"
                       + (f" of {fmt.num(limit.max())} W" if not limit.empty else "") + "): on this GPU the clock, not "
                       "the power, sets their pace at this case, and the energy per call below is a cost, not the "
                       "time.")
        else:
            opening = (f"Run back to back at {self._case_words()}, "
                       f"{join(escape.text(impl_label(i)) for i in at['impl'])} held the board at its power limit "
                       f"and the others did not ({fmt.span(t['board_power_w'].min(), t['board_power_w'].max())} W of "
                       f"{fmt.num(limit.max())} W).")
        ours, rival = self._ours_and_rival()
        if ours is None:
            return opening
        who = escape.text(impl_label(rival["impl"]))
        energy = ours["energy_mj_per_call"] / rival["energy_mj_per_call"]
        cycles = ours["mcycles"] / rival["mcycles"]
        per_cycle = ours["uj_per_kcycle"] / rival["uj_per_kcycle"]
        clock = ours["power_sm_clock_mhz"] / rival["power_sm_clock_mhz"]
        split = (f" Against {who}, the quickest other implementation back to back, ours spent "
                 f"{_change(energy, 'more', 'less')} energy per call ({fmt.num(ours['energy_mj_per_call'])} mJ against "
                 f"{fmt.num(rival['energy_mj_per_call'])} mJ).")
        if not fmt.known(clock):  # NVML gave no clock: the split into cycles and energy per cycle cannot be made
            split += " The driver reported no SM clock, so the energy is not split into cycles and energy per cycle."
        else:  # sentences of their own: four measured figures at most in one (tests/test_report_findings.py)
            split += (f" It needed {_change(cycles, 'more', 'fewer')} cycles per call and spent "
                      f"{_change(per_cycle, 'more', 'less')} energy per cycle.")
            split += (" The driver held both at about the same clock." if abs(clock - 1) <= SAME_BAND else
                      f" So the driver held ours at a {fmt.pct(abs(clock - 1) * 100, 2)} "
                      f"{'higher' if clock > 1 else 'lower'} clock ({_mhz(ours['power_sm_clock_mhz'])} MHz "
                      f"against {_mhz(rival['power_sm_clock_mhz'])} MHz).")
        rested = rival["latency_ms_median"] / ours["latency_ms_median"]
        looped = rival["power_loop_ms"] / ours["power_loop_ms"]
        both_at = all(self._at_limit(r) for r in (ours, rival))
        split += (f" Its speed ratio is {fmt.ratio(looped)} back to back{' at the limit' if both_at else ''} and "
                  f"{fmt.ratio(rested)} in the rested device time the rest of this page compares, where each call "
                  "follows a rest of at least half its length.")
        return opening + split

    def power_table(self) -> str:
        t = self._power
        if t.empty:
            return ""
        ours = t[t["impl"] == FUSED]
        base = ours.iloc[0]["energy_mj_per_call"] if not ours.empty else None
        out = pd.DataFrame({
            "impl": [escape.text(impl_label(i)) for i in t["impl"]],
            "power": [f"{fmt.num(w)} W of {fmt.num(lim)} W" if fmt.known(lim) else f"{fmt.num(w)} W"
                      for w, lim in zip(t["board_power_w"], t["power_limit_w"])],
            "clock": [f"{_mhz(c)} MHz ({_mhz(r)} MHz)" for c, r in zip(t["power_sm_clock_mhz"],
                                                                                   t["sm_clock_mhz"])],
            "loop": [fmt.ms(x) for x in t["power_loop_ms"]],
            "rested": [fmt.ms(x) for x in t["latency_ms_median"]],
            "mcycles": [fmt.num(x) for x in t["mcycles"]],
            "energy": [f"{fmt.num(x)} mJ" for x in t["energy_mj_per_call"]],
            "vs": [fmt.ratio(x / base) if base else "n/a" for x in t["energy_mj_per_call"]]})
        return table_html(out, {"impl": "Implementation", "power": "board power", "clock": "SM clock back to back "
                                "(rested)", "loop": "time per call, back to back", "rested": "device time, rested",
                                "mcycles": "Mcycles per call", "energy": "energy per call",
                                "vs": "energy ÷ ours"})

    def power_figure(self) -> str:
        """Each implementation's energy per call, cycles per call and energy per cycle over ours', as dots on a log
        axis (a dot needs no zero baseline, so differences of a few percent stay visible beside a 2x outlier)."""
        t = self._power
        ours = t[t["impl"] == FUSED]
        if t.empty or ours.empty:
            return ""
        base = ours.iloc[0]
        fig = go.Figure()
        labels = [escape.plot(impl_label(i)) for i in t["impl"]]
        factors = (("energy_mj_per_call", "energy per call", "mJ", "circle"),
                   ("mcycles", "cycles per call", "Mcycles", "diamond"),
                   ("uj_per_kcycle", "energy per cycle", "nJ", "square"))
        factors = tuple(f for f in factors if fmt.known(base[f[0]]))  # no clock from NVML: energy per call alone
        for i, (field, name, unit, symbol) in enumerate(factors):
            ys = t[field] / base[field]
            fig.add_trace(go.Scatter(
                x=labels, y=ys, mode="markers", name=name, marker=dict(symbol=symbol, size=11, color=PALETTE[i]),
                customdata=[f"{fmt.num(v, 4)} {unit}" for v in t[field]],
                hovertemplate=f"%{{x}}<br>{name}: %{{customdata}}, %{{y:.3f}}× ours<extra></extra>"))
        fig.add_hline(y=1.0, line_dash="dash", line_color=PALETTE[7], line_width=1)
        ys = [v for field, *_ in factors for v in t[field] / base[field] if fmt.known(v)]
        fig.update_yaxes(type="log", title_text="÷ ours", **log_ticks(ys + [1.0]))
        what = ("energy per call (board power from the driver's energy counter times the time per call), cycles per "
                "call (time per call times the SM clock the driver held) and their quotient, energy per cycle"
                if len(factors) == 3 else "energy per call (board power from the driver's energy counter times the "
                "time per call; the driver reported no clock to split it by)")
        return self.figure("power-limit", fig,
                           f"The power case, {self._case_words()}, each implementation run back to back for a few "
                           f"seconds, against ours (the dashed line): {what}. At the power limit, energy per call "
                           "orders the times.", height=400)
