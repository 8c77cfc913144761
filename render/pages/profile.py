"""Profiling: what Nsight Compute measured per kernel, and what it says about the bottleneck.

Kernel names come from the profiler (C++ templates with angle brackets): they are untrusted text,
escaped in every table (table_html) and in every hover label (_esc).
"""
from __future__ import annotations

import math
import re

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from collect.occupancy import limits_from_device, occupancy, occupancy_vs_registers, occupancy_vs_smem

from .. import escape, fmt, model
from ..figures import PALETTE
from ..tables import table_html
from .base import Page

# Implementations that never write the score matrix to memory; the others follow the naive model.
FUSED = {"triton", "triton-portable", "sdpa", "sdpa-flash", "sdpa-cudnn", "sdpa-efficient"}


def _shape_id(shape) -> str:
    """Figure-id part for a shape: N and d, and whether causal (two shapes may differ only there)."""
    return f"{shape[2]}-{shape[3]}" + ("-causal" if shape[5] else "")
LEVELS = [("dram", "DRAM", "circle"), ("l2", "L2", "square"), ("l1", "L1", "diamond")]
MIN_STALL_SHARE = 0.03  # reasons below this share of a kernel's stalls are summed as "other"
# Enough distinct colours for a dozen stall reasons: Okabe-Ito first, then Tableau's muted set.
STALL_COLORS = PALETTE[:7] + ["#8C564B", "#BCBD22", "#17BECF", "#9467BD", "#FF9896", "#AEC7E8", "#98DF8A"]


def _esc(text) -> str:
    """Untrusted tool text for a plotly hover label (plotly renders a subset of HTML); Markdown uses escape.text."""
    return escape.plot(text)


def _clip(text: str, n: int = 36) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _ok(x) -> bool:
    return x is not None and not (isinstance(x, float) and math.isnan(x))


def short_kernel_name(name: str) -> str:
    """'void at::native::foo<c10::Half, 4>(float*, ...)' -> 'foo': the function, no namespace or templates."""
    s = re.sub(r"^(void|static)\s+", "", name.strip())
    s = s.replace("(anonymous namespace)::", "").replace("<unnamed>::", "")
    cut = min([i for i in (s.find("<"), s.find("(")) if i > 0] or [len(s)])
    return s[:cut].split("::")[-1].strip() or name[:40]


