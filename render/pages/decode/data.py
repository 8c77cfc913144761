"""The decode phase's rows as frames, the labels and targets the sections share, and the words every section uses."""
from __future__ import annotations

import re
from functools import cached_property

import pandas as pd
import plotly.graph_objects as go

from collect.schema.decode import LEGACY_VARIANTS, VARIANTS

from ... import escape, fmt
from ...decode_memory import idle_share, own_decode_rows
from ...figures import BROWN, PALETTE, PURPLE
from ...vocab import EVEN, decode_float, decode_words, floor_pace, join
from ..base import Page


# Labels carry the cache's float type, filled in from the run ({f}).
VARIANT_COLORS = {"hf-generate": PURPLE, "hf-eager": PALETTE[7], "hf": PALETTE[7], "hf-compiled": PALETTE[5], "eager": PALETTE[0],
                  "graph": PALETTE[2], "persistent": PALETTE[4], "int8-graph": PALETTE[1], "int8-kernel": PALETTE[1], "int8-dequant": PALETTE[3]}
STEP_WORDS = {"fused": "our fused Triton kernels (five launches per layer)", "torch": "PyTorch ops and cuBLAS",
              "inductor": "our step compiled by torch.compile (inductor)",
              "persistent": "one persistent Triton kernel between the embedding and the argmax",
              "persistent-ws": "one warp-specialized persistent Gluon kernel between the embedding and the argmax"}
# Each step_impl as the all-rows tables name it: short, since it repeats on every row.
STEP_SHORT = {"torch": "PyTorch ops and cuBLAS", "fused": "fused Triton kernels", "inductor": "torch.compile (inductor)",
              "persistent": "persistent Triton kernel", "persistent-ws": "persistent Gluon kernel (warp-specialized)",
              "transformers": "transformers' forward", "transformers-compiled": "transformers' compiled forward",
              "transformers-generate": "transformers' model.generate"}
# The persistent variant's steps (DecodeRow.step_impl), in the order the page describes them: the warp-specialized
# Gluon step where it runs (compute capability 9.0, at most 4 sequences), the plain-Triton step elsewhere.
PERSISTENT_STEPS = ("persistent-ws", "persistent")
# Rows of these statuses computed no step: their step_impl names the step that was asked for, not one that ran.
NOT_RUN = ("unsupported", "skipped")
# How the page's sentences name the loops they set our step beside.
SENTENCE_NAMES = {"hf-generate": "transformers' model.generate", "hf-eager": "transformers' eager loop",
                  "hf": "transformers' eager loop", "hf-compiled": "transformers compiled with a static cache",
                  "eager": "our eager loop", "graph": "our CUDA-graph step", "persistent": "our persistent step",
                  "int8-graph": "our int8-cache graph step", "int8-dequant": "the int8 cache dequantized every step"}
MICRO_LABELS = {"triton-bf16": "Triton split-KV, {f} cache", "triton-int8": "Triton split-KV, int8 cache",
                "sdpa": "SDPA, {f} (query length 1)"}
MICRO_COLORS = {"triton-bf16": PALETTE[0], "triton-int8": PALETTE[1], "sdpa": PALETTE[7]}
CLASS_COLORS = {"persistent step": PURPLE, "linear": PALETTE[0], "attention": PALETTE[1], "cache write": PALETTE[4],
                "layer norm": PALETTE[2], "elementwise": PALETTE[3], "embedding": PALETTE[5], "sampling": PALETTE[6], "copy": "#6b6b6b",
                "other": BROWN, "idle": "#c8c8c8"}
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
# Loops whose memory the phase reads around a whole call (collect/decode/baselines.py): model.generate builds its cache
# inside the call, so its start holds none and its peak includes the prefill.
WHOLE_CALL_VARIANTS = ("hf-generate",)
# A loop whose kernels keep the GPU busy for less than this share of its step is bound by the host.
HOST_BOUND = 0.5
# A loop whose GPU sits idle for at least this share of its step takes a time its host sets in part, so a ratio
# against it holds for the run's CPU as much as for its GPU: transformers' compiled step, idle 38% of its step on
# one H200 host (2026-12-04g) and 20% on another (2026-12-04c), took 0.896 ms against 0.692 ms on the same kernels.
HOST_PACED = 0.2
# Two steps' multiples of their floors closer than this ratio are a tie: gpt2-xl's graph step moved
# about 2% between runs at one commit on the H200 (2.34 to 2.38 ms, 2026-12-01).
SAME_APPROACH = 1.03


