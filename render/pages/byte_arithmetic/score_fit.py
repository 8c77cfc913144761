"""Where the score matrix stops fitting: in L2 and in memory, for each head count, against the measured naive calls."""
from __future__ import annotations

from functools import cached_property

import pandas as pd

from ... import fmt, model
from ...tables import table_html
from ...vocab import dtype_short, join, plural, shape_label
from .common import E, BytesSection, l2_fits


# What the naive code as written keeps live at its peak, in bytes an element of one score matrix (the count
# model.max_n_before_oom takes is this over E): the scores, a named variable alive to the end, beside softmax's fp32
# output (4) and its cast back to the input dtype (E); in bf16 PyTorch's softmax first copies the scores to fp32
# (its fused half-to-float kernel takes fp16 only), so at the softmax the scores, that copy and the output are live.
NAIVE_PEAK_BYTES = {"float16": E + 4 + E, "bfloat16": E + 4 + 4}


def modelled_live(dtypes) -> dict[str, float]:
    """Score-sized tensors live at naive's peak by the model, per dtype it knows among `dtypes`."""
    return {dt: NAIVE_PEAK_BYTES[dt] / E for dt in dtypes if dt in NAIVE_PEAK_BYTES}


def _per_dtype(counts: dict[str, float], f=fmt.num) -> str:
    """'4.00 in fp16 and 5.00 in bf16': measured counts per dtype, or the model's with f=_count."""
    return join([f"{f(v)} in {dtype_short(dt)}" for dt, v in counts.items()])


def _count(v: float) -> str:
    """A count of whole tensors, as the model gives it: '4', not '4.00'."""
    return f"{v:g}"


