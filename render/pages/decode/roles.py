"""Kernel by kernel: what each of a layer's kernels costs in the fused step, against the bytes it moves; and
operation by operation, the same for the persistent step's operations inside its one kernel (their spans
of the step's critical path, from a traced step)."""
from __future__ import annotations

from functools import cached_property

import numpy as np
import pandas as pd

from collect.schema.decode import LAYER_ROLES

from ... import escape, fmt
from ...tables import table_html
from ...vocab import join
from .data import DecodeData, ROLE_BYTES_APART, ROLE_EVEN, _ok

# Two layer roles whose bytes lie within SAME_BYTES of each other read the same bytes (the two MLP products read
# one weight shape); where what they pay above them differs by TWINS_APART of the layer's whole spread or more,
# bytes do not set the excess. A set of roles whose excess correlates with their bytes by FOLLOWS or more grows
# with them.
SAME_BYTES, TWINS_APART, FOLLOWS = 1.02, 0.5, 0.5
# ...and only where it rises with them in order: the excess's rank correlation with the bytes at least IN_ORDER
# (run h200-20261206a, gpt2's persistent step: the qkv product, with fewer bytes than either MLP product, paid more
# than both; the two ends alone had made the five correlate, and with any one left out too).
IN_ORDER = 0.9
# A traced persistent step's span that outlasts its timed loop is laid to the trace's own timer reads only where it
# also outlasts the untraced kernel under the profiler by more than TRACE_SLOWER (run h200-20261206a, gpt2-xl: a
# traced span of 3.171 ms against the profiled untraced kernel's 3.178 ms; the gap to the loop was the profiler's).
TRACE_SLOWER = 1.01
# The persistent step's traced operations: where one SM finished at least LATE_SM_MOST of them last, it is late
# most of the time (its place in the plan, or the SM). Where it finished LATE_SM_OVER_CHANCE times the operations a
# late SM drawn at random would give one SM (operations / SMs), and at least LATE_SM_FEWEST, it is late far more
# often than chance (run h100-20261205b: 12 of 61 gpt2 operations on 132 SMs, where chance gives one SM 0.46; a
# fixed share of 20% had called that "not often"). Without the SM count, LATE_SM_OFTEN of them stands in.
LATE_SM_MOST, LATE_SM_OVER_CHANCE, LATE_SM_FEWEST, LATE_SM_OFTEN = 0.5, 5.0, 3, 0.2
_COUNT = {1: "one", 2: "two", 3: "three", 4: "four"}


def _correlates(bytes_: pd.Series, over: pd.Series) -> bool:
    if bytes_.nunique() < 2 or over.nunique() < 2:
        return False
    return float(np.corrcoef(bytes_.astype(float), over.astype(float))[0, 1]) >= FOLLOWS


def _rank_correlation(bytes_: pd.Series, over: pd.Series) -> float:
    """Spearman's: the correlation of the two series' ranks (ties at their mean rank)."""
    a, b = bytes_.astype(float).rank(), over.astype(float).rank()
    if a.nunique() < 2 or b.nunique() < 2:
        return float("nan")
    return float(np.corrcoef(a, b)[0, 1])


def _follows(bytes_: pd.Series, over: pd.Series) -> bool:
    """Whether the excess grows with the bytes across the roles: their correlation, where both vary, holding with
    any one role left out too. One role far below the rest makes five points correlate on its own: gpt2-xl's
    persistent step (run h200-20261205a) paid 4.5 µs on the output projection and 22-26 µs on the other four,
    whose bytes ran from 3.6 to 6.1 µs with no trend (0.87 with all five). And the excess must rise with the bytes
    in order (IN_ORDER), not only at the two ends."""
    if not _correlates(bytes_, over) or not _rank_correlation(bytes_, over) >= IN_ORDER:
        return False
    return len(bytes_) < 4 or all(_correlates(bytes_.drop(i), over.drop(i)) for i in bytes_.index)