def floor_words(r: float, target: float | None = None, idle: float | None = None) -> str:
    """What a step at r times its bandwidth floor is bound by, in words, with the ratio (printed to
    differ from `target` where the sentence judges it against one); `idle`, the share of the step the GPU sat
    idle where it was profiled, picks which of the kernels' costs to name."""
    return f"{fmt.ratio(r) if target is None else fmt.ratio_vs(r, target)} its bandwidth floor: {floor_pace(r, idle)}"


def times_words(a: float, b: float) -> str:
    """a's step time against b's, as 'N× faster' / 'N× slower' / 'on par'."""
    s = b / a
    if s >= EVEN:
        return f"{fmt.ratio(s)} faster"
    if s <= 1 / EVEN:
        return f"{fmt.ratio(1 / s)} slower"
    return "on par"


def than(a: float, b: float, other: str, how: str = "") -> str:
    """a's step time against b's, which is `other`'s: 'N× faster than other', or 'on par with other'; `how` says
    what was compared where it is not a step (' per token')."""
    words = times_words(a, b)
    return f"on par{how} with {other}" if words == "on par" else f"{words}{how} than {other}"


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


def launch_header(cells) -> str:
    """The attention-launch column's header: with the abbreviation spelled out where a cell of the column uses it
    (PDL is defined in the glossary, which a reader of the table may not have open)."""
    used = any("PDL" in str(c) for c in cells if c is not None)
    return "Attention launch (PDL: programmatic dependent launch)" if used else "Attention launch"


def _ok(x) -> bool:
    return x is not None and not (isinstance(x, float) and pd.isna(x))


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _alike(r, mine) -> bool:
    """Whether another run's row measured what this run's did: the same step, warmed the same way (runs before
    2026-12-03 timed transformers' eager loop at cache lengths it met for the first time, and record no cold step)."""
    impls = (r.get("step_impl"), mine.get("step_impl"))
    same_step = impls[0] == impls[1] or not all(_ok(x) for x in impls)
    return same_step and _ok(r.get("cold_step_ms")) == _ok(mine.get("cold_step_ms"))


