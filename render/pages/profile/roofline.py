"""The hierarchical roofline: each call's FLOPs over the bytes one counter saw at each memory level, under
measured roofs."""
from __future__ import annotations

import math
import re

import pandas as pd
import plotly.graph_objects as go

from ... import escape, fmt
from ...axes import log_ticks
from ...ceilings import Roof, TENSOR_KEY
from ...figures import PALETTE
from ...fmt import known
from ...vocab import KERNEL_FUNCTIONS, MATERIALISING, impl_color, impl_label, join, plural
from .data import ProfileData, _clip, _esc, _shape_id, short_kernel_name
from .tensor_cores import _tensor_core_work


# The memory levels of the hierarchical roofline: key, label, marker symbol, the counter behind it, its roof.
LEVELS = [("dram", "DRAM", "circle", "dram__bytes_read.sum + dram__bytes_write.sum", "dram"),
          ("l2", "L2", "square", "lts__t_bytes.sum", "l2"),
          ("l1", "L1", "diamond", "l1tex__t_bytes.sum", "smem"),
          ("shared", "shared memory", "triangle-up", "sm__sass_data_bytes_mem_shared.sum", "smem")]
# Levels nearer the SM than L2: a kernel whose count there is below this share of its own L2 traffic moved its
# data past the counter (TMA copies from L2 straight into shared memory, WGMMA reading its operands there), so
# the counter cannot give that kernel's intensity at the level.
NEAR_SM_MIN_SHARE = 0.10
# Kernels taking at least this share of a call's time decide whether a level can be measured for the call.
MAJOR_KERNEL_SHARE = 0.05
# A kernel the counter missed is said to take "much of" its call only from this share of the call's time up; below
# it the share itself is given, since MAJOR_KERNEL_SHARE lets one GEMM of a few percent drop a call's point.
MUCH_OF_CALL = 0.25
# Kernels whose names say they copy tiles by TMA or multiply with WGMMA (which reads its operands from shared
# memory): cuDNN's and CUTLASS's Hopper kernels spell 'wgmma'/'gmma' or 'tma' out, FlashAttention-4's Hopper
# forward is flash_fwd_sm90 / FlashAttentionForwardSm90. 'tma' only as a word of its own ('softmax' holds it too).
TMA_NAMED = re.compile(r"w?gmma|(?<![a-z])tma(?![a-z])|flash_fwd_sm9\d|FlashAttentionForwardSm9\d", re.IGNORECASE)
# Our kernels that load by TMA and multiply with WGMMA (vocab.KERNEL_FUNCTIONS names each compiled function's kernel).
OUR_TMA_KERNELS = ("hopper", "gluon-tile", "gluon-ws")
# Where a call's DRAM point lies against its ridge, in words that say what the side means for it: the ridge is
# DRAM's alone, so a point right of it can still be bound by another level's bandwidth.
SIDE = {True: "Left of the DRAM ridge (DRAM bandwidth caps them below their compute roof)",
        False: "Right of the DRAM ridge (DRAM bandwidth does not bind them)"}
# Shares of their binding roof within this relative distance are not ranked: each is one profiled call, and
# a single call's kernel time moves by a few percent between runs (the clock check's single-kernel calls
# agree with our device time only to within several percent).
RANK_NOISE = 0.03
# Calls grouped within RANK_NOISE are "equally" close or far only where their shares lie within this many percentage
# points: 91.8% and 89.3% are not equal to a reader, so past it the group says which of them is the closer.
EQUAL_PTS = 1.0
# A second roof at most this much above a call's lowest one is named beside it: with two roofs that close,
# moving fewer bytes at the first level alone would barely raise the call's ceiling.
CLOSE_ROOF = 1.10
# binding_words' mark on a call whose point sits at or above its lowest roof, before that roof's name.
EXCEEDED = "above "
# A TMA call's L2 counter "sees" its tile requests when it counts at least this share of them (causal tiles cut
# by the diagonal make the request count approximate).
L2_SEES_REQUESTS = 0.95


def level_name(label: str, roof: Roof) -> str:
    """A memory level's roof as the findings name it: 'DRAM bandwidth'; the L2 roof, where this run measured it, as
    the 'measured L2 read rate' it is (reads of data held in L2 by one microbenchmark: a rate a kernel can beat, not
    the cache's ceiling); a roof the datasheet stands in for with its source ('DRAM bandwidth (datasheet)')."""
    if roof.key == "l2" and roof.source == "measured":
        return "measured L2 read rate"
    return f"{label} bandwidth" + ("" if roof.source == "measured" else f" ({roof.source})")


