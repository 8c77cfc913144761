"""Where the score matrix stops fitting: in L2 and in memory, for each head count, against the measured naive calls."""
from __future__ import annotations

from functools import cached_property

import pandas as pd

from ... import fmt, model
from ...tables import table_html
from ...vocab import dtype_short, join, plural, shape_label
from .common import E, BytesSection, l2_fits


def _live_dtypes(r: dict) -> str:
    """Which dtype's peak held the most score-sized tensors, and what the others held, where the dtypes differ as
    printed: ' in bf16 (4.00 in fp16)'; empty where they agree."""
    by = r["live_by_dtype"]
    if len({fmt.num(v) for v in by.values()}) <= 1:
        return ""
    rest = [f"{fmt.num(v)} in {dtype_short(dt)}" for dt, v in by.items() if dt != r["live_dtype"]]
    return f" in {dtype_short(r['live_dtype'])} ({join(rest)})"


class ScoreFit(BytesSection):
    """The limits on N at which the score matrix leaves L2 and memory, in a table and in words."""

    @cached_property
    def limits(self) -> list[dict]:
        """Per shape: where S stops fitting in L2 and where naive stops fitting in memory, predicted and seen."""
        out = []
        rows = self.bench.rows
        mem, l2 = self.device.memory_bytes, self.l2_bytes
        measured: dict[tuple, dict[str, float]] = {}
        for shape in self.shapes():
            heads = shape[0] * shape[1]
            naive = rows[(rows["shape"] == shape) & (rows["impl"] == "naive")]
            ok = naive[(naive["status"] == "ok") & naive["peak_mem_bytes"].notna()]
            # Per dtype, at its own longest successful length: each dtype runs its own PyTorch kernels with their
            # own temporaries, so the counts need not agree, and the memory limit must hold for every dtype the run
            # measured.
            for dtype, grp in ok.groupby("dtype", sort=False):
                top = grp[grp["seq_len"] == grp["seq_len"].max()]
                n = int(top["seq_len"].iloc[0])
                measured.setdefault(shape, {})[dtype] = \
                    float(top["peak_mem_bytes"].max()) / model.s_matrix_bytes(n, E, heads)
        # How many score-sized tensors naive holds at its peak is a property of the code, not of the shape: a
        # shape naive did not run at borrows, per dtype, the largest count measured at another.
        borrowed: dict[str, float] = {}
        for counts in measured.values():
            for dtype, v in counts.items():
                borrowed[dtype] = max(v, borrowed.get(dtype, v))
        for shape in self.shapes():
            heads = shape[0] * shape[1]
            naive = rows[(rows["shape"] == shape) & (rows["impl"] == "naive")]
            oom = sorted(set(naive[naive["status"] == "oom"]["seq_len"]))
            ran = sorted(set(naive[naive["status"] == "ok"]["seq_len"]))
            by_dtype = measured.get(shape, borrowed)
            live = max(by_dtype.values()) if by_dtype else None
            out.append({
                "shape": shape, "heads": heads,
                **l2_fits(l2, heads),
                "oom_model": model.max_n_before_oom(mem, heads, E) if mem else None,
                # the most any dtype held, so the limit it sets holds for all of them
                "live": live, "live_by_dtype": by_dtype,
                "live_dtype": next((dt for dt, v in by_dtype.items() if v == live), None),
                "oom_live": model.max_n_before_oom(mem, heads, E, live) if mem and live else None,
                "first_oom": oom[0] if oom else None, "longest_ran": ran[-1] if ran else None,
                "live_here": shape in measured,
                "ns": self.seq_lens(shape),
            })
        return out

    def limits_table(self) -> str:
        rows = [{**r, "shape": shape_label(r["shape"]),
                 "seen": (f"N={r['first_oom']:,}" if r["first_oom"] else
                          f"none up to N={r['longest_ran']:,}" if r["longest_ran"] else "not run at this shape"),
                 "live_note": (fmt.num(r["live"]) + _live_dtypes(r) if r["live_here"] else
                               f"{fmt.num(r['live'])}{_live_dtypes(r)}, measured at another shape" if r["live"]
                               else None)}
                for r in self.limits]
        n_or = lambda v: "n/a" if v is None or v != v else f"{int(v):,}"  # noqa: E731
        return table_html(pd.DataFrame(rows), {
            "shape": "Shape", "heads": "B·H heads", "l2_one": "S of one head fits L2 up to N",
            "l2_all": "S of all heads fit L2 up to N", "l2_p32": "fp32 P of all heads fits L2 up to N",
            "oom_model": "naive fits memory up to N (two live S tensors)",
            "live_note": "naive peak / one S tensor (measured, per dtype)",
            "oom_live": "naive fits up to N (the most tensors any dtype held)",
            "seen": "naive first out of memory"},
            {"l2_one": n_or, "l2_all": n_or, "l2_p32": n_or, "oom_model": n_or, "oom_live": n_or,
             "live_note": lambda v: "n/a" if v is None or v != v else v})

    def limits_finding(self) -> str:
        """Where the cache and memory limits meet the measured naive calls; a shape naive did not run at is named
        once, and the table carries its limits."""
        parts, absent = [], []
        for r in self.limits:
            if r["first_oom"] is None and r["longest_ran"] is None:
                absent.append(r)
                continue
            parts += self._l2_sentence(r) + self._memory_sentence(r)
        if absent:
            live = absent[0]["live"]  # every shape naive did not run at borrows the same counts
            where = (shape_label(absent[0]["shape"]) if len(absent) == 1 else
                     f"{plural(len(absent), 'shape')} ({'; '.join(shape_label(r['shape']) for r in absent)})")
            parts.append(f"Naive PyTorch did not run at {where}; the table "
                         "gives where it would fit"
                         + (f", holding the {fmt.num(live)} score-sized tensors its peak held{_live_dtypes(absent[0])} "
                            "where it ran." if live else "."))
        return " ".join(parts)

    @staticmethod
    def _l2_sentence(r: dict) -> list[str]:
        """Which of the swept lengths can keep the naive code's passes over S and its fp32 P in L2."""
        if r["l2_all"] is None:
            return []
        ns, s_fit, p_fit = r["ns"], r["l2_all"], r["l2_p32"]
        # The passes stay in L2 only while every tensor handed between the naive code's kernels fits, the fp32 P
        # included, so the narrower two-byte S alone would put the limit too late.
        both = [n for n in ns if n <= min(s_fit, p_fit)]
        s_only = [n for n in ns if p_fit < n <= s_fit]
        neither = [n for n in ns if n > max(s_fit, p_fit)]
        where = []
        if both:
            where.append(f"up to N={both[-1]:,} both could stay in the cache")
        if s_only:
            where.append(f"at N={join([f'{n:,}' for n in s_only])} S still fits but the fp32 P does not")
        if neither:
            where.append(f"from N={neither[0]:,} on both go to DRAM" if both or s_only else
                         "at every length swept both go to DRAM")
        return [f"For {shape_label(r['shape'])}, the {r['heads']} two-byte score matrices share the L2 only up to "
                f"N={s_fit:,}, and the fp32 P the code as written also hands between kernels fits only up to "
                f"N={p_fit:,}: {'; '.join(where)}."]

    @staticmethod
    def _memory_sentence(r: dict) -> list[str]:
        """The first out-of-memory length, or the longest run, against the memory the model says naive needs."""
        if r["oom_model"] is None:
            return []
        first, longest = r["first_oom"], r["longest_ran"]
        if first is None:
            limit = r["oom_live"] or r["oom_model"]
            verdict = (f"the sweep stopped at N={longest:,}, short of it" if longest <= limit else
                       f"yet naive ran at N={longest:,}, so it held fewer score tensors at once")
            held = (f"with the {fmt.num(r['live'])} score-sized tensors its peak held{_live_dtypes(r)}"
                    if r["oom_live"] else "with two live score tensors")
            return [f"The model {held} lets naive run up to N={limit:,}; {verdict}."]
        if first > r["oom_model"]:
            agree = "consistent with the model"
        else:
            agree = "earlier than that model allows"
            if r["live"]:
                agree += (f": naive's measured peak at its longest successful length was {fmt.num(r['live'])} "
                          f"score-sized tensors{_live_dtypes(r)}, and with that many the limit moves to "
                          f"N={r['oom_live']:,}")
        return [f"Naive first ran out of memory at N={first:,}; two live score tensors would fit up to "
                f"N={r['oom_model']:,}, so this is {agree}."]