class ProfilePage(Page):
    slug = "profile"
    phase = "profile"

    # ------------------------------------------------------------------ data access

    @property
    def ok(self) -> bool:
        d = self.data
        return d is not None and d.status == "ok" and any(r.status == "ok" for r in d.impls)

    def impls(self) -> pd.DataFrame:
        return self.run.frame("profile", "impls")

    def kernels(self) -> pd.DataFrame:
        return self.run.frame("profile", "kernels")

    def shapes(self) -> list[tuple]:
        """(batch, heads, seq_len, head_dim, dtype, causal) of the main comparison, headline first."""
        df = self.impls()
        df = df[df["group"] == "main"] if not df.empty else df
        keys = list(dict.fromkeys(zip(df["batch"], df["heads"], df["seq_len"], df["head_dim"], df["dtype"], df["causal"])))
        return keys

    @property
    def headline(self) -> tuple | None:
        s = self.shapes()
        return s[0] if s else None

    def shape_text(self, shape) -> str:
        b, h, n, d, dt, c = shape
        return f"B={b}, H={h}, N={n}, d={d}, {dt}" + (", causal" if c else "")

    def _rows(self, shape, group: str = "main") -> pd.DataFrame:
        df = self.impls()
        if df.empty or shape is None:
            return df
        b, h, n, d, dt, c = shape
        m = ((df["group"] == group) & (df["batch"] == b) & (df["heads"] == h) & (df["seq_len"] == n)
             & (df["head_dim"] == d) & (df["dtype"] == dt) & (df["causal"] == c))
        return df[m]

    def _flops(self, row) -> float:
        """Counted FLOPs where the tensor-op counters exist, else the analytical count."""
        return row["flops_counted"] if _ok(row.get("flops_counted")) else row["flops_model"]

    def caption_conditions(self, shape) -> str:
        return f"{self.shape_text(shape)}; Nsight Compute with --clock-control none, one profiled call after warm-up"

    # ------------------------------------------------------------------ status and method

    def status_note(self) -> str:
        """Why data is missing, when it is: the phase's own reason, then cases that did not run."""
        d = self.data
        out = []
        if d.status != "ok":
            out.append(f'!!! failure "No Nsight Compute data in this run"\n    {escape.text(d.reason or "no reason recorded")}\n')
        elif d.reason:
            out.append(f'!!! note "Partly missing"\n    {escape.text(d.reason)}\n')
        bad = [r for r in d.impls if r.status != "ok"]
        if d.status == "ok" and bad:
            lines = "\n".join(f"    - {escape.code(r.case_id)}: {r.status}, {escape.text(r.reason or 'no reason recorded')}" for r in bad)
            out.append(f'!!! warning "Cases without a profile"\n{lines}\n')
        return "\n".join(out)

    def command_block(self) -> str:
        d = self.data
        if not d.ncu_command:
            return "_Nsight Compute did not run, so there is no command line to show._"
        lines, cur = [], []
        for tok in d.ncu_command:
            if tok.startswith("--") and cur:
                lines.append(" ".join(cur))
                cur = []
            cur.append(tok if len(tok) < 100 else tok[:97] + "...")
        lines.append(" ".join(cur))
        return escape.code_block(" \\\n    ".join(lines), "text") + "\n"

    def passes_sentence(self) -> str:
        df = self.kernels()
        p = df["replay_passes"].dropna() if not df.empty else pd.Series(dtype=float)
        ver = f"Nsight Compute {escape.text(self.data.ncu_version)}" if self.data.ncu_version else "Nsight Compute"
        wall = f" The whole ncu run took {fmt.num(self.data.wall_s)} s." if _ok(self.data.wall_s) else ""
        if p.empty:
            return f"{ver} profiled {len(df)} kernel launches.{wall}"
        span = f"{int(p.min())}" if p.min() == p.max() else f"{int(p.min())} to {int(p.max())}"
        return (f"{ver} profiled {len(df)} kernel launches, replaying each {span} times to collect every counter "
                f"(the counters cannot all be read in one pass).{wall}")

    def flops_note(self) -> str:
        if self.data.flops_source == "counters":
            return ("FLOPs are counted by the hardware: the SASS counters for fp32 and fp16 add, multiply and fused "
                    "multiply-add, plus the tensor-core operation counters.")
        return ("This GPU (or this Nsight Compute) has no tensor-core operation counters, so the FLOPs below are "
                "**analytical**: 4·B·H·N²·d for QKᵀ and PV. Bytes and times are still measured.")

    # ------------------------------------------------------------------ summary table

    def impl_table(self, shape=None) -> str:
        shape = shape or self.headline
        df = self._rows(shape)
        if df.empty:
            return "_No implementation was profiled at this shape._"
        rows = []
        for _, r in df.iterrows():
            flops = self._flops(r)
            dram = (r["dram_read_bytes"] or 0) + (r["dram_write_bytes"] or 0) if _ok(r["dram_read_bytes"]) else None
            rows.append({"impl": r["impl"], "status": r["status"], "kernels": r["kernels"], "t": r["duration_ms"],
                         "dram": dram, "l2": r["l2_bytes"], "flops": flops,
                         "ai": flops / dram if dram else None,
                         "tflops": flops / (r["duration_ms"] * 1e-3) if _ok(r["duration_ms"]) and r["duration_ms"] else None,
                         "tensor": r["tensor_inst"], "config": r["config"] or ""})
        t = pd.DataFrame(rows)
        return table_html(t, {"impl": "Implementation", "status": "Status", "kernels": "Kernels", "t": "Kernel time",
                              "dram": "DRAM bytes (r+w)", "l2": "L2 bytes", "flops": "FLOPs", "ai": "FLOP / DRAM byte",
                              "tflops": "Achieved", "tensor": "Tensor-pipe instructions", "config": "Triton config"},
                          {"t": fmt.ms, "dram": fmt.bytes_, "l2": fmt.bytes_, "flops": lambda v: fmt.num(v),
                           "ai": lambda v: fmt.num(v), "tflops": fmt.flops, "tensor": lambda v: fmt.num(v)})

    def kernel_table(self, shape=None) -> str:
        shape = shape or self.headline
        ids = set(self._rows(shape)["case_id"]) if shape else set()
        df = self.kernels()
        df = df[df["case_id"].isin(ids)] if not df.empty else df
        if df.empty:
            return "_No kernel launches at this shape._"
        impl = dict(zip(self.impls()["case_id"], self.impls()["impl"]))
        df = df.assign(impl=[impl.get(c, "") for c in df["case_id"]],
                       dram=df["dram_read_bytes"].fillna(0) + df["dram_write_bytes"].fillna(0))
        return table_html(df, {"impl": "Implementation", "launch": "#", "kernel_name": "Kernel (as Nsight Compute names it)",
                               "duration_ms": "Time", "dram": "DRAM bytes", "l2_hit_rate_pct": "L2 hit rate",
                               "registers_per_thread": "Registers / thread", "block_size": "Threads / block",
                               "tensor_inst": "Tensor-pipe instructions"},
                          {"duration_ms": fmt.ms, "dram": fmt.bytes_, "l2_hit_rate_pct": fmt.pct,
                           "kernel_name": lambda v: v if len(v) <= 160 else v[:157] + "...",
                           "tensor_inst": lambda v: fmt.num(v)})

    def tensor_core_sentence(self, shape=None) -> str:
        df = self._rows(shape or self.headline)
        df = df[df["status"] == "ok"] if not df.empty else df
        if df.empty:
            return ""
        known = df[df["tensor_inst"].notna()]
        if known.empty:
            return ("This GPU exposes no tensor-pipe instruction counter, so the profile cannot say whether tensor "
                    "cores ran.")
        used = [r["impl"] for _, r in known.iterrows() if r["tensor_inst"] > 0]
        idle = [r["impl"] for _, r in known.iterrows() if r["tensor_inst"] == 0]
        text = ""
        if used:
            text += f"Tensor cores ran for {', '.join(used)} (non-zero tensor-pipe instruction counts). "
        if idle:
            text += (f"They did **not** run for {', '.join(idle)}: every multiply went through the ordinary FMA "
                     "pipes, as happens when a compiler falls back on a GPU or dtype without a tensor-core path.")
        return text.strip()

    # ------------------------------------------------------------------ roofline

    def ceilings(self) -> dict:
        m = self.run.manifest
        sheet = m.datasheet
        meas = {c.name: c.per_s_median for c in m.measured_ceilings if c.status == "ok"}
        return {"sheet_bw": sheet.memory_bandwidth_bytes_per_s if sheet else None,
                "sheet_flops": sheet.fp16_tensor_flops_per_s if sheet else None,
                "meas_bw": meas.get("copy_bandwidth"), "meas_flops": meas.get("matmul_fp16")}

    def _kernel_names(self, case_id: str) -> list[str]:
        df = self.kernels()
        return [] if df.empty else list(df[df["case_id"] == case_id].sort_values("launch")["kernel_name"])

    def roofline_fig(self, shape=None) -> go.Figure:
        shape = shape or self.headline
        df = self._rows(shape)
        df = df[(df["status"] == "ok") & df["duration_ms"].notna()] if not df.empty else df
        fig = go.Figure()
        xs = []
        for i, (_, r) in enumerate(df.iterrows()):
            flops, t = self._flops(r), r["duration_ms"] * 1e-3
            names = "<br>".join(_esc(n if len(n) <= 90 else n[:87] + "...") for n in self._kernel_names(r["case_id"])[:8])
            for level, label, symbol in LEVELS:
                by = ((r["dram_read_bytes"] or 0) + (r["dram_write_bytes"] or 0)) if level == "dram" else r[f"{level}_bytes"]
                if not _ok(by) or by <= 0 or not t:
                    continue
                ai = flops / by
                xs.append(ai)
                fig.add_scatter(
                    x=[ai], y=[flops / t], mode="markers", name=f"{_esc(r['impl'])} ({label})",
                    legendgroup=r["impl"], marker=dict(symbol=symbol, size=11, color=PALETTE[i % len(PALETTE)]),
                    customdata=[[_esc(r["impl"]), label, fmt.bytes_(by), fmt.num(flops), fmt.ms(r["duration_ms"]), names]],
                    hovertemplate=("<b>%{customdata[0]}</b>, %{customdata[1]} traffic<br>bytes %{customdata[2]}, "
                                   "FLOPs %{customdata[3]}, time %{customdata[4]}<br>%{x:.3g} FLOP/byte, "
                                   "%{y:.3g} FLOP/s<br>kernels:<br>%{customdata[5]}<extra></extra>"))
        c = self.ceilings()
        lo = min(xs + [1.0]) / 4
        hi = max(xs + [1.0]) * 4
        for kind, bw, peak, dash in (("datasheet", c["sheet_bw"], c["sheet_flops"], "dash"),
                                     ("measured", c["meas_bw"], c["meas_flops"], "solid")):
            if not bw or not peak:
                continue
            ridge = peak / bw
            hi = max(hi, ridge * 4)
            x = [lo, ridge, hi]
            fig.add_scatter(x=x, y=[min(peak, v * bw) for v in x], mode="lines", name=f"{kind} roof (DRAM, fp16 tensor)",
                            line=dict(color=PALETTE[7] if kind == "datasheet" else PALETTE[3], dash=dash),
                            hovertemplate=f"{kind} roof: %{{y:.3g}} FLOP/s at %{{x:.3g}} FLOP/byte<extra></extra>")
            fig.add_scatter(x=[ridge], y=[peak], mode="markers+text", name=f"{kind} ridge",
                            marker=dict(symbol="x", size=10, color=PALETTE[7] if kind == "datasheet" else PALETTE[3]),
                            text=[f"ridge {fmt.num(ridge)}"], textposition="top left", showlegend=False,
                            hovertemplate=f"{kind} ridge point: %{{x:.3g}} FLOP/byte<extra></extra>")
        fig.update_layout(xaxis_type="log", yaxis_type="log", xaxis_title="Arithmetic intensity (FLOP per byte)",
                          yaxis_title="Achieved FLOP/s")
        return fig

    def roofline_figure(self, shape=None) -> str:
        shape = shape or self.headline
        if shape is None:
            return "_Nothing to draw._"
        src = "counted" if self.data.flops_source == "counters" else "analytical"
        return self.figure(f"roofline-{_shape_id(shape)}", self.roofline_fig(shape),
                           f"Roofline with measured bytes at three levels of the memory hierarchy (circle DRAM, square "
                           f"L2, diamond L1) and {src} FLOPs per implementation; roofs are the DRAM bandwidth and the "
                           f"fp16 tensor peak, datasheet (dashed) and measured (solid), ridge points marked. "
                           f"{self.caption_conditions(shape)}.", height=480)

    def roofline_finding(self, shape=None) -> str:
        """Where each implementation sits relative to the measured ridge: computed, never typed."""
        shape = shape or self.headline
        c = self.ceilings()
        bw, peak = c["meas_bw"] or c["sheet_bw"], c["meas_flops"] or c["sheet_flops"]
        df = self._rows(shape)
        df = df[df["status"] == "ok"] if not df.empty else df
        if not bw or not peak or df.empty:
            return "Without ceilings for this GPU the roofline cannot say which roof binds."
        ridge = peak / bw
        which = "measured" if c["meas_bw"] and c["meas_flops"] else "datasheet"
        parts = []
        for _, r in df.iterrows():
            dram = (r["dram_read_bytes"] or 0) + (r["dram_write_bytes"] or 0)
            if not _ok(dram) or not dram or not _ok(r["duration_ms"]):
                continue
            ai = self._flops(r) / dram
            achieved = self._flops(r) / (r["duration_ms"] * 1e-3)
            bound = "memory-bound side" if ai < ridge else "compute-bound side"
            roof = min(peak, ai * bw)
            parts.append(f"**{r['impl']}** {fmt.num(ai)} FLOP/byte ({bound}, {fmt.pct(100 * achieved / roof)} of "
                         "its roof)")
        if not parts:
            return ""
        return (f"The {which} ridge point is {fmt.num(ridge)} FLOP per DRAM byte. At DRAM level: "
                + "; ".join(parts) + ".")

    # ------------------------------------------------------------------ occupancy

    def _main_kernels(self, shape=None, min_share: float = 0.05) -> pd.DataFrame:
        """Kernels of the main implementations at `shape` that take at least `min_share` of their call."""
        shape = shape or self.headline
        rows = self._rows(shape)
        df = self.kernels()
        if df.empty or rows.empty:
            return df
        df = df[df["case_id"].isin(set(rows["case_id"]))].copy()
        tot = df.groupby("case_id")["duration_ms"].transform("sum")
        df = df[(df["duration_ms"].fillna(0) >= min_share * tot.fillna(0))]
        df["label"] = [_clip(f"{impl} #{n}: {short_kernel_name(k)}") for impl, n, k in zip(df["impl"], df["launch"], df["kernel_name"])]
        return df

    def occupancy_table(self, shape=None) -> str:
        df = self._main_kernels(shape)
        if df.empty:
            return "_No occupancy data._"
        lim = limits_from_device(self.run.manifest.device)
        limiter = []
        for _, r in df.iterrows():
            if lim is None or not all(_ok(r[k]) for k in ("block_size", "registers_per_thread", "smem_per_block_bytes")):
                limiter.append("n/a")
                continue
            o = occupancy(lim, int(r["block_size"]), int(r["registers_per_thread"]), int(r["smem_per_block_bytes"]),
                          int(r["smem_config_bytes"]) if _ok(r["smem_config_bytes"]) else None)
            limiter.append(", ".join(o.limiters))
        df = df.assign(limiter=limiter)
        intf = lambda v: "n/a" if not _ok(v) else str(int(v))  # noqa: E731
        return table_html(df, {"label": "Kernel", "theoretical_occupancy_pct": "Theoretical", "achieved_occupancy_pct": "Achieved",
                               "block_limit_registers": "Block limit: registers", "block_limit_smem": "Block limit: shared mem",
                               "block_limit_warps": "Block limit: warps", "block_limit_blocks": "Block limit: blocks",
                               "limiter": "Limited by", "registers_per_thread": "Registers / thread",
                               "smem_per_block_bytes": "Shared mem / block", "block_size": "Threads / block",
                               "waves_per_sm": "Waves per SM"},
                          {"theoretical_occupancy_pct": fmt.pct, "achieved_occupancy_pct": fmt.pct,
                           "block_limit_registers": intf, "block_limit_smem": intf, "block_limit_warps": intf,
                           "block_limit_blocks": intf, "registers_per_thread": intf, "block_size": intf,
                           "smem_per_block_bytes": fmt.bytes_, "waves_per_sm": lambda v: fmt.num(v)})

    def occupancy_figure(self, shape=None) -> str:
        shape = shape or self.headline
        df = self._main_kernels(shape)
        if df.empty:
            return "_No occupancy data._"
        labels = [_esc(x) for x in df["label"]]
        full = [_esc(x if len(x) <= 200 else x[:197] + "...") for x in df["kernel_name"]]
        fig = go.Figure()
        fig.add_bar(name="theoretical", y=labels, x=df["theoretical_occupancy_pct"], orientation="h",
                    marker_color=PALETTE[7], customdata=full,
                    hovertemplate="%{customdata}<br>theoretical %{x:.3g}%<extra></extra>")
        fig.add_bar(name="achieved", y=labels, x=df["achieved_occupancy_pct"], orientation="h", marker_color=PALETTE[0],
                    customdata=full, hovertemplate="%{customdata}<br>achieved %{x:.3g}%<extra></extra>")
        fig.update_layout(barmode="group", xaxis_title="Occupancy (% of the SM's warp slots)", xaxis_range=[0, 100],
                          yaxis=dict(autorange="reversed", tickmode="array", tickvals=labels, ticktext=labels))
        return self.figure(f"occupancy-{_shape_id(shape)}", fig,
                           "Theoretical occupancy (what the launch's registers, shared memory and block size allow) "
                           "against achieved occupancy (warps actually resident, averaged over the run), per kernel "
                           f"taking at least 5% of its call. {self.caption_conditions(shape)}.",
                           height=140 + 44 * len(labels))

    def _triton_kernel(self, shape=None):
        df = self._main_kernels(shape, min_share=0.0)
        if df.empty:
            return None
        df = df[df["impl"] == "triton"]
        return None if df.empty else df.sort_values("duration_ms", ascending=False).iloc[0]

    def occupancy_curves_fig(self, shape=None) -> go.Figure | None:
        k = self._triton_kernel(shape)
        lim = limits_from_device(self.run.manifest.device)
        if k is None or lim is None or not all(_ok(k[c]) for c in ("block_size", "registers_per_thread", "smem_per_block_bytes")):
            return None
        threads, regs, smem = int(k["block_size"]), int(k["registers_per_thread"]), int(k["smem_per_block_bytes"])
        fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.08)
        r_curve = occupancy_vs_registers(lim, threads, smem)
        s_curve = occupancy_vs_smem(lim, threads, regs)
        fig.add_scatter(x=[x for x, _ in r_curve], y=[y for _, y in r_curve], mode="lines", line_shape="hv",
                        name="registers", line=dict(color=PALETTE[0]), row=1, col=1,
                        hovertemplate="%{x} registers/thread: %{y:.3g}%<extra></extra>")
        fig.add_scatter(x=[x / 1024 for x, _ in s_curve], y=[y for _, y in s_curve], mode="lines", line_shape="hv",
                        name="shared memory", line=dict(color=PALETTE[2]), row=1, col=2,
                        hovertemplate="%{x:.3g} KiB/block: %{y:.3g}%<extra></extra>")
        here = occupancy(lim, threads, regs, smem).occupancy_pct
        fig.add_scatter(x=[regs], y=[here], mode="markers", marker=dict(size=12, color=PALETTE[3], symbol="star"),
                        name="the Triton kernel", row=1, col=1,
                        hovertemplate=f"measured kernel: {regs} registers/thread, %{{y:.3g}}%<extra></extra>")
        fig.add_scatter(x=[smem / 1024], y=[here], mode="markers", marker=dict(size=12, color=PALETTE[3], symbol="star"),
                        showlegend=False, row=1, col=2,
                        hovertemplate=f"measured kernel: {fmt.bytes_(smem)} per block, %{{y:.3g}}%<extra></extra>")
        fig.update_yaxes(title_text="Theoretical occupancy (%)", range=[0, 105], row=1, col=1)
        fig.update_yaxes(range=[0, 105], row=1, col=2)
        fig.update_xaxes(title_text="registers per thread", row=1, col=1)
        fig.update_xaxes(title_text="KiB per block", row=1, col=2)
        return fig

    def occupancy_curves_figure(self, shape=None) -> str:
        shape = shape or self.headline
        fig = self.occupancy_curves_fig(shape)
        if fig is None:
            return "_The Triton kernel's launch or this GPU's limits are missing, so no occupancy curve can be drawn._"
        k = self._triton_kernel(shape)
        return self.figure(f"occupancy-curves-{_shape_id(shape)}", fig,
                           f"Theoretical occupancy of a {int(k['block_size'])}-thread block as registers per thread (left, "
                           f"shared memory fixed at the kernel's {fmt.bytes_(k['smem_per_block_bytes'])}) and shared memory "
                           f"per block (right, registers fixed at {int(k['registers_per_thread'])}) vary, from this GPU's "
                           "limits and the CUDA occupancy rules (collect/occupancy.py); the star is the measured kernel. "
                           f"{self.caption_conditions(shape)}.", height=400)

    def occupancy_finding(self, shape=None) -> str:
        k = self._triton_kernel(shape)
        lim = limits_from_device(self.run.manifest.device)
        if k is None or not _ok(k["registers_per_thread"]):
            return "The Triton kernel has no occupancy data in this run."
        parts = [f"The Triton kernel runs {int(k['block_size'])} threads per block with "
                 f"{int(k['registers_per_thread'])} registers per thread and {fmt.bytes_(k['smem_per_block_bytes'])} of "
                 "shared memory per block."]
        if lim is not None and all(_ok(k[c]) for c in ("block_size", "smem_per_block_bytes")):
            o = occupancy(lim, int(k["block_size"]), int(k["registers_per_thread"]), int(k["smem_per_block_bytes"]),
                          int(k["smem_config_bytes"]) if _ok(k["smem_config_bytes"]) else None)
            parts.append(f"Registers allow {o.blocks_by_registers} blocks per SM, shared memory {o.blocks_by_smem}, "
                         f"warp slots {o.blocks_by_warps} and the block limit {o.blocks_by_blocks}, so "
                         f"{o.active_blocks} fit: theoretical occupancy {fmt.pct(o.occupancy_pct)}, limited by "
                         f"{' and '.join(o.limiters)}.")
            th = k["theoretical_occupancy_pct"]
            if _ok(th) and abs(th - o.occupancy_pct) > 0.5:
                parts.append(f"Nsight Compute reports {fmt.pct(th)} instead: the driver chose a shared-memory carveout "
                             "or launch setting the model does not see.")
        if _ok(k["achieved_occupancy_pct"]) and _ok(k["theoretical_occupancy_pct"]) and k["theoretical_occupancy_pct"] > 0:
            ratio = k["achieved_occupancy_pct"] / k["theoretical_occupancy_pct"]
            where = "at its ceiling" if ratio >= 0.9 else "below its ceiling"
            parts.append(f"Achieved occupancy is {fmt.pct(k['achieved_occupancy_pct'])}, {where} "
                         f"({fmt.pct(100 * ratio)} of the theoretical {fmt.pct(k['theoretical_occupancy_pct'])}).")
        return " ".join(parts)

    # ------------------------------------------------------------------ stalls

    def stall_frame(self, shape=None) -> pd.DataFrame:
        """Share of stall (excluding 'selected', which is issuing) per reason, per main kernel."""
        ks = self._main_kernels(shape)
        st = self.run.frame("profile", "stalls")
        if ks.empty or st.empty:
            return pd.DataFrame(columns=["label", "kernel_name", "reason", "share"])
        st = st[st["reason"] != "selected"].merge(ks[["case_id", "launch", "label", "kernel_name"]], on=["case_id", "launch"])
        tot = st.groupby("label")["warps_per_issue"].transform("sum")
        st = st.assign(share=(st["warps_per_issue"] / tot).where(tot > 0))
        st.loc[st["share"] < MIN_STALL_SHARE, "reason"] = "other"
        return st.groupby(["label", "kernel_name", "reason"], as_index=False, sort=False)["share"].sum()

    def stalls_figure(self, shape=None) -> str:
        shape = shape or self.headline
        df = self.stall_frame(shape)
        if df.empty:
            return "_No warp-state data in this run._"
        fig = go.Figure()
        order = [r for r in df.groupby("reason")["share"].sum().sort_values(ascending=False).index if r != "other"]
        order += ["other"] if (df["reason"] == "other").any() else []
        labels = [_esc(x) for x in dict.fromkeys(df["label"])]
        raw_labels = list(dict.fromkeys(df["label"]))
        for i, reason in enumerate(order):
            sub = df[df["reason"] == reason].set_index("label").reindex(raw_labels)
            color = PALETTE[7] if reason == "other" else STALL_COLORS[i % len(STALL_COLORS)]
            fig.add_bar(name=_esc(reason), y=labels, x=100 * sub["share"].fillna(0), orientation="h", marker_color=color,
                        customdata=[_esc(x) for x in sub["kernel_name"].fillna("")],
                        hovertemplate=f"{_esc(reason)}: %{{x:.3g}}% of stalls<br>%{{customdata}}<extra></extra>")
        fig.update_layout(barmode="stack", xaxis_title="Share of warp stalls (%)", xaxis_range=[0, 100],
                          yaxis=dict(autorange="reversed", tickmode="array", tickvals=labels, ticktext=labels),
                          # Measured from the figure's edge, not the plot's: long kernel labels narrow the plot.
                          legend=dict(xref="container", entrywidth=130, traceorder="normal"))
        return self.figure(f"stalls-{_shape_id(shape)}", fig,
                           "Why warps were not issuing: each stall reason's share of the warps stalled per issued "
                           "instruction (smsp__average_warps_issue_stalled_*), reasons under 3% summed as other. "
                           f"{self.caption_conditions(shape)}.", height=220 + 36 * len(labels) + 24 * (len(order) // 4))

    def stall_finding(self, shape=None) -> str:
        df = self.stall_frame(shape)
        k = self._triton_kernel(shape)
        if df.empty or k is None:
            return ""
        mine = df[(df["kernel_name"] == k["kernel_name"]) & (df["reason"] != "other")].sort_values("share", ascending=False)
        if mine.empty:
            return ""
        top = mine.iloc[0]
        text = (f"The Triton kernel's largest stall reason is **{escape.text(top['reason'])}**, {fmt.pct(100 * top['share'])} of "
                "its stalls")
        if len(mine) > 1:
            text += f", then {escape.text(mine.iloc[1]['reason'])} at {fmt.pct(100 * mine.iloc[1]['share'])}"
        return text + "."

    # ------------------------------------------------------------------ bytes vs model

    def bytes_frame(self, shape=None) -> pd.DataFrame:
        shape = shape or self.headline
        df = self._rows(shape)
        df = df[(df["status"] == "ok") & df["dram_read_bytes"].notna()] if not df.empty else df
        if df.empty:
            return pd.DataFrame()
        b, h, n, d, dt, c = shape
        e = {"float16": 2, "bfloat16": 2, "float32": 4}.get(dt, 2)
        out = []
        for _, r in df.iterrows():
            fused = r["impl"] in FUSED
            mdl = (model.fused_traffic_bytes if fused else model.naive_traffic_bytes)(n, d, e, b * h)
            dram = r["dram_read_bytes"] + (r["dram_write_bytes"] or 0)
            out.append({"impl": r["impl"], "case_id": r["case_id"], "model_kind": "fused 4eNd" if fused else "naive 4eNd + 4eN²",
                        "model": float(mdl), "dram": dram, "ratio": dram / mdl if mdl else None, "l2": r["l2_bytes"],
                        "config": r["config"]})
        return pd.DataFrame(out)

    def bytes_figure(self, shape=None) -> str:
        shape = shape or self.headline
        df = self.bytes_frame(shape)
        if df.empty:
            return "_No DRAM byte counts in this run._"
        fig = go.Figure()
        x = [_esc(i) for i in df["impl"]]
        fig.add_bar(name="model (byte arithmetic)", x=x, y=df["model"], marker_color=PALETTE[7],
                    customdata=[_esc(k) for k in df["model_kind"]], hovertemplate="%{x}: model %{y:.4s}B (%{customdata})<extra></extra>")
        fig.add_bar(name="measured DRAM (read + write)", x=x, y=df["dram"], marker_color=PALETTE[0],
                    hovertemplate="%{x}: measured %{y:.4s}B<extra></extra>")
        fig.add_bar(name="measured L2 traffic", x=x, y=df["l2"], marker_color=PALETTE[5],
                    hovertemplate="%{x}: L2 %{y:.4s}B<extra></extra>")
        fig.update_layout(barmode="group", yaxis_type="log", yaxis_title="Bytes")
        return self.figure(f"bytes-{_shape_id(shape)}", fig,
                           "Bytes each implementation moved, measured by the DRAM and L2 counters, beside the byte-"
                           "arithmetic model (naive: 4eNd + 4eN² per head; fused: 4eNd per head). "
                           f"{self.caption_conditions(shape)}.")

    def bytes_table(self, shape=None) -> str:
        df = self.bytes_frame(shape)
        if df.empty:
            return ""
        return table_html(df, {"impl": "Implementation", "model_kind": "Model", "model": "Model bytes", "dram": "Measured DRAM",
                               "ratio": "Measured / model", "l2": "Measured L2"},
                          {"model": fmt.bytes_, "dram": fmt.bytes_, "l2": fmt.bytes_, "ratio": fmt.ratio})

    def bytes_gap_explained(self, shape=None) -> str:
        """The gap between measured and modelled bytes, in numbers from this run."""
        shape = shape or self.headline
        df = self.bytes_frame(shape)
        if df.empty:
            return ""
        b, h, n, d, dt, c = shape
        e = {"float16": 2, "bfloat16": 2, "float32": 4}.get(dt, 2)
        tensor = b * h * e * n * d  # one of Q, K, V or O
        rows = {r["case_id"]: r for _, r in self._rows(shape).iterrows()}
        parts = []
        tri = df[df["impl"] == "triton"]
        m = re.search(r"BLOCK_M=(\d+)", (tri.iloc[0]["config"] or "") if not tri.empty else "")
        if m:
            r = rows[tri.iloc[0]["case_id"]]
            bm = int(m.group(1))
            blocks = -(-n // bm)
            # Each of a head's N/BLOCK_M query blocks streams all of that head's K and V.
            reread = tensor * (2 + 2 * blocks)
            text = (f"The model counts K and V once, but the Triton kernel's {blocks} query blocks of {bm} rows per head "
                    f"each read all of their head's K and V: with Q read and O written once that is "
                    f"{fmt.bytes_(reread)} of requests.")
            if _ok(r["l1_bytes"]):
                text += f" The L1 counter saw {fmt.bytes_(r['l1_bytes'])} ({fmt.ratio(r['l1_bytes'] / reread)} of that)"
                text += f", L2 {fmt.bytes_(r['l2_bytes'])}" if _ok(r["l2_bytes"]) else ""
                text += f" and DRAM {fmt.bytes_(r['dram_read_bytes'])} of reads."
            kv_from_dram = (r["dram_read_bytes"] - tensor) / (2 * tensor)
            if kv_from_dram < 0.5 * blocks:
                text += (f" K and V came from DRAM about {fmt.num(max(kv_from_dram, 0), 2)} times instead of {blocks}: "
                         "the re-reads were served by the caches, because the query blocks of one head run at about the "
                         "same time and share K and V in L1 and L2.")
            else:
                text += (f" K and V came from DRAM about {fmt.num(kv_from_dram, 2)} times: the caches did not hold "
                         "them between query blocks.")
            parts.append(text)
        nv = df[df["impl"] == "naive"]
        if not nv.empty:
            r = nv.iloc[0]
            text = (f"The naive path moved {fmt.bytes_(r['dram'])} through DRAM, {fmt.ratio(r['ratio'])} the model's "
                    f"{fmt.bytes_(r['model'])}")
            if r["ratio"] > 1.05:
                text += (": the model counts the score and probability matrices once each in the input dtype, while "
                         "this implementation scales the scores in a separate kernel and its softmax writes fp32 "
                         "probabilities that are cast back, so N² elements cross DRAM more often (see the kernel table).")
            elif r["ratio"] < 0.95:
                text += (": part of the N² matrices stayed in L2 between kernels, so DRAM saw fewer bytes than the "
                         "model's one pass per kernel.")
            else:
                text += ", about what the model predicts."
            parts.append(text)
        short = [rows[cid]["impl"] for cid in df["case_id"]
                 if _ok(rows[cid]["dram_write_bytes"]) and rows[cid]["dram_write_bytes"] < 0.9 * tensor]
        if short:
            l2 = self.run.manifest.device.l2_bytes if self.run.manifest.device else None
            size = f" ({fmt.bytes_(l2)} here)" if l2 else ""
            parts.append(f"DRAM writes of {', '.join(short)} are below the {fmt.bytes_(tensor)} of output they produce: "
                         f"L2 is a write-back cache{size}, so output still held in L2 when the kernel ended reaches "
                         "DRAM later, after the counters stopped.")
        return "\n\n".join(parts)

    # ------------------------------------------------------------------ register cap

    def regcap_frame(self) -> pd.DataFrame:
        df = self.run.frame("profile", "regcap")
        if df.empty:
            return df
        return df.assign(tile=[f"{m}x{n}, {w} warps, {s} stages" for m, n, w, s in
                               zip(df["block_m"], df["block_n"], df["num_warps"], df["num_stages"])],
                         cap=[("none" if not _ok(x) else str(int(x))) for x in df["maxnreg"]])

    def regcap_table(self) -> str:
        df = self.regcap_frame()
        if df.empty:
            return "_The register-cap experiment did not run in this run._"
        intf = lambda v: "n/a" if not _ok(v) else str(int(v))  # noqa: E731
        df = df.assign(spread=[f"{fmt.num(a)}–{fmt.num(b)} ms" if _ok(a) and _ok(b) else "n/a"
                               for a, b in zip(df["latency_ms_p10"], df["latency_ms_p90"])])
        return table_html(df, {"tile": "Tile config", "cap": "maxnreg", "status": "Status", "registers_per_thread": "Registers / thread",
                               "block_limit_registers": "Blocks by registers", "theoretical_occupancy_pct": "Theoretical occupancy",
                               "achieved_occupancy_pct": "Achieved occupancy", "local_bytes": "Spill traffic",
                               "latency_ms_median": "Latency (median)", "spread": "p10–p90", "reason": "Reason"},
                          {"registers_per_thread": intf, "block_limit_registers": intf,
                           "theoretical_occupancy_pct": fmt.pct, "achieved_occupancy_pct": fmt.pct,
                           "local_bytes": fmt.bytes_, "latency_ms_median": fmt.ms})

    def regcap_figure(self) -> str:
        df = self.regcap_frame()
        df = df[df["latency_ms_median"].notna()] if not df.empty else df
        if df.empty:
            return ""
        fig = go.Figure()
        for i, tile in enumerate(dict.fromkeys(df["tile"])):
            sub = df[df["tile"] == tile]
            fig.add_scatter(x=sub["achieved_occupancy_pct"], y=sub["latency_ms_median"], mode="markers+text",
                            text=[f"maxnreg {c}" for c in sub["cap"]], textposition="top center", name=_esc(tile),
                            marker=dict(size=11, color=PALETTE[i % len(PALETTE)]),
                            error_y=dict(type="data", symmetric=False,
                                         array=(sub["latency_ms_p90"] - sub["latency_ms_median"]).tolist(),
                                         arrayminus=(sub["latency_ms_median"] - sub["latency_ms_p10"]).tolist()),
                            customdata=sub[["registers_per_thread", "theoretical_occupancy_pct"]].values,
                            hovertemplate="%{text}: %{customdata[0]} registers/thread, theoretical %{customdata[1]:.3g}%, "
                                          "achieved %{x:.3g}%<br>%{y:.4g} ms<extra></extra>")
        occ = df["achieved_occupancy_pct"].dropna()
        pad = max(2.0, 0.15 * (occ.max() - occ.min())) if not occ.empty else 2.0
        fig.update_layout(xaxis_title="Achieved occupancy (%)", yaxis_title="Latency, median (ms)", showlegend=True,
                          xaxis_range=[occ.min() - pad, occ.max() + pad] if not occ.empty else None)
        shape = self.headline
        cond = self.shape_text(shape) if shape else ""
        return self.figure("regcap", fig, "Register-cap experiment: the Triton kernel's tile configs with and without "
                           "maxnreg, latency (median, whiskers p10–p90, do_bench outside the profiler) against achieved "
                           f"occupancy. {cond}.")

    def regcap_finding(self) -> str:
        """Per tile config: did the cap raise occupancy, and did latency move beyond the run-to-run spread?"""
        df = self.regcap_frame()
        if df.empty:
            return ""
        out = []
        for tile in dict.fromkeys(df["tile"]):
            sub = df[df["tile"] == tile]
            base = sub[sub["cap"] == "none"]
            if base.empty or not _ok(base.iloc[0]["latency_ms_median"]):
                out.append(f"{tile}: the uncapped kernel has no latency, so the caps cannot be compared.")
                continue
            b = base.iloc[0]
            for _, r in sub[sub["cap"] != "none"].iterrows():
                if r["status"] != "ok" or not _ok(r["latency_ms_median"]):
                    out.append(f"{tile}, maxnreg {r['cap']}: {r['status']} ({escape.text(r['reason'] or 'no reason recorded')}).")
                    continue
                occ = ""
                if _ok(r["theoretical_occupancy_pct"]) and _ok(b["theoretical_occupancy_pct"]):
                    d_occ = r["theoretical_occupancy_pct"] - b["theoretical_occupancy_pct"]
                    occ = (f"raised theoretical occupancy from {fmt.pct(b['theoretical_occupancy_pct'])} to "
                           f"{fmt.pct(r['theoretical_occupancy_pct'])}" if d_occ > 0.5 else
                           f"left theoretical occupancy at {fmt.pct(r['theoretical_occupancy_pct'])}")
                    if _ok(r["registers_per_thread"]):
                        occ += f" ({int(r['registers_per_thread'])} registers per thread)"
                overlap = (_ok(r["latency_ms_p10"]) and _ok(b["latency_ms_p90"]) and _ok(b["latency_ms_p10"])
                           and r["latency_ms_p10"] <= b["latency_ms_p90"] and b["latency_ms_p10"] <= r["latency_ms_p90"])
                change = r["latency_ms_median"] / b["latency_ms_median"] - 1
                if overlap:
                    lat = f"latency {fmt.ms(r['latency_ms_median'])} vs {fmt.ms(b['latency_ms_median'])}, within the run-to-run spread"
                else:
                    lat = (f"latency {fmt.ms(r['latency_ms_median'])} vs {fmt.ms(b['latency_ms_median'])}: "
                           f"{fmt.pct(abs(100 * change))} {'faster' if change < 0 else 'slower'}")
                spill = ""
                if _ok(r["local_bytes"]) and r["local_bytes"] > 0:
                    spill = f", with {fmt.bytes_(r['local_bytes'])} of register spill traffic"
                out.append(f"{tile}, maxnreg {r['cap']}: {occ or 'occupancy not measured'}; {lat}{spill}.")
        return "\n".join(f"- {x}" for x in out)
