"""What each compiled kernel uses: registers, shared memory and occupancy per version, and what they (and the
profile's stall reasons) say about where the final version falls short."""
from __future__ import annotations

import pandas as pd

from functools import cached_property

from ... import escape, fmt
from ...profiler_clock import profiler_slowdowns, slowed_who
from ...tables import table_html
from ...vocab import DTYPE_SHORT as SHORT
from ...vocab import (FULL_OCCUPANCY, PERSISTENT_LIMIT, impl_label, is_rival, join, kernel_function_name, kernel_key,
                      kernel_name, masking, plural)
from .common import GoalCase, IterationsSection, case_label, goal_ratio_text, where_ran

# What tells one compiled kernel from another in the rows: two rows alike in all of these ran the same kernel.
KERNEL_FACTS = ("config", "warp_specialized", "registers_per_thread", "shared_mem_bytes")


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

    def _resources(self, row) -> dict:
        """A compiled kernel's resources as the table prints them."""
        def opt(col, f=lambda x: str(int(x))):
            return f(row[col]) if pd.notna(row.get(col)) else "n/a"

        return {"config": row.get("config") or "n/a", "ws": "yes" if row.get("warp_specialized") is True else "no",
                "regs": opt("registers_per_thread"), "spills": opt("spilled_registers"),
                "smem": opt("shared_mem_bytes", fmt.bytes_), "warps": opt("warps_per_block"),
                "blocks": opt("blocks_per_sm"), "occ": opt("occupancy_pct", fmt.pct),
                "lim": self.occupancy_limit(row)}

    def occupancy_limit(self, row) -> str:
        """What sets a compiled kernel's occupancy, in the Profiling page's words: nothing at full occupancy (the
        resources that tie at the maximum are no limit), its design for a persistent kernel at one block per SM,
        else the resources the occupancy model found."""
        if pd.notna(row.get("occupancy_pct")) and row["occupancy_pct"] >= 100:
            return FULL_OCCUPANCY
        if pd.notna(row.get("blocks_per_sm")) and int(row["blocks_per_sm"]) == 1 and self.persistent(row):
            return PERSISTENT_LIMIT
        return row.get("occupancy_limiter") or "n/a"

    def persistent(self, row) -> bool | None:
        """Whether a row's kernel runs a persistent grid (one block per SM, each looping over its tiles): the Gluon
        warp-specialized kernel always does and the tile and portable kernels never; a Hopper version's switches say
        whether its kernel does. A version that chooses per shape ran one of those kernels: the one whose rows have
        the same compiled facts, or the Gluon step the bench phase saw at that case. None where neither tells."""
        if row.get("warp_specialized") is not True:
            return False
        v = self.version(row["impl"])
        if v is not None and self._known_persistent(v) is not None:
            return self._known_persistent(v)
        seen = self._persistent_by_kernel.get(tuple(row.get(c) for c in KERNEL_FACTS), set())
        if len(seen) == 1:
            return next(iter(seen))
        step = self._bench_steps.get(GoalCase(row["dtype"], bool(row["causal"]), int(row["seq_len"]), int(row["batch"]),
                                              int(row["heads"]), int(row["head_dim"])))
        return kernel_key("gluon", step) == "gluon-ws" if step and v is not None and v.name == self.data.final_version \
            else None

    @staticmethod
    def _known_persistent(v) -> bool | None:
        """A warp-specialized kernel's grid, where the version's own record fixes it."""
        if v.path == "gluon":
            return True
        if v.path == "hopper" and v.features != "per shape":
            return "persistent" in str(v.features).split("+")
        return None

    @cached_property
    def _persistent_by_kernel(self) -> dict:
        """KERNEL_FACTS -> the persistence of every warp-specialized row with those facts whose version fixes it."""
        out: dict = {}
        for _, row in self.ok[self.ok["warp_specialized"] == True].iterrows():  # noqa: E712
            v = self.version(row["impl"])
            if v is not None and (known := self._known_persistent(v)) is not None:
                out.setdefault(tuple(row.get(c) for c in KERNEL_FACTS), set()).add(known)
        return out

    @cached_property
    def _bench_steps(self) -> dict:
        """GoalCase -> the Gluon step the bench phase saw flash_attention run there (what the final version ships)."""
        b = self.run.frame("bench", "rows")
        if b.empty or "kernel_step" not in b:
            return {}
        b = b[(b["impl"] == "triton") & (b["status"] == "ok")]
        return {GoalCase(r.dtype, bool(r.causal), int(r.seq_len), int(r.batch), int(r.heads), int(r.head_dim)):
                r.kernel_step for r in b.itertuples() if isinstance(r.kernel_step, str)}

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
        ratios = [x for x in (self.ratio(final, *c) for c in self.cases()) if x is not None]
        # Short of the goal as goal_finding defines it (median and floor), not a single case within the noise.
        below = bool(ratios) and not self._goal_verdict(ratios)[2]
        row = r.iloc[0]
        if below:
            # A version that compiles a kernel per shape is described at its worst goal case, where it falls short,
            # not at its first row (run h100-20261205b described a case 1.05x ahead of the goal).
            worst = min(((x, c) for c in self.cases() if (x := self.ratio(final, *c)) is not None),
                        key=lambda t: t[0], default=None)
            if worst is not None:
                c = worst[1]
                at = r[(r["dtype"] == c.dtype) & (r["causal"] == c.causal) & (r["seq_len"] == c.n)
                       & (r["batch"] == c.batch) & (r["heads"] == c.heads) & (r["head_dim"] == c.head_dim)]
                row = at.iloc[0] if len(at) else row
        res = []
        if pd.notna(row.get("blocks_per_sm")):
            limit = self.occupancy_limit(row)
            how = (f"{fmt.pct(row['occupancy_pct'])} theoretical occupancy" + ("" if limit == FULL_OCCUPANCY else
                   " (a persistent grid: one block per SM is its design, not a shortage of any resource)"
                   if limit == PERSISTENT_LIMIT else f" set by {escape.text(join(limit.split(', ')))}"))
            res.append(f"{plural(int(row['blocks_per_sm']), 'block')} of {int(row['warps_per_block'])} warps per SM, "
                       + how)
        if pd.notna(row.get("registers_per_thread")):
            res.append(f"{int(row['registers_per_thread'])} registers a thread")
        if pd.notna(row.get("shared_mem_bytes")):
            res.append(f"{fmt.bytes_(row['shared_mem_bytes'])} of shared memory a block")
        spills = r["spilled_registers"].dropna()
        spill_txt = (f" The compiler spilled registers in {int((spills > 0).sum())} of {len(spills)} cases."
                     if len(spills) and (spills > 0).any() else f" No case of {escape.text(final)} spilled registers." if len(spills) else "")
        facts = (f"{escape.text(final)}'s compiled kernel, config {escape.code(row['config'])}, runs {join(res)}."
                 if res else "")
        where_case = None
        if res and len({tuple(self._resources(x).items()) for _, x in r.iterrows()}) > 1:
            # A per-shape version's first row describes one of its kernels, not the version.
            where_case = GoalCase(row["dtype"], bool(row["causal"]), int(row["seq_len"]), int(row["batch"]),
                                  int(row["heads"]), int(row["head_dim"]))
            where = case_label(*where_case)
            facts = (f"{escape.text(final)} compiles a different kernel at different shapes (the table above has "
                     f"each); at {where}, config {escape.code(row['config'])}, it runs {join(res)}.")
        if not below:
            return facts + spill_txt
        # The facts describe one case's kernel where the version compiles several, and the stall comparison one
        # profiled case: the lead-in says whether those are where it falls short, since the version missing the goal
        # over all cases says nothing of these two.
        shown = [c for c in (where_case, self._stall_case()) if c]
        return " ".join(x for x in (self._shortfall_lead(shown), (facts + spill_txt).strip(),
                                    self.stall_comparison()) if x)

    def _shortfall_lead(self, shown: list[GoalCase]) -> str:
        """The sentence before the compiled kernel's facts and the stall comparison, where the version misses the goal:
        "where it falls short" only where every case they describe is a shortfall (a ratio under the goal, as the goal
        finding lists them); otherwise which of them are not."""
        final, goal = self.data.final_version, self.data.goal_ratio
        judged = [(c, r) for c in shown if (r := self.ratio(final, *c)) is not None]
        short = [c for c, r in judged if r < goal]
        if len(short) == len(judged):  # every case described falls short, or none is told apart from the rest
            return "Where it falls short, the compiled kernel alone cannot name the bottleneck."
        if not short:
            which = ("the case this paragraph describes is not among them: there" if len(judged) == 1 else
                     "the cases this paragraph describes are not among them: at each")
            return (f"The compiled kernel alone cannot name the bottleneck where it falls short, and {which} it "
                    f"reaches the goal of {fmt.ratio(goal)}.")
        return ("The compiled kernel alone cannot name the bottleneck where it falls short; of the cases this paragraph "
                f"describes, it falls short only at {join(self.label(c) for c in short)}.")

    def _stall_profile(self):
        """(our profiled call, the rivals profiled beside it, its goal case) at the causal goal shape the profile phase
        adds, or the sentence that says why there is none."""
        impls, stalls = self.run.frame("profile", "impls"), self.run.frame("profile", "stalls")
        if impls.empty or stalls.empty:
            return "This run has no profile of a goal shape to say where the time goes."
        goal = impls[(impls["status"] == "ok") & (impls["causal"] == True) & (impls["group"] == "main")]  # noqa: E712
        ours = goal[goal["impl"] == "triton"]
        theirs = goal[goal["impl"].map(is_rival).astype(bool)]
        if ours.empty or theirs.empty:
            return "This run has no profile of a causal goal shape beside another implementation."
        o = ours.iloc[0]
        theirs = theirs[(theirs[["batch", "heads", "seq_len", "head_dim", "dtype"]] ==
                         o[["batch", "heads", "seq_len", "head_dim", "dtype"]]).all(axis=1)]
        if theirs.empty:
            return "This run has no profile of a causal goal shape beside another implementation."
        case = GoalCase(o["dtype"], True, int(o["seq_len"]), int(o["batch"]), int(o["heads"]), int(o["head_dim"]))
        return o, theirs, case

    def _stall_case(self) -> GoalCase | None:
        """The goal case the stall comparison describes, None where it describes none."""
        found = self._stall_profile()
        return None if isinstance(found, str) or not self.stall_comparison() else found[2]

    def stall_comparison(self) -> str:
        """Nsight Compute's stall reasons for our kernel against the fastest other implementation's, at the causal goal
        shape the profile phase adds, when this run has it. The rival is the one this page measures ours against
        there, so the profile and the ratios speak of the same pair."""
        found = self._stall_profile()
        if isinstance(found, str):
            return found
        o, theirs, case = found
        stalls = self.run.frame("profile", "stalls")
        rival = self.fastest_rival(*case)
        named = theirs[theirs["impl"] == rival[0]] if rival else theirs.iloc[0:0]
        timed = theirs[theirs["duration_ms"].notna()]
        t = named.iloc[0] if not named.empty else timed.loc[timed["duration_ms"].idxmin()] if not timed.empty \
            else theirs.iloc[0]
        why = ("the fastest other implementation there on this page's clock" if not named.empty else
               "the fastest other implementation profiled there")

        def top(case_id):
            s = stalls[stalls["case_id"] == case_id].groupby("reason")["warps_per_issue"].sum().sort_values(ascending=False)
            return float(s.sum()), s

        o_tot, o_s = top(o["case_id"])
        t_tot, t_s = top(t["case_id"])
        if o_s.empty or t_s.empty:
            return ""
        lead = o_s.index[0]
        them = escape.text(impl_label(t["impl"]))
        shape = f"B={o['batch']}, H={o['heads']}, N={o['seq_len']}, d={o['head_dim']}, {SHORT.get(o['dtype'], o['dtype'])}, causal"
        text = " ".join(x for x in (
            f"The Profiling page has our kernel at {shape}, where it runs {self._profiled_kernel(o)}, beside {them}, "
            f"{why}.", self._pace(o, t, case),
            f"Our kernel's warps spend {o_tot:.2f} cycles per issued instruction, {them}'s {t_tot:.2f} (issuing "
            f"included){self._issue_slots(o, t)}.",
            f"Our largest stall reason is **{escape.text(lead)}** ({o_s.iloc[0]:.2f}; theirs "
            f"{float(t_s.get(lead, 0.0)):.2f})") if x)
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

    def _main_kernel(self, case_id):
        """The longest kernel launch of one profiled call, or None."""
        k = self.run.frame("profile", "kernels")
        k = k[k["case_id"] == case_id] if not k.empty else k
        return None if k.empty or k["duration_ms"].isna().all() else k.loc[k["duration_ms"].idxmax()]

    def _profiled_kernel(self, o) -> str:
        """'the Gluon tile kernel (g28; 157 registers a thread, 72.0 KiB of shared memory a block)': which of our
        kernels a profiled call ran, which need not be the kernel the sentences before it describe."""
        k = self._main_kernel(o["case_id"])
        step = o.get("kernel_step") if isinstance(o.get("kernel_step"), str) else None
        name = (kernel_name("gluon", step) if step else
                kernel_function_name(str(k["kernel_name"])) if k is not None else None) or "our kernel"
        facts = []
        if k is not None and pd.notna(k.get("registers_per_thread")):
            facts.append(f"{int(k['registers_per_thread'])} registers a thread")
        if k is not None and pd.notna(k.get("smem_per_block_bytes")):
            facts.append(f"{fmt.bytes_(k['smem_per_block_bytes'])} of shared memory a block")
        inner = "; ".join(x for x in (escape.text(step) if step else "", ", ".join(facts)) if x)
        return f"the {name}" + (f" ({inner})" if inner else "")

    def _pace(self, o, t, case: GoalCase) -> str:
        """Ours against theirs at the profiled shape under Nsight Compute and on this page's clock, and whether the two
        rank them alike."""
        ncu = (float(t["duration_ms"]) / float(o["duration_ms"])
               if pd.notna(o.get("duration_ms")) and pd.notna(t.get("duration_ms")) else None)
        page = self.ratio(self.data.final_version, *case) if self.fastest_rival(*case) and \
            self.fastest_rival(*case)[0] == t["impl"] else None
        parts = []
        if ncu is not None:
            parts.append(f"{fmt.ratio_vs(ncu, 1.0)} of their speed under Nsight Compute")
        if page is not None:
            parts.append(f"{goal_ratio_text(page, self.data.goal_ratio)} on this page's clock")
        if not parts:
            return ""
        text = "There ours runs at " + " and at ".join(parts)
        if ncu is not None and page is not None and (ncu >= 1) != (page >= 1):
            text += ": the two clocks rank them differently"
            slowed = self._slowed_under_profiler(o, t)
            if slowed:
                # The Profiling page's one rule (render/profiler_clock.py): such a call's kernel time measures the
                # profiler's slowdown, so the ranking under Nsight Compute is not the kernels' as timed.
                text += (f", and {slowed} ran slower under Nsight Compute than on our clock (the Profiling page's One "
                         "clock section), so the ranking there rests on that slowdown")
        return text + "."

    def _slowed_under_profiler(self, o, t) -> str:
        """'ours', their label or 'both' where the clock check marks the call as slowed under the profiler; ''."""
        if not self.run.has("profile"):
            return ""
        checks = self.run.frame("profile", "clock_check")
        if checks.empty or "case_id" not in checks:
            return ""
        slowed = profiler_slowdowns(self.run, checks)["slower"]
        by_case = dict(zip(checks["case_id"], slowed))
        return slowed_who(bool(by_case.get(o.get("case_id"))), bool(by_case.get(t.get("case_id"))),
                          escape.text(impl_label(t["impl"])))

    def _issue_slots(self, o, t) -> str:
        """', with the issue slots busy 45.6% and 44.7% of cycles': cycles per instruction compare little across
        kernels that keep different numbers of warps per scheduler, busy issue slots compare directly."""
        a, b = self._main_kernel(o["case_id"]), self._main_kernel(t["case_id"])
        if a is None or b is None or not (pd.notna(a.get("issue_slots_pct")) and pd.notna(b.get("issue_slots_pct"))):
            return ""
        return (f", with the issue slots busy {fmt.pct(a['issue_slots_pct'])} and {fmt.pct(b['issue_slots_pct'])} "
                "of cycles")
