"""The baselines: how transformers' loops ran, what their first pass cost, and model.generate against the plain loop."""
from __future__ import annotations

import pandas as pd

from collect.schema.decode import HOST_NESTED, HOST_OTHER, HOST_PARTS_OVER_WHOLE

from ... import escape, fmt
from ...decode_memory import idle_share
from ...tables import table_html
from ...vocab import EVEN, join
from .data import DecodeData, FLOOR_TARGETS, _ok


def _parts_over_whole(profile) -> bool:
    """Whether a host profile's components (those not nested in another) add up to more than its whole loop: its two
    profiled calls differed by noise (collect/host_profile.py now profiles such a pair again; older runs kept it)."""
    parts = sum(v for k, v in profile.components.items() if k not in HOST_NESTED and k != HOST_OTHER)
    return parts > HOST_PARTS_OVER_WHOLE * profile.ms_per_token


class Baselines(DecodeData):
    """The baseline shape, the cold-cache and generate findings, and the baselines table."""

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
            # The first pass was timed, not profiled: the planning is the likely cause, not a measured one.
            text += (". Its attention runs in cuDNN (the profile names its kernels), and PyTorch builds a cuDNN plan "
                     "on the host for each key length it has not seen: the likely cause, though this run did not "
                     "profile the first pass to show it")
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
        # The ratio is printed with the figures that set it apart from the bar it is judged against: run
        # h200-20261205a's 1.2035 printed as "1.20×, more than the 20%".
        edge = self.GENERATE_EVEN if ratio >= 1 else 1 / self.GENERATE_EVEN
        text = (f"At {where}, model.generate takes {fmt.ms(float(rg.step_ms_median))} a token and the plain loop "
                f"{fmt.ms(float(re_.step_ms_median))} a step: {fmt.ratio_vs(ratio, edge)}")
        bar = fmt.pct(100 * (self.GENERATE_EVEN - 1), 2)
        if 1 / self.GENERATE_EVEN <= ratio <= self.GENERATE_EVEN:
            text += f", within {bar} of each other."
        elif ratio > 1:
            text += f", more than {bar} apart."
        else:  # generate the quicker by more than the bar: its cache or its loop saves the plain loop's host work
            text += f", so generate is the quicker, by more than {bar}."
        gap = g.ms_per_token - e.ms_per_token
        extra = sorted(((c, g.components.get(c, 0.0) - e.components.get(c, 0.0))
                        for c in dict.fromkeys([*g.components, *e.components])), key=lambda x: -x[1])
        # Named parts only: the unattributed rest explains nothing, and a part nested in another would count twice.
        extra = [(c, d) for c, d in extra if c != HOST_OTHER and c not in HOST_NESTED
                 and d > 0 and gap > 0 and d >= 0.05 * gap][:3]
        # Two times, then the shares of their difference, in sentences of their own: at most four figures each.
        text += (f" Under cProfile a generate token costs {fmt.ms(g.ms_per_token)} of host time and a loop step "
                 f"{fmt.ms(e.ms_per_token)}{self._profiled_apart(g.ms_per_token, rg)}.")
        noisy = [p for p in (g, e) if _parts_over_whole(p)]
        if noisy:
            # Clamped to nothing, such a profile's remainder would have been split as if it were measured.
            text += (f" The {join('loop' if p is e else 'generate' for p in noisy)} profile's parts add up to more "
                     "than its whole (host noise between its two profiled calls), so the difference is not split.")
        elif gap > 0 and extra:
            # Said to hold the difference only where the parts named do (run h100-20261205b named three parts that
            # held 83% of it, leaving out a fourth of 12%).
            whole = sum(d for _, d in extra) >= 0.95 * gap
            text += ((" The difference lies in " if whole else
                      f" The largest {'part' if len(extra) == 1 else 'parts'} of the difference lie in ")
                     + join([f"{escape.text(c)} ({fmt.pct(100 * d / gap, 2)} of it)" for c, d in extra])
                     + ("." if whole else
                        f"; the rest ({fmt.pct(round(100 - 100 * sum(d for _, d in extra) / gap, 9), 2)}) is in smaller parts "
                        "and in time the profile does not attribute."))
        if g.kernels_per_token is not None and e.kernels_per_token is not None:
            more = g.kernels_per_token - e.kernels_per_token
            text += (f" Per token, generate launches {fmt.count(g.kernels_per_token)} kernels against the loop's "
                     f"{fmt.count(e.kernels_per_token)}")
            text += f" ({fmt.count(more)} more)." if more > 0 else "."
            if g.host_copies_per_token:
                text += (f" It also copies to the host {fmt.count(g.host_copies_per_token)} times a token, each a wait "
                         f"for the GPU to finish (the loop: {fmt.count(e.host_copies_per_token or 0)}).")
        return text

    @staticmethod
    def _profiled_apart(profiled: float, timed) -> str:
        """Why the host profile's figures are read as shares and not against the timed ones: the timed row's own
        samples spread around the profiled figure, or the profiler moved it (either way, as the data show)."""
        samples = timed.get("step_samples_ms")
        samples = [float(x) for x in samples] if isinstance(samples, (list, tuple)) and len(samples) > 1 else []
        if samples and min(samples) <= profiled <= max(samples):
            return (f" (host time; generate's own timed pairs spanned {fmt.span(min(samples), max(samples), fmt.ms)} a "
                    "token, so read what follows as shares of these figures, not against the timed ones)")
        return " (host time under a profiler: read what follows as shares of these figures, not against the timed ones)"

    def compiled_idle_words(self) -> str:
        """How long the compiled baseline's GPU sat idle between replays, at its first profiled shape: its graph holds
        the forward alone, and the loop around it runs on the host. '' where it was not profiled."""
        for model, b, c in self.key_shapes():
            r = self.row(model, "hf-compiled", b, c)
            idle = idle_share(r) if r is not None else None
            if idle is not None:
                return (f"; in this run the GPU sat idle for {fmt.pct(100 * idle)} of its step at "
                        f"{escape.text(model)}, batch {b}, context {c}")
        return ""

    def dynamic_cache_words(self) -> str:
        """What transformers' dynamic cache costs the GPU each step, where the profile shows it: its copy kernels at the
        profiled shape where they take the largest share of the step. Said to grow by concatenation only where those
        kernels are named for it; '' where the eager loop's copies were not profiled."""
        k = self.classes
        if k.empty:
            return ""
        k = k[k["variant"].isin(("hf-eager", "hf")) & (k["kernel_class"] == "copy")]
        seen = []
        for c in k.itertuples():
            r = self.row(c.model, c.variant, int(c.batch), int(c.context))
            if r is not None and r.step_ms_median > 0:
                seen.append((c.ms_per_step / r.step_ms_median, c, r))
        if not seen:
            return ""
        _, c, r = max(seen, key=lambda x: x[0])
        cat = "catarray" in str(c.top_kernel).lower()
        text = (" Its dynamic cache grows by concatenation, so every step also reads and rewrites the whole cache"
                if cat else " Every step also runs copy kernels")
        text += (f": at {escape.text(c.model)}, batch {c.batch}, context {c.context}, its copy kernels take "
                 f"{fmt.ms(c.ms_per_step)} of a {fmt.ms(r.step_ms_median)} step")
        attention = self._class_ms(r, "attention")
        if _ok(attention) and 0 < attention < c.ms_per_step:
            text += f", more than its attention ({fmt.ms(attention)})"
        if cat:
            text += (". The floor counts the cache once, so part of this loop's multiple of its floor is that extra "
                     "traffic, bytes the floor does not count")
            # The cache read once and written once is the least the concatenation moves; at copy bandwidth that is a
            # bound on the copies' time, not their measure (other copies share the class), so it is said as a bound.
            kv, bw = r.get("kv_bytes_per_step"), self.data.floor_bandwidth_bytes_per_s
            if _ok(kv) and bw:
                least = 2 * kv / bw * 1e3
                text += (f". Reading and rewriting the cache at copy bandwidth would take {fmt.ms(least)} of "
                         f"those {fmt.ms(c.ms_per_step)}")
                if least < 0.5 * c.ms_per_step:
                    text += (", so the copies take longer than that traffic needs: they run below copy bandwidth, "
                             "or copy more than the cache")
        return text + "."

    def _cudnn_attention(self, r) -> bool:
        """Whether the profile shows this row's attention kernels to be cuDNN's."""
        s = self._class_shares(r.model, r.variant, r.batch, r.context)
        s = s[s["kernel_class"] == "attention"]
        return bool(len(s)) and "cudnn" in str(s.iloc[0].top_kernel).lower()

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
