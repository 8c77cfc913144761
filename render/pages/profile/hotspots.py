"""Where the warps wait, instruction by instruction: the SASS hot spots of the profiled kernels."""
from __future__ import annotations

from functools import cached_property

import pandas as pd

from ... import escape, fmt
from ...fmt import known
from ...frames import index_by
from ...tables import table_html
from ...vocab import HOTSPOT_ROLES, impl_label, join, stall_lead, stall_words
from .data import ProfileData, _step_words

# At a WARPGROUP instruction (WARPGROUP.DEPBAR, wgmma's wait_group; WARPGROUP.ARRIVE, its fence: collect/ncu_source.py's
# role "mma-wait") a warp waits for its own warpgroup's asynchronous matrix multiplies, and Nsight Compute counts that
# wait as a barrier stall: the usual gloss, waiting for the other warps, would be wrong there.
MMA_WAIT_BARRIER = "barrier (waiting for its own asynchronous matrix multiplies; Nsight Compute counts this as a barrier stall)"
# collect/ncu_source.py classes a NOP whose samples are chiefly barrier stalls as a barrier: a stalled warp is sampled
# at the instruction it would issue next, so one held at a barrier shows on the instruction after it.
NOP_BARRIER = ("A NOP is grouped with the barriers where its warps were sampled waiting at a barrier: Nsight Compute "
               "samples a stalled warp at the instruction it would issue next, so a warp held at a barrier shows on "
               "the instruction after it, here a NOP.")


def _state_words(reason: str, role: str | None = None) -> str:
    """A sampled warp state in words: a stall reason, or 'selected', which is no stall (the warp was issuing). A barrier
    stall at an instruction that waits for its own MMAs (role 'mma-wait') is glossed as that wait."""
    if reason == "selected":
        return "selected (issuing, not stalled)"
    return MMA_WAIT_BARRIER if reason == "barrier" and role == "mma-wait" else stall_words(reason)


class Hotspots(ProfileData):
    """The kernels with hot spots, a table of their instructions by role, and a finding."""

    def hotspot_kernels(self) -> list[dict]:
        """The kernels with hot spots: [{case_id, launch, title}], our kernel first at each shape."""
        hs = self.run.frame("profile", "hotspots")
        if hs.empty:
            return []
        im = self.impls().set_index("case_id")
        keys = list(dict.fromkeys(zip(hs["case_id"], hs["launch"])))
        out = []
        for case_id, launch in keys:
            if case_id not in im.index:
                continue
            r = im.loc[case_id]
            shape = (int(r["batch"]), int(r["heads"]), int(r["seq_len"]), int(r["head_dim"]), r["dtype"], bool(r["causal"]))
            step = r.get("kernel_step") if known(r.get("kernel_step")) else None
            out.append(dict(case_id=case_id, launch=int(launch), impl=r["impl"], shape=shape,
                            title=escape.text(f"{impl_label(r['impl'])}{_step_words(step)}, at {self.shape_text(shape)}")))
        order = {s: i for i, s in enumerate(self.limiter_shapes())}
        out.sort(key=lambda d: (order.get(d["shape"], len(order)), d["impl"] != "triton"))  # ours first at each shape
        return out

    @cached_property
    def _hotspots_by_launch(self) -> dict[tuple, pd.DataFrame]:
        return {key: g.sort_values("rank") for key, g in
                index_by(self.run.frame("profile", "hotspots"), ("case_id", "launch")).items()}

    def _hotspots(self, case_id: str, launch: int) -> pd.DataFrame:
        return self._hotspots_by_launch.get((case_id, launch), pd.DataFrame(columns=["rank", "role", "opcode"]))

    def hotspot_table(self, case_id: str, launch: int) -> str:
        """The kernel's top instructions grouped by what they do: each group's share of the kernel's samples,
        its instructions (opcodes, most sampled first) and the stall reasons sampled most there."""
        hs = self._hotspots(case_id, launch)
        if hs.empty:
            return ""
        rows = []
        for role, g in hs.groupby("role", sort=False):
            reasons = g.groupby("top_reason")["samples"].sum().sort_values(ascending=False)
            rows.append(dict(role=HOTSPOT_ROLES.get(role, role), share=g["share_pct"].sum(), n=len(g),
                             ops=", ".join(dict.fromkeys(g["opcode"]))[:120],
                             why="; ".join(_state_words(r, role) for r in reasons.index[:2])))
        t = pd.DataFrame(rows).sort_values("share", ascending=False)
        nop = ((hs["role"] == "barrier") & hs["opcode"].astype(str).str.startswith("NOP")).any()
        # Only the hottest instructions are listed: a group's share and count are of those, not of every
        # instruction of its kind in the kernel.
        return table_html(t, {"role": "What the instructions do",
                              "share": "Share of the kernel's samples (listed instructions)",
                              "n": "Listed instructions", "ops": "Opcodes", "why": "Warp states sampled most there"},
                          {"share": fmt.pct}, caption=NOP_BARRIER if nop else None)

    def hotspot_finding(self, case_id: str, launch: int) -> str:
        hs = self._hotspots(case_id, launch)
        if hs.empty:
            return ""
        top = hs.iloc[:3]
        pcts = top["top_reason_pct"] if "top_reason_pct" in top else pd.Series(None, index=top.index, dtype=float)
        # A reason is what the warps there "chiefly" wait for only above half of the instruction's samples (vocab.
        # stall_lead); below, it leads them.
        parts = [f"{escape.code(o)} ({HOTSPOT_ROLES.get(r, r)}, {fmt.pct(sh)} of the kernel's samples"
                 + (f", {stall_lead(p if known(p) else None)} {escape.text(_state_words(t) if t == 'selected' else t)})"
                    if known(t) else ")")
                 for o, r, sh, t, p in zip(top["opcode"], top["role"], top["share_pct"], top["top_reason"], pcts)]
        covered = hs["share_pct"].sum()
        return (f"Its three hottest instructions are {join(parts)}; the {len(hs)} listed hold "
                f"{fmt.pct(covered)} of its warp samples.")
