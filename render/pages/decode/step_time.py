"""Where a step's time goes: the key shapes' step times, the launch trials, the kernel classes, the int8 step."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ... import escape, fmt
from ...decode_memory import idle_share
from ...tables import table_html
from ...vocab import join, plural
from .targets import ratio_ends, spread_verdict
from .data import (CLASS_COLORS, DecodeData, FLOOR_TARGETS, INT8_STEP_TARGET, _ok, floor_words, launch_header,
                   launch_words, than)


class StepTime(DecodeData):
    """The key-shape table and figure, where each step's time goes, and the int8 step against the graph step."""

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
                                              "launch": launch_header(o["launch"] for o in out),
                                              "ms": "Step (judged)",
                                              "over": "× the fastest"},
                          formats={"ms": opt(fmt.ms), "over": opt(fmt.ratio)})

    def profiled_words(self) -> str:
        """Which variants the torch profiler ran at the key shapes: 'every variant', or 'every variant but …' where a
        variant ran there unprofiled (model.generate's rows keep no kernel time)."""
        shapes = self.key_shapes()
        ran = self.ok[[(m, int(b), int(c)) in shapes for m, b, c in zip(self.ok["model"], self.ok["batch"],
                                                                          self.ok["context"])]] if shapes else self.ok
        if ran.empty:
            return "every variant"
        busy = ran["kernel_ms_per_step"] if "kernel_ms_per_step" in ran else pd.Series(index=ran.index, dtype=float)
        profiled = set(ran[busy.notna()]["variant"])
        rest = [v for v in self.variants() if v in set(ran["variant"]) and v not in profiled]
        return f"every variant but {join(self.named(v) for v in rest)}" if rest else "every variant"

    def key_shapes_sentence(self) -> str:
        """Defines 'the key shapes', which the loops' list and the tables below use before any table shows them."""
        shapes = self.key_shapes()
        if not shapes:
            return ""
        each = [f"{escape.text(m)} at batch {b} and context {c}" for m, b, c in shapes]
        # each item holds an "and" of its own: semicolons keep the list's items apart
        words = each[0] if len(each) == 1 else "; ".join(each[:-1]) + f"{';' if len(each) > 2 else ''} and {each[-1]}"
        return (f"The **key shapes** are the {plural(len(shapes), 'shape')} at which a few steps also ran under "
                f"the torch profiler ([where a step's time goes](#where-a-steps-time-goes)): {words}.")

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
                   "launch": launch_header(o["launch"] for o in out), "config": "Attention config",
                   "compile": "Cold compile (s)"}
        for col, field in (("launch", "attention_launch"), ("config", "attention_config")):
            if not self._recorded(field):
                del columns[col]
        return table_html(pd.DataFrame(out), columns, caption=(
            "The key shapes: each loop's step time, its kernels and, from its profiled steps, the time the GPU was "
            "busy and idle in a step"),
            formats={"step": opt(fmt.ms), "floor": opt(fmt.ratio), "kernels": opt(lambda x: f"{x:.0f}"),
                     "busy": opt(fmt.ms), "idle": opt(fmt.ms), "compile": opt(lambda x: f"{x:.1f}"),
                     "launch": opt(str), "config": opt(str)})

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
                # top_kernel is the name with the most time in its class (summed over launches), not the longest launch;
                # the data keep no share for it, so it is the largest share, not "most" (the fused step's residual
                # products held 41% of gpt2's linear class in run h200-20261205a).
                text += (f" The largest class alone takes {fmt.ratio(lead.ms_per_step / r.floor_ms)} the whole step's "
                         f"floor; the kernel with the largest share of it is "
                         f"{escape.code(lead.top_kernel or 'unnamed')}.")
        return text + self.read_floor_words(r, target)

    def has_read_twins(self) -> bool:
        """Whether this run timed any step's read-only twin (runs before schema 3 did not)."""
        return self._recorded("read_floor_ms")

    def read_floor_words(self, r, target: float | None = None) -> str:
        """What the step's kernel structure costs by itself: the same kernels as plain reads."""
        read = r.get("read_floor_ms")
        if not _ok(read) or not _ok(r.floor_ms) or read <= 0:
            return ""
        # The twin is explained once, above the findings; each step's sentence gives its figures only.
        text = (f" Its read-only twin (the same kernels, each a plain read of its counterpart's bytes) takes "
                f"{fmt.ms(read)}, {fmt.ratio(read / r.floor_ms)} the floor; the step takes "
                f"{fmt.ratio(r.step_ms_median / read)} that.")
        if target is not None:
            if read / r.floor_ms > target:
                text += (f" Even plain reads in this many kernels miss the target of {fmt.ratio(target)}, so faster "
                         "kernels alone are unlikely to reach it: it takes fewer of them.")
            else:
                text += (f" Plain reads in this many kernels would meet the target of {fmt.ratio(target)}: the rest "
                         "of the gap is inside our kernels.")
        return text

    def time_finding(self) -> str:
        """For each floor target: the graph step against its floor, the persistent step beside it where it ran,
        met or not by the faster of the two (as the targets table judges), and where the graph step's time
        goes when it is not."""
        out = []
        for model, b, c, target in FLOOR_TARGETS:
            g = self.row(model, "graph", b, c)
            if g is None or not _ok(g.achieved_over_floor):
                continue
            pace = floor_words(g.achieved_over_floor, target, idle_share(g))
            head = f"- **{model}, batch {b}, context {c}: {pace}.**"
            p = self.row(model, "persistent", b, c)
            if p is not None and _ok(p.achieved_over_floor):
                head += (f" Our persistent step, one kernel between the embedding and the argmax, takes "
                         f"{fmt.ms(p.step_ms_median)}, {fmt.ratio_vs(p.achieved_over_floor, target)} its floor: "
                         f"{than(p.step_ms_median, g.step_ms_median, f'the graph step ({fmt.ms(g.step_ms_median)})')}.")
            best = self.fastest_step(model, b, c)
            if best.achieved_over_floor <= target:
                # With the persistent step's multiple just before it, "that" would read as the persistent step's:
                # the sentence names the step that meets the target and its own multiple.
                meets = ("That meets the target of " + fmt.ratio(target) if p is None else
                         f"The target of {fmt.ratio(target)} is met by {self.label(best.variant)} "
                         f"({fmt.ratio_vs(best.achieved_over_floor, target)})")
                # The twin splits the multiple whether or not the target is met: how much of the step plain reads in
                # the same kernels take says what "the kernels' costs beyond their bytes" are made of.
                out.append(f"{head} {meets}.{self.read_floor_words(g)}")
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
        outlast = False
        for i, (model, b, c) in enumerate(shapes, start=1):
            rows = [(v, self.row(model, v, b, c)) for v in self.variants()]
            rows = [(v, r) for v, r in rows if r is not None and _ok(r.get("kernel_ms_per_step"))]
            names = [escape.plot(f"{self.short(v)} · {fmt.ms(r.step_ms_median)}") for v, r in rows]
            # Profiled steps run a little slower than the timed loop: a step whose kernels outlast its loop time
            # is drawn as its kernels alone, with no idle time.
            total = [max(r.step_ms_median, r.kernel_ms_per_step) for _, r in rows]
            outlast |= any(r.kernel_ms_per_step > r.step_ms_median for _, r in rows)
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
                                     marker_color=CLASS_COLORS.get(cls, CLASS_COLORS["other"]), customdata=ms,
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
                                        "milliseconds. "
                                        + ("Where a step's profiled kernels outlast its timed loop (the profiler slows "
                                           "them a little), the bar is its kernel time, and its shares and diamond are "
                                           "of that. " if outlast else "")
                                        + f"{self.data.dtype}, {self._weights_words()}.",
                           height=300 * len(shapes) + 140)

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
        # The verdict as the targets table gives it, so the sentence is not read as met where the loops cannot tell.
        lo, hi = ratio_ends(q, g)
        if spread_verdict(r, lo, hi, target).startswith("too close"):
            text += (f" The timed loops put it anywhere from {fmt.span(lo, hi, fmt.num)}, across the target: too close "
                     "to call.")
        else:
            text += " That meets the target." if r <= target else " That misses the target."
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
