"""Decode: step latency against the bandwidth floor, peak memory of the int8 caches, token agreement,
and the decode-attention microbenchmark. Every outcome word is chosen here, from the data."""
from __future__ import annotations

from functools import cached_property

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from collect.schema.decode import REFERENCE_VARIANT, VARIANTS

from .. import escape, fmt
from ..figures import PALETTE
from ..tables import table_html
from .base import Page

VARIANT_LABELS = {
    "hf": "transformers loop, dynamic cache",
    "eager": "our loop, bf16 cache, eager",
    "graph": "our loop, bf16 cache, CUDA graph",
    "int8-dequant": "int8 cache, dequantized in full each step",
    "int8-kernel": "int8 cache, Triton kernel",
}
SHORT_LABELS = {"hf": "transformers", "eager": "bf16 eager", "graph": "bf16 graph", "int8-dequant": "int8 dequant-all",
                "int8-kernel": "int8 kernel"}
VARIANT_COLORS = {"hf": PALETTE[7], "eager": PALETTE[0], "graph": PALETTE[2], "int8-dequant": PALETTE[3],
                  "int8-kernel": PALETTE[1]}
MICRO_LABELS = {"triton-bf16": "Triton split-KV, bf16 cache", "triton-int8": "Triton split-KV, int8 cache",
                "sdpa": "SDPA, bf16 (query length 1)"}
MICRO_COLORS = {"triton-bf16": PALETTE[0], "triton-int8": PALETTE[1], "sdpa": PALETTE[7]}

# The targets, stated once; whether each is met is read from the data.
FLOOR_TARGET = 3.0            # graph step within this factor of the bandwidth floor ...
FLOOR_TARGET_SHAPE = ("gpt2", 4, 1000)  # ... for this model, batch and context
MATCH_TARGET = 0.99           # int8-kernel token match against eager
MICRO_TARGET = 0.80           # of measured copy bandwidth ...
MICRO_TARGET_CONTEXT = 8192   # ... at this context and above
# Words for achieved / floor.
NEAR_FLOOR = 1.5
# Two step times within this factor are "on par".
EVEN = 1.05


def label(variant: str) -> str:
    return VARIANT_LABELS.get(variant, variant)


def join(items) -> str:
    items = [str(i) for i in items]
    if not items:
        return ""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def floor_words(r: float) -> str:
    """What a step at r times its bandwidth floor is bound by, in words."""
    if r <= NEAR_FLOOR:
        return f"{fmt.ratio(r)} its bandwidth floor: close enough that moving bytes sets the pace"
    if r <= FLOOR_TARGET:
        return f"{fmt.ratio(r)} its bandwidth floor: bandwidth is a large part of the step, but not all of it"
    return f"{fmt.ratio(r)} its bandwidth floor: fixed per-step costs (launches, small kernels), not bandwidth, set the pace"


def times_words(a: float, b: float) -> str:
    """a's step time against b's, as 'N× faster' / 'N× slower' / 'on par'."""
    s = b / a
    if s >= EVEN:
        return f"{fmt.ratio(s)} faster"
    if s <= 1 / EVEN:
        return f"{fmt.ratio(1 / s)} slower"
    return "on par"


def inset_titles(fig: go.Figure, ncols: int) -> None:
    """Subplot titles inside each panel's top-left corner, clear of the legend above the plot."""
    fig.for_each_annotation(lambda a: a.update(y=a.y - 0.01, yanchor="top", x=a.x - 0.5 / ncols + 0.01,
                                               xanchor="left", font=dict(size=12)))


def verdict(ok: bool | None) -> str:
    return "not measured" if ok is None else ("met" if ok else "not met")


