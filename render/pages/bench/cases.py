"""What was measured: the run's cases, the clocks they ran at, the kernel our rows ran, and SDPA's own choice."""
from __future__ import annotations

import pandas as pd

from ... import escape, fmt
from ...bench_data import distinct_sdpa
from ...clock_reading import overshoot
from ...vocab import (CLOCK_GAP, IMPL_LABELS, clock_gap, clocks_apart, dtype_short, facet_label, impl_label,
                      is_rival, join, kernel_name, plural, shape_label, speedup_words)
from .common import FUSED, BenchSection
from .words import call_then_words


def _kernels_used(rows: pd.DataFrame) -> str:
    """'the Gluon tile kernel in 6 cases (with tensor cores in its code)' for each kernel `rows` (bench rows that ran,
    with kernel_path) ran, by public name: the Gluon steps of one kernel together."""
    parts = []
    steps = rows["kernel_step"] if "kernel_step" in rows else pd.Series(None, index=rows.index, dtype=object)
    names = [kernel_name(p, s if isinstance(s, str) else None) for p, s in zip(rows["kernel_path"], steps)]
    for name, g in rows.groupby(pd.Series(names, index=rows.index), sort=False):
        tc = g["tensor_cores"].dropna() if "tensor_cores" in g else pd.Series(dtype=bool)
        use = ("with tensor cores in its code" if len(tc) and tc.all() else
               "without tensor cores in its code" if len(tc) and not tc.any() else
               f"with tensor cores in {int(tc.sum())} of {len(tc)}" if len(tc) else "tensor-core use not recorded")
        parts.append(f"the {escape.text(name)} in {plural(len(g), 'case')} ({use})")
    return join(parts)


