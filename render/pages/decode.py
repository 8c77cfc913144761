"""Decode: step time against the bandwidth floor, where a step's time goes, token agreement, peak
memory of the int8 caches, and the decode-attention microbenchmark. Every outcome word is chosen
here, from the data."""
from __future__ import annotations

import re
from functools import cached_property

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from collect.schema.decode import LAYER_ROLES, LEGACY_VARIANTS, VARIANTS

from .. import escape, fmt
from ..decode_memory import own_decode_rows
from ..figures import PALETTE
from ..tables import table_html
from ..vocab import DTYPE_SHORT, EVEN, FAR_FLOOR, INT8_PAIRS, floor_pace, join, plural
from .base import Page

# Labels carry the cache's float type, filled in from the run ({f}).
VARIANT_LABELS = {
    "hf-generate": "transformers, model.generate",
    "hf-eager": "transformers, eager loop (host-bound)",
    "hf-compiled": "transformers, StaticCache + torch.compile",
    "eager": "our loop, {f} cache, eager",
    "graph": "our step, {f} cache, CUDA graph",
    "int8-graph": "our step, int8 cache, CUDA graph",
    "int8-dequant": "int8 cache, dequantized in full each step",
    "hf": "transformers, eager loop (host-bound)",
    "int8-kernel": "int8 cache, Triton kernel, eager",
}
SHORT_LABELS = {"hf-generate": "transformers generate", "hf-eager": "transformers eager", "hf-compiled": "transformers compiled", "eager": "{f} eager",
                "graph": "{f} graph", "int8-graph": "int8 graph", "int8-dequant": "int8 dequant-all",
                "hf": "transformers eager", "int8-kernel": "int8 kernel"}
VARIANT_COLORS = {"hf-generate": "#882255", "hf-eager": PALETTE[7], "hf": PALETTE[7], "hf-compiled": PALETTE[5], "eager": PALETTE[0],
                  "graph": PALETTE[2], "int8-graph": PALETTE[1], "int8-kernel": PALETTE[1], "int8-dequant": PALETTE[3]}
STEP_WORDS = {"fused": "our fused Triton kernels (five launches per layer)", "torch": "PyTorch ops and cuBLAS",
              "inductor": "our step compiled by torch.compile (inductor)"}
MICRO_LABELS = {"triton-bf16": "Triton split-KV, {f} cache", "triton-int8": "Triton split-KV, int8 cache",
                "sdpa": "SDPA, {f} (query length 1)"}
MICRO_COLORS = {"triton-bf16": PALETTE[0], "triton-int8": PALETTE[1], "sdpa": PALETTE[7]}
CLASS_COLORS = {"linear": PALETTE[0], "attention": PALETTE[1], "cache write": PALETTE[4], "layer norm": PALETTE[2],
                "elementwise": PALETTE[3], "embedding": PALETTE[5], "sampling": PALETTE[6], "copy": "#6b6b6b",
                "other": "#3d3d3d", "idle": "#c8c8c8"}
# The targets, stated once; whether each is met is read from the data.
FLOOR_TARGETS = (("gpt2", 4, 1000, 3.0), ("gpt2-xl", 4, 1000, 1.5))  # graph step within this × its floor
INT8_STEP_TARGET = ("gpt2", 64, 512, 0.8)   # int8-graph step at most this × the graph step
AGREEMENT_TARGET = 0.99                     # teacher-forced top-1 agreement outside near-ties
MICRO_SPEEDUP = 1.6                         # int8 kernel against the bf16 kernel ...
MICRO_SPEEDUP_CONTEXT, MICRO_SPEEDUP_BATCH = 16384, 4  # ... at contexts and batches at least these
MICRO_TARGET = 0.80                         # of measured copy bandwidth ...
MICRO_TARGET_CONTEXT = 8192                 # ... at this context and above
# Two of a layer's kernels whose bytes differ by at least ROLE_BYTES_APART, and whose time above their
# bytes lies within ROLE_EVEN of each other, pay "about as much": a cost per kernel, not per byte.
ROLE_BYTES_APART, ROLE_EVEN = 3.0, 1.5
# A loop whose kernels keep the GPU busy for less than this share of its step is bound by the host.
HOST_BOUND = 0.5
# Two steps' multiples of their floors closer than this ratio are a tie: gpt2-xl's graph step moved
# about 2% between runs at one commit on the H200 (2.34 to 2.38 ms, 2026-12-01).
SAME_APPROACH = 1.03


def floor_words(r: float, target: float | None = None) -> str:
    """What a step at r times its bandwidth floor is bound by, in words, with the ratio (printed to
    differ from `target` where the sentence judges it against one)."""
    return f"{fmt.ratio(r) if target is None else fmt.ratio_vs(r, target)} its bandwidth floor: {floor_pace(r)}"


def times_words(a: float, b: float) -> str:
    """a's step time against b's, as 'N× faster' / 'N× slower' / 'on par'."""
    s = b / a
    if s >= EVEN:
        return f"{fmt.ratio(s)} faster"
    if s <= 1 / EVEN:
        return f"{fmt.ratio(1 / s)} slower"
    return "on par"


def than(a: float, b: float, other: str) -> str:
    """a's step time against b's, which is `other`'s: 'N× faster than other', or 'on par with other'."""
    words = times_words(a, b)
    return f"on par with {other}" if words == "on par" else f"{words} than {other}"


def inset_titles(fig: go.Figure, ncols: int) -> None:
    """Subplot titles inside each panel's top-left corner, clear of the legend above the plot."""
    fig.for_each_annotation(lambda a: a.update(y=a.y - 0.01, yanchor="top", x=a.x - 0.5 / ncols + 0.01,
                                               xanchor="left", font=dict(size=12)))


_LAUNCH = re.compile(r"^(plain|pdl)(?:-prefetch(\d+))?(-late)?(\+new-kv)?$")


def launch_words(label) -> str:
    """An attention launch label from the data ('pdl-prefetch64-late+new-kv') in words a reader can follow:
    'PDL, 64 keys asked of L2 early, next kernel after its loop, newest key and value written by it'. A label
    this page does not know is shown as it is (the table escapes it)."""
    m = _LAUNCH.match(str(label))
    if not m:
        return str(label)
    how, keys, late, new_kv = m.groups()
    words = ["plain launch" if how == "plain" else "PDL"]
    if keys:
        words.append(f"{keys} keys asked of L2 early")
    if how == "pdl":
        words.append("next kernel after its loop" if late else "next kernel at once")
    if new_kv:
        words.append("newest key and value written by it")
    return ", ".join(words)


def verdict(ok: bool | None) -> str:
    return "not measured" if ok is None else ("met" if ok else "not met")


def spread_verdict(value: float, lo: float | None, hi: float | None, target: float) -> str:
    """A most-this-much target judged on a value whose timed loops spread from lo to hi: met or not
    where the whole spread falls on one side of the target, 'too close to call' where it spans it."""
    if _ok(lo) and _ok(hi) and lo <= target < hi:
        return "too close to call: the timed loops' spread spans the target"
    return verdict(value <= target)


def spread_words(lo: float | None, hi: float | None, show) -> str:
    """' (p10-p90 lo-hi)' for a measured cell, or nothing where the loops' spread is unknown."""
    return f" (loops' p10 to p90: {fmt.span(lo, hi, show)})" if _ok(lo) and _ok(hi) else ""


def _ok(x) -> bool:
    return x is not None and not (isinstance(x, float) and pd.isna(x))


