"""Occupancy: theoretical against achieved per kernel, the CUDA occupancy curves, and what sets our kernel's."""
from __future__ import annotations

import re
from functools import cached_property

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from collect.schema.occupancy import (blocks_by_smem, limits_from_device, occupancy, occupancy_vs_registers,
                                     occupancy_vs_smem, register_cap_for_blocks)

from ... import escape, fmt
from ...figures import PALETTE
from ...fmt import known
from ...tables import table_html
from ...vocab import impl_label, join, plural
from .data import ProfileData, _clip, _esc, _shape_id, count_word, short_kernel_name
from .ws_steps import CONSUMER_WARPS, PRODUCER_WARPS, ws_partition


# Kernels taking at least this share of their call's kernel time are drawn and tabled; the rest are launch glue.
MIN_KERNEL_SHARE = 0.05


class Occupancy(ProfileData):
    """The occupancy table, figures and findings of the main kernels."""

    def _main_kernels(self, shape=None, min_share: float = MIN_KERNEL_SHARE) -> pd.DataFrame:
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

    def occupancy_table_lead(self, shape=None) -> str:
        shape = shape or self.headline
        return (f"At {self.shape_text(shape)}, every kernel that takes at least {fmt.pct(100 * MIN_KERNEL_SHARE, 2)} "
                "of its call's kernel time:") if shape else ""

    def occupancy_table(self, shape=None) -> str:
        df = self._main_kernels(shape)
        if df.empty:
            return "_No occupancy data._"
        limiter = []
        for _, r in df.iterrows():
            o = self._occupancy(r)
            if o is None:
                limiter.append("n/a")
                continue
            limiter.append("one block per SM by design (persistent grid)" if self._persistent(r)
                           else "none (full occupancy)" if o.occupancy_pct >= 100 else ", ".join(o.limiters))
        df = df.assign(limiter=limiter)
        intf = lambda v: "n/a" if not known(v) else str(int(v))  # noqa: E731
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
                           f"taking at least {fmt.pct(100 * MIN_KERNEL_SHARE, 2)} of its call. "
                           f"{self.caption_conditions(shape)}.",
                           height=140 + 44 * len(labels))

    def _triton_kernel(self, shape=None):
        df = self._main_kernels(shape, min_share=0.0)
        if df.empty:
            return None
        df = df[df["impl"] == "triton"]
        return None if df.empty else df.sort_values("duration_ms", ascending=False).iloc[0]

    @cached_property
    def _limits(self):
        return limits_from_device(self.run.manifest.device)

    def _occupancy(self, k):
        """The occupancy model for one profiled kernel row; None where the device's limits or the
        kernel's block size, registers or shared memory are not known."""
        if self._limits is None or not all(known(k[c]) for c in ("block_size", "registers_per_thread",
                                                               "smem_per_block_bytes")):
            return None
        return occupancy(self._limits, int(k["block_size"]), int(k["registers_per_thread"]),
                         int(k["smem_per_block_bytes"]),
                         int(k["smem_config_bytes"]) if known(k["smem_config_bytes"]) else None)

    def occupancy_curves_fig(self, shape=None) -> go.Figure | None:
        k = self._triton_kernel(shape)
        lim = self._limits
        if k is None or lim is None or not all(known(k[c]) for c in ("block_size", "registers_per_thread", "smem_per_block_bytes")):
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
        fig.update_yaxes(title_text="theoretical occupancy (%)", range=[0, 105], row=1, col=1)
        fig.update_yaxes(range=[0, 105], row=1, col=2)
        fig.update_xaxes(title_text="registers per thread", row=1, col=1)
        fig.update_xaxes(title_text="shared memory per block (KiB)", row=1, col=2)
        return fig

    def occupancy_curves_figure(self, shape=None) -> str:
        """How the ceiling of our kernel moves with its registers or its shared memory. Where neither alone moves
        it (each pins the block count the other would free), two flat curves show nothing: the sentence says what
        would move it instead."""
        shape = shape or self.headline
        fig = self.occupancy_curves_fig(shape)
        if fig is None:
            return "_The Triton kernel's launch or this GPU's limits are missing, so no occupancy curve can be drawn._"
        k = self._triton_kernel(shape)
        pinned = self._pinned_words(k)
        if pinned:
            return pinned
        return ("How the ceiling moves as the Triton kernel's register count or shared-memory footprint changes, "
                "computed from this GPU's limits:\n\n" + self.figure(
                    f"occupancy-curves-{_shape_id(shape)}", fig,
                    f"Theoretical occupancy of a {int(k['block_size'])}-thread block as registers per thread (left, "
                    f"shared memory fixed at the kernel's {fmt.bytes_(k['smem_per_block_bytes'])}) and shared memory "
                    f"per block (right, registers fixed at {int(k['registers_per_thread'])}) vary, from this GPU's "
                    "limits and the CUDA occupancy rules (collect/schema/occupancy.py); the star is the measured kernel. "
                    f"{self.caption_conditions(shape)}.", height=400))

    def _pinned_words(self, k) -> str:
        """Where neither registers alone nor shared memory alone can raise our kernel's occupancy: what one more
        block per SM would take of both; '' where one alone can (the curves then show it)."""
        lim, here = self._limits, self._occupancy(k)
        if here is None or self._persistent(k):
            return ""
        threads, regs, smem = int(k["block_size"]), int(k["registers_per_thread"]), int(k["smem_per_block_bytes"])
        by_regs = max(y for _, y in occupancy_vs_registers(lim, threads, smem))
        by_smem = max(y for _, y in occupancy_vs_smem(lim, threads, regs))
        if max(by_regs, by_smem) > here.occupancy_pct:
            return ""
        more = here.active_blocks + 1
        text = (f"Neither resource alone moves our kernel's ceiling here: with its {fmt.bytes_(smem)} of shared memory a "
                f"block, no register count fits more than {plural(here.active_blocks, 'block')} per SM, and with its "
                f"{regs} registers a thread, no smaller shared-memory footprint does.")
        cap = register_cap_for_blocks(lim, threads, more)
        room = max((b for b in range(0, lim.smem_per_block_optin_bytes + 1, 128) if blocks_by_smem(lim, b) >= more),
                   default=None)
        if cap is None or room is None or min(here.blocks_by_warps, here.blocks_by_blocks) < more:
            return text + f" No launch of {threads} threads fits {more} blocks on this GPU."
        nth = {2: "A second", 3: "A third", 4: "A fourth"}.get(more, f"Block {more}")
        return text + (f" {nth} block would need both: at most {cap} registers a thread and at most "
                       f"{fmt.bytes_(room)} of shared memory a block.")

    def _kernel_words(self, k) -> str:
        """'our Triton kernel (_hopper_fwd_ws_persistent)' for the kernel of a profiled launch."""
        impl = self.impls()
        row = impl[impl["case_id"] == k["case_id"]]
        who = impl_label(row.iloc[0]["impl"]) if not row.empty else "the kernel"
        return f"{who}, {escape.code(short_kernel_name(str(k['kernel_name'])))}"

    def _persistent(self, k) -> bool:
        """A grid of exactly one block per SM: a persistent kernel, each block looping over its share of the work.
        (A small problem's grid can be smaller than the SM count without being persistent.)"""
        sms = self.run.manifest.device.sm_count if self.run.manifest.device else None
        return bool(sms and known(k.get("grid_size")) and k["grid_size"] == sms)

    def _warps_note(self, k) -> str:
        """How the launch's warps and registers divide, where they are not what the config says: for our
        warp-specialized kernel, from its recorded step (ws_steps), checked against the warps it launched; for
        another kernel whose launch has more warps than its config, only that it does."""
        cfg = self.impls()
        row = cfg[cfg["case_id"] == k["case_id"]]
        m = re.search(r"warps=(\d+)", str(row["config"].iloc[0]) if len(row) else "")
        if not known(k.get("block_size")):
            return ""
        launched = int(k["block_size"]) // 32
        step = k.get("kernel_step") if known(k.get("kernel_step")) else None
        head_dim = row["head_dim"].iloc[0] if len(row) else None
        part = ws_partition(step, head_dim) if head_dim is not None else None
        if part is not None and part.launched_warps == launched:
            return " " + self._partition_words(k, part, launched, m)
        if not m or int(m.group(1)) == launched:
            return ""
        return (f" Its config says warps={m.group(1)}, yet it launches {launched} warps per block: a warp-specialized "
                "kernel launches the warps of all its partitions.")

    @staticmethod
    def _partition_words(k, p, launched: int, config_warps) -> str:
        """The warp-specialized kernel's warps by job and its registers as setmaxnreg moves them."""
        asked = (f" (the config's warps={config_warps.group(1)} is the first consumer's, the default partition)"
                 if config_warps else "")
        pad = (f", padded to a warpgroup by {count_word(p.padding_warps)} more warp{'' if p.padding_warps == 1 else 's'}"
               if p.padding_warps else "")
        out = (f"It launches {launched} warps{asked}: {count_word(p.consumers)} consumer warpgroups of "
               f"{count_word(CONSUMER_WARPS)} warps, which compute, and a producer of {count_word(PRODUCER_WARPS)} "
               f"warp{'' if PRODUCER_WARPS == 1 else 's'}, which issues the TMA copies{pad}.")
        if known(k.get("registers_per_thread")):
            out += (f" Nsight Compute reports the launch's register budget, {int(k['registers_per_thread'])} a thread; "
                    f"at run time `setmaxnreg` moves registers from the producer's warpgroup to the consumers', "
                    f"{p.consumer_regs} a consumer thread and {p.producer_regs} a producer thread.")
        if p.padding_warps:
            out += (f" So of the {launched} warps its occupancy counts, {p.consumers * CONSUMER_WARPS} compute, "
                    f"{count_word(PRODUCER_WARPS)} issue{'s' if PRODUCER_WARPS == 1 else ''} copies and "
                    f"{count_word(p.padding_warps)} only pad.")
        return out

    def occupancy_verdict(self, shape=None) -> str:
        """One sentence on what sets our kernel's occupancy: its design (a persistent grid) or a resource."""
        k = self._triton_kernel(shape)
        if k is None or not known(k.get("block_size")):
            return ""
        if self._persistent(k):
            return (f"Our Triton kernel is persistent ({plural(int(k['grid_size']), 'block')} for "
                    f"{self.run.manifest.device.sm_count} SMs), so it runs one block per SM by design.")
        o = self._occupancy(k)
        if o is None:
            return ""
        return (f"Our Triton kernel's occupancy is limited by {join(o.limiters)}, which allow "
                f"{plural(o.active_blocks, 'block')} per SM.")

    def occupancy_finding(self, shape=None) -> str:
        k = self._triton_kernel(shape)
        if k is None or not known(k["registers_per_thread"]):
            return "The Triton kernel has no occupancy data in this run."
        # Each launch figure only where the profile has it: a published profile may give registers alone.
        launch = [f"{int(k['block_size'])} threads per block" if known(k.get("block_size")) else "",
                  f"{int(k['registers_per_thread'])} registers per thread",
                  f"{fmt.bytes_(k['smem_per_block_bytes'])} of shared memory per block"
                  if known(k.get("smem_per_block_bytes")) else ""]
        parts = [f"The kernel analysed here is {self._kernel_words(k)}: {join([x for x in launch if x])}."
                 f"{self._warps_note(k)}"]
        o = self._occupancy(k)
        if o is not None:
            allow = (f"Registers allow {plural(o.blocks_by_registers, 'block')} per SM, shared memory "
                     f"{o.blocks_by_smem}, warp slots {o.blocks_by_warps} and the block limit {o.blocks_by_blocks}")
            if self._persistent(k):
                parts.append(f"{allow}. But the kernel is persistent: it launches {plural(int(k['grid_size']), 'block')} "
                             f"for {self.run.manifest.device.sm_count} SMs, each looping over its share of the tiles, so "
                             "one block per SM is its design, not a shortage of any resource, and no register cap would "
                             f"put a second block beside it: theoretical occupancy {fmt.pct(o.occupancy_pct)}.")
            else:
                parts.append(f"{allow}, so {plural(o.active_blocks, 'block')} fit{'s' if o.active_blocks == 1 else ''}: "
                             f"theoretical occupancy "
                             f"{fmt.pct(o.occupancy_pct)}, limited by {' and '.join(o.limiters)}.")
            th = k["theoretical_occupancy_pct"]
            if known(th) and abs(th - o.occupancy_pct) > 0.5:
                parts.append(f"Nsight Compute reports {fmt.pct(th)} instead: the driver chose a shared-memory carveout "
                             "or launch setting the model does not see.")
        if known(k["achieved_occupancy_pct"]) and known(k["theoretical_occupancy_pct"]) and k["theoretical_occupancy_pct"] > 0:
            ratio = k["achieved_occupancy_pct"] / k["theoretical_occupancy_pct"]
            where = "at its ceiling" if ratio >= 0.9 else "below its ceiling"
            parts.append(f"Achieved occupancy is {fmt.pct(k['achieved_occupancy_pct'])}, {where} "
                         f"({fmt.pct(100 * ratio)} of the theoretical {fmt.pct(k['theoretical_occupancy_pct'])}).")
        return " ".join(parts)
