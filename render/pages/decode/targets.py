"""The targets, stated once in data.py, judged against this run's rows."""
from __future__ import annotations

import pandas as pd

from ... import fmt
from ...tables import table_html
from ...vocab import INT8_PAIRS, join
from .data import (AGREEMENT_TARGET, DecodeData, FLOOR_TARGETS, INT8_STEP_TARGET, MICRO_LABELS, MICRO_SPEEDUP,
                   MICRO_SPEEDUP_BATCH, MICRO_SPEEDUP_CONTEXT, MICRO_TARGET, MICRO_TARGET_CONTEXT, _ok)


def verdict(ok: bool | None) -> str:
    return "not measured" if ok is None else ("met" if ok else "not met")


def spread_verdict(value: float, lo: float | None, hi: float | None, target: float) -> str:
    """A most-this-much target judged on a value whose timed loops spread from lo to hi: met or not
    where the whole spread falls on one side of the target, 'too close to call' where it spans it."""
    if _ok(lo) and _ok(hi) and lo <= target < hi:
        return "too close to call: the timed loops' spread spans the target"
    return verdict(value <= target)


def ratio_ends(fast, slow) -> list[float | None]:
    """The widest range of fast / slow over the two rows' timed loops: fast's quickest loop against slow's slowest,
    and the other way round (None where a row kept no spread)."""
    return [fast.get(a) / slow.get(b) if _ok(fast.get(a)) and _ok(slow.get(b)) else None
            for a, b in (("step_ms_p10", "step_ms_p90"), ("step_ms_p90", "step_ms_p10"))]


def spread_words(lo: float | None, hi: float | None, show) -> str:
    """' (p10-p90 lo-hi)' for a measured cell, or nothing where the loops' spread is unknown."""
    return f" (loops' p10 to p90: {fmt.span(lo, hi, show)})" if _ok(lo) and _ok(hi) else ""