class DecodePage(Page):
    slug = "decode"
    phase = "decode"

    # --- frames ----------------------------------------------------------------------------

    @cached_property
    def rows(self) -> pd.DataFrame:
        """Every row, its memory figures its own loop's where the run says what the other models held."""
        return self._own_memory[0]

    @cached_property
    def _own_memory(self) -> tuple[pd.DataFrame, bool]:
        return own_decode_rows(self.run)

    @property
    def memory_is_own(self) -> bool:
        """Whether the rows' memory figures hold nothing of another model (decode_memory.py)."""
        return self._own_memory[1]

    @cached_property
    def ok(self) -> pd.DataFrame:
        return self.rows[self.rows["status"] == "ok"]

    @cached_property
    def micro(self) -> pd.DataFrame:
        return self.run.frame("decode", "micro")

    @cached_property
    def classes(self) -> pd.DataFrame:
        return self.run.frame("decode", "kernel_classes")

    @cached_property
    def agreement(self) -> pd.DataFrame:
        return self.run.frame("decode", "agreement")

    @property
    def f(self) -> str:
        return DTYPE_SHORT.get(self.data.dtype, self.data.dtype) if self.data else "bf16"

    def label(self, variant: str) -> str:
        # Only our own labels are templates: a name from the data is shown as it is, never formatted.
        if variant in ("hf-eager", "hf") and not self.hf_host_bound():
            return "transformers, eager loop"
        return VARIANT_LABELS[variant].format(f=self.f) if variant in VARIANT_LABELS else str(variant)

    def hf_host_bound(self) -> bool:
        """Whether this run shows transformers' eager loop bound by its host: it was profiled, and every
        profiled step of it kept the GPU busy for less than HOST_BOUND of its loop time. On a slow GPU
        with a fast host it need not be, so the label is read from the data, not assumed."""
        return self._hf_busy_shares is not None and bool((self._hf_busy_shares < HOST_BOUND).all())

    @cached_property
    def _hf_busy_shares(self) -> pd.Series | None:
        f = self.ok[self.ok["variant"].isin(("hf-eager", "hf"))] if not self.ok.empty else self.ok
        if f.empty or "kernel_ms_per_step" not in f:
            return None
        shares = (f["kernel_ms_per_step"] / f["step_ms_median"]).dropna()
        return None if shares.empty else shares

    def short(self, variant: str) -> str:
        return SHORT_LABELS[variant].format(f=self.f) if variant in SHORT_LABELS else str(variant)

    def models(self) -> list[str]:
        return [m.name for m in self.data.models] if self.data else []

    @staticmethod
    def model_title(model: str) -> str:
        """A model name (a checkpoint folder's, possibly) as inert text for a heading."""
        return escape.text(model)

    def model_info(self, name: str):
        return next((m for m in self.data.models if m.name == name), None)

    def variants(self) -> list[str]:
        present = set(self.rows["variant"])
        order = VARIANTS + LEGACY_VARIANTS + ("hf",)
        return [v for v in order if v in present] + sorted(present - set(order))

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

    def key_shapes(self) -> list[tuple[str, int, int]]:
        """Shapes whose steps were profiled, in the order measured."""
        if self.classes.empty:
            return []
        return list(dict.fromkeys(zip(self.classes["model"], self.classes["batch"].astype(int),
                                      self.classes["context"].astype(int))))

    def _weights_words(self) -> str:
        kinds = {m.weights for m in self.data.models}
        return "random weights" if kinds == {"random-init"} else "checkpoint and random weights" if len(kinds) > 1 else "checkpoint weights"

    # --- prose -----------------------------------------------------------------------------

    def summary(self) -> str:
        d = self.data
        counts = self.rows["status"].value_counts()
        status = join(f"{counts[s]} {s}" for s in ("ok", "oom", "unsupported", "error", "skipped") if s in counts)
        text = (f"This run decoded {len(self.rows)} rows ({status}) on {escape.text(join(self.models()))}, "
                f"{d.warmup_steps} warm-up steps before each row's timed steps. Prompts, as the run describes them: "
                f"{escape.text(d.prompt)}. ")
        if d.dtype_reason:
            text += f"Weights, activations and float caches are {escape.text(d.dtype_reason)}. "
        if d.graph_step:
            text += (f"The CUDA-graph variants compute their step with "
                     f"{escape.text(STEP_WORDS.get(d.graph_step, d.graph_step))}. ")
        if d.floor_bandwidth_bytes_per_s:
            text += (f"Bandwidth floors use {fmt.bandwidth(d.floor_bandwidth_bytes_per_s)} "
                     f"({escape.text(d.floor_bandwidth_source or 'source not recorded')}).")
        else:
            text += "No copy bandwidth was measured, so this run has no bandwidth floors."
        if d.notes:
            text += "\n" + "".join(map(escape.note, d.notes))
        return text

    def models_table(self) -> str:
        rows = [{"name": m.name, "weights": m.weights + (f" (seed {m.seed})" if m.seed is not None else ""),
                 "shape": f"{m.n_layer} layers, {m.n_head} heads × {m.head_dim}, width {m.n_embd}",
                 "params": f"{m.parameters / 1e6:.0f} M", "wbytes": fmt.bytes_(m.weight_bytes_per_step),
                 "pos": m.n_positions, "attn": m.hf_attn_implementation or "n/a"} for m in self.data.models]
        return table_html(pd.DataFrame(rows), {"name": "Model", "weights": "Weights", "shape": "Shape",
                                               "params": "Parameters", "wbytes": "Weights read per step",
                                               "pos": "Positions", "attn": "transformers attention"})

    # --- what this run shows --------------------------------------------------------------

    def findings_first(self) -> str:
        """At most three sentences: the targets and the floor, our step against transformers' loops, and what
        transformers' eager loop pays the first time it meets a cache length (else the token agreement)."""
        out = []
        rows = self._target_rows()
        judged = [r for r in rows if r["verdict"] != "not measured"]
        met = sum(r["verdict"] == "met" for r in judged)
        floors = [(m, self.row(m, "graph", b, c)) for m, b, c, _ in FLOOR_TARGETS]
        floors = [(m, g) for m, g in floors if g is not None and _ok(g.achieved_over_floor)]
        shapes = {(int(g.batch), int(g.context)) for _, g in floors}
        if judged:
            text = f"{met} of the {len(judged)} targets this run measured are met"
            if floors and len(shapes) == 1:
                b, c = shapes.pop()
                text += (f"; at batch {b} and context {c} the CUDA-graph step takes "
                         + join(f"{fmt.ratio(g.achieved_over_floor)}{' its bandwidth floor' if i == 0 else ''} for "
                                f"{escape.text(m)}" for i, (m, g) in enumerate(floors)))
            out.append(text + ".")
        shape = self._baseline_shape()
        if shape is not None:
            model, b, c = shape
            g = self.row(model, "graph", b, c)
            # Runs before the eager loop warmed every position it timed (no cold_step_ms) timed its first pass.
            eager = self.row(model, "hf-eager", b, c)
            first = (" (timed at cache lengths it met for the first time)"
                     if eager is not None and not _ok(eager.get("cold_step_ms")) and _ok(eager.get("peak_mem_bytes")) else "")
            others = [(v, w) for v, w in (("hf-generate", "transformers' model.generate, per token"),
                                          ("hf-eager", f"transformers' eager loop{first}"),
                                          ("hf-compiled", "transformers compiled with a static cache"))
                      if self.row(model, v, b, c) is not None]
            if others and others[0][0] == "hf-generate":  # what a user calls stands for the eager loop too
                others = [o for o in others if o[0] != "hf-eager"]
            parts = [than(g.step_ms_median, self.row(model, v, b, c).step_ms_median, w) for v, w in others[:2]]
            if parts:
                out.append(f"For {escape.text(model)} at batch {b} and context {c}, our CUDA-graph step is "
                           f"{join(parts)}.")
        cold = self.cold_finding()
        out.append(cold or self._agreement_sentence())
        return " ".join(x for x in out if x) or "This run has no decode step to report."

    def _baseline_shape(self) -> tuple[str, int, int] | None:
        """The shape the page compares our step with transformers' loops at: the first floor target's shape where
        the graph step and a transformers loop ran, else the first profiled shape that has both."""
        shapes = [(m, b, c) for m, b, c, _ in FLOOR_TARGETS] + self.key_shapes()
        for model, b, c in shapes:
            if self.row(model, "graph", b, c) is not None and any(
                    self.row(model, v, b, c) is not None for v in ("hf-generate", "hf-eager", "hf-compiled")):
                return model, b, c
        return None

    def cold_finding(self) -> str:
        """What transformers' eager loop pays at a cache length it meets for the first time, against its warm
        step, at the baseline shape; '' where the run did not time its first pass."""
        shape = self._baseline_shape()
        r = self.row(*shape[:1], "hf-eager", *shape[1:]) if shape else None
        if r is None or not _ok(r.get("cold_step_ms")):
            return ""
        cold, warm = float(r.cold_step_ms), float(r.step_ms_median)
        text = (f"Transformers' eager loop takes {fmt.ms(warm)} a step once it has met a cache length, and "
                f"{fmt.ms(cold)} the first time")
        if cold >= EVEN * warm and self._cudnn_attention(r):
            text += (": its attention runs in cuDNN, which PyTorch plans anew (a graph built on the host) for "
                     "every key length it has not seen")
        return text + "."

    # model.generate within this factor of the plain loop's step needs no explanation (issue 39's bar).
    GENERATE_EVEN = 1.2

    def generate_finding(self) -> str:
        """Why model.generate costs more (or not) per token than the plain greedy loop, from the host profile of
        both at one shape; '' where the run has no such profile."""
        prof = {p.variant: p for p in getattr(self.data, "host_profiles", []) if p.status == "ok"}
        g, e = prof.get("hf-generate"), prof.get("hf-eager")
        if g is None or e is None:
            return ""
        rg, re_ = self.row(g.model, "hf-generate", g.batch, g.context), self.row(e.model, "hf-eager", e.batch, e.context)
        if rg is None or re_ is None:
            return ""
        ratio = float(rg.step_ms_median) / float(re_.step_ms_median)
        where = f"{escape.text(g.model)}, batch {g.batch}, context {g.context}"
        text = (f"At {where}, model.generate takes {fmt.ms(float(rg.step_ms_median))} a token and the plain loop "
                f"{fmt.ms(float(re_.step_ms_median))} a step: {fmt.ratio(ratio)}")
        if ratio <= self.GENERATE_EVEN:
            text += f", within {fmt.pct(100 * (self.GENERATE_EVEN - 1), 2)} of each other."
        else:
            text += f", more than the {fmt.pct(100 * (self.GENERATE_EVEN - 1), 2)} two ways of decoding should differ by."
        gap = g.ms_per_token - e.ms_per_token
        extra = sorted(((c, g.components.get(c, 0.0) - e.components.get(c, 0.0))
                        for c in dict.fromkeys([*g.components, *e.components])), key=lambda x: -x[1])
        extra = [(c, d) for c, d in extra if d > 0 and gap > 0 and d >= 0.05 * gap][:3]
        text += (f" Under cProfile a generate token costs {fmt.ms(g.ms_per_token)} of host time and a loop step "
                 f"{fmt.ms(e.ms_per_token)} (the profiler slows both)")
        if gap > 0 and extra:
            text += ("; the difference lies in " + join([f"{escape.text(c)} ({fmt.pct(100 * d / gap, 2)} of it)"
                                                         for c, d in extra]))
        text += "."
        if g.kernels_per_token is not None and e.kernels_per_token is not None:
            more = g.kernels_per_token - e.kernels_per_token
            text += (f" Per token, generate launches {fmt.count(g.kernels_per_token)} kernels against the loop's "
                     f"{fmt.count(e.kernels_per_token)}")
            text += f" ({fmt.count(more)} more)" if more > 0 else ""
            if g.host_copies_per_token:
                text += (f", and copies to the host {fmt.count(g.host_copies_per_token)} times, each a wait for the GPU "
                         f"to finish (the loop: {fmt.count(e.host_copies_per_token or 0)})")
            text += "."
        return text

    def _cudnn_attention(self, r) -> bool:
        """Whether the profile shows this row's attention kernels to be cuDNN's."""
        s = self._class_shares(r.model, r.variant, r.batch, r.context)
        s = s[s["kernel_class"] == "attention"]
        return bool(len(s)) and "cudnn" in str(s.iloc[0].top_kernel).lower()

    def _agreement_sentence(self) -> str:
        a = self.agreement[self.agreement["status"] == "ok"] if not self.agreement.empty else self.agreement
        a = a[a["agreement"].notna()] if not a.empty else a
        if a.empty:
            return ""
        return (f"Outside near-ties every variant picks the same next token as our CUDA-graph step at "
                f"{fmt.pct(100 * a['agreement'].min(), 4)} of positions or more.")

    def floor_statement(self) -> str:
        """What bounds a step from below, said once: the floor's bandwidth, and how fast reading alone went."""
        d = self.data
        if not d.floor_bandwidth_bytes_per_s:
            return "This run measured no copy bandwidth, so its steps have no bandwidth floor."
        text = (f"The floor prices a step's bytes at the measured copy bandwidth, "
                f"{fmt.bandwidth(d.floor_bandwidth_bytes_per_s)} (a copy's reads plus writes).")
        m = self._micro_ok()
        m = m[m["bandwidth_fraction"].notna()] if not m.empty else m
        if not m.empty and m["bandwidth_fraction"].max() > 1:
            top = m.loc[m["bandwidth_fraction"].idxmax()]
            text += (f" Reading alone goes faster: the decode attention below read its cache at up to "
                     f"{fmt.pct(100 * top.bandwidth_fraction)} of that rate, since memory that only reads never "
                     "turns around to write. So the floor is a yardstick, not a hard bound: a step that only read "
                     "could come in under it by as much.")
        else:
            text += (" No read measured on this GPU went faster than that, so the floor is the least a step can "
                     "take at the bandwidth this run saw.")
        return text

    def baselines_table(self) -> str:
        """How each transformers baseline ran: its call, cache, compilation and attention kernel, and its time."""
        shape = self._baseline_shape()
        version = self.run.manifest.software.get("transformers") if self.run.manifest.software else None
        how = {"hf-generate": ("model.generate(do_sample=False), timed per token: a call generating the prefill's "
                               "token and N more, less one generating that token alone, over N", "no"),
               "hf-eager": ("the model's forward in a Python loop, steps issued back to back", "no"),
               "hf-compiled": ("the forward in a Python loop, steps issued back to back",
                               "torch.compile(mode='reduce-overhead'): CUDA graphs")}
        default_cache = {"hf-generate": "its default", "hf-eager": "its default dynamic cache",
                         "hf-compiled": "StaticCache"}
        out = []
        for v, (call, compiled) in how.items():
            f = self.ok[self.ok["variant"] == v]
            if f.empty:
                continue
            r = self.row(shape[0], v, shape[1], shape[2]) if shape else None
            cache = next((c for c in f.get("cache_class", pd.Series(dtype=object)).dropna()), None)
            att = self._class_shares(r.model, v, r.batch, r.context) if r is not None else pd.DataFrame()
            att = att[att["kernel_class"] == "attention"] if not att.empty else att
            if v == "hf-eager" and r is not None and not _ok(r.get("cold_step_ms")) and _ok(r.get("peak_mem_bytes")):
                call += ", each at a cache length this process had not decoded before (runs before 2026-12-03)"
            name = str(att.iloc[0].top_kernel) if len(att) else "not profiled"
            out.append({"loop": self.label(v), "call": call, "cache": cache or default_cache[v], "compiled": compiled,
                        "attention": name if len(name) <= 40 else name[:40] + "…",
                        "step": r.step_ms_median if r is not None else None,
                        "cold": r.get("cold_step_ms") if r is not None else None})
        if not out:
            return "No transformers loop ran in this run."
        opt = lambda fn: (lambda x: "" if not _ok(x) else fn(x))  # noqa: E731
        at = f" at {shape[0]}, batch {shape[1]}, context {shape[2]}" if shape else ""
        cols = {"loop": "Baseline", "call": "How it is called and timed", "cache": "Cache", "compiled": "Compiled",
                "attention": "Attention kernel (profiled)", "step": f"Step{at}", "cold": "First pass at a length"}
        if not self._recorded("cold_step_ms"):
            del cols["cold"]
        caption = (f"transformers {version}, {self.data.dtype}, its attention implementation as the models table says"
                   if version else None)
        return table_html(pd.DataFrame(out), cols, formats={"step": opt(fmt.ms), "cold": opt(fmt.ms)},
                          caption=caption)

    # --- the key shapes: step time, kernels, where the time goes -----------------------------

    def _recorded(self, field: str) -> bool:
        """Whether any row of this run has `field` (older schemas lack the newer optional ones)."""
        return field in self.rows and self.rows[field].notna().any()

    def has_launch_choices(self) -> bool:
        """Whether this run's graph steps chose how to launch their attention (runs before schema 4 did not)."""
        return self._recorded("attention_launch")

    def has_judged_configs(self) -> bool:
        """Whether this run's graph steps judged their attention config in the captured step (rows record
        the config since then; the runs before let the autotuner choose and did not record it)."""
        return self._recorded("attention_config")

    def _trials(self, r) -> dict:
        t = r.get("attention_trials")
        return t if isinstance(t, dict) else {}

    def has_trials(self) -> bool:
        """Whether this run recorded the times its graph steps' attention choices were judged by (schema 5 on)."""
        return "attention_trials" in self.rows and any(self._trials(r) for _, r in self.rows.iterrows())

    def offers_new_kv(self) -> bool:
        """Whether this run's graph steps were judged with the newest key and value handed to the attention
        as a choice (its launch label ends in '+new-kv')."""
        labels = [k for _, r in self.rows.iterrows() for k in self._trials(r)]
        if self._recorded("attention_launch"):
            labels += [str(x) for x in self.rows["attention_launch"].dropna()]
        return any(x.endswith("+new-kv") for x in labels)

    def trials_table(self) -> str:
        """Every attention choice each graph step timed at warm-up, at the profiled shapes, fastest first."""
        out = []
        for model, b, c in self.key_shapes():
            for v in self.variants():
                r = self.row(model, v, b, c)
                trials = self._trials(r) if r is not None else {}
                if not trials:
                    continue
                best = min(trials.values())
                for choice, ms in sorted(trials.items(), key=lambda kv: kv[1]):
                    config, _, launch = str(choice).partition(" | ")
                    out.append({"shape": f"{model}, batch {b}, context {c}", "variant": self.label(v),
                                "config": config, "launch": launch_words(launch), "ms": ms, "over": ms / best if best > 0 else None})
        if not out:
            return "This run recorded no judged choices at the profiled shapes."
        opt = lambda fn: (lambda x: "" if not _ok(x) else fn(x))  # noqa: E731
        return table_html(pd.DataFrame(out), {"shape": "Shape", "variant": "Variant", "config": "Attention config",
                                              "launch": "Attention launch", "ms": "Step (judged)",
                                              "over": "× the fastest"},
                          formats={"ms": opt(fmt.ms), "over": opt(fmt.ratio)})

    def key_table(self) -> str:
        shapes = self.key_shapes()
        if not shapes:
            return "No step was profiled in this run, so there are no kernel counts."
        out = []
        for model, b, c in shapes:
            for v in self.variants():
                r = self.row(model, v, b, c)
                if r is None:
                    continue
                busy = r.get("kernel_ms_per_step")
                out.append({"shape": f"{model}, batch {b}, context {c}", "variant": self.label(v),
                            "step": r.step_ms_median, "floor": r.achieved_over_floor,
                            "kernels": r.get("kernels_per_step"), "busy": busy,
                            "idle": max(0.0, r.step_ms_median - busy) if _ok(busy) else None,
                            "launch": launch_words(r.get("attention_launch")) if _ok(r.get("attention_launch")) else None,
                            "config": r.get("attention_config"),
                            "compile": r.get("compile_s")})
        opt = lambda fn: (lambda x: "" if not _ok(x) else fn(x))  # noqa: E731
        columns = {"shape": "Shape", "variant": "Variant", "step": "Step (loop time)", "floor": "× floor",
                   "kernels": "Kernels per step", "busy": "Kernel time per step", "idle": "GPU idle per step",
                   "launch": "Attention launch", "config": "Attention config", "compile": "Cold compile (s)"}
        for col, field in (("launch", "attention_launch"), ("config", "attention_config")):
            if not self._recorded(field):
                del columns[col]
        return table_html(pd.DataFrame(out), columns,
            formats={"step": opt(fmt.ms), "floor": opt(fmt.ratio), "kernels": opt(lambda x: f"{x:.0f}"),
                     "busy": opt(fmt.ms), "idle": opt(fmt.ms), "compile": opt(lambda x: f"{x:.1f}"),
                     "launch": opt(str), "config": opt(str)})

    # --- roles ----------------------------------------------------------------------------

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
            g = g[g["over_us_each"].notna()]
            if g.empty or step is None:
                continue
            hi, lo = g.loc[g["over_us_each"].idxmax()], g.loc[g["over_us_each"].idxmin()]
            over_ms = float((g["over_us_each"] * g["kernels_per_step"]).sum()) / 1000
            out.append(f"- **{escape.text(model)}, batch {b}, context {c}, {escape.text(self.short(variant))}.** Each kernel "
                       f"takes {fmt.num(lo.over_us_each)} µs ({self.role_words(lo.role)}) to "
                       f"{fmt.num(hi.over_us_each)} µs ({self.role_words(hi.role)}) longer than "
                       f"reading its bytes at copy bandwidth would. Over the step that is {fmt.ms(over_ms)} of its "
                       f"{fmt.ms(step.step_ms_median)}." + self._role_spread_words(g)
                       + self._head_apart_words(g, model, b))
        return "\n".join(out) + "\n" if out else ""

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

    def _role_spread_words(self, g: pd.DataFrame) -> str:
        """Whether what a layer's kernels pay above their bytes follows the bytes: compared between the layer
        role with the fewest bytes per kernel and the one with the most, where those differ severalfold."""
        g = g[g["role"].isin(LAYER_ROLES) & (g["bytes_us_each"] > 0)]
        if len(g) < 2:
            return ""
        few, most = g.loc[g["bytes_us_each"].idxmin()], g.loc[g["bytes_us_each"].idxmax()]
        if most.bytes_us_each < ROLE_BYTES_APART * few.bytes_us_each or few.over_us_each <= 0:
            return ""
        few_w, most_w = self.role_words(few.role), self.role_words(most.role)
        if most.over_us_each <= ROLE_EVEN * few.over_us_each:
            return (f" Of a layer's five kernels, the one with the fewest bytes to read ({few_w}) pays about as "
                    f"much above them as the one with the most ({most_w}): a cost per kernel, not per byte.")
        return (f" Here, of a layer's five kernels, the one with the most bytes to read ({most_w}) also pays more "
                f"above them than the one with the fewest ({few_w}), so not all of the excess is a fixed cost "
                "per kernel.")

    def role_table(self) -> str:
        r = self._role_frame.copy()
        if r.empty:
            return ""
        r["shape"] = [f"{m}, batch {b}, context {c}, {self.short(v)}"
                      for m, b, c, v in zip(r["model"], r["batch"], r["context"], r["variant"])]
        r["does"] = [self.ROLE_WORDS.get(x, x) for x in r["role"]]  # plain: the table escapes its cells
        opt = lambda fn: (lambda x: "" if not _ok(x) else fn(x))  # noqa: E731
        us = opt(lambda x: f"{fmt.num(x)} µs")
        return table_html(r, {"shape": "Shape", "does": "Kernel", "kernels_per_step": "Per step",
                              "us_each": "GPU time each", "bytes_us_each": "Its bytes at copy bandwidth",
                              "over_us_each": "Above its bytes"},
                          formats={"kernels_per_step": opt(lambda x: f"{x:.0f}"), "us_each": us, "bytes_us_each": us,
                                   "over_us_each": us})

    def _class_shares(self, model: str, variant: str, b: int, c: int) -> pd.DataFrame:
        k = self.classes
        return k[(k["model"] == model) & (k["variant"] == variant) & (k["batch"] == b) & (k["context"] == c)]

    def where_time_goes(self, model: str, variant: str, b: int, c: int, target: float | None = None) -> str:
        """Sentences that account for one row's step time: floor, busy kernels, idle gaps, the largest classes,
        and what the kernel structure costs by itself (measured against `target`, a floor multiple, if given)."""
        r = self.row(model, variant, b, c)
        if r is None:
            return ""
        text = f"The step takes {fmt.ms(r.step_ms_median)}"
        if _ok(r.floor_ms):
            text += f"; moving its bytes at copy bandwidth would take {fmt.ms(r.floor_ms)}"
        text += "."
        busy = r.get("kernel_ms_per_step")
        if not _ok(busy):
            return text + " It was not profiled, so the rest cannot be split further."
        if busy >= r.step_ms_median:
            # The profiled steps ran no faster than the timed loop (the profiler slows them a little).
            text += (f" Under the profiler its {r.kernels_per_step:.0f} kernels kept the GPU busy for {fmt.ms(busy)} "
                     "a step, as long as the timed step or longer: the GPU did not sit idle between kernels.")
        else:
            text += (f" Its {r.kernels_per_step:.0f} kernels kept the GPU busy for {fmt.ms(busy)}, and it sat idle "
                     f"between kernels for the other {fmt.ms(r.step_ms_median - busy)}.")
        shares = self._class_shares(model, variant, b, c).sort_values("ms_per_step", ascending=False)
        if not shares.empty:
            top = shares.head(2)  # two classes, with their times and kernel counts: four figures at most
            parts = [f"{escape.text(s.kernel_class)} {fmt.ms(s.ms_per_step)} in "
                     f"{plural(round(s.kernels_per_step), 'kernel')}" for s in top.itertuples()]
            text += f" By class: {join(parts)}{' (the rest in the figure)' if len(shares) > 2 else ''}."
            lead = top.iloc[0]
            if _ok(r.floor_ms) and lead.ms_per_step > 0:
                text += (f" The largest class alone takes {fmt.ratio(lead.ms_per_step / r.floor_ms)} the whole step's "
                         f"floor; its heaviest kernel is {escape.code(lead.top_kernel or 'unnamed')}.")
        return text + self.read_floor_words(r, target)

    def has_read_twins(self) -> bool:
        """Whether this run timed any step's read-only twin (runs before schema 3 did not)."""
        return self._recorded("read_floor_ms")

    def read_floor_words(self, r, target: float | None = None) -> str:
        """What the step's kernel structure costs by itself: the same kernels as plain reads."""
        read = r.get("read_floor_ms")
        if not _ok(read) or not _ok(r.floor_ms) or read <= 0:
            return ""
        text = (f" The same number of kernels in one graph, each only reading the bytes its counterpart must "
                f"read, take {fmt.ms(read)}, {fmt.ratio(read / r.floor_ms)} the floor: about what moving the step's "
                f"bytes in this many plain reads costs on this GPU. The step takes {fmt.ratio(r.step_ms_median / read)} "
                "that.")
        if target is not None:
            if read / r.floor_ms > target:
                text += (f" Even plain reads in this many kernels miss the target of {fmt.ratio(target)}, so faster "
                         "kernels alone are unlikely to reach it: it takes fewer of them.")
            else:
                text += (f" Plain reads in this many kernels would meet the target of {fmt.ratio(target)}: the rest "
                         "of the gap is inside our kernels.")
        return text

    def time_finding(self) -> str:
        """For each floor target: met or not, and where the time goes when it is not."""
        out = []
        for model, b, c, target in FLOOR_TARGETS:
            g = self.row(model, "graph", b, c)
            if g is None or not _ok(g.achieved_over_floor):
                continue
            head = f"- **{model}, batch {b}, context {c}: {floor_words(g.achieved_over_floor, target)}.**"
            if g.achieved_over_floor <= target:
                out.append(f"{head} That meets the target of {fmt.ratio(target)}.")
            else:
                out.append(f"{head} The target is {fmt.ratio(target)}. "
                           f"{self.where_time_goes(model, 'graph', b, c, target)}")
        return "\n".join(out) + "\n" if out else "No graph step ran at a target shape, so no target can be judged."

    def time_figure(self) -> str:
        """Each profiled step as one bar of 100%: its GPU time by kernel class and its idle time as shares of the
        step, on a linear axis, so a segment's length is its share; a diamond marks the share the row's own
        bandwidth floor would take. The step times themselves are in the bar labels and the table above."""
        shapes = self.key_shapes()
        if not shapes:
            return "No step was profiled in this run."
        fig = make_subplots(rows=len(shapes), cols=1, vertical_spacing=0.12, shared_xaxes=True,
                            subplot_titles=[escape.plot(f"{m}, batch {b}, context {c}") for m, b, c in shapes])
        shown = set()
        classes = [c for c in CLASS_COLORS if c != "idle" and c in set(self.classes["kernel_class"])]
        for i, (model, b, c) in enumerate(shapes, start=1):
            rows = [(v, self.row(model, v, b, c)) for v in self.variants()]
            rows = [(v, r) for v, r in rows if r is not None and _ok(r.get("kernel_ms_per_step"))]
            names = [escape.plot(f"{self.short(v)} · {fmt.ms(r.step_ms_median)}") for v, r in rows]
            # Profiled steps run a little slower than the timed loop: a step whose kernels outlast its loop time
            # is drawn as its kernels alone, with no idle time.
            total = [max(r.step_ms_median, r.kernel_ms_per_step) for _, r in rows]
            for cls in classes + ["idle"]:
                ms = []
                for v, r in rows:
                    if cls == "idle":
                        ms.append(max(0.0, r.step_ms_median - r.kernel_ms_per_step))
                    else:
                        sh = self._class_shares(model, v, b, c)
                        ms.append(float(sh[sh["kernel_class"] == cls]["ms_per_step"].sum()))
                name = "GPU idle between kernels" if cls == "idle" else cls
                fig.add_trace(go.Bar(y=names, x=[100 * x / t for x, t in zip(ms, total)], orientation="h",
                                     name=escape.plot(name), legendgroup=cls, showlegend=cls not in shown,
                                     marker_color=CLASS_COLORS.get(cls, "#3d3d3d"), customdata=ms,
                                     hovertemplate=f"%{{y}}<br>{escape.plot(name)}: %{{customdata:.4g}} ms, "
                                                   "%{x:.3g}% of the step<extra></extra>"),
                              row=i, col=1)
                shown.add(cls)
            fl = [(n, 100 * r.floor_ms / t, r.floor_ms) for n, (_, r), t in zip(names, rows, total) if _ok(r.floor_ms)]
            if fl:
                fig.add_trace(go.Scatter(y=[x[0] for x in fl], x=[x[1] for x in fl], mode="markers",
                                         name="the step's bandwidth floor", legendgroup="floor",
                                         showlegend="floor" not in shown,
                                         marker=dict(symbol="diamond", size=10, color="#222222",
                                                     line=dict(color="#ffffff", width=1)),
                                         customdata=[x[2] for x in fl],
                                         hovertemplate="%{y}<br>bandwidth floor: %{customdata:.3g} ms, %{x:.3g}% of "
                                                       "the step<extra></extra>"), row=i, col=1)
                shown.add("floor")
            fig.update_xaxes(range=[0, 100], title_text="share of the step (%)" if i == len(shapes) else None,
                             row=i, col=1)
        fig.update_layout(barmode="stack", legend=dict(orientation="h", y=-0.08, yanchor="top"))
        return self.figure("time", fig, "Where one decode step's time goes, per variant, as shares of its step: GPU "
                                        "time by kernel class (torch profiler, a few steps averaged; where kernels "
                                        "overlap, the time is charged once, to the one that started first) and the "
                                        "time the GPU sat idle between kernels (loop step time minus kernel time). "
                                        "Each bar's label gives its step time; the diamond is the share of the step "
                                        "its bandwidth floor would take (an int8 cache's floor is lower). Hover for "
                                        f"milliseconds. {self.data.dtype}, {self._weights_words()}.",
                           height=300 * len(shapes) + 140)

    def overhead_finding(self) -> str:
        """Per model, at its longest context: the loops against each other and the graph against its floor.
        The step times themselves are in the figure below and the rows table; the sentences give the ratios."""
        out = []
        for model in self.models():
            b = self.context_batch(model)
            f = self.ok[(self.ok["model"] == model) & (self.ok["batch"] == b)]
            if f.empty:
                out.append(f"- **{escape.text(model)}.** No row ran at batch {b}.")
                continue
            c = int(f["context"].max())
            r = {v: self.row(model, v, b, c) for v in self.variants()}
            hf = r.get("hf-eager") if r.get("hf-eager") is not None else r.get("hf")
            eager, g, hc = r.get("eager"), r.get("graph"), r.get("hf-compiled")
            sentences = []
            if eager is not None and hf is not None:
                text = "our eager loop is " + than(eager.step_ms_median, hf.step_ms_median, "transformers' eager loop")
                busy = hf.get("kernel_ms_per_step")
                if _ok(busy) and busy < HOST_BOUND * hf.step_ms_median:
                    text += (f"; the GPU is busy for only {fmt.pct(100 * busy / hf.step_ms_median)} of transformers' "
                             "eager step, so the host issuing its kernels sets the pace")
                sentences.append(text)
            if g is not None and (eager is not None or hc is not None):
                vs = [than(g.step_ms_median, eager.step_ms_median, "our eager loop")] if eager is not None else []
                if hc is not None:
                    vs.append(than(g.step_ms_median, hc.step_ms_median,
                                   "transformers compiled with a static cache"))
                sentences.append(f"our graph step is {join(vs)}")
            if g is not None and _ok(g.achieved_over_floor):
                sentences.append(f"the graph's step takes {floor_words(g.achieved_over_floor)}")
            if not sentences:
                sentences = ["too few variants ran to compare"]
            text = " ".join(f"{x[0].upper()}{x[1:]}." for x in sentences)
            out.append(f"- **{escape.text(model)}, batch {b}, context {c}.** {text}")
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
        """Which model comes closer to its floor, at a shape both ran (the longest context of the largest batch
        they share): where decode turns bandwidth-bound. Each model's best over every shape would set one
        model's batch 64 beside another's batch 4."""
        g = self.ok[(self.ok["variant"] == "graph") & self.ok["achieved_over_floor"].notna()]
        models = [m for m in self.models() if m in set(g["model"])]
        if len(models) < 2:
            return ""
        shared = set.intersection(*({(int(r.batch), int(r.context)) for r in g[g["model"] == m].itertuples()}
                                    for m in models))
        if not shared:
            return (f"No shape ran the CUDA-graph step of {join(escape.text(m) for m in models)} alike, so which comes "
                    "closer to its floor cannot be said here.")
        b, c = max(shared)
        rows = sorted((self.row(m, "graph", b, c) for m in models), key=lambda r: r.achieved_over_floor)
        r1, r2 = rows[0], rows[-1]
        text = (f"Closest approach to the floor, CUDA-graph step, at batch {b}, context {c} (a shape both ran): "
                f"{escape.text(r1.model)} at {fmt.ratio(r1.achieved_over_floor)} against {escape.text(r2.model)}'s "
                f"{fmt.ratio(r2.achieved_over_floor)}.")
        # Said only where the data bear it out: the closer step is the one moving more bytes.
        gap = r2.achieved_over_floor / r1.achieved_over_floor
        if gap < SAME_APPROACH:
            text += (f" They are {fmt.pct(100 * (gap - 1))} apart, within the {fmt.pct(100 * (SAME_APPROACH - 1))} "
                     "that repeated collects move a step: too close to say that either comes closer, or why.")
        elif r1.bytes_per_step > r2.bytes_per_step:
            text += " The step that moves more bytes spreads its fixed costs over them and comes closer."
        else:
            text += (f" The closer step moves fewer bytes ({fmt.bytes_(r1.bytes_per_step)} against "
                     f"{fmt.bytes_(r2.bytes_per_step)}): how close a step comes depends on how fast its kernels run, "
                     "not on its bytes alone.")
        return text

    def int8_step_finding(self) -> str:
        model, b, c, target = INT8_STEP_TARGET
        g, q = self.row(model, "graph", b, c), self.row(model, "int8-graph", b, c)
        if g is None or q is None:
            return ""
        r = q.step_ms_median / g.step_ms_median
        text = ""
        if _ok(g.kv_bytes_per_step) and _ok(g.bytes_per_step):
            text = (f"At {model}, batch {b}, context {c}, the {self.f} cache is "
                    f"{fmt.pct(100 * g.kv_bytes_per_step / g.bytes_per_step)} of a step's bytes. There")
        else:
            text = f"At {model}, batch {b}, context {c},"
        # One sentence for the comparison itself: two step times, their ratio and the target.
        text += (f" the int8 cache in the same graph step takes {fmt.ms(q.step_ms_median)} against "
                 f"{fmt.ms(g.step_ms_median)}: {fmt.num_vs(r, target)} of the time, against a target of at most "
                 f"{fmt.num(target)}.")
        if _ok(q.bytes_per_step) and _ok(g.bytes_per_step):
            text += f" It has {fmt.num(q.bytes_per_step / g.bytes_per_step)} of the bytes to move."
        if r > target:
            gap = self._int8_gap_words(g, q, target)
            text += " " + (gap + self.read_floor_words(q) if gap else self.where_time_goes(model, "int8-graph", b, c))
        return text

    def _class_ms(self, r, kernel_class: str) -> float | None:
        s = self._class_shares(r.model, r.variant, r.batch, r.context)
        return float(s[s["kernel_class"] == kernel_class]["ms_per_step"].sum()) if not s.empty else None

    def _int8_gap_words(self, g, q, target: float) -> str:
        """Where the int8 step's time goes against the float one's, from the profiled classes: what its
        attention saves, what the rest costs both, and what the attention would have to take to meet
        the target with the rest as it is. Empty where either step was not profiled."""
        ga, qa = self._class_ms(g, "attention"), self._class_ms(q, "attention")
        gb, qb = g.get("kernel_ms_per_step"), q.get("kernel_ms_per_step")
        if not all(_ok(x) and x > 0 for x in (ga, qa, gb, qb)):
            return ""
        text = (f"Under the profiler the attention kernels take {fmt.ms(qa)} of the int8 step's GPU time against "
                f"{fmt.ms(ga)} with the {self.f} cache, and every other kernel {fmt.ms(qb - qa)} against "
                f"{fmt.ms(gb - ga)}.")
        # The attention time that would meet the target with the other kernels and idle time as they are.
        need = target * g.step_ms_median - (q.step_ms_median - qa)
        if need <= 0:
            return text + (f" Even an attention that took no time would leave the int8 step above {fmt.num(target)} "
                           "of the float one: the target needs the other kernels faster.")
        text += (f" To meet the target with the rest as it is, the int8 attention would have to take "
                 f"{fmt.ms(need)} a step")
        if _ok(q.kv_bytes_per_step) and _ok(q.floor_ms) and _ok(q.bytes_per_step) and q.bytes_per_step > 0:
            text += (f"; reading its cache bytes at copy bandwidth takes "
                     f"{fmt.ms(q.floor_ms * q.kv_bytes_per_step / q.bytes_per_step)}")
        return text + "."

    # --- memory ----------------------------------------------------------------------------

    def _pair_shape(self, model: str, int8: str, base: str) -> tuple[int, int] | None:
        """The shape with the largest float cache where both variants of a pair ran."""
        f = self.ok[self.ok["model"] == model]
        shapes = []
        for (b, c), g in f.groupby(["batch", "context"]):
            if {int8, base} <= set(g["variant"]):
                e = g[g["variant"] == base].iloc[0]
                shapes.append((e.kv_cache_bytes or 0, int(b), int(c)))
        return max(shapes)[1:] if shapes else None

    def memory_shape(self, model: str) -> tuple[int, int] | None:
        for int8, base in INT8_PAIRS:
            s = self._pair_shape(model, int8, base)
            if s is not None:
                return s
        return None

    def memory_basis(self, caption: bool = False) -> str:
        """What the memory figures on this page count, where more than one model was decoded: a paragraph,
        or the memory figure's caption's sentence."""
        if len(self.models()) < 2:
            return ""
        if caption:
            return (" The phase keeps every model it decodes loaded; the other models' weights are left out of "
                    "each panel." if self.memory_is_own else
                    " The phase keeps every model it decodes loaded, and this run does not say how much each held, "
                    "so what was already allocated includes the other models' weights.")
        if self.memory_is_own:
            return ("The phase keeps every model it decodes loaded from its first row to its last. Each model's "
                    "footprint was measured when it was built, and every peak-memory figure on this page leaves "
                    "the other models' out: what is left is the loop's own model, cache, buffers and graphs.\n")
        return ("The phase keeps every model it decodes loaded from its first row to its last, and this run does "
                "not record how much each one held, so every peak-memory figure on this page also includes the "
                "other models' weights. Differences between two loops of one model are exact; the peaks themselves "
                "are not what one loop would hold alone.\n")

    def memory_finding(self) -> str:
        """Per model, each int8 variant's peak against its float counterpart's at the shape with the largest
        cache where both ran, one sentence each; the figure below splits every peak into its parts."""
        out = []
        for model in self.models():
            sentences, last = [], None
            for int8, base in INT8_PAIRS:
                shape = self._pair_shape(model, int8, base)
                if shape is None:
                    continue
                b, c = shape
                e, q = self.row(model, base, b, c), self.row(model, int8, b, c)
                if not _ok(e.peak_mem_bytes) or not _ok(q.peak_mem_bytes):
                    continue
                where = "there" if shape == last else f"at batch {b}, context {c}"
                last = shape
                text = (f"{where}, {escape.text(self.label(int8))} peaks at "
                        f"{self._delta(q.peak_mem_bytes, e.peak_mem_bytes, escape.text(self.short(base)))}")
                if _ok(q.kv_cache_bytes) and _ok(e.kv_cache_bytes) and e.kv_cache_bytes > 0:
                    share = q.kv_cache_bytes / e.kv_cache_bytes
                    text += f", with a cache {fmt.pct(100 * share)} the size of {escape.text(self.short(base))}'s"
                    if share < 1 and q.peak_mem_bytes > e.peak_mem_bytes:
                        text += ": what a step allocates on top outweighs the smaller cache"
                sentences.append(text)
            if sentences:
                out.append(f"- **{escape.text(model)}.** " + " ".join(f"{x[0].upper()}{x[1:]}." for x in sentences))
            elif self.memory_shape(model) is not None:
                out.append(f"- **{escape.text(model)}.** No peak-memory statistics were recorded (not a CUDA run).")
            else:
                out.append(f"- **{escape.text(model)}.** No int8 variant ran at a shape with its float counterpart.")
        return "\n".join(out) + "\n"

    @staticmethod
    def _delta(x: float, base: float, base_name: str) -> str:
        diff = x - base
        word = "more" if diff > 0 else "less"
        if abs(diff) < 0.005 * base:
            return f"{fmt.bytes_(x)}, the same as {base_name} within half a percent"
        # In bytes only: a share of the peak would be a share of all the process has allocated, which
        # also holds what this loop does not use (workspaces; in older runs, the other models' weights).
        return f"{fmt.bytes_(x)}, {fmt.bytes_(abs(diff))} {word} than {base_name}"

    def peak_regressions(self, int8: str, base: str) -> tuple[int, list[str]]:
        """(shapes where both ran with peaks, those of them where the int8 variant does not peak below the
        float one, named, unescaped: 'gpt2, batch 4, context 1000')."""
        n, regressions = 0, []
        for (model, b, c), g in self.ok.groupby(["model", "batch", "context"]):
            peaks = g.set_index("variant")["peak_mem_bytes"].dropna()
            if {int8, base} <= set(peaks.index):
                n += 1
                if peaks[int8] >= peaks[base]:
                    regressions.append(f"{model}, batch {int(b)}, context {int(c)}")
        return n, regressions

    @staticmethod
    def _except(others: list[str], limit: int = 3) -> str:
        """' (not at A and B)' for a few exceptions, '' for none or too many to list."""
        return f" (not at {join(others)})" if 0 < len(others) <= limit else ""

    def memory_summary(self) -> str:
        out = []
        for int8, base in INT8_PAIRS:
            n, regressions = self.peak_regressions(int8, base)
            if n and len(regressions) == n:  # none below: say what happened, not "below at 0 of n"
                out.append(f"{escape.text(self.label(int8))} peaks at or above {escape.text(self.short(base))} at "
                           f"every one of the {n} shapes where both ran")
            elif n:
                out.append(f"{escape.text(self.label(int8))} peaks below {escape.text(self.short(base))} at "
                           f"{n - len(regressions)} of the {n} shapes where both ran"
                           f"{self._except([escape.text(o) for o in regressions])}")
        sentence = join(out)
        return f"{sentence[0].upper()}{sentence[1:]}." if out else ""

    # --- token agreement -------------------------------------------------------------------

    def agreement_finding(self) -> str:
        a = self.agreement[self.agreement["status"] == "ok"] if not self.agreement.empty else self.agreement
        if a.empty:
            return "This run has no token-agreement measurement."
        out = []
        for model, g in a.groupby("model", sort=False):
            worst = g.loc[g["agreement"].idxmin()]
            lowest = join([escape.text(self.label(v)) for v in g[g["agreement"] == worst.agreement]["variant"]])
            ties = g["near_tie_fraction"].max()
            ref = self.label(str(g.iloc[0].reference))
            out.append(f"- **{escape.text(model)}**, {int(g.iloc[0].positions)} positions each, against "
                       f"{escape.text(ref)}: outside near-ties every variant agrees at "
                       f"{fmt.pct(100 * worst.agreement, 4)} or more (lowest: {lowest}). "
                       f"Near-ties are {fmt.pct(100 * ties)} of the positions at most.")
        return "\n".join(out) + "\n"

    def agreement_table(self) -> str:
        a = self.agreement
        if a.empty:
            return ""
        order = {v: i for i, v in enumerate(VARIANTS)}
        a = a.assign(_o=a["variant"].map(order)).sort_values(["model", "_o"])
        rows = []
        for r in a.itertuples():
            if r.status != "ok":
                rows.append({"model": r.model, "variant": self.label(r.variant), "status": f"{r.status}: {r.reason}"})
                continue
            first = "none" if not _ok(r.free_running_first_mismatch) else f"step {int(r.free_running_first_mismatch)}"
            rows.append({"model": r.model, "variant": self.label(r.variant), "positions": r.positions,
                         "agree": r.agreement, "ties": r.near_tie_fraction, "at_ties": r.agreement_at_near_ties,
                         "margin": r.max_margin_at_disagreement, "free": r.free_running_match, "first": first,
                         "status": "ok"})
        opt = lambda fn: (lambda x: "" if not _ok(x) else fn(x))  # noqa: E731
        return table_html(pd.DataFrame(rows), {
            "model": "Model", "variant": "Variant", "positions": "Positions",
            "agree": "Agreement outside near-ties", "ties": "Near-ties", "at_ties": "Agreement at near-ties",
            "margin": "Largest margin at a disagreement", "free": "Free-running match",
            "first": "First free-running difference", "status": "Status"},
            formats={"positions": opt(lambda x: str(int(x))), "agree": opt(lambda x: fmt.pct(100 * x, 4)),
                     "ties": opt(lambda x: fmt.pct(100 * x)), "at_ties": opt(lambda x: fmt.pct(100 * x)),
                     "margin": opt(fmt.num), "free": opt(lambda x: fmt.pct(100 * x))})

    # --- microbenchmark --------------------------------------------------------------------

    def _micro_ok(self) -> pd.DataFrame:
        m = self.micro[self.micro["status"] == "ok"] if not self.micro.empty else self.micro
        return m[m["latency_ms_median"].notna()] if not m.empty else m

    def micro_speedups(self) -> pd.Series:
        """bf16 kernel time / int8 kernel time, per (batch, context) where both ran."""
        m = self._micro_ok()
        if m.empty:
            return pd.Series(dtype=float)
        key = ["batch", "context"]
        i8 = m[m["impl"] == "triton-int8"].set_index(key)
        bf = m[m["impl"] == "triton-bf16"].set_index(key)
        common = i8.index.intersection(bf.index)
        return bf.loc[common, "latency_ms_median"] / i8.loc[common, "latency_ms_median"]

    def micro_finding(self) -> str:
        m = self._micro_ok()
        if m.empty:
            return "The microbenchmark has no measurement."
        out = []
        mb = m[m["bandwidth_fraction"].notna()]
        for impl in MICRO_LABELS:
            g = mb[mb["impl"] == impl]
            if g.empty:
                continue
            lo, hi = g.loc[g["bandwidth_fraction"].idxmin()], g.loc[g["bandwidth_fraction"].idxmax()]
            a, b = fmt.pct(100 * lo.bandwidth_fraction), fmt.pct(100 * hi.bandwidth_fraction)
            share = (f"{a} of the measured copy bandwidth at every shape measured" if a == b else
                     f"{a} (batch {lo.batch}, context {lo.context}) to {b} (batch {hi.batch}, context {hi.context}) "
                     "of the measured copy bandwidth")
            out.append(f"- **{MICRO_LABELS[impl].format(f=self.f)}**: {share}.")
        if not mb.empty and (mb["bandwidth_fraction"] > 1).any():
            out.append("\nSome figures exceed 100%. The copy bandwidth counts a copy's reads plus its writes, and "
                       "memory loses time turning around between the two; decode attention only reads, so it can "
                       "stream faster than a copy moves bytes. Above 100% is not an error in the byte count.")
        key = ["batch", "context"]
        bf = m[m["impl"] == "triton-bf16"].set_index(key)
        sd = m[m["impl"] == "sdpa"].set_index(key)
        both = bf.index.intersection(sd.index)
        if len(both):
            rel = bf.loc[both, "latency_ms_median"] / sd.loc[both, "latency_ms_median"]
            worst, best = rel.idxmax(), rel.idxmin()
            where = ("" if fmt.num(rel.min()) == fmt.num(rel.max()) else
                     f" (slowest relative to SDPA at batch {worst[0]}, context {worst[1]}; fastest at batch {best[0]}, "
                     f"context {best[1]})")
            out.append(f"\nAgainst SDPA on the same {self.f} cache, our kernel takes "
                       f"{fmt.span(rel.min(), rel.max())} times its time over {len(both)} shapes{where}.")
        speed = self.micro_speedups()
        if len(speed):
            i8 = m[m["impl"] == "triton-int8"].set_index(key)
            fewer = bf.loc[speed.index, "bytes_read"] / i8.loc[speed.index, "bytes_read"]
            out.append(f"\nThe int8 cache has {fmt.ratio(fewer.median())} fewer bytes to read; the kernel reading it "
                       f"is {fmt.span(speed.min(), speed.max(), fmt.ratio)} as fast as the {self.f} kernel over "
                       f"the {len(speed)} shapes both ran.")
            sel = [k for k in speed.index if k[0] >= MICRO_SPEEDUP_BATCH and k[1] >= MICRO_SPEEDUP_CONTEXT]
            if sel:
                out[-1] += (f" The target is {fmt.ratio(MICRO_SPEEDUP)} at context {MICRO_SPEEDUP_CONTEXT} and above, "
                            f"batch {MICRO_SPEEDUP_BATCH} and above.")
                for b in sorted({k[0] for k in sel}):
                    got = speed[[k for k in sel if k[0] == b]]
                    verdict_ = ("met" if (got >= MICRO_SPEEDUP).all() else
                                "missed" if (got < MICRO_SPEEDUP).all() else
                                f"met at {(got >= MICRO_SPEEDUP).sum()} of {len(got)} contexts")
                    vs = lambda x: fmt.ratio_vs(x, MICRO_SPEEDUP)  # noqa: E731
                    out[-1] += (f" At batch {b} it is {verdict_}: {fmt.span(got.min(), got.max(), vs)} over "
                                f"{plural(len(got), 'context')}.")
        return "\n".join(out) + "\n"

    # --- targets ---------------------------------------------------------------------------

    def _unchecked_models(self, checked: pd.DataFrame) -> str:
        """The models this run decoded whose variants the agreement check did not compare: named, so a verdict
        over the others is not read as theirs. Plain text: the table escapes its cells."""
        rest = [m for m in self.models() if m not in set(checked["model"])]
        return f" ({join(rest)} not checked)" if rest else ""

    def targets_table(self) -> str:
        return table_html(pd.DataFrame(self._target_rows()), {"target": "Target", "measured": "This run",
                                                               "verdict": "Verdict"})

    def _target_rows(self) -> list[dict]:
        """Each target with what this run measured and its verdict ('met', 'not met', 'not measured', or too
        close to call), as the targets table prints them."""
        rows = []
        for model, b, c, target in FLOOR_TARGETS:
            g = self.row(model, "graph", b, c)
            if g is None or not _ok(g.achieved_over_floor) or not _ok(g.floor_ms):
                rows.append({"target": f"CUDA-graph step within {fmt.ratio(target)} of the bandwidth floor at {model}, "
                                       f"batch {b}, context {c}", "measured": "not measured", "verdict": verdict(None)})
                continue
            lo, hi = (g.get(k) / g.floor_ms if _ok(g.get(k)) else None for k in ("step_ms_p10", "step_ms_p90"))
            rows.append({"target": f"CUDA-graph step within {fmt.ratio(target)} of the bandwidth floor at {model}, "
                                   f"batch {b}, context {c}",
                         "measured": fmt.ratio_vs(g.achieved_over_floor, target) + spread_words(lo, hi, fmt.ratio),
                         "verdict": spread_verdict(g.achieved_over_floor, lo, hi, target)})
        model, b, c, target = INT8_STEP_TARGET
        g, q = self.row(model, "graph", b, c), self.row(model, "int8-graph", b, c)
        label = f"int8-graph step at most {fmt.num(target)} of the graph step at {model}, batch {b}, context {c}"
        if g is None or q is None:
            rows.append({"target": label, "measured": "not measured", "verdict": verdict(None)})
        else:
            # The ratio's widest range over the two rows' loop spreads: the int8 step's fastest loop
            # against the float step's slowest, and the other way round.
            ends = [q.get(a) / g.get(b) if _ok(q.get(a)) and _ok(g.get(b)) else None
                    for a, b in (("step_ms_p10", "step_ms_p90"), ("step_ms_p90", "step_ms_p10"))]
            r = q.step_ms_median / g.step_ms_median
            rows.append({"target": label, "measured": fmt.num_vs(r, target) + spread_words(*ends, fmt.num),
                         "verdict": spread_verdict(r, *ends, target)})
        a = self.agreement[self.agreement["status"] == "ok"] if not self.agreement.empty else self.agreement
        a = a[a["agreement"].notna()] if not a.empty else a
        ok = None if a.empty else bool(a["agreement"].min() >= AGREEMENT_TARGET)
        rows.append({"target": f"every variant agrees with the graph step at ≥ {fmt.pct(100 * AGREEMENT_TARGET)} of "
                               "positions outside near-ties (teacher-forced)",
                     "measured": "not measured" if a.empty else
                     f"{fmt.pct_vs(100 * a['agreement'].min(), 100 * AGREEMENT_TARGET, 4)} at worst over {len(a)} "
                     f"variants of {join(dict.fromkeys(a['model']))}" + self._unchecked_models(a),
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

    # --- tables ----------------------------------------------------------------------------

    def rows_table(self, model: str) -> str:
        f = self.rows[self.rows["model"] == model].copy()
        order = {v: i for i, v in enumerate(self.variants())}
        f["_o"] = f["variant"].map(order)
        f = f.sort_values(["batch", "context", "_o"])
        f["variant"] = f["variant"].map(self.label)
        f["status"] = [s if s == "ok" else f"{s}: {r}" for s, r in zip(f["status"], f["reason"].fillna(""))]
        opt = lambda fn: (lambda x: "" if not _ok(x) else fn(x))  # noqa: E731
        columns = {"batch": "Batch", "context": "Context", "variant": "Variant", "step_impl": "Step",
                   "attention_launch": "Attention launch", "step_ms_median": "Step (loop time)",
                   "tokens_per_s": "Tokens/s", "achieved_over_floor": "× floor", "kernels_per_step": "Kernels per step",
                   "peak_mem_bytes": "Peak memory", "kv_cache_bytes": "KV cache", "distinct_tokens": "Distinct tokens",
                   "status": "Status"}
        if not self.has_launch_choices():
            del columns["attention_launch"]
        return table_html(f, columns,
            formats={"step_ms_median": opt(fmt.ms), "tokens_per_s": opt(fmt.num),
                     "achieved_over_floor": opt(fmt.ratio), "kernels_per_step": opt(lambda x: f"{x:.0f}"),
                     "peak_mem_bytes": opt(fmt.bytes_), "kv_cache_bytes": opt(fmt.bytes_),
                     "distinct_tokens": opt(lambda x: str(int(x))), "step_impl": opt(str),
                     "attention_launch": opt(launch_words)})

    def micro_table(self) -> str:
        f = self.micro.sort_values(["batch", "context", "impl"]).copy()
        f["impl"] = f["impl"].map(lambda i: MICRO_LABELS[i].format(f=self.f) if i in MICRO_LABELS else str(i))
        f["status"] = [s if s == "ok" else f"{s}: {r}" for s, r in zip(f["status"], f["reason"].fillna(""))]
        opt = lambda fn: (lambda x: "" if not _ok(x) else fn(x))  # noqa: E731
        return table_html(f, {"batch": "Batch", "context": "Context", "impl": "Kernel", "latency_ms_median": "Device time",
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
        out = [{"model": m, "variant": self.label(v), "status": s,
                "where": join(f"b{b}/c{c}" for b, c in zip(g["batch"], g["context"])), "reason": r}
               for (m, v, s, r), g in bad.groupby(["model", "variant", "status", bad["reason"].fillna("")], sort=False)]
        return table_html(pd.DataFrame(out), {"model": "Model", "variant": "Variant", "status": "Status",
                                              "where": "Batch / context", "reason": "Reason"})

    # --- figures ---------------------------------------------------------------------------

    def _by_model(self, title) -> tuple[go.Figure, list[str]]:
        models = self.models()
        fig = make_subplots(rows=1, cols=max(1, len(models)), subplot_titles=[escape.plot(title(m)) for m in models],
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
                name = escape.plot(self.label(v))
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
            base = "graph" if "graph" in set(f["variant"]) else "eager"
            fl = f[(f["variant"] == base) & f["floor_ms"].notna()].sort_values("context")
            if not fl.empty:
                fig.add_trace(go.Scatter(x=fl["context"], y=fl["floor_ms"], mode="lines",
                                         name=f"bandwidth floor ({self.f} cache)", legendgroup="floor",
                                         showlegend="floor" not in shown, line=dict(color=PALETTE[7], dash="dash", width=1),
                                         hovertemplate="floor %{y:.3g} ms<extra></extra>"), row=1, col=j)
                shown.add("floor")
            fig.update_yaxes(type="log", title_text="step time (ms)" if j == 1 else None, row=1, col=j)
            fig.update_xaxes(title_text="context (prompt tokens)", row=1, col=j)
        loops = self.ok["loops_timed"].dropna() if "loops_timed" in self.ok else pd.Series(dtype=float)
        few = (f" (each row times {fmt.span(loops.min(), loops.max(), lambda v: f'{v:.0f}')} loops, so these are "
               "interpolated between them)") if len(loops) and loops.max() < 10 else ""
        return self.figure("latency", fig, "Loop time of one decode step against context, log scale; bars span p10 to "
                                           f"p90 of the timed loops{few}; the dashed line is the bandwidth floor (weights "
                                           "plus cache over copy bandwidth). Hover for tokens/s. "
                                           f"{self.data.dtype}, {self._weights_words()}.")

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
                name = escape.plot(f"{self.label(v)} ({model})" if len(self.models()) > 1 else self.label(v))
                fig.add_trace(go.Scatter(x=g["batch"], y=g["tokens_per_s"], mode="lines+markers", name=name,
                                         line=dict(color=VARIANT_COLORS.get(v, PALETTE[6])),
                                         customdata=g["achieved_over_floor"],
                                         hovertemplate=f"{name}<br>batch %{{x}}<br>%{{y:.4g}} tokens/s<br>"
                                                       "%{customdata:.3g}× floor<extra></extra>"))
        if not title:
            return "This run has no batch sweep."
        fig.update_xaxes(type="log", title_text="batch")
        fig.update_yaxes(type="log", title_text="tokens/s (all sequences)")
        return self.figure("throughput", fig, f"Decode throughput against batch, {join(title)}; tokens/s "
                                              f"is batch over the step's loop time. {self.data.dtype}, "
                                              f"{self._weights_words()}.")

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
                name = escape.plot(self.label(v))
                fig.add_trace(go.Scatter(x=g["context"], y=g["achieved_over_floor"], mode="lines+markers", name=name,
                                         legendgroup=v, showlegend=v not in shown,
                                         line=dict(color=VARIANT_COLORS.get(v, PALETTE[6])),
                                         hovertemplate=f"{name}<br>context %{{x}}<br>%{{y:.3g}}× floor<extra></extra>"),
                              row=1, col=j)
                shown.add(v)
            fig.add_hline(y=1, line_dash="dash", line_color=PALETTE[7], line_width=1, row=1, col=j)
            fig.add_hline(y=FAR_FLOOR, line_dash="dot", line_color=PALETTE[7], line_width=1, row=1, col=j)
            fig.update_yaxes(type="log", title_text="step time / floor" if j == 1 else None, row=1, col=j)
            fig.update_xaxes(title_text="context (prompt tokens)", row=1, col=j)
        return self.figure("floor", fig, f"Achieved step time over the bandwidth floor, log scale: 1 (dashed) would "
                                         f"move the step's bytes at copy bandwidth; the dotted line is "
                                         f"{fmt.ratio(FAR_FLOOR)}. Each variant's floor counts its own cache format "
                                         f"(int8 plus scales for the int8 variants). {self.data.dtype}, "
                                         f"{self._weights_words()}.")

    def memory_figure(self) -> str:
        models = [m for m in self.models() if self.memory_shape(m) is not None]
        if not models:
            return "No shape ran a float cache and an int8 cache together, so there is no memory comparison."
        fig = make_subplots(rows=1, cols=len(models), horizontal_spacing=0.1,
                            subplot_titles=[escape.plot(f"{m}, batch {self.memory_shape(m)[0]}, context "
                                                        f"{self.memory_shape(m)[1]}") for m in models])
        inset_titles(fig, len(models))
        parts = [("rest", "weights and other live tensors", PALETTE[7]), ("cache", "KV cache", PALETTE[0]),
                 ("step", "allocated during a step", PALETTE[3])]
        for j, model in enumerate(models, start=1):
            b, c = self.memory_shape(model)
            f = self.ok[(self.ok["model"] == model) & (self.ok["batch"] == b) & (self.ok["context"] == c)
                        & self.ok["peak_mem_bytes"].notna()]
            f = f.set_index("variant").reindex([v for v in self.variants() if v in set(f["variant"])])
            names = [escape.plot(self.short(v)) for v in f.index]
            start = f["mem_at_start_bytes"].fillna(f["peak_mem_bytes"])
            values = {"cache": f["kv_cache_bytes"].fillna(0).clip(upper=start),
                      "step": (f["peak_mem_bytes"] - start).clip(lower=0)}
            values["rest"] = start - values["cache"]
            for key, name, color in parts:
                fig.add_trace(go.Bar(x=names, y=values[key] / 2**20, name=name, legendgroup=key, showlegend=j == 1,
                                     marker_color=color,
                                     hovertemplate=f"%{{x}}<br>{name}: %{{y:.4g}} MiB<extra></extra>"), row=1, col=j)
            top = float(f["peak_mem_bytes"].max()) / 2**20 if len(f) else 1.0
            fig.update_yaxes(title_text="peak memory (MiB)" if j == 1 else None, range=[0, 1.15 * top], row=1, col=j)
        fig.update_layout(barmode="stack")
        others = self.memory_basis(caption=True)
        return self.figure("memory", fig, "Peak memory over the timed steps, split into the KV cache, what was "
                                          "already allocated besides it (weights, workspaces, a graph's buffers), and "
                                          "what a step allocates on top. The shape with the largest cache per model."
                                          f"{others} {self.data.dtype}, {self._weights_words()}.", height=480)

    def micro_figure(self) -> str:
        m = self._micro_ok()
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
                name = escape.plot(MICRO_LABELS[impl].format(f=self.f))
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
        return self.figure("micro", fig, f"Decode attention alone: cache bytes read over median device time, as a "
                                         f"share of the measured copy bandwidth (a copy's reads plus writes); "
                                         f"{r.heads} heads, head_dim {r.head_dim}, one query per head, whole cache "
                                         f"valid; the dotted line is {fmt.pct(100 * MICRO_TARGET)}.")
