"""Peak memory of the int8 cache against the float cache it replaces."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ... import escape, fmt
from ...figures import PALETTE
from ...vocab import ELEMENT_BYTES, INT8_PAIRS, join
from .data import WHOLE_CALL_VARIANTS, DecodeData, _ok, inset_titles


WHOLE_CALL = "whole model.generate call, prefill included"
# The warp-specialized persistent step holds its copy of the weights and scratch for the attention; the graph step holds small
# buffers of its own that it does not. What run h100-20261205a's persistent steps held beyond its graph steps was 0.17%
# less (gpt2) and 0.08% more (gpt2-xl) than that copy; an extra further from the copy than this share is not it.
WS_COPY_NEAR = 0.05


class Memory(DecodeData):
    """The shape compared, the basis of the figures, the finding, summary and figure."""

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
            packed = self._packed_copy(model)
            if packed:
                sentences.append(packed)
            if sentences:
                out.append(f"- **{escape.text(model)}.** " + " ".join(f"{x[0].upper()}{x[1:]}." for x in sentences))
            elif self.memory_shape(model) is not None:
                out.append(f"- **{escape.text(model)}.** No peak-memory statistics were recorded (not a CUDA run).")
            else:
                out.append(f"- **{escape.text(model)}.** No int8 variant ran at a shape with its float counterpart.")
        return "\n".join(out) + "\n"

    def _packed_copy(self, model: str) -> str:
        """Where the persistent step ran beside the graph step: what it holds before a step beyond the graph
        step's, and what that is made of where the figures say so. The plain-Triton step (step_impl 'persistent')
        packs its own copy of the weights (kernels/decode/persistent_step.py) and holds scratch for its partial
        sums: said where the extra is one copy of the weights and at most 30% more. The warp-specialized step
        ('persistent-ws', kernels/decode/persistent_ws.py) keeps a copy of every weight but the LM head, which it
        reads in place, and scratch for the attention's partial results: said where the extra is within
        WS_COPY_NEAR of that copy."""
        f = self.ok[(self.ok["model"] == model) & (self.ok["variant"] == "persistent")]
        for r in f.itertuples():
            g = self.row(model, "graph", r.batch, r.context)
            if g is None or not (_ok(r.mem_at_start_bytes) and _ok(g.mem_at_start_bytes)):
                continue
            more = r.mem_at_start_bytes - g.mem_at_start_bytes
            if more <= 0:
                return ""
            shown = (r.batch, r.context) == self.memory_shape(model)
            unseen = "" if shown else " (a shape the figure below does not show)"
            text = (f"at batch {r.batch}, context {r.context}{unseen}, {escape.text(self.label('persistent'))} holds "
                    f"{fmt.bytes_(more)} more than {escape.text(self.short('graph'))} before a step")
            w = r.weight_bytes_per_step
            if getattr(r, "step_impl", None) == "persistent-ws":
                return text + self._transposed_copy(model, more, w)
            if _ok(w) and w > 0 and w <= more <= 1.3 * w:
                text += (f": {fmt.bytes_(w)} of it a second copy of the weights, packed tile by tile in the order the "
                         "step streams them (the model keeps the originals for the prefill), the rest its scratch "
                         "for partial sums and the packing's padding")
            return text
        return ""

    def _transposed_copy(self, model: str, more: float, w) -> str:
        """What the warp-specialized step holds beyond the graph step, where `more` bytes lie within WS_COPY_NEAR of
        its copy: every weight a step reads (`w`) but the LM head, whose bytes are the model's vocabulary times its
        width in its dtype; '' where the model's shape is not known or the bytes do not match."""
        m = self.model_info(model)
        size = ELEMENT_BYTES.get(m.dtype) if m is not None else None
        if not (_ok(w) and size):
            return ""
        copy = w - m.vocab_size * m.n_embd * size
        if copy <= 0 or abs(more - copy) > WS_COPY_NEAR * copy:
            return ""
        return (f", about a second copy of every weight but the LM head ({fmt.bytes_(copy)}): the warp-specialized "
                "step keeps one, its matrices transposed for its TMA copies (the model keeps the originals for the "
                f"prefill); the remainder, {'' if more >= copy else '−'}{fmt.bytes_(abs(more - copy))}, is its scratch "
                "for the attention's partial results less the graph step's own buffers. That step reads the LM head in "
                f"place from the model's matrix, so its copy is less than the {fmt.bytes_(w)} of weights a step reads")

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

    def memory_figure(self) -> str:
        models = [m for m in self.models() if self.memory_shape(m) is not None]
        if not models:
            return "No shape ran a float cache and an int8 cache together, so there is no memory comparison."
        fig = make_subplots(rows=1, cols=len(models), horizontal_spacing=0.1,
                            subplot_titles=[escape.plot(f"{m}, batch {self.memory_shape(m)[0]}, context "
                                                        f"{self.memory_shape(m)[1]}") for m in models])
        inset_titles(fig, len(models))
        parts = [("rest", "weights and other live tensors", PALETTE[7]), ("cache", "KV cache", PALETTE[0]),
                 ("step", "allocated during a step", PALETTE[3]), ("call", WHOLE_CALL, PALETTE[4])]
        drawn = set()
        for j, model in enumerate(models, start=1):
            b, c = self.memory_shape(model)
            f = self.ok[(self.ok["model"] == model) & (self.ok["batch"] == b) & (self.ok["context"] == c)
                        & self.ok["peak_mem_bytes"].notna()]
            f = f.set_index("variant").reindex([v for v in self.variants() if v in set(f["variant"])])
            names = [escape.plot(self.short(v)) for v in f.index]
            values = self._memory_parts(f)
            for key, name, color in parts:
                if not values[key].any():
                    continue
                fig.add_trace(go.Bar(x=names, y=values[key] / 2**20, name=name, legendgroup=key, showlegend=key not in drawn,
                                     marker_color=color,
                                     hovertemplate=f"%{{x}}<br>{name}: %{{y:.4g}} MiB<extra></extra>"), row=1, col=j)
                drawn.add(key)
            top = float(f["peak_mem_bytes"].max()) / 2**20 if len(f) else 1.0
            fig.update_yaxes(title_text="peak memory (MiB)" if j == 1 else None, range=[0, 1.15 * top], row=1, col=j)
        fig.update_layout(barmode="stack")
        others = self.memory_basis(caption=True)
        whole = (" model.generate's memory is read around a whole call, before it has a cache and through its "
                 "prefill, so its bar is one piece." if "call" in drawn else "")
        return self.figure("memory", fig, "Peak memory over the timed steps, split into the KV cache, what was "
                                          "already allocated besides it (weights, workspaces, a graph's buffers), and "
                                          "what a step allocates on top. The shape with the largest cache per model."
                                          f"{whole}{others} {self.data.dtype}, {self._weights_words()}.", height=480)

    @staticmethod
    def _memory_parts(f: pd.DataFrame) -> dict[str, pd.Series]:
        """Each row's peak split into what it held besides its cache, its cache and what a step added; a loop whose
        memory was read around a whole call (WHOLE_CALL_VARIANTS) is one piece, since its start held no cache yet and
        its peak includes the prefill."""
        whole = f.index.isin(WHOLE_CALL_VARIANTS)
        start = f["mem_at_start_bytes"].fillna(f["peak_mem_bytes"])
        cache = f["kv_cache_bytes"].fillna(0).clip(upper=start)
        parts = {"cache": cache, "step": (f["peak_mem_bytes"] - start).clip(lower=0), "rest": start - cache}
        parts = {k: v.where(~whole, 0.0) for k, v in parts.items()}
        parts["call"] = f["peak_mem_bytes"].where(whole, 0.0)
        return parts