class DecodeData(Page):
    """The decode phase's data: the base of every section of the Decode page."""

    slug = "decode"
    phase = "decode"

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

    def cut_short(self) -> bool:
        """Whether the decode phase stopped before its end (interrupted, or still collecting): its rows are the ones
        it saved, not the ones it planned."""
        return self.run.phase_state("decode") == "partial"

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
        return decode_float(self.data.dtype if self.data else None)

    def label(self, variant: str) -> str:
        # Only our own labels are templates: a name from the data is shown as it is, never formatted.
        if variant in ("hf-eager", "hf") and not self.hf_host_bound():
            return "transformers, eager loop"
        return decode_words(variant, "label", self.f) or str(variant)

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

    def ratio_spread(self, model: str, fast: str, slow: str, batch: int, context: int) -> tuple[float, float, int] | None:
        """`slow`'s step time over `fast`'s at one shape in every run on this run's GPU that measured both alike, this
        run included: (lowest, highest, runs). None where fewer than two runs did: a ratio against a loop its host
        paces moves with the host, and only other runs show how far."""
        mine = [self.row(model, v, batch, context) for v in (fast, slow)]
        if any(r is None for r in mine):
            return None
        ratios = []
        for run in self.runs:
            if run.device_name != self.run.device_name or not run.has(self.phase):
                continue
            f = run.frame(self.phase, "rows")
            f = f[(f["status"] == "ok") & (f["model"] == model) & (f["batch"] == batch) & (f["context"] == context)]
            theirs = [f[f["variant"] == v] for v in (fast, slow)]
            if any(len(t) != 1 for t in theirs):
                continue
            a, b = (t.iloc[0] for t in theirs)
            if _alike(a, mine[0]) and _alike(b, mine[1]) and a.step_ms_median > 0:
                ratios.append(b.step_ms_median / a.step_ms_median)
        return (min(ratios), max(ratios), len(ratios)) if len(ratios) >= 2 else None

    def host_caveat(self, model: str, batch: int, context: int, fast: str, slows: list[str], idle: bool = True) -> str:
        """Sentences after `fast`'s step is set beside each of `slows` at one shape: which of those loops left the GPU
        idle for much of its step, with the ratio on kernel time alone where both were profiled (left out where `idle`
        is False, for a sentence that said so itself); which were not profiled on the GPU but wait for it every token
        (their host profile's copies to the host), so that no ratio against them goes without a word on the host;
        and how far each ratio moved over the runs on this GPU that measured it alike. '' where none is known."""
        paced, waits = [], []
        fast_row = self.row(model, fast, batch, context)
        copies = {p.variant: p.host_copies_per_token for p in getattr(self.data, "host_profiles", [])
                  if p.status == "ok" and p.model == model and p.batch == batch and p.context == context}
        for v in slows:
            r = self.row(model, v, batch, context)
            share = idle_share(r) if r is not None and idle else None
            if share is not None and share >= HOST_PACED:
                busy = (float(r.kernel_ms_per_step) / float(fast_row.kernel_ms_per_step)
                        if fast_row is not None and _ok(fast_row.get("kernel_ms_per_step"))
                        and _ok(r.get("kernel_ms_per_step")) and fast_row.kernel_ms_per_step > 0 else None)
                paced.append((self.named(v), fmt.pct(100 * share), busy))
            elif idle and r is not None and share is None and copies.get(v):
                waits.append((self.named(v), copies[v]))
        # One sentence however many loops it names: the opening paragraph holds three sentences at most.
        parts = [f"{n} left the GPU idle for {p} of its step" + (f" (on the GPU's busy time alone the ratio is "
                                                                 f"{fmt.ratio(b)})" if b is not None else "")
                 for n, p, b in paced]
        parts += [f"{n}, not profiled on the GPU, waits for it {fmt.count(k)} {'time' if k == 1 else 'times'} a token "
                  "(its host profile's copies to the host)" for n, k in waits]
        text = ""
        if parts:
            one = len(parts) == 1
            text += (f" {_capital(join(parts))}, so {'the ratio against it is' if one else 'the ratios against them are'}"
                     " partly this run's host's.")
        if spreads := self._moved_spreads(model, batch, context, fast, slows):
            parts = [f"from {fmt.span(lo, hi, fmt.ratio)} against {self.named(v)} ({n} runs)"
                     for v, (lo, hi, n) in spreads]
            text += f" Over the runs on this GPU that measured the same loops, the ratio ranged {join(parts)}."
        return text

    def _moved_spreads(self, model: str, batch: int, context: int, fast: str, slows: list[str]):
        """(variant, (low, high, runs)) for each of `slows` whose ratio to `fast` moved by SAME_APPROACH or more over
        the runs on this GPU that measured both alike (ratio_spread)."""
        return [(v, s) for v in slows if (s := self.ratio_spread(model, fast, v, batch, context)) is not None
                and s[1] / s[0] >= SAME_APPROACH]

    def host_spread_sentence(self, model: str, batch: int, context: int, fast: str, slows: list[str]) -> str:
        """One sentence: how far `fast`'s ratio to each of `slows` moved over the runs on this GPU that measured them
        alike, where it moved enough to matter; '' otherwise."""
        spreads = self._moved_spreads(model, batch, context, fast, slows)
        if not spreads:
            return ""
        lows = join(fmt.span(lo, hi, fmt.ratio) for _, (lo, hi, _) in spreads)
        return (f"Those ratios move from run to run with the host: over the runs on this GPU that measured the same "
                f"loops they ranged {lows}.")

    def named(self, variant: str) -> str:
        """A variant as this page's sentences name it ('transformers compiled with a static cache'), its label where
        they have no words for it."""
        return SENTENCE_NAMES.get(variant) or self.label(variant)

    def short(self, variant: str) -> str:
        return decode_words(variant, "short", self.f) or str(variant)

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

    def persistent_steps(self) -> list[str]:
        """Which steps this run's `persistent` rows computed (their step_impl: 'persistent-ws', the warp-specialized
        Gluon step, or 'persistent', the plain-Triton one), in PERSISTENT_STEPS order, then any other a row names.
        Only the rows that ran a step count: a row the step refused (run h100-20261205a's batch 64) names the step it
        asked, which ran nothing; where no row ran, the steps every row asked. Empty where no row says."""
        f = self.rows[self.rows["variant"] == "persistent"]
        if "step_impl" not in f:
            return []
        ran = f[~f["status"].isin(NOT_RUN)]
        present = {str(x) for x in (ran if len(ran) else f)["step_impl"] if _ok(x)}
        return [s for s in PERSISTENT_STEPS if s in present] + sorted(present - set(PERSISTENT_STEPS))

    def context_batch(self, model: str) -> int | None:
        """The batch a model's context sweep ran at: the one with the most contexts measured (rows that did
        not run, a spent budget's, count only where nothing ran)."""
        for rows in (self.ok, self.rows):
            f = rows[rows["model"] == model]
            if not f.empty:
                counts = f.groupby("batch")["context"].nunique()
                return int(counts.sort_values(kind="stable", ascending=False).index[0])
        return None

    def batch_context(self, model: str) -> int | None:
        """The context a model's batch sweep ran at, if it measured one (more than one batch there)."""
        f = self.ok[self.ok["model"] == model]
        counts = f.groupby("context")["batch"].nunique()
        counts = counts[counts > 1]
        return int(counts.sort_values(kind="stable", ascending=False).index[0]) if len(counts) else None

    def swept_models(self) -> list[str]:
        """The models whose context sweep measured at least two contexts at its batch: a curve to draw."""
        out = []
        for m in self.models():
            f = self.ok[(self.ok["model"] == m) & (self.ok["batch"] == self.context_batch(m))]
            if f["context"].nunique() >= 2:
                out.append(m)
        return out

    def row(self, model: str, variant: str, batch: int, context: int):
        f = self.ok[(self.ok["model"] == model) & (self.ok["variant"] == variant) & (self.ok["batch"] == batch)
                    & (self.ok["context"] == context)]
        return f.iloc[0] if len(f) else None

    def fastest_step(self, model: str, batch: int, context: int):
        """Our fastest bf16 step at this shape, the row the targets judge: the graph step's, or the persistent
        step's where it ran and took less time a step (None where neither ran)."""
        rows = [r for r in (self.row(model, v, batch, context) for v in ("graph", "persistent")) if r is not None]
        return min(rows, key=lambda r: r.step_ms_median) if rows else None

    def key_shapes(self) -> list[tuple[str, int, int]]:
        """Shapes whose steps were profiled, in the order measured."""
        if self.classes.empty:
            return []
        return list(dict.fromkeys(zip(self.classes["model"], self.classes["batch"].astype(int),
                                      self.classes["context"].astype(int))))

    def _weights_words(self) -> str:
        kinds = {m.weights for m in self.data.models}
        return "random weights" if kinds == {"random-init"} else "checkpoint and random weights" if len(kinds) > 1 else "checkpoint weights"