class Roles(DecodeData):
    """The per-role frame, its finding and table."""

    ROLE_WORDS = {"embed": "embedding", "qkv": "norm + qkv product + cache write", "attention": "attention",
                  "proj": "output projection + residual", "fc": "norm + first MLP product + GELU",
                  "out": "second MLP product + residual", "head": "final norm + LM head", "argmax": "argmax"}

    @cached_property
    def roles(self) -> pd.DataFrame:
        return self.run.frame("decode", "kernel_roles")

    def has_roles(self) -> bool:
        return not self.roles.empty

    def role_words(self, role: str) -> str:
        """What a kernel of this role does, in words; a role name from the data is shown as inert text."""
        return self.ROLE_WORDS.get(role, escape.text(role))

    @cached_property
    def _role_frame(self) -> pd.DataFrame:
        """Each role of each profiled fused graph step with its time per kernel and, where its bytes are known,
        their time at copy bandwidth and what the kernel adds above it (µs). Callers copy before adding columns."""
        r = self.roles.copy()
        if r.empty:
            return r
        bw = self.data.floor_bandwidth_bytes_per_s if self.data else None
        per = r["kernels_per_step"].where(r["kernels_per_step"] > 0)
        r["us_each"] = 1000 * r["ms_per_step"] / per
        r["bytes_us_each"] = (1e6 * r["bytes_per_step"] / per / bw) if bw else float("nan")
        r["over_us_each"] = r["us_each"] - r["bytes_us_each"]
        for part in ("handoff", "late"):  # the persistent step's split, where its run traced one
            if f"{part}_ms_per_step" in r:
                r[f"{part}_us_each"] = 1000 * r[f"{part}_ms_per_step"] / per
        return r

    def role_finding(self) -> str:
        """Per profiled fused graph step: what each of its kernels adds above its own bytes at copy bandwidth,
        the spread over the roles that read bytes, and what that comes to over the step."""
        r = self._role_frame
        if r.empty:
            return ""
        out = []
        for (model, variant, b, c), g in r.groupby(["model", "variant", "batch", "context"], sort=False):
            step = self.row(model, variant, b, c)
            whole, g = g, g[g["over_us_each"].notna()]
            if g.empty or step is None:
                continue
            hi, lo = g.loc[g["over_us_each"].idxmax()], g.loc[g["over_us_each"].idxmin()]
            over_ms = float((g["over_us_each"] * g["kernels_per_step"]).sum()) / 1000
            unit = self.unit(variant)
            out.append(f"- **{escape.text(model)}, batch {b}, context {c}, {escape.text(self.short(variant))}.** Each {unit} "
                       f"takes {fmt.num(lo.over_us_each)} µs ({self.role_words(lo.role)}) to "
                       f"{fmt.num(hi.over_us_each)} µs ({self.role_words(hi.role)}) longer than "
                       f"reading its bytes at copy bandwidth would.{self._prefetch_words(step)} Over the step "
                       f"that is {fmt.ms(over_ms)} of its {fmt.ms(step.step_ms_median)}." + self._role_spread_words(g, unit)
                       + self._head_apart_words(g, model, b) + self._split_words(whole, step))
        return "\n".join(out) + "\n" if out else ""

    @staticmethod
    def _prefetch_words(step) -> str:
        """For the warp-specialized persistent step: why an operation's span is not its cost beyond its own bytes
        (its producer warp reads later operations' weights ahead, during earlier operations' spans)."""
        if getattr(step, "step_impl", None) != "persistent-ws":
            return ""
        return (" (Here that is a span, not a cost beyond its own bytes: the producer warp reads later operations' "
                "weights ahead, during earlier operations' spans, so a span can hold less than its own bytes' "
                "reading, or more; this sets the operation's span of the critical path against its bytes at copy "
                "bandwidth, not against what it moved in that span.)")

    def _head_apart_words(self, g: pd.DataFrame, model: str, batch: int) -> str:
        """Where the LM head pays well above every layer kernel (ROLE_EVEN): what else it does besides its
        reads, from the model's shape: it writes fp32 logits, and its product is the step's widest."""
        info = self.model_info(model)
        head = g[g["role"] == "head"]
        layer = g[g["role"].isin(LAYER_ROLES)]
        if info is None or head.empty or layer.empty or layer["over_us_each"].max() <= 0:
            return ""
        over = float(head["over_us_each"].iloc[0])
        if over <= ROLE_EVEN * float(layer["over_us_each"].max()):
            return ""
        logits = batch * info.vocab_size * 4
        bw = self.data.floor_bandwidth_bytes_per_s
        flops = 2 * batch * info.n_embd * info.vocab_size
        widest = 2 * batch * info.n_embd * 4 * info.n_embd  # a layer's largest product: either MLP product
        return (f" The final norm + LM head stands apart, {fmt.num(over)} µs above its reads. Besides them it "
                f"writes its fp32 logits ({fmt.bytes_(logits)}, {fmt.num(1e6 * logits / bw)} µs at copy bandwidth), "
                f"and its product, {fmt.num(flops / 1e9)} GFLOP, is {fmt.ratio(flops / widest)} the largest in a "
                "layer.")

    def _split_words(self, g: pd.DataFrame, step) -> str:
        """For a traced persistent step (its roles' hand-off and late-SM parts, schema 10 on): what its operations'
        spans are made of, which part is the largest, and whether one SM is late most of the time."""
        if "handoff_ms_per_step" not in g or "late_ms_per_step" not in g:
            return ""
        g = g[g["handoff_ms_per_step"].notna() & g["late_ms_per_step"].notna()]
        total = float(g["ms_per_step"].sum())
        if g.empty or total <= 0:
            return ""
        handoff, late = float(g["handoff_ms_per_step"].sum()), float(g["late_ms_per_step"].sum())
        work = max(0.0, total - handoff - late)
        # The trace reads the GPU's timer at every tile, which can slow the step: its parts then sum past the timed
        # step, so they are given as shares of the traced span, and the reader is told why the two differ.
        slower = total > step.step_ms_median and fmt.ms(total) != fmt.ms(step.step_ms_median)
        traced, own = self._slower_words(total, step) if slower else ("", False)
        # A cause judged against the untraced kernel ends a sentence of its own (a figure or two more).
        lead = f". Of that span, {fmt.ms(handoff)}" if own else f"; {fmt.ms(handoff)} of that"
        out = (f" Its traced operations span {fmt.ms(total)}{traced}{lead} "
               f"({fmt.pct(100 * handoff / total)}) passes before the median SM has its first tile of an operation "
               "under way: the hand-off from the operation before (the counter's release and the polls that see it, "
               f"the input rows, the LayerNorm). Summed over the operations, the median SM then works {fmt.ms(work)} "
               f"and the last SM finishes {fmt.ms(late)} after the median one.")
        largest = max(("handoff", handoff), ("work", work), ("late", late), key=lambda kv: kv[1])[0]
        # Each verdict compares the largest part with the other two one by one, never with their sum (the hand-off
        # and the late SM together can outweigh the work that is larger than either).
        out += {"handoff": " The hand-off is the largest of the three: the median SM spends longer getting to its "
                           "first tile of an operation than working through its tiles.",
                "work": " The median SM's work is the largest of the three: its tiles take longer than the hand-offs "
                        "before them or the waits for the last SM after them.",
                "late": " The wait for the last SM is the largest of the three: the operations end unevenly across "
                        "the SMs."}[largest]
        parts = {"handoff": ("the hand-off", handoff), "work": ("the median SM's work", work),
                 "late": ("the wait for the last SM", late)}
        others = [parts[k] for k in parts if k != largest]
        if sum(v for _, v in others) > parts[largest][1]:
            out = (out[:-1] + f", though {others[0][0]} and {others[1][0]} together take more "
                   f"({fmt.ms(sum(v for _, v in others))} against {fmt.ms(parts[largest][1])}).")
        share = getattr(step, "last_sm_share", None)
        ops = float(g["kernels_per_step"].sum())
        if _ok(share) and ops >= 2:
            last = round(share * ops)
            if share >= LATE_SM_MOST:
                why = "it is late most of the time, so its place in the plan or the SM itself holds the step back."
            elif self._often_late(last, ops):
                why = ("not most of the time, but far more often than chance would make one SM of many the last, so "
                       "its place in the plan or the SM itself is worth a look.")
            else:
                why = "no SM is late often; the last to finish changes from operation to operation."
            out += f" One SM finished {last} of the {ops:.0f} operations last: {why}"
        return out

    def _untraced_ms(self, step) -> float | None:
        """The untraced persistent kernel's time per step under the profiler (its kernel class), where known."""
        c = self.classes
        if c.empty or "kernel_class" not in c:
            return None
        f = c[(c["model"] == step.model) & (c["variant"] == step.variant) & (c["batch"] == step.batch)
              & (c["context"] == step.context) & (c["kernel_class"] == "persistent step")]
        ms = float(f["ms_per_step"].sum()) if len(f) else float("nan")
        return ms if _ok(ms) and ms > 0 else None

    def _slower_words(self, total: float, step) -> tuple[str, bool]:
        """Why the traced span outlasts the timed loop, and whether the words end a sentence of their own (where they
        judge the span against the untraced kernel): the trace's timer reads only where the span also outlasts the
        untraced kernel under the profiler (TRACE_SLOWER); where it does not, the gap is the profiler's."""
        times = f"{fmt.ratio(total / step.step_ms_median)} the timed step"
        shares = "so the parts below are shares of the traced span, not of the timed step"
        untraced = self._untraced_ms(step)
        if untraced is None:
            return (f" (the traced step ran slower than the timed loop, likely for the trace's own timer reads: its "
                    f"span is {times}, {shares})"), False
        if total > TRACE_SLOWER * untraced:
            return (f", {times} and {fmt.ratio(total / untraced)} the untraced kernel's {fmt.ms(untraced)} under the "
                    f"profiler: the trace's own timer reads slowed it, {shares}"), True
        near = "no longer than" if total <= untraced else f"within {fmt.pct(100 * (TRACE_SLOWER - 1))} of"
        return (f", {times} but {near} the untraced kernel's {fmt.ms(untraced)} under the profiler: the gap to the "
                f"timed loop is the profiler's, which slows the kernels a little, not the trace's, {shares}"), True

    def _often_late(self, last: int, ops: float) -> bool:
        """Whether one SM finishing `last` of `ops` operations last is far more than chance (LATE_SM_OVER_CHANCE)."""
        sms = getattr(getattr(self.run.manifest, "device", None), "sm_count", None)
        if not sms:
            return last >= LATE_SM_OFTEN * ops
        return last >= max(LATE_SM_FEWEST, LATE_SM_OVER_CHANCE * ops / sms)

    @staticmethod
    def unit(variant: str) -> str:
        """What a role's row counts: the fused step's kernels, or the persistent step's operations (the spans
        of its one kernel's critical path)."""
        return "operation" if variant == "persistent" else "kernel"

    def _role_spread_words(self, g: pd.DataFrame, unit: str = "kernel") -> str:
        """Whether what a layer's kernels pay above their bytes follows the bytes, judged over all five: all five within
        ROLE_EVEN of each other, though their bytes lie severalfold apart, is a cost per kernel; two roles that read
        the same bytes yet pay far apart say the bytes do not set it; else the five together say whether the excess
        grows with the bytes. (The two extremes by bytes alone once read as "about as much" beside two kernels that
        paid twice as much: run h100-20261205a, gpt2 batch 64.)"""
        g = g[g["role"].isin(LAYER_ROLES) & (g["bytes_us_each"] > 0)]
        if len(g) < 2:
            return ""
        over = g["over_us_each"]
        few, most = g.loc[g["bytes_us_each"].idxmin()], g.loc[g["bytes_us_each"].idxmax()]
        apart = most.bytes_us_each >= ROLE_BYTES_APART * few.bytes_us_each
        few_w, most_w = self.role_words(few.role), self.role_words(most.role)
        if apart and over.min() > 0 and over.max() <= ROLE_EVEN * over.min():
            return (f" Of a layer's five {unit}s, the one with the most bytes to read ({most_w}) reads "
                    f"{fmt.ratio(most.bytes_us_each / few.bytes_us_each)} those of the one with the fewest ({few_w}), "
                    f"yet all of a layer's five pay within {fmt.ratio(ROLE_EVEN)} of each other above their bytes: a "
                    f"cost per {unit}, not per byte.")
        twins = self._byte_twins(g)
        if twins is not None:
            a, b = twins
            return (f" Two of a layer's five {unit}s read the same bytes ({self.role_words(a.role)}; "
                    f"{self.role_words(b.role)}) yet pay {fmt.num(a.over_us_each)} µs and {fmt.num(b.over_us_each)} µs "
                    f"above them: the excess varies by {unit}, not with its bytes.")
        if not apart or few.over_us_each <= 0:
            return ""
        if _follows(g["bytes_us_each"], over) and most.over_us_each > few.over_us_each:
            return (f" Here, of a layer's five {unit}s, the one with the most bytes to read ({most_w}) also pays more "
                    f"above them than the one with the fewest ({few_w}), and the excess grows with the bytes across "
                    f"all five, so not all of it is a fixed cost per {unit}.")
        spread = f"it varies by {unit}, from {fmt.num(over.min())} to {fmt.num(over.max())} µs"
        if _correlates(g["bytes_us_each"], over):
            # A trend over all five that some single role makes on its own: named, so a reader can see which; the
            # range then said is that of the roles left without them.
            alone = [i for i in g.index if not _correlates(g["bytes_us_each"].drop(i), over.drop(i))]
            rest = over.drop(alone)
            if alone and len(rest) >= 2:
                named = [f"the {self.role_words(g.loc[i, 'role'])}" for i in alone]
                theirs = join([f"{n} {fmt.num(over[i])} µs" for n, i in zip(named, alone)], "and")
                return (f" Across a layer's five {unit}s the excess rises with the bytes, but the trend rests on "
                        f"{join(named, 'or')} alone: without {'it' if len(alone) == 1 else 'any one of them'} the "
                        f"excess does not follow the bytes, so the bytes alone do not set it: it varies by {unit}, "
                        f"from {fmt.num(rest.min())} to {fmt.num(rest.max())} µs over the other "
                        f"{_COUNT.get(len(rest), str(len(rest)))} ({theirs}).")
            # A trend with no one role making it, yet not in the bytes' order: the pair most out of it, named.
            flip = max(((x, y) for x in g.itertuples() for y in g.itertuples()
                        if x.bytes_us_each < y.bytes_us_each and x.over_us_each > y.over_us_each),
                       key=lambda xy: xy[0].over_us_each - xy[1].over_us_each, default=None)
            if flip is not None:
                x, y = flip
                return (f" Across a layer's five {unit}s the excess does not rise with the bytes in order: the "
                        f"{self.role_words(x.role)} reads fewer bytes than the {self.role_words(y.role)} yet pays "
                        f"{fmt.num(x.over_us_each)} µs above them against {fmt.num(y.over_us_each)} µs, so the excess "
                        f"varies by {unit}, not with its bytes: from {fmt.num(over.min())} to "
                        f"{fmt.num(over.max())} µs.")
        return f" Across a layer's five {unit}s the excess does not follow the bytes: {spread}."

    @staticmethod
    def _byte_twins(g: pd.DataFrame):
        """The two layer roles that read the same bytes (within SAME_BYTES) and differ most in what they pay above
        them, where that difference is at least TWINS_APART of the spread over all the layer's roles; else None.
        Such a pair shows the excess is not set by bytes, whatever the extremes say."""
        spread = g["over_us_each"].max() - g["over_us_each"].min()
        best = None
        rows = list(g.itertuples())
        for i, x in enumerate(rows):
            for y in rows[i + 1:]:
                if max(x.bytes_us_each, y.bytes_us_each) > SAME_BYTES * min(x.bytes_us_each, y.bytes_us_each):
                    continue
                gap = abs(x.over_us_each - y.over_us_each)
                if spread > 0 and gap >= TWINS_APART * spread and (best is None or gap > best[0]):
                    best = (gap, *sorted((x, y), key=lambda r: -r.over_us_each))
        return None if best is None else best[1:]

    def _has_spans(self) -> bool:
        r = self.roles
        return not r.empty and bool((r["variant"] == "persistent").any())

    def role_table_title(self) -> str:
        """The role table's title: the persistent step's rows, where present, are its traced operations' spans."""
        return ("Every kernel role of the profiled fused graph steps"
                + (" and the persistent step's traced operations" if self._has_spans() else ""))

    def role_table(self) -> str:
        r = self._role_frame.copy()
        if r.empty:
            return ""
        r["shape"] = [f"{m}, batch {b}, context {c}, {self.short(v)}"
                      for m, b, c, v in zip(r["model"], r["batch"], r["context"], r["variant"])]
        r["does"] = [self.ROLE_WORDS.get(x, x) for x in r["role"]]  # plain: the table escapes its cells
        opt = lambda fn: (lambda x: "" if not _ok(x) else fn(x))  # noqa: E731
        us = opt(lambda x: f"{fmt.num(x)} µs")
        spans = self._has_spans()
        columns = {"shape": "Shape", "does": "Kernel (persistent step: operation)", "kernels_per_step": "Per step",
                   "us_each": ("GPU time each (persistent step: the operation's span of the critical path)" if spans
                               else "GPU time each"), "bytes_us_each": "Its bytes at copy bandwidth",
                   "over_us_each": "Above its bytes"}
        formats = {"kernels_per_step": opt(lambda x: f"{x:.0f}"), "us_each": us, "bytes_us_each": us,
                   "over_us_each": us}
        for col, head in (("handoff_us_each", "Persistent step: hand-off each"),
                          ("late_us_each", "Last SM after the median")):
            if col in r and r[col].notna().any():
                columns[col], formats[col] = head, us
        return table_html(r, columns, formats=formats)