def roof_words(name: str) -> str:
    """A roof's name followed by 'roof' where it does not already say what it is: 'tensor fp16 compute roof', but
    'measured L2 read rate'."""
    return name if name.endswith(" rate") else f"{name} roof"


class Roofline(ProfileData):
    """Roofs, level points, the binding roof per call, the figure and its finding."""

    def roofs(self, shape) -> dict:
        """The roofs drawn for `shape`: DRAM, L2 and shared memory, the tensor roof of its dtype, and FP32."""
        c = self.ceilings
        keys = ["dram", "l2", "smem", TENSOR_KEY.get(shape[4], "fp16"), "fp32"]
        return {k: c.roof(k) for k in dict.fromkeys(keys)}

    def compute_roof(self, shape, impl: str) -> Roof:
        """The compute roof `impl` is judged against at `shape`: the tensor roof of the dtype, unless the profile
        shows its matrix multiplies ran without tensor cores; then the FP32 roof, since FMA work on the ordinary
        pipes cannot reach the tensor rate. Where nothing decides, the tensor roof stays: it is the higher one, so
        it never calls a kernel further from its roof than it is."""
        roofs = self.roofs(shape)
        used = self.tensor_core_verdicts(shape).get(impl, (None, ""))[0]
        return roofs["fp32"] if used is False else roofs[TENSOR_KEY.get(shape[4], "fp16")]

    def level_points(self, shape=None) -> pd.DataFrame:
        """One row per (implementation, level) the counters can measure: bytes, intensity, FLOP/s; and the
        levels they cannot, with why (column `why`, empty when plotted). Worked out once per shape: the
        figure, its findings and the Home page all ask (callers filter, never change, the frame)."""
        shape = shape or self.headline
        cache = self.__dict__.setdefault("_level_points_by_shape", {})
        if shape not in cache:
            cache[shape] = self._level_points(shape)
        return cache[shape]

    def _level_points(self, shape) -> pd.DataFrame:
        df = self._rows(shape)
        df = df[(df["status"] == "ok") & df["duration_ms"].notna()] if not df.empty else df
        out = []
        for _, r in df.iterrows():
            flops, t = self._flops(r), r["duration_ms"] * 1e-3
            k = self._case_kernels(r["case_id"])
            for level, label, symbol, counter, roof in LEVELS:
                by, why = self._level_bytes(r, k, level)
                out.append({"impl": r["impl"], "case_id": r["case_id"], "level": level, "label": label,
                            "symbol": symbol, "counter": counter, "roof": roof, "bytes": by,
                            "ai": flops / by if by else None, "flops_per_s": flops / t if t else None,
                            "flops": flops, "time_ms": r["duration_ms"], "why": why})
        return pd.DataFrame(out, columns=["impl", "case_id", "level", "label", "symbol", "counter", "roof", "bytes",
                                          "ai", "flops_per_s", "flops", "time_ms", "why"])

    def _level_bytes(self, r, k: pd.DataFrame, level: str) -> tuple[float | None, str]:
        """A call's bytes at one level, or (None, why not)."""
        if level == "dram":
            by = self._dram(r)
            return (by, "") if by else (None, "no DRAM count")
        if level == "l2":
            if not (known(r["l2_bytes"]) and r["l2_bytes"] > 0):
                return None, "no L2 count"
            if known(r["dram_read_bytes"]) and r["l2_bytes"] < r["dram_read_bytes"]:
                # Every byte read from DRAM crosses L2: a smaller L2 count cannot be the call's L2 traffic.
                return None, "l2-blind"
            return r["l2_bytes"], ""
        col = "l1_bytes" if level == "l1" else "shared_bytes"
        if k.empty or col not in k or k[col].isna().all():
            return None, "not counted on this GPU"
        if not self._blind_kernels(k, level).empty:
            return None, "bypassed"
        by = float(k[col].fillna(0).sum())
        return (by, "") if by > 0 else (None, "none")

    @staticmethod
    def _blind_kernels(k: pd.DataFrame, level: str) -> pd.DataFrame:
        """The kernels of one call (`k`) that drop its point at L1 or shared memory: each takes at least
        MAJOR_KERNEL_SHARE of the call's time and its count there is under NEAR_SM_MIN_SHARE of its own L2 traffic.
        Column `share`: the kernel's share of the call's time."""
        col = "l1_bytes" if level == "l1" else "shared_bytes"
        if k.empty or col not in k or k[col].isna().all():
            return k.iloc[0:0].assign(share=[])
        total = k["duration_ms"].fillna(0).sum()
        k = k.assign(share=k["duration_ms"].fillna(0) / total if total else 1.0)
        major = k[k["share"] >= MAJOR_KERNEL_SHARE] if total else k
        if level == "shared":
            # Only a kernel that multiplies matrices can hide shared-memory traffic from the counter (WGMMA reads
            # its operands there); a kernel that uses no shared memory rightly counts none.
            major = major[_tensor_core_work(major)]
        return major[major[col].fillna(0) < NEAR_SM_MIN_SHARE * major["l2_bytes"].fillna(0)]

    @staticmethod
    def names_tma(kernel_name: str) -> bool:
        """Whether a kernel's name says it copies tiles by TMA or multiplies with WGMMA: one of our TMA kernels, or a
        library kernel whose name spells it out (TMA_NAMED)."""
        ours = KERNEL_FUNCTIONS.get(str(kernel_name).split("(")[0].strip())
        return ours in OUR_TMA_KERNELS or bool(TMA_NAMED.search(str(kernel_name)))

    def _bypass_words(self, shape, gone: pd.DataFrame) -> str:
        """Why the counters cannot place the calls in `gone` (level points whose why is 'bypassed'): in which kernel,
        with that kernel's share of its call, and the TMA and WGMMA explanation only where the kernel's name says it
        uses them (names_tma); for another kernel, that its name does not say how it moves its data."""
        rows = self._rows(shape).set_index("case_id")
        blind = []  # per call: (impl, the largest kernel the counter missed, its share, whether its name says TMA)
        for case_id, g in gone.groupby("case_id", sort=False):
            k = self._case_kernels(case_id)
            missed = pd.concat([self._blind_kernels(k, lv) for lv in g["level"]])
            if missed.empty or case_id not in rows.index:
                continue
            top = missed.sort_values("share", ascending=False, kind="stable").iloc[0]  # one kernel may miss both
            blind.append((rows.loc[case_id, "impl"], top["kernel_name"], float(top["share"]),
                          self.names_tma(top["kernel_name"])))
        counters = f"{escape.code('l1tex__t_bytes')} and {escape.code('sm__sass_data_bytes_mem_shared')}"
        out = []
        for tma in (True, False):
            group = [b for b in blind if b[3] == tma]
            if not group:
                continue
            where = self._blind_where(group)
            if tma:
                out.append(f"{where}, the counter saw less than a tenth of the kernel's L2 traffic, which is what "
                           "happens when TMA copies tiles from L2 straight into shared memory and WGMMA reads its "
                           f"operands there: {counters} count neither.")
            else:
                names = join(dict.fromkeys(escape.code(short_kernel_name(n)) for _, n, _, _ in group))
                out.append(f"{where} ({names}), the counter saw less than a tenth of the kernel's L2 traffic; the "
                           "kernel's name does not say how it moves its data, so this run cannot tell what the "
                           "counter missed.")
        return " ".join(out)

    @staticmethod
    def _blind_where(group: list[tuple]) -> str:
        """'In the only kernel of each call of A and B' or 'In a kernel that takes 7.69% of the C call': "much of"
        only from MUCH_OF_CALL up, the only kernel for a call of one kernel, else the share itself (the largest,
        where several calls are named)."""
        big = [b for b in group if b[2] >= MUCH_OF_CALL]
        small = [b for b in group if b[2] < MUCH_OF_CALL]
        parts = []
        if big:
            whole = [b[2] >= 1 for b in big]
            names = join(impl_label(b[0]) for b in big)
            parts.append(f"the only kernel of each call of {names}" if all(whole) else
                         f"a kernel that takes {'much' if not any(whole) else 'much or all'} of each call of {names}")
        if small:
            top = max(b[2] for b in small)
            parts.append(f"a kernel that takes {fmt.pct(100 * top)} of the {impl_label(small[0][0])} call"
                         if len(small) == 1 else f"a kernel that takes at most {fmt.pct(100 * top)} of each call of "
                         f"{join(impl_label(b[0]) for b in small)}")
        return "In " + " and in ".join(parts)

    def _roof_caps(self, shape) -> dict[str, tuple[float, list[tuple[str, float]]]]:
        """impl -> (its achieved FLOP rate, every roof over it as (name, the FLOP rate it allows), lowest first).
        A level without a roof or a point does not count; the compute roof the call is judged against
        (compute_roof) does. Worked out once per shape, like level_points: the summary, the roofline finding
        and the clock check (once per call) all ask."""
        cache = self.__dict__.setdefault("_roof_caps_by_shape", {})
        if shape not in cache:
            cache[shape] = self._work_out_roof_caps(shape)
        return cache[shape]

    def _work_out_roof_caps(self, shape) -> dict[str, tuple[float, list[tuple[str, float]]]]:
        pts = self.level_points(shape)
        pts = pts[pts["ai"].notna()] if not pts.empty else pts
        roofs = self.roofs(shape)
        out = {}
        for impl, g in pts.groupby("impl", sort=False):
            top = self.compute_roof(shape, impl)
            caps = [(top.label + " compute" + ("" if top.source == "measured" else f" ({top.source})"),
                     top.value)] if top.ok else []
            for _, p in g.iterrows():
                roof = roofs[p["roof"]]
                if roof.ok:
                    caps.append((level_name(p["label"], roof), roof.value * p["ai"]))
            if caps:
                out[impl] = (float(g["flops_per_s"].iloc[0]), sorted(caps, key=lambda c: c[1]))
        return out

    @staticmethod
    def _close_roofs_sentence(close: dict[str, tuple[str, float]], bind: dict[str, tuple[str, float]]) -> str:
        """One sentence on the calls with a second roof close above the lowest, with how far above where
        the sentence stays within four figures. Each call's gap follows its name after a comma, not in
        parentheses: implementation names carry parentheses of their own."""
        if len(close) <= 4:
            calls = [f"{impl_label(i)}, its {roof_words(lv)} {fmt.pct(100 * (r - 1))} above its {roof_words(bind[i][0])}"
                     for i, (lv, r) in close.items()]
            listed = "; ".join(calls[:-1]) + ("; and " if len(calls) > 1 else "") + calls[-1]
        else:
            listed = join(impl_label(i) for i in close)
        return (f"A second roof lies just above the lowest over {listed}: relieving the lowest limit alone would "
                "raise such a call's ceiling by no more than that gap.")

    def binding_roofs(self, shape=None) -> dict[str, tuple[str, float]]:
        """impl -> (the lowest roof over its points, achieved / that roof). A share of one or more is a call whose
        point sits at or above that roof (exceeded_roofs): a measured rate it beat, which does not bind it."""
        return {impl: (caps[0][0], rate / caps[0][1])
                for impl, (rate, caps) in self._roof_caps(shape or self.headline).items()}

    def exceeded_roofs(self, shape=None) -> dict[str, tuple[str, float]]:
        """The calls of binding_roofs whose point sits at or above their lowest roof: that roof is a rate one
        microbenchmark measured (the L2 read rate, most often), which the kernel beat, so it binds nothing there."""
        return {impl: b for impl, b in self.binding_roofs(shape).items() if b[1] >= 1}

    def tied_roofs(self, shape=None) -> dict[str, str]:
        """impl -> its second-lowest roof, for the calls whose two lowest roofs lie within RANK_NOISE of each other:
        naming one of them as the call's binding roof would rank two figures the noise does not tell apart. A call
        above its lowest roof (exceeded_roofs) has no binding roof to tie."""
        above = self.exceeded_roofs(shape)
        return {impl: caps[1][0] for impl, (_, caps) in self._roof_caps(shape or self.headline).items()
                if len(caps) > 1 and caps[1][1] <= (1 + RANK_NOISE) * caps[0][1] and impl not in above}

    def binding_words(self, shape=None) -> dict[str, str]:
        """impl -> the roof that binds it in words: 'DRAM bandwidth', or 'DRAM and shared memory bandwidth alike' for
        a tie; for a call at or above its lowest roof, that it beat that roof (EXCEEDED + the roof's name), which
        Summary._roof_groups says apart."""
        tied = self.tied_roofs(shape)
        above = self.exceeded_roofs(shape)
        out = {}
        for impl, (level, _) in self.binding_roofs(shape).items():
            second = tied.get(impl)
            if impl in above:
                out[impl] = EXCEEDED + level
            elif second is None:
                out[impl] = level
            elif level.endswith(" bandwidth") and second.endswith(" bandwidth"):
                out[impl] = f"{level.removesuffix(' bandwidth')} and {second.removesuffix(' bandwidth')} bandwidth alike"
            else:
                out[impl] = f"{level} and {second} alike"
        return out

    def close_roofs(self, shape=None) -> dict[str, tuple[str, float]]:
        """impl -> (its second-lowest roof, how far above the lowest), for the calls whose second roof lies
        within CLOSE_ROOF of the lowest."""
        above = self.exceeded_roofs(shape)  # no lowest limit to relieve where the point is above it
        return {impl: (caps[1][0], caps[1][1] / caps[0][1])
                for impl, (_, caps) in self._roof_caps(shape or self.headline).items()
                if len(caps) > 1 and caps[1][1] <= CLOSE_ROOF * caps[0][1] and impl not in above}

    def roofline_fig(self, shape=None) -> go.Figure:
        shape = shape or self.headline
        pts = self.level_points(shape)
        fig = go.Figure()
        plotted = pts[pts["ai"].notna()] if not pts.empty else pts
        xs = list(plotted["ai"]) if not plotted.empty else []
        ys = [v / 1e12 for v in plotted["flops_per_s"]] if not plotted.empty else []
        for impl, g in plotted.groupby("impl", sort=False):
            names = "<br>".join(_esc(_clip(n, 90)) for n in self._case_kernels(g["case_id"].iloc[0])["kernel_name"][:8])
            label = _esc(impl_label(impl))
            fig.add_scatter(
                x=list(g["ai"]), y=[v / 1e12 for v in g["flops_per_s"]], mode="lines+markers", name=label,
                legendgroup=impl, line=dict(color=impl_color(impl), width=1, dash="dot"),
                marker=dict(symbol=list(g["symbol"]), size=11, color=impl_color(impl), line=dict(width=1, color="white")),
                customdata=[[label, p["label"], _esc(p["counter"]), fmt.bytes_(p["bytes"]), fmt.num(p["flops"]),
                             fmt.ms(p["time_ms"]), names] for _, p in g.iterrows()],
                hovertemplate=("<b>%{customdata[0]}</b>, %{customdata[1]} (%{customdata[2]})<br>bytes %{customdata[3]}, "
                               "FLOPs %{customdata[4]}, time %{customdata[5]}<br>%{x:.3g} FLOP/byte, "
                               "%{y:.3g} TFLOP/s<br>kernels:<br>%{customdata[6]}<extra></extra>"))
        for level, label, symbol, counter, _ in LEVELS:  # the level key: one grey marker per symbol
            fig.add_scatter(x=[None], y=[None], mode="markers", name=f"{label} ({_esc(counter)})", legendgroup="levels",
                            legendgrouptitle_text="level (symbol)" if level == "dram" else None,
                            marker=dict(symbol=symbol, size=10, color=PALETTE[7]))
        roofs = self.roofs(shape)
        lo = min(xs + [1.0]) / 4
        hi = max(xs + [10.0]) * 4
        compute = [r for r in roofs.values() if r.unit == "FLOP/s" and r.ok]
        top = max((r.value for r in compute), default=None)
        for r in roofs.values():
            if r.ok and r.unit == "B/s" and top:
                hi = max(hi, top / r.value * 4)
        # Bandwidth roofs are labelled above the top compute roof, left of where each meets it, one row apiece.
        label_row = 0
        for r in roofs.values():
            if not r.ok:
                continue
            dash = "solid" if r.source == "measured" else "dash"
            tag = "" if r.source == "measured" else f" ({r.source})"
            if r.unit == "B/s":
                knee = top / r.value if top else hi
                x, y = [lo, knee], [lo * r.value / 1e12, knee * r.value / 1e12]
                label_row += 1
                tx, ty, pos = knee, (top or knee * r.value) * 1.45 ** label_row / 1e12, "middle left"
            else:
                x, y = [lo, hi], [r.value / 1e12] * 2
                tx, ty, pos = hi, r.value / 1e12, "bottom left"
            ys += y
            fig.add_scatter(x=x, y=y, mode="lines", showlegend=False, line=dict(color=PALETTE[7], dash=dash, width=1.5),
                            hovertemplate=f"{r.label} roof ({r.source}): {r.text()}<extra></extra>")
            fig.add_scatter(x=[tx], y=[ty], mode="text", text=[f"{r.label} {r.text()}{tag} "], textposition=pos,
                            showlegend=False, hoverinfo="skip", textfont=dict(size=11, color=PALETTE[7]))
        fig.update_xaxes(type="log", title_text="arithmetic intensity (FLOP per byte at each level)",
                         range=[math.log10(lo), math.log10(hi)], **log_ticks(xs + [lo, hi]))
        pts_y = [v / 1e12 for v in plotted["flops_per_s"]] if not plotted.empty else [1.0]
        y_lo, y_hi = min(pts_y) / 8, (top / 1e12 if top else max(pts_y)) * 1.45 ** (label_row + 1.5)
        fig.update_yaxes(type="log", title_text="achieved (TFLOP/s)", range=[math.log10(y_lo), math.log10(y_hi)],
                         **log_ticks([y_lo, y_hi]))
        return fig

    def roofline_figure(self, shape=None) -> str:
        shape = shape or self.headline
        if shape is None:
            return "_Nothing to draw._"
        src = "counted" if self.data.flops_source == "counters" else "analytical"
        return self.figure(f"roofline-{_shape_id(shape)}", self.roofline_fig(shape),
                           f"Hierarchical roofline: one colour per implementation, one symbol per memory level, each "
                           f"point the call's {src} FLOPs over the bytes one counter measured at that level (hover names "
                           "the counter), at the height of those FLOPs over Nsight Compute's kernel time. Roofs: "
                           "DRAM and shared memory bandwidth, the measured L2 read rate, the tensor and FP32 compute rates; solid where measured, dashed where the datasheet or the architecture stands in. "
                           f"{self.caption_conditions(shape)}.", height=520)

    def roofline_finding(self, shape=None) -> str:
        """Which side of the DRAM ridge each call sits, which roof binds, and the points left out and why."""
        shape = shape or self.headline
        roofs = self.roofs(shape)
        dram, tensor = roofs["dram"], roofs[TENSOR_KEY.get(shape[4], "fp16")]
        pts = self.level_points(shape)
        d = pts[(pts["level"] == "dram") & pts["ai"].notna()] if not pts.empty else pts
        top = {impl: self.compute_roof(shape, impl) for impl in d["impl"]} if not d.empty else {}
        if not dram.ok or not any(r.ok for r in top.values()):
            return "Without ceilings for this GPU the roofline cannot say which roof binds."
        # Each call's ridge is where the DRAM roof meets its own compute roof (compute_roof).
        sides = {True: [], False: []}
        for _, p in d.iterrows():
            r = top[p["impl"]]
            if r.ok:
                sides[bool(p["ai"] < r.value / dram.value)].append(impl_label(p["impl"]))

        def ridge(r: Roof) -> str:
            src = "measured" if dram.source == r.source == "measured" else "datasheet-based"
            if r.key == tensor.key:
                return f"{src} DRAM ridge point is {fmt.num(r.value / dram.value)} FLOP per byte"
            # Worded apart from the tensor roof's ridge, the figure the other pages quote under that name.
            return f"{src} ridge with the DRAM roof sits at {fmt.num(r.value / dram.value)} FLOP per byte"

        others = {}
        for impl, r in top.items():
            if r.key != tensor.key:
                others.setdefault(r.key, []).append(impl_label(impl))
        if not others:
            out = [f"The {ridge(tensor)}."]
        else:
            out = [f"The {ridge(tensor)} under the {tensor.label} roof." if tensor.ok else
                   f"This run has no {tensor.label} roof, so no call that used the tensor cores has a ridge."]
            for key, names in others.items():
                r = roofs[key]
                who = f"{join(names)}, whose matrix multiplies ran without tensor cores,"
                out.append(f"{who} {'is' if len(names) == 1 else 'are'} judged against the {r.label} roof instead, "
                           f"whose {ridge(r)}." if r.ok else
                           f"{who} cannot be judged against a compute roof: this run measured no {r.label} rate and "
                           "the datasheet gives none.")
        for mem in (True, False):
            if sides[mem]:
                out.append(f"{SIDE[mem]}: {join(sides[mem])}.")
        bind = self.binding_roofs(shape)
        if bind:
            src = "counted" if self.data.flops_source == "counters" else "analytical"
            out.append(self._closest_and_furthest(
                bind, f"Measured against the lowest roof over it ({src} FLOPs over Nsight Compute's kernel time)"))
        close = self.close_roofs(shape)
        if close:
            out.append(self._close_roofs_sentence(close, bind))
        gone = pts[pts["why"] == "bypassed"]
        if not gone.empty:
            by_level = [f"no {lv} point for {join(impl_label(i) for i in g['impl'])}"
                        for lv, g in gone.groupby("label", sort=False)]
            out.append(f"The counters cannot place every call: {'; '.join(by_level)}.")
            out.append(self._bypass_words(shape, gone))
        out.append(self._l2_undercount_words(shape))
        blind = pts[pts["why"] == "l2-blind"]
        if not blind.empty:
            out.append(f"No L2 point is drawn for {join(impl_label(i) for i in dict.fromkeys(blind['impl']))}: "
                       f"{escape.code('lts__t_bytes')} counted fewer bytes for {'it' if blind['impl'].nunique() == 1 else 'them'} "
                       "than DRAM delivered, and every byte read from DRAM crosses L2, so the counter does not see "
                       "all of the call's L2 traffic (tensor-memory-accelerator copies among it).")
        out.append(self._l2_roof_exceeded(shape))
        missing = [r for r in roofs.values() if not r.ok]
        fallback = [r for r in roofs.values() if r.ok and r.source != "measured"]
        if fallback:
            many = len(fallback) > 1
            out.append(f"This run did not measure the {join(r.label for r in fallback)} roof{'s' if many else ''}; "
                       f"the dashed line{'s stand' if many else ' stands'} in with the datasheet or architectural "
                       "figure, which the GPU may not reach.")
        if missing:
            out.append(f"No {join(r.label for r in missing)} roof is drawn: it was not measured in this run and the "
                       "datasheet gives none.")
        return " ".join(x for x in out if x)

    @staticmethod
    def _closest_and_furthest(bind: dict[str, tuple[str, float]], lead: str) -> str:
        """Which call comes closest to its binding roof and which stays furthest, grouping the calls whose shares are
        within RANK_NOISE of the end's (a ranking there would be noise); a group is "equally" close or far only where
        its shares lie within EQUAL_PTS, and otherwise names the closer (or further) of them."""
        above = {i: b for i, b in bind.items() if b[1] >= 1}
        said = _above_words(above)
        bind = {i: b for i, b in bind.items() if i not in above}
        if not bind:
            return said
        ranked = Roofline._ranked(bind, lead)
        return f"{ranked} {said}" if said else ranked

    @staticmethod
    def _ranked(bind: dict[str, tuple[str, float]], lead: str) -> str:
        """_closest_and_furthest's ranking of the calls below their lowest roof."""
        order = sorted(bind.items(), key=lambda kv: kv[1][1], reverse=True)

        def group_words(group, one: str, many: tuple[str, str, str, str]) -> str:
            """`many`: the verb for a group whose shares lie within EQUAL_PTS ('come equally close'), the verb for
            one whose shares do not ('come closest'), and the words that name its first call then, of two and of
            more ('closer', 'closest')."""
            if len(group) == 1:
                (i, (roof, v)), = group
                return f"{impl_label(i)} {one}, at {fmt.pct(100 * v)} of its {roof_words(roof)}"
            shares = [v for _, (_, v) in group]
            equal = 100 * (max(shares) - min(shares)) <= EQUAL_PTS
            tied, ranked, of_two, of_more = many
            if len(group) == 2:
                each = " and ".join(f"{impl_label(i)}, at {fmt.pct(100 * v)} of its {roof_words(roof)}," for i, (roof, v) in group)
                return f"{each} {tied}" if equal else f"{each} {ranked}, {impl_label(group[0][0])} the {of_two}"
            lo, hi = min(shares), max(shares)  # one range, not a figure per call
            said = (f"{join(impl_label(i) for i, _ in group)} {tied if equal else ranked}, at "
                    f"{fmt.span(100 * lo, 100 * hi, fmt.pct)} of their lowest roofs")
            return said if equal else f"{said}, {impl_label(group[0][0])} the {of_more}"

        if len(order) == 1:
            return f"{lead}, {group_words(order, 'reaches', ('', '', '', ''))}."
        top = [kv for kv in order if kv[1][1] >= order[0][1][1] * (1 - RANK_NOISE)]
        if len(top) == len(order):
            return f"{lead}, {group_words(top, '', ('come equally close', 'come about as close', 'closer', 'closest'))}."
        rest = order[len(top):]
        low = [kv for kv in rest if kv[1][1] <= rest[-1][1][1] * (1 + RANK_NOISE)]
        close = group_words(top, "comes closest", ("come equally close", "come closest", "closer", "closest"))
        far = group_words(low[::-1], "stays furthest", ("stay equally far", "stay furthest", "further", "furthest"))
        if len(top) == 1 and len(low) == 1:
            return f"{lead}, {close}, and {far}."
        return f"{lead}, {close}. {far[0].upper() + far[1:]}."

    def l2_undercounts(self, shape=None) -> tuple[dict[str, float], list[str]]:
        """The calls whose loads bypass L1 (TMA copies, which reach shared memory through L2 alone): impl -> L2
        bytes counted over the tile bytes its recorded config requests, where that is under one; and the
        bypassing calls whose tiles this run does not record (library kernels), which cannot be checked."""
        shape = shape or self.headline
        pts = self.level_points(shape)
        tma = set(pts[(pts["level"] == "l1") & (pts["why"] == "bypassed")]["impl"]) if not pts.empty else set()
        under, unknown = {}, []
        for _, r in self._rows(shape).iterrows():
            if r["impl"] not in tma or r["impl"] in MATERIALISING or not known(r["l2_bytes"]):
                continue  # the GEMMs of a materialising call load by TMA too, but request no attention tiles
            req = self.tile_requests(r)
            if req is None:
                unknown.append(r["impl"])
            elif r["l2_bytes"] < L2_SEES_REQUESTS * req:
                under[r["impl"]] = r["l2_bytes"] / req
        return under, unknown

    def _l2_undercount_words(self, shape) -> str:
        """The caveat on the L2 points of TMA calls whose L2 counter saw fewer bytes than their tiles request."""
        under, unknown = self.l2_undercounts(shape)
        if not under:
            return ""
        one = len(under) == 1
        who = join(impl_label(i) for i in under)
        seen = fmt.span(min(under.values()), max(under.values()), fmt.ratio)
        text = (f"The L2 point{'' if one else 's'} of {who} need{'s' if one else ''} a caveat: "
                f"{escape.code('lts__t_bytes')} counted {seen} the tile bytes {'its' if one else 'their'} recorded "
                "tile config requests, though a TMA copy reaches shared memory through L2 alone, so either the counter "
                f"misses part of that traffic or requests were merged before it: {'the point' if one else 'each point'} "
                f"may sit up to {fmt.ratio(1 / min(under.values()))} too far right.")
        if unknown:
            text += (f" {join(impl_label(i) for i in unknown)} also load by TMA, and this run does not record "
                     f"{'its' if len(unknown) == 1 else 'their'} tiles, so the same may hold there.")
        return text

    def _l2_roof_exceeded(self, shape=None) -> str:
        """Where a kernel of the calls drawn at `shape` moved L2 traffic faster than the measured L2 roof, that roof
        is a rate one microbenchmark reached, not a ceiling: say so, with the fastest such kernel. Only those
        calls' kernels: the register-cap experiment's, whose L2 traffic is mostly their own spills, are drawn in
        no roofline, so they cannot explain a point at or above its roof."""
        shape = shape or self.headline
        roof = self.roofs(shape)["l2"]
        k = self.kernels()
        if not roof.ok or roof.source != "measured" or k.empty:
            return ""
        k = k[k["case_id"].isin(set(self._rows(shape)["case_id"]))]
        k = k[k["l2_bytes"].notna() & k["duration_ms"].notna() & (k["duration_ms"] > 0)]
        if k.empty:
            return ""
        rate = k["l2_bytes"] / (k["duration_ms"] * 1e-3)
        over = k[rate > roof.value]
        if over.empty:
            return ""
        top = over.loc[rate[over.index].idxmax()]
        return (f"The L2 roof is a rate, not a ceiling: {plural(len(over), 'profiled kernel')} moved L2 traffic faster "
                f"than the {fmt.bandwidth(roof.value)} the L2 microbenchmark sustained, up to "
                f"{fmt.bandwidth(rate[top.name])} ({escape.code(short_kernel_name(top['kernel_name']))}), so a point at "
                "or above that roof is not a contradiction.")


def _above_words(above: dict[str, tuple[str, float]]) -> str:
    """The calls whose point sits at or above their lowest roof, said apart from the ranking: such a roof is a rate
    measured by one microbenchmark that the kernel beat, so it binds nothing there and no call "comes closest" by it."""
    if not above:
        return ""
    one = len(above) == 1
    each = join(f"{impl_label(i)} at {fmt.pct(100 * v)} of its {roof_words(roof)}" for i, (roof, v) in above.items())
    return (f"{'One call sits' if one else 'These calls sit'} at or above {'its' if one else 'their'} lowest roof, "
            f"{each}: that roof is a rate measured by a microbenchmark, which the kernel beat, so it does not bind "
            f"{'it' if one else 'them'}.")
