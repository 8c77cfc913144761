"""What each compiled kernel uses: registers, shared memory and occupancy per version, and what they (and the
profile's stall reasons) say about where the final version falls short."""
from __future__ import annotations

import pandas as pd

from ... import escape, fmt
from ...tables import table_html
from ...vocab import DTYPE_SHORT as SHORT
from ...vocab import impl_label, is_rival, join, masking, plural
from .common import IterationsSection, case_label, where_ran


class CompiledKernels(IterationsSection):
    """The resources table and the limits finding, with the profile's stall comparison."""

    def resources_table(self) -> str:
        """Compiled-kernel resources per version and masking: one row per distinct kernel, with where it ran."""
        data = []
        for name in self.version_names():
            for causal in (False, True):
                r = self.ok[(self.ok["impl"] == name) & (self.ok["causal"] == causal)]
                if r.empty:
                    continue
                kernels = self.kernels(r)
                for res, keys, first in kernels:
                    src = first.get("resources_from")
                    data.append({"name": name + (f" (compiled as {src})" if isinstance(src, str) else ""),
                                 "masking": masking(causal),
                                 "where": where_ran(keys) if len(kernels) > 1 else "every case it ran", **res})
        if not data:
            return "No version ran, so there are no compiled kernels to describe."
        return table_html(pd.DataFrame(data), {
            "name": "Version", "masking": "Mask", "where": "Cases", "config": "Tile config", "ws": "Warp-specialized",
            "regs": "Registers / thread", "spills": "Spilled", "smem": "Shared memory / block", "warps": "Warps / block",
            "blocks": "Blocks / SM", "occ": "Theoretical occupancy", "lim": "Limited by"})

    @staticmethod
    def _resources(row) -> dict:
        """A compiled kernel's resources as the table prints them."""
        def opt(col, f=lambda x: str(int(x))):
            return f(row[col]) if pd.notna(row.get(col)) else "n/a"

        return {"config": row.get("config") or "n/a", "ws": "yes" if row.get("warp_specialized") is True else "no",
                "regs": opt("registers_per_thread"), "spills": opt("spilled_registers"),
                "smem": opt("shared_mem_bytes", fmt.bytes_), "warps": opt("warps_per_block"),
                "blocks": opt("blocks_per_sm"), "occ": opt("occupancy_pct", fmt.pct),
                "lim": row.get("occupancy_limiter") or "n/a"}

    def kernels(self, rows: pd.DataFrame) -> list[tuple[dict, list, pd.Series]]:
        """The distinct compiled kernels among rows of one version and masking: (resources, the (head_dim, N,
        dtype) cases that ran it, its first row), in case order. A per-shape version runs several."""
        found: dict[tuple, tuple[list, pd.Series]] = {}
        for _, row in rows.iterrows():
            key = (int(row["head_dim"]), int(row["seq_len"]), str(row["dtype"]))
            found.setdefault(tuple(self._resources(row).items()), ([], row))[0].append(key)
        out = [(dict(res), keys, row) for res, (keys, row) in found.items()]
        return sorted(out, key=lambda k: min((-hd, n) for hd, n, _ in k[1]))

    def limits_finding(self) -> str:
        """Where the final version stands and what its compiled kernel says about why."""
        d = self.data
        final = d.final_version
        r = self.ok[self.ok["impl"] == final]
        if r.empty:
            return f"{escape.text(final)} did not run in this run."
        row = r.iloc[0]
        ratios = [x for x in (self.ratio(final, *c) for c in self.cases()) if x is not None]
        # Short of the goal as goal_finding defines it (median and floor), not a single case within the noise.
        below = bool(ratios) and not self._goal_verdict(ratios)[2]
        res = []
        if pd.notna(row.get("blocks_per_sm")):
            res.append(f"{plural(int(row['blocks_per_sm']), 'block')} of {int(row['warps_per_block'])} warps per SM, "
                       f"{fmt.pct(row['occupancy_pct'])} theoretical occupancy set by "
                       f"{escape.text(row['occupancy_limiter'])}")
        if pd.notna(row.get("registers_per_thread")):
            res.append(f"{int(row['registers_per_thread'])} registers a thread")
        if pd.notna(row.get("shared_mem_bytes")):
            res.append(f"{fmt.bytes_(row['shared_mem_bytes'])} of shared memory a block")
        spills = r["spilled_registers"].dropna()
        spill_txt = (f" The compiler spilled registers in {int((spills > 0).sum())} of {len(spills)} cases."
                     if len(spills) and (spills > 0).any() else " No case spilled registers." if len(spills) else "")
        facts = (f"{escape.text(final)}'s compiled kernel, config {escape.code(row['config'])}, runs {join(res)}."
                 if res else "")
        if res and len({tuple(self._resources(x).items()) for _, x in r.iterrows()}) > 1:
            # A per-shape version's first row describes one of its kernels, not the version.
            where = case_label(row["dtype"], bool(row["causal"]), int(row["seq_len"]), int(row["batch"]),
                               int(row["heads"]), int(row["head_dim"]))
            facts = (f"{escape.text(final)} compiles a different kernel at different shapes (the table above has "
                     f"each); at {where}, config {escape.code(row['config'])}, it runs {join(res)}.")
        if not below:
            return facts + spill_txt
        return " ".join(x for x in ("Where it falls short, the compiled kernel alone cannot name the bottleneck.",
                                    (facts + spill_txt).strip(),
                                    self.stall_comparison()) if x)

    def stall_comparison(self) -> str:
        """Nsight Compute's stall reasons for our kernel against the fastest other implementation's, at the causal goal
        shape the profile phase adds, when this run has it."""
        impls, stalls = self.run.frame("profile", "impls"), self.run.frame("profile", "stalls")
        if impls.empty or stalls.empty:
            return "This run has no profile of a goal shape to say where the time goes."
        goal = impls[(impls["status"] == "ok") & (impls["causal"] == True) & (impls["group"] == "main")]  # noqa: E712
        ours = goal[goal["impl"] == "triton"]
        theirs = goal[goal["impl"].map(is_rival).astype(bool)]
        if ours.empty or theirs.empty:
            return "This run has no profile of a causal goal shape beside another implementation."

        def top(case_id):
            s = stalls[stalls["case_id"] == case_id].groupby("reason")["warps_per_issue"].sum().sort_values(ascending=False)
            return float(s.sum()), s

        o = ours.iloc[0]
        t = theirs.iloc[0]
        o_tot, o_s = top(o["case_id"])
        t_tot, t_s = top(t["case_id"])
        if o_s.empty or t_s.empty:
            return ""
        lead = o_s.index[0]
        shape = f"B={o['batch']}, H={o['heads']}, N={o['seq_len']}, d={o['head_dim']}, {SHORT.get(o['dtype'], o['dtype'])}, causal"
        pace = ""
        if pd.notna(o.get("duration_ms")) and pd.notna(t.get("duration_ms")):
            x = float(t["duration_ms"]) / float(o["duration_ms"])
            pace = (f" (there ours runs at {fmt.ratio(x)} of their speed under Nsight Compute, so this shape is not "
                    f"where the goal is missed)" if x >= 1.0 else f" (there ours runs at {fmt.ratio(x)} of their speed "
                    f"under Nsight Compute)")
        text = (f"The Profiling page has both kernels at {shape}{pace}: our kernel's warps spend {o_tot:.2f} cycles per "
                f"issued instruction, {escape.text(impl_label(t['impl']))}'s {t_tot:.2f} (issuing included). Our "
                f"largest stall reason is **{escape.text(lead)}** ({o_s.iloc[0]:.2f}; theirs "
                f"{float(t_s.get(lead, 0.0)):.2f})")
        if o_s.index[0] != t_s.index[0]:
            text += f", where theirs is {escape.text(t_s.index[0])} ({t_s.iloc[0]:.2f})"
        text += "."
        if lead == "long_scoreboard" and "_ws" in str(o.get("kernel_name", "")) + " ".join(
                self.run.frame("profile", "kernels").query("case_id == @o.case_id")["kernel_name"].astype(str)):
            text += (" In the sm90 SASS of the warp-specialized kernel (Triton 3.6) the consumer loop has no global "
                     "loads, so these waits are on the mbarriers through which the producer's TMA copies arrive: the "
                     "consumers wait for K and V tiles, which the two-stage pipeline, restarted for each query "
                     "tile, does not fetch early enough.")
        return text