class DecodePage(Page):
    slug = "decode"
    phase = "decode"

    # --- frames ----------------------------------------------------------------------------

    @cached_property
    def rows(self) -> pd.DataFrame:
        return self.run.frame("decode", "rows")

    @cached_property
    def ok(self) -> pd.DataFrame:
        return self.rows[self.rows["status"] == "ok"]

    @cached_property
    def micro(self) -> pd.DataFrame:
        return self.run.frame("decode", "micro")

    @cached_property
    def checks(self) -> pd.DataFrame:
        return self.run.frame("decode", "checks")

    def models(self) -> list[str]:
        return [m.name for m in self.data.models] if self.data else []

    def model_info(self, name: str):
        return next((m for m in self.data.models if m.name == name), None)

    def variants(self) -> list[str]:
        present = set(self.rows["variant"])
        return [v for v in VARIANTS if v in present] + sorted(present - set(VARIANTS))

    def context_batch(self, model: str) -> int | None:
        """The batch a model's context sweep ran at: the one with the most contexts."""
        f = self.rows[self.rows["model"] == model]
        if f.empty:
            return None
        counts = f.groupby("batch")["context"].nunique()
        return int(counts.sort_values(kind="stable", ascending=False).index[0])

    def batch_context(self, model: str) -> int | None:
        """The context a model's batch sweep ran at, if it has one (more than one batch)."""
        f = self.rows[self.rows["model"] == model]
        counts = f.groupby("context")["batch"].nunique()
        counts = counts[counts > 1]
        return int(counts.sort_values(kind="stable", ascending=False).index[0]) if len(counts) else None

    def row(self, model: str, variant: str, batch: int, context: int):
        f = self.ok[(self.ok["model"] == model) & (self.ok["variant"] == variant) & (self.ok["batch"] == batch)
                    & (self.ok["context"] == context)]
        return f.iloc[0] if len(f) else None

    def _conditions(self, model: str) -> str:
        info = self.model_info(model)
        weights = "random weights" if info is None or info.weights == "random-init" else "checkpoint weights"
        return f"{model}, {self.data.dtype}, {weights}"

    # --- prose -----------------------------------------------------------------------------

    def summary(self) -> str:
        d = self.data
        counts = self.rows["status"].value_counts()
        status = join(f"{counts[s]} {s}" for s in ("ok", "oom", "unsupported", "error") if s in counts)
        text = (f"This run decoded {len(self.rows)} rows ({status}) on {join(self.models())}, "
                f"{d.warmup_steps} warm-up steps before each row's timed steps, prompts of {escape.text(d.prompt)}. ")
        if d.floor_bandwidth_bytes_per_s:
            text += (f"Bandwidth floors use {fmt.bandwidth(d.floor_bandwidth_bytes_per_s)} "
                     f"({escape.text(d.floor_bandwidth_source or 'source not recorded')}).")
        else:
            text += "No copy bandwidth was measured, so this run has no bandwidth floors."
        for note in d.notes:
            text += f"\n\n!!! note\n    {escape.text(note)}"
        return text

    def models_table(self) -> str:
        rows = [{"name": m.name, "weights": m.weights + (f" (seed {m.seed})" if m.seed is not None else ""),
                 "shape": f"{m.n_layer} layers, {m.n_head} heads × {m.head_dim}, width {m.n_embd}",
                 "params": f"{m.parameters / 1e6:.0f} M", "wbytes": fmt.bytes_(m.weight_bytes_per_step),
                 "pos": m.n_positions, "attn": m.hf_attn_implementation or "n/a"} for m in self.data.models]
        return table_html(pd.DataFrame(rows), {"name": "Model", "weights": "Weights", "shape": "Shape",
                                               "params": "Parameters", "wbytes": "Weights read per step",
                                               "pos": "Positions", "attn": "transformers attention"})

    def overhead_finding(self) -> str:
        """Per model, at its longest context: the loops against each other and the graph against its floor."""
        out = []
        for model in self.models():
            b = self.context_batch(model)
            f = self.ok[(self.ok["model"] == model) & (self.ok["batch"] == b)]
            if f.empty:
                out.append(f"- **{model}.** No row ran at batch {b}.")
                continue
            c = int(f["context"].max())
            r = {v: self.row(model, v, b, c) for v in self.variants()}
            parts = []
            if r.get("eager") is not None and r.get("hf") is not None:
                parts.append(f"our eager loop is {times_words(r['eager'].step_ms_median, r['hf'].step_ms_median)} "
                             f"than transformers' ({fmt.ms(r['eager'].step_ms_median)} against "
                             f"{fmt.ms(r['hf'].step_ms_median)} per step)")
            if r.get("graph") is not None and r.get("eager") is not None:
                parts.append(f"capturing it in a CUDA graph makes it "
                             f"{times_words(r['graph'].step_ms_median, r['eager'].step_ms_median)} "
                             f"({fmt.ms(r['graph'].step_ms_median)})")
            g = r.get("graph")
            if g is not None and pd.notna(g.achieved_over_floor):
                parts.append(f"the graph's step takes {floor_words(g.achieved_over_floor)}")
            sentence = "; ".join(parts) if parts else "too few variants ran to compare"
            out.append(f"- **{model}, batch {b}, context {c}.** {sentence[0].upper()}{sentence[1:]}.")
            grow = self._growth(model, b)
            if grow:
                out[-1] += " " + grow
        return "\n".join(out) + "\n"

    def _growth(self, model: str, b: int) -> str:
        g = self.ok[(self.ok["model"] == model) & (self.ok["batch"] == b) & (self.ok["variant"] == "graph")]
        g = g[g["floor_ms"].notna()].sort_values("context")
        if len(g) < 2:
            return ""
        lo, hi = g.iloc[0], g.iloc[-1]
        return (f"From context {lo.context} to {hi.context} the floor grows {fmt.ratio(hi.floor_ms / lo.floor_ms)} "
                f"and the graph's step time {fmt.ratio(hi.step_ms_median / lo.step_ms_median)}.")

    def size_finding(self) -> str:
        """Which model comes closer to its floor: where decode turns bandwidth-bound."""
        best = []
        for model in self.models():
            g = self.ok[(self.ok["model"] == model) & (self.ok["variant"] == "graph") & self.ok["achieved_over_floor"].notna()]
            if not g.empty:
                r = g.loc[g["achieved_over_floor"].idxmin()]
                best.append((model, r))
        if len(best) < 2:
            return ""
        best.sort(key=lambda x: x[1].achieved_over_floor)
        (m1, r1), (m2, r2) = best[0], best[-1]
        return (f"Closest approach to the floor, CUDA-graph loop: {m1} at {fmt.ratio(r1.achieved_over_floor)} "
                f"(batch {r1.batch}, context {r1.context}, {fmt.bytes_(r1.bytes_per_step)} per step) against {m2}'s "
                f"{fmt.ratio(r2.achieved_over_floor)} (batch {r2.batch}, context {r2.context}, "
                f"{fmt.bytes_(r2.bytes_per_step)} per step). The more bytes a step must move, the smaller the share "
                f"of fixed per-step costs.")

    def memory_shape(self, model: str) -> tuple[int, int] | None:
        """The shape with the largest bf16 cache where eager and both int8 variants ran."""
        f = self.ok[self.ok["model"] == model]
        shapes = []
        for (b, c), g in f.groupby(["batch", "context"]):
            if {"eager", "int8-dequant", "int8-kernel"} <= set(g["variant"]):
                e = g[g["variant"] == "eager"].iloc[0]
                shapes.append((e.kv_cache_bytes or 0, int(b), int(c)))
        return max(shapes)[1:] if shapes else None

    def memory_finding(self) -> str:
        out = []
        for model in self.models():
            shape = self.memory_shape(model)
            if shape is None:
                out.append(f"- **{model}.** Eager and both int8 variants never ran at one shape.")
                continue
            b, c = shape
            e, d, k = (self.row(model, v, b, c) for v in ("eager", "int8-dequant", "int8-kernel"))
            if any(x is None or pd.isna(x.peak_mem_bytes) for x in (e, d, k)):
                out.append(f"- **{model}.** No peak-memory statistics were recorded (not a CUDA run).")
                continue
            cache = f"The int8 cache holds {fmt.bytes_(k.kv_cache_bytes)} against bf16's {fmt.bytes_(e.kv_cache_bytes)} " \
                    f"({fmt.pct(100 * k.kv_cache_bytes / e.kv_cache_bytes)})"
            out.append(f"- **{model}, batch {b}, context {c}.** {cache}. Peak memory: bf16 eager "
                       f"{fmt.bytes_(e.peak_mem_bytes)}; dequantizing every step {self._delta(d.peak_mem_bytes, e.peak_mem_bytes)}; "
                       f"the int8 kernel {self._delta(k.peak_mem_bytes, e.peak_mem_bytes)}.")
        return "\n".join(out) + "\n"

    @staticmethod
    def _delta(x: float, base: float) -> str:
        diff = x - base
        word = "more" if diff > 0 else "less"
        if abs(diff) < 0.005 * base:
            return f"{fmt.bytes_(x)}, the same as bf16 within half a percent"
        return f"{fmt.bytes_(x)}, {fmt.bytes_(abs(diff))} {word} than bf16 ({'+' if diff > 0 else '−'}{fmt.pct(100 * abs(diff) / base)})"

    def peak_regressions(self) -> tuple[int, int, int]:
        """(shapes where all three ran, where int8-dequant peaks above eager, where int8-kernel peaks below it)."""
        n = above = below = 0
        for (m, b, c), g in self.ok.groupby(["model", "batch", "context"]):
            peaks = g.set_index("variant")["peak_mem_bytes"].dropna()
            if {"eager", "int8-dequant", "int8-kernel"} <= set(peaks.index):
                n += 1
                above += peaks["int8-dequant"] > peaks["eager"]
                below += peaks["int8-kernel"] < peaks["eager"]
        return n, int(above), int(below)

    def memory_summary(self) -> str:
        n, above, below = self.peak_regressions()
        if not n:
            return ""
        return (f"Over all {n} shapes where the three ran: dequantizing in full peaks above the bf16 cache at "
                f"{above} of them, and the int8 kernel peaks below it at {below}.")

    def accuracy_finding(self) -> str:
        out = []
        for model in self.models():
            f = self.ok[(self.ok["model"] == model) & self.ok["token_match"].notna()]
            if f.empty:
                continue
            parts = []
            for v in self.variants():
                g = f[f["variant"] == v]
                if g.empty:
                    continue
                total = (g["token_match"] * g["tokens_compared"]).sum() / g["tokens_compared"].sum()
                worst = g.loc[g["token_match"].idxmin()]
                n = int(g["tokens_compared"].sum())
                if worst.token_match == 1:
                    parts.append(f"{label(v)} all {n} tokens")
                else:
                    parts.append(f"{label(v)} {fmt.pct(100 * total)} of {n} tokens (lowest "
                                 f"{fmt.pct(100 * worst.token_match)} at batch {worst.batch}, context {worst.context})")
            out.append(f"- **{model}**, greedy tokens equal to the bf16 eager loop's: " + "; ".join(parts) + ".")
        hf = self.ok[(self.ok["variant"] == "hf") & self.ok["token_match"].notna()]
        k = self.ok[(self.ok["variant"] == "int8-kernel") & self.ok["token_match"].notna()]
        if not hf.empty and not k.empty:
            hf_m, k_m = self._pooled(hf), self._pooled(k)
            if k_m >= hf_m:
                out.append(f"\nThe int8 kernel agrees with our bf16 loop at least as often ({fmt.pct(100 * k_m)}) as "
                           f"transformers' bf16 loop does ({fmt.pct(100 * hf_m)}): its departures are no larger than "
                           f"those between two bf16 implementations.")
            else:
                out.append(f"\nThe int8 kernel agrees with our bf16 loop less often ({fmt.pct(100 * k_m)}) than "
                           f"transformers' bf16 loop does ({fmt.pct(100 * hf_m)}): quantization changes more tokens "
                           f"than a different bf16 implementation.")
        return "\n".join(out) + "\n" if out else "No token comparison ran."

    @staticmethod
    def _pooled(g: pd.DataFrame) -> float:
        return float((g["token_match"] * g["tokens_compared"]).sum() / g["tokens_compared"].sum())

    def checks_finding(self) -> str:
        c = self.checks[self.checks["status"] == "ok"] if not self.checks.empty else self.checks
        if c.empty:
            return "No logit check ran."
        out = []
        t = c[(c["reference"] == "transformers") & (c["cache"] == "bf16")]
        for _, r in t.iterrows():
            out.append(f"- **{r.model}, {r.sequence} tokens.** Our decoder's logits differ from transformers' full "
                       f"forward by at most {fmt.num(r.max_abs_diff)} (largest logit {fmt.num(r.logit_scale)}); the "
                       f"argmax agrees at {fmt.pct(100 * r.top1_agreement)} of {r.batch * r.positions} positions.")
        q = c[(c["reference"] == REFERENCE_VARIANT) & (c["sequence"] == "greedy")]
        for _, r in q.iterrows():
            if pd.isna(r.max_margin_at_disagreement):
                flips = "no position"
            elif r.max_margin_at_disagreement == 0:
                flips = "only positions where the reference's top two logits were tied"
            else:
                flips = f"only positions whose top-two gap was at most {fmt.num(r.max_margin_at_disagreement)}"
            out.append(f"- **{r.model}, {r.cache} cache, along the bf16 loop's own greedy path.** The argmax agrees at "
                       f"{fmt.pct(100 * r.top1_agreement)} of {r.batch * r.positions} positions; it changed at "
                       f"{flips} (median gap {fmt.num(r.median_top2_margin)}); largest logit difference "
                       f"{fmt.num(r.max_abs_diff)}.")
        return "\n".join(out) + "\n"

    def micro_finding(self) -> str:
        m = self.micro[self.micro["status"] == "ok"] if not self.micro.empty else self.micro
        m = m[m["bandwidth_fraction"].notna()] if not m.empty else m
        if m.empty:
            return "The microbenchmark has no measurement against a copy bandwidth."
        out = []
        for impl in MICRO_LABELS:
            g = m[m["impl"] == impl]
            if g.empty:
                continue
            lo, hi = g.loc[g["bandwidth_fraction"].idxmin()], g.loc[g["bandwidth_fraction"].idxmax()]
            out.append(f"- **{MICRO_LABELS[impl]}**: {fmt.pct(100 * lo.bandwidth_fraction)} (batch {lo.batch}, "
                       f"context {lo.context}) to {fmt.pct(100 * hi.bandwidth_fraction)} (batch {hi.batch}, context "
                       f"{hi.context}) of the measured copy bandwidth.")
        key = ["batch", "context"]
        i8 = m[m["impl"] == "triton-int8"].set_index(key)
        bf = m[m["impl"] == "triton-bf16"].set_index(key)
        sd = m[m["impl"] == "sdpa"].set_index(key)
        both = bf.index.intersection(sd.index)
        if len(both):
            rel = bf.loc[both, "latency_ms_median"] / sd.loc[both, "latency_ms_median"]
            worst, best = rel.idxmax(), rel.idxmin()
            out.append(f"\nAgainst SDPA on the same bf16 cache, our kernel takes {fmt.num(rel.min())} to "
                       f"{fmt.num(rel.max())} times its time over {len(both)} shapes (slowest relative to SDPA at "
                       f"batch {worst[0]}, context {worst[1]}; fastest at batch {best[0]}, context {best[1]}).")
        common = i8.index.intersection(bf.index)
        if len(common):
            speed = bf.loc[common, "latency_ms_median"] / i8.loc[common, "latency_ms_median"]
            fewer = bf.loc[common, "bytes_read"] / i8.loc[common, "bytes_read"]
            out.append(f"\nThe int8 cache has {fmt.ratio(fewer.median())} fewer bytes to read; the kernel reading it "
                       f"takes {fmt.num(1 / speed.max())} to {fmt.num(1 / speed.min())} times the bf16 kernel's time "
                       f"over the {len(common)} shapes both ran.")
        return "\n".join(out) + "\n"

    # --- targets ---------------------------------------------------------------------------

    def targets_table(self) -> str:
        rows = []
        # (e) peak below (b) at the same shape
        n, _, below = self.peak_regressions()
        rows.append({"target": "int8 kernel: peak memory below the bf16 eager loop's at the same shape",
                     "measured": f"below at {below} of {n} shapes" if n else "no shape with both",
                     "verdict": verdict(None if not n else below == n)})
        k = self.ok[(self.ok["variant"] == "int8-kernel") & self.ok["token_match"].notna()]
        k64 = k[k["new_tokens"] >= 64]
        if not k64.empty:
            pooled = self._pooled(k64)
            rows.append({"target": f"int8 kernel: at least {fmt.pct(100 * MATCH_TARGET)} of the bf16 loop's tokens "
                                   "(rows of ≥ 64 tokens)",
                         "measured": f"{fmt.pct(100 * pooled)} of {int(k64['tokens_compared'].sum())} tokens",
                         "verdict": verdict(pooled >= MATCH_TARGET)})
        else:
            rows.append({"target": f"int8 kernel: at least {fmt.pct(100 * MATCH_TARGET)} of the bf16 loop's tokens",
                         "measured": "no row of ≥ 64 tokens", "verdict": verdict(None)})
        model, b, c = FLOOR_TARGET_SHAPE
        g = self.row(model, "graph", b, c)
        ok = None if g is None or pd.isna(g.achieved_over_floor) else g.achieved_over_floor <= FLOOR_TARGET
        rows.append({"target": f"CUDA graph: within {fmt.ratio(FLOOR_TARGET)} of the bandwidth floor at {model}, "
                               f"batch {b}, context {c}",
                     "measured": "not measured" if ok is None else fmt.ratio(g.achieved_over_floor),
                     "verdict": verdict(ok)})
        m = self.micro[(self.micro["status"] == "ok") & self.micro["impl"].str.startswith("triton")
                       & (self.micro["context"] >= MICRO_TARGET_CONTEXT)] if not self.micro.empty else self.micro
        m = m[m["bandwidth_fraction"].notna()] if not m.empty else m
        for impl in ("triton-bf16", "triton-int8"):
            g = m[m["impl"] == impl] if not m.empty else m
            ok = None if g.empty else bool(g["bandwidth_fraction"].min() >= MICRO_TARGET)
            rows.append({"target": f"microbenchmark, {MICRO_LABELS[impl]}: at least {fmt.pct(100 * MICRO_TARGET)} of "
                                   f"copy bandwidth at context ≥ {MICRO_TARGET_CONTEXT}",
                         "measured": "not measured" if g.empty else
                         f"{fmt.pct(100 * g['bandwidth_fraction'].min())} at worst over {len(g)} shapes",
                         "verdict": verdict(ok)})
        sd = self.micro[(self.micro["status"] == "ok") & (self.micro["impl"] == "sdpa")
                        & (self.micro["context"] >= MICRO_TARGET_CONTEXT)] if not self.micro.empty else self.micro
        sd = sd[sd["bandwidth_fraction"].notna()] if not sd.empty else sd
        if not sd.empty:
            lo = sd.loc[sd["bandwidth_fraction"].idxmin()]
            rows.append({"target": "for reference, SDPA on the same shapes (not a target)",
                         "measured": f"{fmt.pct(100 * lo.bandwidth_fraction)} at worst (batch {lo.batch}, "
                                     f"context {lo.context})",
                         "verdict": "meets it" if lo.bandwidth_fraction >= MICRO_TARGET else "misses it too"})
        return table_html(pd.DataFrame(rows), {"target": "Target", "measured": "This run", "verdict": "Verdict"})

    # --- tables ----------------------------------------------------------------------------

    def rows_table(self, model: str) -> str:
        f = self.rows[self.rows["model"] == model].copy()
        order = {v: i for i, v in enumerate(self.variants())}
        f["_o"] = f["variant"].map(order)
        f = f.sort_values(["batch", "context", "_o"])
        f["variant"] = f["variant"].map(label)
        f["status"] = [s if s == "ok" else f"{s}: {r}" for s, r in zip(f["status"], f["reason"].fillna(""))]
        opt = lambda fn: (lambda x: "" if pd.isna(x) else fn(x))  # noqa: E731
        return table_html(f, {
            "batch": "Batch", "context": "Context", "variant": "Variant", "step_ms_median": "Step (median)",
            "tokens_per_s": "Tokens/s", "achieved_over_floor": "× floor", "peak_mem_bytes": "Peak memory",
            "kv_cache_bytes": "KV cache", "token_match": "Token match", "distinct_tokens": "Distinct tokens",
            "max_abs_logit_diff": "Max logit diff", "status": "Status"},
            formats={"step_ms_median": opt(fmt.ms), "tokens_per_s": opt(fmt.num),
                     "achieved_over_floor": opt(fmt.ratio), "peak_mem_bytes": opt(fmt.bytes_),
                     "kv_cache_bytes": opt(fmt.bytes_), "token_match": opt(lambda x: fmt.pct(100 * x)),
                     "distinct_tokens": opt(lambda x: str(int(x))), "max_abs_logit_diff": opt(fmt.num)})

    def micro_table(self) -> str:
        f = self.micro.sort_values(["batch", "context", "impl"]).copy()
        f["impl"] = f["impl"].map(lambda i: MICRO_LABELS.get(i, i))
        f["status"] = [s if s == "ok" else f"{s}: {r}" for s, r in zip(f["status"], f["reason"].fillna(""))]
        opt = lambda fn: (lambda x: "" if pd.isna(x) else fn(x))  # noqa: E731
        return table_html(f, {"batch": "Batch", "context": "Context", "impl": "Kernel", "latency_ms_median": "Median",
                              "bytes_read": "Bytes read", "achieved_bytes_per_s": "Achieved",
                              "bandwidth_fraction": "Of copy bandwidth", "num_splits": "Splits",
                              "kernel_config": "Config", "max_abs_diff_vs_sdpa": "Max diff vs SDPA", "status": "Status"},
                          formats={"latency_ms_median": opt(fmt.ms), "bytes_read": opt(fmt.bytes_),
                                   "achieved_bytes_per_s": opt(fmt.bandwidth),
                                   "bandwidth_fraction": opt(lambda x: fmt.pct(100 * x)),
                                   "num_splits": opt(lambda x: str(int(x))), "max_abs_diff_vs_sdpa": opt(fmt.num)})

    def failures_table(self) -> str:
        bad = self.rows[self.rows["status"] != "ok"]
        if bad.empty:
            return "Every decode row ran."
        out = [{"model": m, "variant": label(v), "status": s, "where": join(f"b{b}/c{c}" for b, c in zip(g["batch"], g["context"])),
                "reason": r} for (m, v, s, r), g in bad.groupby(["model", "variant", "status", bad["reason"].fillna("")], sort=False)]
        return table_html(pd.DataFrame(out), {"model": "Model", "variant": "Variant", "status": "Status",
                                              "where": "Batch / context", "reason": "Reason"})

    # --- figures ---------------------------------------------------------------------------

    def _by_model(self, title) -> tuple[go.Figure, list[str]]:
        models = self.models()
        fig = make_subplots(rows=1, cols=max(1, len(models)), subplot_titles=[title(m) for m in models],
                            horizontal_spacing=0.08)
        inset_titles(fig, max(1, len(models)))
        return fig, models

    def latency_figure(self) -> str:
        fig, models = self._by_model(lambda m: f"{m}, batch {self.context_batch(m)}")
        shown = set()
        for j, model in enumerate(models, start=1):
            b = self.context_batch(model)
            f = self.ok[(self.ok["model"] == model) & (self.ok["batch"] == b)]
            for v in self.variants():
                g = f[f["variant"] == v].sort_values("context")
                if g.empty:
                    continue
                name = escape.plot(label(v))
                fig.add_trace(go.Scatter(
                    x=g["context"], y=g["step_ms_median"], mode="lines+markers", name=name, legendgroup=v,
                    showlegend=v not in shown, line=dict(color=VARIANT_COLORS.get(v, PALETTE[6])),
                    error_y=dict(type="data", symmetric=False, thickness=1, width=3,
                                 array=g["step_ms_p90"] - g["step_ms_median"],
                                 arrayminus=g["step_ms_median"] - g["step_ms_p10"]),
                    customdata=g["tokens_per_s"],
                    hovertemplate=f"{name}<br>context %{{x}}<br>%{{y:.3g}} ms per step<br>%{{customdata:.4g}} tokens/s"
                                  "<extra></extra>"), row=1, col=j)
                shown.add(v)
            fl = f[f["variant"] == "eager"].sort_values("context")
            fl = fl[fl["floor_ms"].notna()]
            if not fl.empty:
                fig.add_trace(go.Scatter(x=fl["context"], y=fl["floor_ms"], mode="lines", name="bandwidth floor (bf16)",
                                         legendgroup="floor", showlegend="floor" not in shown,
                                         line=dict(color=PALETTE[7], dash="dash", width=1),
                                         hovertemplate="floor %{y:.3g} ms<extra></extra>"), row=1, col=j)
                shown.add("floor")
            fig.update_yaxes(type="log", title_text="step time (ms)" if j == 1 else None, row=1, col=j)
            fig.update_xaxes(title_text="context (prompt tokens)", row=1, col=j)
        return self.figure("latency", fig, "Median time of one decode step against context, log scale; bars span "
                                           "p10 to p90 of the timed steps; the dashed line is the bf16 bandwidth "
                                           "floor (weights plus cache over copy bandwidth). Hover for tokens/s. "
                                           f"{self.data.dtype}, {self._weights_words()}.")

    def _weights_words(self) -> str:
        kinds = {m.weights for m in self.data.models}
        return "random weights" if kinds == {"random-init"} else "checkpoint and random weights" if len(kinds) > 1 else "checkpoint weights"

    def throughput_figure(self) -> str:
        fig = go.Figure()
        title = []
        for model in self.models():
            c = self.batch_context(model)
            if c is None:
                continue
            title.append(f"{model} at context {c}")
            f = self.ok[(self.ok["model"] == model) & (self.ok["context"] == c)]
            for v in self.variants():
                g = f[f["variant"] == v].sort_values("batch")
                if g.empty:
                    continue
                name = escape.plot(f"{label(v)} ({model})" if len(self.models()) > 1 else label(v))
                fig.add_trace(go.Scatter(x=g["batch"], y=g["tokens_per_s"], mode="lines+markers", name=name,
                                         line=dict(color=VARIANT_COLORS.get(v, PALETTE[6])),
                                         customdata=g["achieved_over_floor"],
                                         hovertemplate=f"{name}<br>batch %{{x}}<br>%{{y:.4g}} tokens/s<br>"
                                                       "%{customdata:.3g}× floor<extra></extra>"))
        if not title:
            return "This run has no batch sweep."
        fig.update_xaxes(type="log", title_text="batch")
        fig.update_yaxes(type="log", title_text="tokens/s (all sequences)")
        return self.figure("throughput", fig, f"Decode throughput against batch, {join(title)}; tokens/s is batch over "
                                              f"the median step time. {self.data.dtype}, {self._weights_words()}.")

    def floor_figure(self) -> str:
        fig, models = self._by_model(lambda m: f"{m}, batch {self.context_batch(m)}")
        shown = set()
        for j, model in enumerate(models, start=1):
            b = self.context_batch(model)
            f = self.ok[(self.ok["model"] == model) & (self.ok["batch"] == b) & self.ok["achieved_over_floor"].notna()]
            for v in self.variants():
                g = f[f["variant"] == v].sort_values("context")
                if g.empty:
                    continue
                name = escape.plot(label(v))
                fig.add_trace(go.Scatter(x=g["context"], y=g["achieved_over_floor"], mode="lines+markers", name=name,
                                         legendgroup=v, showlegend=v not in shown,
                                         line=dict(color=VARIANT_COLORS.get(v, PALETTE[6])),
                                         hovertemplate=f"{name}<br>context %{{x}}<br>%{{y:.3g}}× floor<extra></extra>"),
                              row=1, col=j)
                shown.add(v)
            fig.add_hline(y=1, line_dash="dash", line_color=PALETTE[7], line_width=1, row=1, col=j)
            fig.add_hline(y=FLOOR_TARGET, line_dash="dot", line_color=PALETTE[7], line_width=1, row=1, col=j)
            fig.update_yaxes(type="log", title_text="step time / floor" if j == 1 else None, row=1, col=j)
            fig.update_xaxes(title_text="context (prompt tokens)", row=1, col=j)
        return self.figure("floor", fig, f"Achieved step time over the bandwidth floor, log scale: 1 (dashed) would "
                                         f"move the step's bytes at copy bandwidth; the dotted line is "
                                         f"{fmt.ratio(FLOOR_TARGET)}. Each variant's floor counts its own cache format "
                                         f"(int8 plus scales for both int8 variants). {self.data.dtype}, "
                                         f"{self._weights_words()}.")

    def memory_figure(self) -> str:
        models = [m for m in self.models() if self.memory_shape(m) is not None]
        if not models:
            return "No shape ran the bf16 loop and both int8 caches, so there is no memory comparison."
        fig = make_subplots(rows=1, cols=len(models), horizontal_spacing=0.1,
                            subplot_titles=[f"{m}, batch {self.memory_shape(m)[0]}, context {self.memory_shape(m)[1]}"
                                            for m in models])
        inset_titles(fig, len(models))
        parts = [("rest", "weights and other live tensors", PALETTE[7]), ("cache", "KV cache", PALETTE[0]),
                 ("step", "allocated during a step", PALETTE[3])]
        for j, model in enumerate(models, start=1):
            b, c = self.memory_shape(model)
            f = self.ok[(self.ok["model"] == model) & (self.ok["batch"] == b) & (self.ok["context"] == c)
                        & self.ok["peak_mem_bytes"].notna()]
            f = f.set_index("variant").reindex([v for v in self.variants() if v in set(f["variant"])])
            names = [escape.plot(SHORT_LABELS.get(v, v)) for v in f.index]
            start = f["mem_at_start_bytes"].fillna(f["peak_mem_bytes"])
            values = {"cache": f["kv_cache_bytes"].fillna(0).clip(upper=start),
                      "step": (f["peak_mem_bytes"] - start).clip(lower=0)}
            values["rest"] = start - values["cache"]
            for key, name, color in parts:
                fig.add_trace(go.Bar(x=names, y=values[key] / 2**20, name=name, legendgroup=key, showlegend=j == 1,
                                     marker_color=color,
                                     hovertemplate=f"%{{x}}<br>{name}: %{{y:.4g}} MiB<extra></extra>"), row=1, col=j)
            top = float(f["peak_mem_bytes"].max()) / 2**20
            fig.update_yaxes(title_text="peak memory (MiB)" if j == 1 else None, range=[0, 1.15 * top], row=1, col=j)
        fig.update_layout(barmode="stack")
        return self.figure("memory", fig, "Peak memory over the timed steps, split into the KV cache, what was "
                                          "already allocated besides it (weights, cuBLAS workspaces), and what a step "
                                          "allocates on top. The shape with the largest cache per model. "
                                          f"{self.data.dtype}, {self._weights_words()}.", height=480)

    def micro_figure(self) -> str:
        m = self.micro[(self.micro["status"] == "ok")] if not self.micro.empty else self.micro
        m = m[m["bandwidth_fraction"].notna()] if not m.empty else m
        if m.empty:
            return "The microbenchmark has no measurement against a copy bandwidth."
        batches = sorted(set(m["batch"]))
        fig = make_subplots(rows=1, cols=len(batches), shared_yaxes=True, horizontal_spacing=0.04,
                            subplot_titles=[f"batch {b}" for b in batches])
        inset_titles(fig, len(batches))
        shown = set()
        for j, b in enumerate(batches, start=1):
            for impl in MICRO_LABELS:
                g = m[(m["batch"] == b) & (m["impl"] == impl)].sort_values("context")
                if g.empty:
                    continue
                name = escape.plot(MICRO_LABELS[impl])
                fig.add_trace(go.Scatter(x=g["context"], y=100 * g["bandwidth_fraction"], mode="lines+markers",
                                         name=name, legendgroup=impl, showlegend=impl not in shown,
                                         line=dict(color=MICRO_COLORS[impl]), customdata=g["latency_ms_median"],
                                         hovertemplate=f"{name}<br>context %{{x}}<br>%{{y:.3g}}% of copy bandwidth<br>"
                                                       "%{customdata:.3g} ms<extra></extra>"), row=1, col=j)
                shown.add(impl)
            fig.add_hline(y=100 * MICRO_TARGET, line_dash="dot", line_color=PALETTE[7], line_width=1, row=1, col=j)
            ctxs = sorted(set(m["context"]))
            fig.update_xaxes(type="log", title_text="context", tickvals=ctxs, ticktext=[f"{c // 1024}k" if c >= 1024
                                                                                         else str(c) for c in ctxs],
                             row=1, col=j)
        fig.update_yaxes(range=[0, max(105.0, 110 * float(m["bandwidth_fraction"].max()))])
        fig.update_yaxes(title_text="% of measured copy bandwidth", row=1, col=1)
        r = m.iloc[0]
        return self.figure("micro", fig, f"Decode attention alone: cache bytes read over median time, as a share of "
                                         f"the measured copy bandwidth; {r.heads} heads, head_dim {r.head_dim}, one "
                                         f"query per head, whole cache valid; the dotted line is "
                                         f"{fmt.pct(100 * MICRO_TARGET)}.")