class Cases(BenchSection):
    """The run's cases, their clocks, the kernel our rows ran and SDPA's own choice."""

    def summary(self) -> str:
        """What the run measured: the implementations and dtypes in a sentence, the shapes (each with its lengths) in
        a list, how many cases did not run ok in a sentence of their own, then the clocks."""
        data = self.data
        counts = self.rows["status"].value_counts()
        failed = join(f"{counts[s]} {s}" for s in ("oom", "unsupported", "error", "skipped") if s in counts)
        shapes = [(s, self.b.seq_lens(s)) for s in self.shapes() + self.b.point_shapes()]
        # An implementation or dtype none of whose cases this GPU could run (FlashAttention-4 or bf16 on a T4) is
        # not one the run measured: the sentence after the shapes names it as unsupported instead.
        rows = self.rows
        never = rows.groupby("impl")["status"].agg(lambda s: set(s) == {"unsupported"})
        never_dt = rows.groupby("dtype")["status"].agg(lambda s: set(s) == {"unsupported"})
        ran = [i for i in self.impls() if not never.get(i, False)] or self.impls()
        dtypes = list(dict.fromkeys(rows["dtype"]))
        ran_dt = [d for d in dtypes if not never_dt.get(d, False)] or dtypes
        text = (f"This run measured {len(rows)} cases of {join(impl_label(i) for i in ran)}, in "
                f"{join(dtype_short(d) for d in ran_dt)}, causal and not, at "
                f"{'this shape' if len(shapes) == 1 else 'these shapes'}:\n\n")
        text += "".join(f"- {shape_label(s)}, {_lengths_words(ns)}\n" for s, ns in shapes)
        text += ("\nEvery case ran ok." if not failed else f"\nNone ran ok: {failed}." if "ok" not in counts
                 else f"\nApart from {failed}, every case ran ok.")
        gone = [impl_label(i) for i in self.impls() if i not in ran]
        gone_dt = [dtype_short(d) for d in dtypes if d not in ran_dt]
        if gone or gone_dt:
            what = (f"no case of {join(gone)}" + (f", nor any {join(gone_dt)} case," if gone_dt else "") if gone
                    else f"no {join(gone_dt)} case")
            text += (f" On this GPU {what} could run: all of those are unsupported, each with its reason under [Cases "
                     "that did not run](#cases-that-did-not-run).")
        text += self._clock_sentence() + self._clock_gap_sentence()
        text += f'\n\n??? info "How each case was timed"\n    {escape.text(data.timing_method)}\n'
        text += "".join(map(escape.note, data.notes))
        return text

    # The kinds the page's list describes; the portable path only where the run timed it (collect drops it on a GPU
    # without the Hopper path, where it would time the very kernel `triton` does).
    KINDS = ("naive", "sdpa forced", "sdpa choice", "fa4", FUSED)

    def has_portable(self) -> bool:
        return bool((self.rows["impl"] == "triton-portable").any())

    def measured_intro(self) -> str:
        """What the page measures, over the run's own sweeps and single shapes: a profile or a GPU that runs other
        shapes (the quick profile sweeps one) must not read the full profile's."""
        sweeps = self.shapes()
        points = self.b.point_shapes()
        over = (f"over {'one sweep' if len(sweeps) == 1 else f'{_word(len(sweeps))} sweeps'} of N "
                f"({join(shape_label(s) for s in sweeps)})" if sweeps else "")
        if points:
            many = "s" if len(points) > 1 else ""
            over += (f"{' and' if over else 'over'} {_word(len(points))} single shape{many}, each at one length (the "
                     "section on single shapes names them)")
        kinds = _word(len(self.KINDS) + self.has_portable())
        return ("How long one forward pass of attention takes, how many floating-point operations per second it "
                "sustains, and how much memory it needs beyond its inputs, as the sequence grows"
                + (f", {over}" if over else "") + f". {kinds[0].upper()}{kinds[1:]} kinds of implementation are "
                "measured on the same inputs:")

    def coverage(self) -> str:
        """The implementations timed at only some of the run's shapes, and what that leaves out of "the fastest other
        implementation" elsewhere: a comparison's opponent is chosen from what ran at that shape."""
        shapes = self.b.shapes()
        timed = self.ok[self.ok["latency_ms_median"].notna()]
        where = {i: [sh for sh in shapes if ((timed["impl"] == i) & (timed["shape"] == sh)).any()] for i in self.impls()}
        partial = {i: sh for i, sh in where.items() if sh and len(sh) < len(shapes)}
        if not partial:
            return ""
        groups: dict[tuple, list[str]] = {}
        for i, sh in partial.items():
            groups.setdefault(tuple(sh), []).append(impl_label(i))
        # Groups apart by semicolons: the shapes inside a group are already joined by "and".
        said = "; ".join(f"{join(names)} at {join(shape_label(s) for s in sh)} only" for sh, names in groups.items())
        text = f"Not every implementation ran at every shape: {said}."
        missed = [impl_label(i) for i in partial if is_rival(i)]
        if missed:
            text += (f" Elsewhere, the fastest other implementation is chosen without {join(missed)}.")
        return text

    def _clock_sentence(self) -> str:
        """The SM clock seen while the device time was measured, where the run recorded it: the spread of
        the cases' medians, then the single samples' extremes, which one call's wake-up or a power-limit
        dip can set alone."""
        ok = self.ok
        if "sm_clock_mhz" not in ok or ok["sm_clock_mhz"].isna().all():
            return " The SM clock during the timing was not recorded in this run."
        med = ok["sm_clock_mhz"].dropna()
        lo = ok["sm_clock_min_mhz"].dropna().min() if "sm_clock_min_mhz" in ok else float("nan")
        hi = ok["sm_clock_max_mhz"].dropna().max() if "sm_clock_max_mhz" in ok else float("nan")
        lo = med.min() if lo != lo else min(lo, med.min())
        hi = med.max() if hi != hi else max(hi, med.max())
        a, b = fmt.num(med.min(), 4), fmt.num(med.max(), 4)
        text = (f" While the device time was measured, each case's median SM clock was {a} MHz" if a == b else
                f" While the device time was measured, each case's median SM clock lay between {a} and {b} MHz")
        x, y = fmt.num(lo, 4), fmt.num(hi, 4)
        if (x, y) != (a, b):
            text += f", and single calls saw {x} to {y} MHz"
        text += " (clocks are read, never set)."
        return text + self._clock_over_max()

    def _clock_over_max(self) -> str:
        """A reading above the device's maximum SM clock says how far the rest before a call, where the clock is read,
        can stand from the call's own clock (render/clock_reading.py), and the pages weigh clock gaps of a few
        percent."""
        o = overshoot(self.ok, self.run.manifest.device)
        if o is None:
            return ""
        hi, top = o
        return (f" The highest reading lies {fmt.pct(100 * (hi / top - 1), 2)} above the device's reported maximum "
                f"SM clock of {fmt.num(top, 4)} MHz: readings are of the rest before each call, not of the call, so a "
                "gap between two of that size or less need not be one between the calls' clocks.")

    def _clock_gap_sentence(self) -> str:
        """Where our kernel and the fastest other implementation it is compared with ran at median SM clocks more than
        CLOCK_GAP apart (clocks are read, never set), how many such comparisons there are and the widest."""
        if "sm_clock_mhz" not in self.ok:
            return ""
        pairs = []
        for shape in self.b.shapes():
            for dtype, causal in self.facets(shape):
                f = self.b.facet_rows(self.ok, shape, dtype, causal)
                ours = f[f["impl"] == FUSED].set_index("seq_len")["sm_clock_mhz"]
                ours_t = f[f["impl"] == FUSED].set_index("seq_len")["latency_ms_median"]
                fast = self.b.fastest_rival(shape, dtype, causal)
                for n in ours.index.intersection(fast.index):
                    a, b = ours[n], fast.loc[n, "sm_clock_mhz"]
                    if (gap := clock_gap(a, b)) is not None:
                        ratio = fast.loc[n, "latency_ms_median"] / ours_t[n]
                        pairs.append((gap, a, b, shape, dtype, causal, int(n), self._sdpa_label(fast.loc[n]), ratio,
                                      fast.loc[n, "impl"]))
        # The comparisons whose clock readings lie apart (vocab.clocks_apart, which Home's headline table asks of its
        # cells too). No ratio is rescaled by them: a reading is of the rest before the call.
        apart = [x for x in pairs if clocks_apart(x[1], x[2])]
        if not apart:
            return ""
        _, a, b, shape, dtype, causal, n, who, ratio, _ = max(apart, key=lambda x: x[0])
        leaning = sum((x[1] > x[2]) == (x[8] >= 1) for x in apart)
        text = (f" In {len(apart)} of {plural(len(pairs), 'comparison')} with the fastest other implementation the two "
                f"calls' median SM clock readings differ by more than {fmt.pct(100 * CLOCK_GAP, 2)}. The widest gap is "
                f"at {facet_label(dtype, causal)}, {shape_label(shape)}, N={n}, ours at {fmt.num(a, 4)} MHz against "
                f"{who}'s {fmt.num(b, 4)} MHz, where the medians make ours {speedup_words(ratio)}. In {leaning} of the "
                f"{len(apart)} the call with the higher reading was also the quicker. A reading is of the rest before "
                "each call, not of the call, and the [Hardware](hardware.md#clocks-seen) page shows how little this run's "
                "times follow it, so no verdict is rescaled by the readings; the tables give the verdicts as timed.")
        text += self._cycles_back_to_back(apart)
        if self.power_rows():
            # A gap between two calls can be the kernels' own doing: at the power limit the driver sets each one's
            # clock by the energy it spends per cycle, so a comparison at one clock is a case that never runs.
            text += (" Where a call holds the board at its power limit, its clock is partly its own doing (the "
                     "driver lowers it by the power the kernel draws: [At the power limit](#at-the-power-limit)), so "
                     "the verdict at the clocks the calls ran at is the one a user gets.")
        return text

    def _cycles_back_to_back(self, apart: list[tuple]) -> str:
        """Where the power phase ran one of the comparisons whose clock readings lie apart back to back (both calls),
        the cycle ratio it measured there: time times the clock nvidia-smi read during the loop, a clock of the calls
        themselves. '' where it ran none of them."""
        for x in sorted(apart, key=lambda x: -x[0]):
            _, _, _, shape, dtype, causal, n, who, _, rival = x
            ours, theirs = (self.power_cycles(i, shape, dtype, causal, n) for i in (FUSED, rival))
            if ours is None or theirs is None:
                continue
            return (f" The power phase ran one of these cases back to back, {facet_label(dtype, causal)}, "
                    f"{shape_label(shape)}, N={n}, where nvidia-smi read the clock during the calls: there ours needed "
                    f"{fmt.ratio(ours / theirs)} {who}'s cycles per call (time times that clock).")
        return ""

    def path_sentence(self) -> str:
        """Which kernel our rows ran and whether its code used the tensor cores, from the rows themselves."""
        df = self.run.frame("bench", "rows")
        if df.empty or "kernel_path" not in df:
            return ""
        ours = df[(df["impl"] == FUSED) & (df["status"] == "ok") & df["kernel_path"].notna()]
        if ours.empty:
            return ""
        text = (f"Which kernel ran, from each row: {_kernels_used(ours)}. The code is read from the compiled kernel "
                "that ran (`kernels/aot.py`), so a GPU where Triton compiles matrix multiplies without tensor cores says "
                "so here.")
        # Our kernel held to the portable path is the T4's fallback: whether Triton gave it tensor cores there is the
        # question the Turing kernel exists to answer.
        held = df[(df["impl"] == "triton-portable") & (df["status"] == "ok") & df["kernel_path"].notna()]
        if not held.empty:
            text += f" {impl_label('triton-portable')} ran {_kernels_used(held)}."
        return text

    def backend_choice(self) -> str:
        """Which backend PyTorch chose when none was forced."""
        auto = self.ok[self.ok["impl"] == "sdpa"]
        if auto.empty:
            return "No case of SDPA without a forced backend ran, so PyTorch's own choice is not known for this run."
        parts = []
        for backend, grp in auto.groupby("backend_used", sort=False):
            where = ""
            if len(grp) < len(auto):
                facets = dict.fromkeys(f"{shape_label(s)} {facet_label(dt, c)}"
                                       for s, dt, c in zip(grp["shape"], grp["dtype"], grp["causal"]))
                where = f" ({join(facets)})"
            # The backend as the forced rows name it ('cudnn' -> SDPA cuDNN); a backend no forced row has keeps its name.
            name = IMPL_LABELS.get(f"sdpa-{backend}", backend)
            parts.append(f"**{escape.text(name)}** in {len(grp)} of {len(auto)} cases{where}")
        text = (f"With no backend forced, PyTorch chose {join(parts)}. "
                f"The choice was read with {call_then_words(self.data.backend_choice_method)}.")
        return text + self._choice_counted_once(auto)

    def _choice_counted_once(self, auto: pd.DataFrame) -> str:
        """How many of PyTorch's choices ran a backend that was also timed forced: those rows time the same
        kernel twice, and the comparisons with the fastest other implementation use the forced row alone."""
        timed = auto[auto["latency_ms_median"].notna()]
        twice = int((~timed.index.isin(distinct_sdpa(self.ok).index)).sum())
        if not twice:
            return ""
        rest = len(timed) - twice
        where = "In every one of them" if not rest else f"In {twice} of them"
        text = (f" {where}, the backend it chose was also timed forced, so the two rows are one kernel timed twice: "
                "the comparisons with the fastest other implementation below count that kernel once, by its forced run.")
        if rest:
            text += (f" In the other {rest}, PyTorch's choice is compared as it is "
                     "(its backend was not timed forced there, or is not known).")
        return text


def _word(n: int) -> str:
    """A small count in words, as prose writes it."""
    return ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine")[n - 1] if 0 < n < 10 else str(n)


def _lengths_words(ns: list[int]) -> str:
    """The lengths a shape ran at: 'over seq_len 512 to 16384' only where they double from the first to the last
    with none left out; otherwise each length, and the doublings between the ends that did not run where the lengths
    lie on one ('at seq_len 512, 1024, 2048, 4096 and 16384, not 8192')."""
    if len(ns) == 1:
        return f"at seq_len {ns[0]} only"
    if all(b == 2 * a for a, b in zip(ns, ns[1:])):
        return f"over seq_len {ns[0]} to {ns[-1]}"
    text = f"at seq_len {join(ns)}"
    chain = [ns[0]]
    while chain[-1] < ns[-1]:
        chain.append(2 * chain[-1])
    if chain[-1] == ns[-1] and set(ns) <= set(chain):
        text += f", not {join([n for n in chain if n not in ns], 'or')}"
    return text