class Targets(DecodeData):
    """The targets table and the rows behind it."""

    def _unchecked_models(self, checked: pd.DataFrame) -> str:
        """The models this run decoded whose variants the agreement check did not compare: named, so a verdict
        over the others is not read as theirs. Plain text: the table escapes its cells."""
        rest = [m for m in self.models() if m not in set(checked["model"])]
        return f" ({join(rest)} not checked)" if rest else ""

    def _uncompared_variants(self, checked: pd.DataFrame) -> str:
        """'; not compared: …': per checked model, the variants that ran but were not compared, so 'every variant'
        is not read as theirs. Plain text: the table escapes its cells."""
        parts = [f"{join(self.named(v) for v in rest)} on {model}" for model, rest in self.uncompared_by_model(checked)]
        return f"; not compared: {'; '.join(parts)}" if parts else ""

    def targets_table(self) -> str:
        return table_html(pd.DataFrame(self._target_rows()), {"target": "Target", "measured": "This run",
                                                               "verdict": "Verdict"})

    def targets_legend(self) -> str:
        """The terms the targets table uses before the page defines them, each said once and linked to its section."""
        bw = self.data.floor_bandwidth_bytes_per_s
        at = f", {fmt.bandwidth(bw)} in this run" if bw else ""
        # "Fused" only where this run's graph step ran our fused kernels: the first runs computed it with PyTorch ops.
        step = "our fused decode step" if self.data.graph_step == "fused" else "our decode step"
        return (f"**Bandwidth floor**: the weights and cache a step must read, at the measured copy bandwidth{at} "
                f"([what a step must read](#what-a-step-must-read)). **CUDA-graph step**: {step}, "
                "captured once and replayed from one CUDA graph; the **int8-graph step** is the same over an int8 cache "
                "([the loops](#the-loops)). **Split-KV kernel**: our decode attention, which splits each sequence's "
                "cache into chunks read in parallel ([glossary](glossary.md#split-kv)). **Near-ties**: positions whose "
                "two largest logits are within one rounding step of each other, counted apart "
                "([token agreement](#do-the-variants-predict-the-same-tokens)).")

    def _target_rows(self) -> list[dict]:
        """Each target with what this run measured and its verdict ('met', 'not met', 'not measured', or too
        close to call), as the targets table prints them."""
        rows = []
        for model, b, c, target in FLOOR_TARGETS:
            g = self.fastest_step(model, b, c)
            if g is None or not _ok(g.achieved_over_floor) or not _ok(g.floor_ms):
                rows.append({"target": f"CUDA-graph step within {fmt.ratio(target)} of the bandwidth floor at {model}, "
                                       f"batch {b}, context {c}", "measured": "not measured", "verdict": verdict(None)})
                continue
            lo, hi = (g.get(k) / g.floor_ms if _ok(g.get(k)) else None for k in ("step_ms_p10", "step_ms_p90"))
            which = f", {self.label(g.variant)}" if self.row(model, "persistent", b, c) is not None \
                else ""
            rows.append({"target": f"CUDA-graph step within {fmt.ratio(target)} of the bandwidth floor at {model}, "
                                   f"batch {b}, context {c}",
                         "measured": fmt.ratio_vs(g.achieved_over_floor, target) + which + spread_words(lo, hi, fmt.ratio),
                         "verdict": spread_verdict(g.achieved_over_floor, lo, hi, target)})
        model, b, c, target = INT8_STEP_TARGET
        g, q = self.fastest_step(model, b, c), self.row(model, "int8-graph", b, c)
        label = f"int8-graph step at most {fmt.num(target)} of our fastest bf16 step at {model}, batch {b}, context {c}"
        if g is None or q is None:
            rows.append({"target": label, "measured": "not measured", "verdict": verdict(None)})
        else:
            ends = ratio_ends(q, g)
            r = q.step_ms_median / g.step_ms_median
            rows.append({"target": label, "measured": fmt.num_vs(r, target) + spread_words(*ends, fmt.num),
                         "verdict": spread_verdict(r, *ends, target)})
        a = self._agreement_ok()
        ok = None if a.empty else bool(a["agreement"].min() >= AGREEMENT_TARGET)
        rows.append({"target": f"every variant compared agrees with the graph step at ≥ "
                               f"{fmt.pct(100 * AGREEMENT_TARGET)} of positions outside near-ties (teacher-forced)",
                     "measured": "not measured" if a.empty else
                     f"{fmt.pct_vs(100 * a['agreement'].min(), 100 * AGREEMENT_TARGET, 4)} at worst over the {len(a)} "
                     f"variant and model pairs compared, of {join(dict.fromkeys(a['model']))}"
                     + self._unchecked_models(a) + self._uncompared_variants(a),
                     "verdict": verdict(ok)})
        speed = self.micro_speedups()
        sel = [k for k in speed.index if k[0] >= MICRO_SPEEDUP_BATCH and k[1] >= MICRO_SPEEDUP_CONTEXT]
        ok = None if not sel else bool(speed.loc[sel].min() >= MICRO_SPEEDUP)
        rows.append({"target": f"int8 split-KV kernel ≥ {fmt.ratio(MICRO_SPEEDUP)} as fast as the {self.f} kernel "
                               f"at context ≥ {MICRO_SPEEDUP_CONTEXT}, batch ≥ {MICRO_SPEEDUP_BATCH}",
                     "measured": "not measured" if not sel else
                     f"{fmt.ratio_vs(speed.loc[sel].min(), MICRO_SPEEDUP)} at worst over {len(sel)} shapes",
                     "verdict": verdict(ok)})
        for int8, base in INT8_PAIRS[:1]:
            n, regressions = self.peak_regressions(int8, base)
            rows.append({"target": f"{self.label(int8)}: peak memory below {self.short(base)}'s at the same shape",
                         "measured": f"below at {n - len(regressions)} of {n} shapes{self._except(regressions)}"
                         if n else "no shape with both",
                         "verdict": verdict(None if not n else not regressions)})
        m = self._micro_ok()
        m = m[m["bandwidth_fraction"].notna() & (m["context"] >= MICRO_TARGET_CONTEXT)] if not m.empty else m
        for impl in ("triton-bf16", "triton-int8"):
            g = m[m["impl"] == impl] if not m.empty else m
            ok = None if g.empty else bool(g["bandwidth_fraction"].min() >= MICRO_TARGET)
            rows.append({"target": f"microbenchmark, {MICRO_LABELS[impl].format(f=self.f)}: at least "
                                   f"{fmt.pct(100 * MICRO_TARGET)} of copy bandwidth at context ≥ {MICRO_TARGET_CONTEXT}",
                         "measured": "not measured" if g.empty else
                         f"{fmt.pct_vs(100 * g['bandwidth_fraction'].min(), 100 * MICRO_TARGET)} at worst over "
                         f"{len(g)} shapes",
                         "verdict": verdict(ok)})
        return rows
