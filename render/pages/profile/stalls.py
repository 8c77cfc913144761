"""Where the warps wait: each stall reason's share per main kernel."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from ... import escape, fmt
from ...figures import PALETTE
from ...fmt import known
from ...vocab import STALL_WORDS
from .data import ProfileData, _esc, _shape_id, count_word
from .ws_steps import ws_partition


def shape_of(page, k) -> tuple:
    """The profiled shape of a kernel row, from its call."""
    r = page.impls()
    r = r[r["case_id"] == k["case_id"]].iloc[0]
    return (int(r["batch"]), int(r["heads"]), int(r["seq_len"]), int(r["head_dim"]), r["dtype"], bool(r["causal"]))


MIN_STALL_SHARE = 0.03  # reasons below this share of a kernel's stalls are summed as "other"
# Enough distinct colours for a dozen stall reasons: Okabe-Ito first, then Tableau's muted set.
STALL_COLORS = PALETTE[:7] + ["#8C564B", "#BCBD22", "#17BECF", "#9467BD", "#FF9896", "#AEC7E8", "#98DF8A"]


class Stalls(ProfileData):
    """The stall frame, its stacked-bar figure and the Triton kernel's largest reasons."""

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
                           "Why warps were not issuing: each stall reason's share of the warp cycles per issued "
                           "instruction (smsp__average_warps_issue_stalled_*_per_issue_active), 'selected' (issuing) "
                           f"left out, reasons under {MIN_STALL_SHARE:.0%} summed as other; the legend above the "
                           f"figures says what each reason waits for. {self.caption_conditions(shape)}.",
                           height=220 + 36 * len(labels) + 24 * (len(order) // 4))

    def stall_legend(self) -> str:
        """What each stall reason drawn on this page waits for, once, in Nsight Compute's sense (vocab.STALL_WORDS):
        the charts name reasons by the profiler's own words, which few readers know past 'barrier'."""
        # "The most common first" over every chart: each reason's shares summed across the shapes.
        frames = [df for df in (self.stall_frame(s) for s in self.shapes()) if not df.empty]
        if not frames:
            return ""
        total = pd.concat(frames).groupby("reason")["share"].sum().sort_values(ascending=False, kind="stable")
        drawn = [r for r in total.index if r != "other"]
        if not drawn:
            return ""
        lines = [f"- **{escape.text(r)}**: {escape.text(STALL_WORDS.get(r, 'a reason this report has no words for'))}"
                 for r in drawn]
        lines.append(f"- **other**: the reasons under {MIN_STALL_SHARE:.0%} of a kernel's stalls, summed")
        return ("The stall reasons the charts below show, the most common first, and what a warp stalled for each "
                "is waiting for:\n\n" + "\n".join(lines))

    def stall_finding(self, shape=None) -> str:
        df = self.stall_frame(shape)
        k = self._triton_kernel(shape)
        if df.empty or k is None:
            return ""
        # By label, not kernel name: with the portable path shipped at this shape both Triton rows run one kernel.
        mine = df[(df["label"] == k["label"]) & (df["reason"] != "other")].sort_values("share", ascending=False)
        if mine.empty:
            return ""
        top = mine.iloc[0]
        text = (f"Our kernel's largest stall reason is **{escape.text(top['reason'])}**, "
                f"{fmt.pct(100 * top['share'])} of its stalls")
        if len(mine) > 1:
            text += f", then {escape.text(mine.iloc[1]['reason'])} at {fmt.pct(100 * mine.iloc[1]['share'])}"
        text += "."
        part = ws_partition(k.get("kernel_step") if known(k.get("kernel_step")) else None, shape_of(self, k)[3])
        if top["reason"] == "barrier" and part is not None and part.named_turns:
            text += (f" Its {count_word(part.consumers)} consumer warpgroups take turns at the tensor cores through "
                     "named barriers, so part of every turn is a wait at a barrier by design "
                     "([What limits each kernel](#what-limits-each-kernel) says more).")
        return text