def _most(modelled: dict[str, float]) -> str:
    """The model's count that sets the limit: 'the model's 5 score-sized tensors (bf16's, the most)'."""
    top = max(modelled.values())
    whose = [dtype_short(dt) for dt, v in modelled.items() if v == top]
    return (f"the model's {_count(top)} score-sized tensors"
            + (f" ({join(whose)}'s, the most)" if len(modelled) > len(whose) else ""))


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
        every = rows[rows["impl"] == "naive"]
        for shape in self.shapes():
            heads = shape[0] * shape[1]
            naive = rows[(rows["shape"] == shape) & (rows["impl"] == "naive")]
            oom = sorted(set(naive[naive["status"] == "oom"]["seq_len"]))
            ran = sorted(set(naive[naive["status"] == "ok"]["seq_len"]))
            by_dtype = measured.get(shape, borrowed)
            live = max(by_dtype.values()) if by_dtype else None
            # The model's count per dtype naive ran in here (else anywhere in the run); the most of them sets the
            # limit, so it holds for every dtype.
            modelled = modelled_live(dict.fromkeys((naive if not naive.empty else every)["dtype"]))
            out.append({
                "shape": shape, "heads": heads,
                **l2_fits(l2, heads),
                "modelled": modelled,
                "oom_model": (model.max_n_before_oom(mem, heads, E, max(modelled.values()))
                              if mem and modelled else None),
                # each dtype's own limit, which its own runs are held to
                "oom_by_dtype": {dt: model.max_n_before_oom(mem, heads, E, v) for dt, v in modelled.items()} if mem
                else {},
                "by_dtype_runs": {dt: (min(g.loc[g["status"] == "oom", "seq_len"], default=None),
                                       max(g.loc[g["status"] == "ok", "seq_len"], default=None))
                                  for dt, g in naive.groupby("dtype", sort=False)},
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
            "oom_model": self._model_header(),
            "live_note": "naive peak / one S tensor (measured, per dtype)",
            "oom_live": "naive fits up to N (the most tensors any dtype held)",
            "seen": "naive first out of memory"},
            {"l2_one": n_or, "l2_all": n_or, "l2_p32": n_or, "oom_model": n_or, "oom_live": n_or,
             "live_note": lambda v: "n/a" if v is None or v != v else v})

    def _model_header(self) -> str:
        """The model column's header, with the counts the model gives for the dtypes the run swept."""
        counts = {dt: v for r in self.limits for dt, v in r["modelled"].items()}
        return (f"naive fits memory up to N (model: live S tensors, {_per_dtype(counts, _count)}"
                + ("; the most of them)" if len(set(counts.values())) > 1 else ")"))

    @staticmethod
    def _model_sentence(modelled: dict[str, float]) -> str:
        """What the model holds live, as naive's code allocates it, per dtype the run swept."""
        words = {"float16": "in fp16 the cast of that output back to fp16",
                 "bfloat16": "in bf16 an fp32 copy of the scores, which PyTorch's softmax makes first (its fused "
                             "half-to-float kernel takes fp16 only)"}
        parts = [f"{words[dt]}, {_count(v)}{' score-sized tensors in all' if i == 0 else ''}"
                 for i, (dt, v) in enumerate(modelled.items())]
        return ("As naive's code is written, its peak holds the scores beside the fp32 softmax output and one more "
                f"tensor: {'; '.join(parts)}.")

    def limits_finding(self) -> str:
        """Where the cache and memory limits meet the measured naive calls; a shape naive did not run at is named
        once, and the table carries its limits."""
        parts, absent, described = [], [], False
        for r in self.limits:
            if r["first_oom"] is None and r["longest_ran"] is None:
                absent.append(r)
                continue
            if r["modelled"] and not described:  # the model once, before the first limit it sets
                parts.append(self._model_sentence(r["modelled"]))
                described = True
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
        """The first out-of-memory length, or the longest run, against the memory the model says naive needs, and
        whether the measured peaks held the model's count: the verdict names whatever disagrees."""
        if r["oom_model"] is None:
            return []
        first, longest, limit = r["first_oom"], r["longest_ran"], r["oom_model"]
        wrong = ScoreFit._disagreements(r)
        measured = (f", and so are naive's measured peaks ({_per_dtype(r['live_by_dtype'])})"
                    if r["live_here"] and r["live_by_dtype"] else "")
        verdict = (f"consistent with the model{measured}" if not wrong else
                   f"not consistent with the model: {'; '.join(wrong)}")
        if first is None:
            return [f"With {_most(r['modelled'])}, naive fits memory up to N={limit:,} at this shape; the sweep "
                    f"stopped at N={longest:,}, {'short of it' if longest <= limit else 'past it'}: {verdict}."]
        return [f"Naive first ran out of memory at N={first:,}; with {_most(r['modelled'])} it fits up to "
                f"N={limit:,}, so this is {verdict}."]

    @staticmethod
    def _disagreements(r: dict) -> list[str]:
        """Where the measurements part from the model: a measured peak that held another count than the model's (as
        printed), a dtype that ran out of memory within its modelled limit, or one that ran past it."""
        out = []
        measured = r["live_by_dtype"] if r["live_here"] else {}
        off = {dt: v for dt, v in measured.items()
               if dt in r["modelled"] and fmt.num(v) != fmt.num(r["modelled"][dt])}
        if off:
            out.append(f"naive's measured peak held {_per_dtype(off)} score-sized tensors, against the model's "
                       f"{_per_dtype({dt: r['modelled'][dt] for dt in off}, _count)}"
                       # the limit moves only where the most any dtype held is not the model's most
                       + (f", and with the most any dtype held the limit moves to N={r['oom_live']:,}"
                          if r["oom_live"] and r["oom_live"] != r["oom_model"] else ""))
        for dt, (first, longest) in r["by_dtype_runs"].items():
            own = r["oom_by_dtype"].get(dt)
            if own is not None and first is not None and first <= own:
                out.append(f"in {dtype_short(dt)} it ran out at N={first:,}, within the N={own:,} the model allows")
            if own is not None and longest is not None and longest > own:
                out.append(f"in {dtype_short(dt)} it ran at N={longest:,}, past the N={own:,} the model allows")
        return out
