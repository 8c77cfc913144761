"""Kernel iterations: each recorded version of our kernel against SDPA's fastest backends and the
matmul ceiling, with the prediction made before each was measured and what it turned out to be."""
from __future__ import annotations

import dataclasses
import math
from functools import cached_property

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from collect.schema.iterations import IterationRow

from .. import escape, fmt
from ..figures import PALETTE
from ..tables import table_html
from .base import Page

SHORT = {"float16": "fp16", "bfloat16": "bf16"}
SDPA_LABELS = {"sdpa-cudnn": "SDPA cuDNN", "sdpa-flash": "SDPA flash"}
CEILINGS = {"float16": "matmul_fp16", "bfloat16": "matmul_bf16"}
# A measured factor within this much of a predicted range's edge still "holds": run-to-run noise.
SLACK = 0.01
# Two timing methods whose ratios differ by more than this in some case are worth a word.
MATERIAL = 0.03


def masking(causal: bool) -> str:
    return "causal" if causal else "non-causal"


def case_label(dtype: str, causal: bool, n: int) -> str:
    return f"{SHORT.get(dtype, dtype)}, {masking(causal)}, N={n}"


def join(items) -> str:
    items = [str(i) for i in items]
    if not items:
        return ""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def geomean(xs) -> float | None:
    xs = [x for x in xs if x is not None and x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def verdict(measured: float | None, low: float, high: float) -> str:
    """How a measured factor sits against the range predicted for it."""
    if measured is None:
        return "not measured"
    if measured > high * (1 + SLACK):
        return "better than predicted"
    if measured < low * (1 - SLACK):
        return "worse than predicted"
    return "as predicted"


class IterationsPage(Page):
    slug = "iterations"
    phase = "iterations"

    # --- frames ----------------------------------------------------------------------------

    @cached_property
    def rows(self) -> pd.DataFrame:
        df = self.run.frame("iterations", "rows")
        if df.empty:  # keep the columns, so every method below works on a run with no rows
            df = pd.DataFrame(columns=[f.name for f in dataclasses.fields(IterationRow)])
        return df

    @cached_property
    def ok(self) -> pd.DataFrame:
        r = self.rows
        return r[(r["status"] == "ok") & r["tflops"].notna()]

    @cached_property
    def versions(self) -> list:
        return list(self.data.versions)

    def version_names(self) -> list[str]:
        return [v.name for v in self.versions]

    def version(self, name: str):
        return next((v for v in self.versions if v.name == name), None)

    def cases(self) -> list[tuple[str, bool, int]]:
        """(dtype, causal, N) of the rows, N ascending, fp16 before bf16, non-causal first."""
        keys = {(d, bool(c), int(n)) for d, c, n in zip(self.rows["dtype"], self.rows["causal"], self.rows["seq_len"])}
        order = {d: i for i, d in enumerate(SHORT)}
        return sorted(keys, key=lambda k: (k[2], order.get(k[0], 9), k[1]))

    def facets(self) -> list[tuple[str, bool]]:
        return list(dict.fromkeys((d, c) for d, c, _ in self.cases()))

    @cached_property
    def _tflops_by_case(self) -> dict:
        """(impl, dtype, causal, N) -> TFLOP/s, built once: the page looks up thousands of cases, and a
        boolean mask over the frame per lookup made it the slowest page of a large run."""
        ok = self.ok
        return {(i, d, bool(c), int(n)): float(t) for i, d, c, n, t in
                zip(ok["impl"], ok["dtype"], ok["causal"], ok["seq_len"], ok["tflops"])}

    @cached_property
    def _fastest_sdpa_by_case(self) -> dict:
        out: dict = {}
        ok = self.ok[self.ok["kind"] == "sdpa"]
        for i, d, c, n, t in zip(ok["impl"], ok["dtype"], ok["causal"], ok["seq_len"], ok["tflops"]):
            key = (d, bool(c), int(n))
            if key not in out or float(t) > out[key][1]:
                out[key] = (str(i), float(t))
        return out

    def tflops(self, impl: str, dtype: str, causal: bool, n: int) -> float | None:
        return self._tflops_by_case.get((impl, dtype, bool(causal), int(n)))

    def fastest_sdpa(self, dtype: str, causal: bool, n: int) -> tuple[str, float] | None:
        return self._fastest_sdpa_by_case.get((dtype, bool(causal), int(n)))

    def ratio(self, impl: str, dtype: str, causal: bool, n: int) -> float | None:
        """TFLOP/s of impl over the fastest SDPA backend's, same case."""
        t, s = self.tflops(impl, dtype, causal, n), self.fastest_sdpa(dtype, causal, n)
        return t / s[1] if t is not None and s else None

    def ceiling(self, dtype: str) -> float | None:
        """The measured matmul rate of this dtype (FLOP/s), from the env phase."""
        name = CEILINGS.get(dtype)
        c = next((c for c in self.run.manifest.measured_ceilings if c.name == name and c.status == "ok"), None)
        return c.per_s_median if c else None

    def speedup(self, name: str, baseline: str, causal: bool) -> float | None:
        """Geometric mean over the goal cases of this masking of name's TFLOP/s over the baseline's
        ('sdpa': the fastest SDPA backend of each case). Only cases both ran count."""
        out = []
        for dtype, c, n in self.cases():
            if c != causal:
                continue
            t = self.tflops(name, dtype, c, n)
            if baseline == "sdpa":
                s = self.fastest_sdpa(dtype, c, n)
                b = s[1] if s else None
            else:
                b = self.tflops(baseline, dtype, c, n)
            if t is not None and b:
                out.append(t / b)
        return geomean(out)

    # --- prose -----------------------------------------------------------------------------

    def summary(self) -> str:
        d = self.data
        counts = self.rows["status"].value_counts()
        status = join(f"{counts[s]} {s}" for s in ("ok", "oom", "unsupported", "error") if s in counts)
        shapes = dict.fromkeys(f"B={b}, H={h}, d={hd}" for b, h, hd in zip(self.rows["batch"], self.rows["heads"],
                                                                          self.rows["head_dim"]))
        ns = sorted(set(self.rows["seq_len"]))
        timed = set(self.rows[self.rows["kind"] != "sdpa"]["impl"]) if "kind" in self.rows else set()
        untimed = [n for n in self.version_names() if n not in timed]
        text = (f"This run timed {len([n for n in self.version_names() if n in timed])} versions of our kernel and "
                f"{join(SDPA_LABELS.get(i, i) for i in dict.fromkeys(self.rows[self.rows['kind'] == 'sdpa']['impl']))} "
                f"in {len(self.rows)} cases ({status}): {join(shapes)}; N = {join(ns)}; "
                f"{join(SHORT.get(x, x) for x in dict.fromkeys(self.rows['dtype']))}; causal and not. "
                f"Timing: {escape.text(d.timing_method)}.")
        if untimed:
            text += (f" {join(untimed)} {'is' if len(untimed) == 1 else 'are'} recorded with {'its' if len(untimed) == 1 else 'their'} "
                     "story but not timed by this phase (superseded, to keep the phase short); the notes give what the "
                     "development runs measured.")
        if not d.hopper_available:
            text += (f"\n\n!!! note \"Hopper versions not run\"\n    This GPU could not run the Hopper versions: "
                     f"{escape.text(d.hopper_reason)}. Their rows are kept as unsupported; only the portable kernel "
                     "is compared here.")
        for note in d.notes:
            text += f"\n\n!!! note\n    {escape.text(note)}"
        return text

    def goal_finding(self) -> str:
        """Whether the final version reached the goal ratio, case by case."""
        d = self.data
        final = d.final_version
        ratios = [(c, self.ratio(final, *c)) for c in self.cases()]
        measured = [(c, r) for c, r in ratios if r is not None]
        goal = fmt.ratio(d.goal_ratio)
        if not measured:
            return (f"The final version, **{escape.text(final)}**, has no case measured beside an SDPA backend in this "
                    f"run, so whether it reaches {goal} of the fastest SDPA backend cannot be said here.")
        met = [(c, r) for c, r in measured if r >= d.goal_ratio]
        worst = min(measured, key=lambda x: x[1])
        best = max(measured, key=lambda x: x[1])
        head = (f"The goal was our kernel at {goal} or more of the fastest SDPA backend's TFLOP/s in every goal case. "
                f"The final version, **{escape.text(final)}**, reaches it in {len(met)} of {len(measured)} cases")
        if len(met) == len(measured):
            head += f" (lowest {fmt.ratio(worst[1])}, at {case_label(*worst[0])}"
        else:
            missed = [case_label(*c) + f" ({fmt.ratio(r)})" for c, r in measured if r < d.goal_ratio]
            head += f"; it falls short at {join(missed)} (lowest {fmt.ratio(worst[1])}, at {case_label(*worst[0])}"
        head += f"; highest {fmt.ratio(best[1])}, at {case_label(*best[0])})."
        beats = [c for c, r in measured if r >= 1.0]
        if beats:
            head += (f" It is at least as fast as every SDPA backend measured in {len(beats)} of {len(measured)} cases.")
        return head

    def bench_ratio(self, dtype: str, causal: bool, n: int) -> float | None:
        """The bench phase's ratio at one goal case: `triton` (flash_attention as shipped) over the fastest
        SDPA backend, same shape (this phase's batch, heads and head_dim)."""
        return self._bench_ratios.get((dtype, bool(causal), int(n)))

    @cached_property
    def _bench_ratios(self) -> dict:
        """bench_ratio for every case at once (one pass over the bench rows, not one per case)."""
        b = self.run.frame("bench", "rows")
        if b.empty or self.rows.empty:
            return {}
        r0 = self.rows.iloc[0]
        f = b[(b["status"] == "ok") & (b["batch"] == r0["batch"]) & (b["heads"] == r0["heads"])
              & (b["head_dim"] == r0["head_dim"]) & b["tflops"].notna()]
        out = {}
        for (dtype, causal, n), g in f.groupby(["dtype", "causal", "seq_len"]):
            ours = g[g["impl"] == "triton"]["tflops"]
            sdpa = g[g["impl"].str.startswith("sdpa")]["tflops"]
            if len(ours) and len(sdpa):
                out[(dtype, bool(causal), int(n))] = float(ours.iloc[0] / sdpa.max())
        return out

    def bench_crosscheck(self) -> str:
        """The same goal cases as the bench phase measured them, with its own timing method."""
        bench = self.run.phase("bench")
        got = [(c, self.bench_ratio(*c)) for c in self.cases()]
        got = [(c, r) for c, r in got if r is not None]
        if bench is None or not got:
            return ("The bench phase did not measure these shapes in this run, so this page's ratios have no second "
                    "measurement to be checked against.")
        goal = self.data.goal_ratio
        met = sum(r >= goal for _, r in got)
        text = (f"The bench phase measured the same shapes with its own method ({escape.text(bench.timing_method)}) "
                f"and `flash_attention` as shipped: {join(f'{case_label(*c)} {fmt.ratio(r)}' for c, r in got)} of the "
                f"fastest SDPA backend, reaching {fmt.ratio(goal)} in {met} of {len(got)} cases.")
        final = self.data.final_version
        diffs = [(c, r - self.ratio(final, *c)) for c, r in got if self.ratio(final, *c) is not None]
        if diffs:
            lo, hi = min(diffs, key=lambda x: x[1]), max(diffs, key=lambda x: x[1])
            text += (f" Case by case, the bench phase's ratio minus this page's runs from {lo[1]:+.3f} "
                     f"({case_label(*lo[0])}) to {hi[1]:+.3f} ({case_label(*hi[0])}).")
            flips = [c for c, _ in diffs if (self.bench_ratio(*c) >= goal) != (self.ratio(final, *c) >= goal)]
            if max(abs(d) for _, d in diffs) > MATERIAL:
                text += (" The methods differ in what happens just before each timed call: this page keeps the GPU "
                         "busy first, the bench phase runs the calls back to back, each after zeroing Triton's "
                         "L2-flush buffer.")
            if flips:
                text += (f" The verdict depends on the method at {join(case_label(*c) for c in flips)}; the issue "
                         "that set the goal names the bench phase as its judge.")
        return text

    def ceiling_finding(self) -> str:
        """The final version and the fastest SDPA backend as fractions of the measured matmul rate."""
        final = self.data.final_version
        parts = []
        for dtype, causal in self.facets():
            ceil = self.ceiling(dtype)
            if not ceil or causal:
                continue
            n = max(n for d, c, n in self.cases() if d == dtype and c == causal)
            t = self.tflops(final, dtype, causal, n)
            s = self.fastest_sdpa(dtype, causal, n)
            if t is None and s is None:
                continue
            bit = f"{SHORT.get(dtype, dtype)} at N={n}: "
            bit += f"{escape.text(final)} {fmt.pct(100 * t * 1e12 / ceil)}" if t is not None else f"{escape.text(final)} did not run"
            if s:
                bit += f", {SDPA_LABELS.get(s[0], s[0])} {fmt.pct(100 * s[1] * 1e12 / ceil)}"
            parts.append(bit + f" of the measured {fmt.flops(ceil)} matmul rate")
        if not parts:
            return "No measured matmul ceiling (or no non-causal case) in this run to set the attention rates against."
        return ("The FLOPs counted for attention are those of two matmuls per score tile, with a softmax between them "
                "that the tensor cores do not do, so the measured rate of one large matmul (Hardware page) is the "
                "natural roof to compare against. Non-causal, the longest sequence: " + "; ".join(parts) + ".")

    def wide_loads_finding(self) -> str:
        """What the T4 study's open fix (fewer, wider loads) did here."""
        v = next((v for v in self.versions if v.role == "t4-fix"), None)
        if v is None:
            return "No version in this run tries the fewer-wider-loads fix."
        name = escape.text(v.name)
        base = escape.text(v.baseline)
        res = []
        for causal in (False, True):
            s = self.speedup(v.name, v.baseline, causal)
            if s is not None:
                res.append((causal, s))
        if not res:
            return f"{name}, the fewer-wider-loads version, did not run beside {base} in this run."
        words = []
        for causal, s in res:
            pred = next((p for p in v.predicted if p.masking == masking(causal)), None)
            change = ("faster" if s > 1 + SLACK else "slower" if s < 1 - SLACK else "no faster and no slower")
            w = f"{masking(causal)}: {fmt.ratio(s)} of {base}'s TFLOP/s ({change})"
            if pred:
                w += f", predicted {fmt.ratio(pred.low)} to {fmt.ratio(pred.high)}: {verdict(s, pred.low, pred.high)}"
            words.append(w)
        return (f"The published T4 study ended with one fix left open: fewer, wider loads to relieve the pressure on "
                f"the shared-memory pipeline. Here that is **{name}** (its change is in the table above). Against {base}, "
                f"geometric mean over the goal cases, {'; '.join(words)}.")

    def limits_finding(self) -> str:
        """Where the final version stands and what its compiled kernel says about why."""
        d = self.data
        final = d.final_version
        r = self.ok[self.ok["impl"] == final]
        if r.empty:
            return f"{escape.text(final)} did not run in this run."
        row = r.iloc[0]
        ratios = [x for x in (self.ratio(final, *c) for c in self.cases()) if x is not None]
        below = ratios and min(ratios) < d.goal_ratio
        res = []
        if pd.notna(row.get("blocks_per_sm")):
            res.append(f"{int(row['blocks_per_sm'])} block(s) of {int(row['warps_per_block'])} warps per SM "
                       f"({fmt.pct(row['occupancy_pct'])} theoretical occupancy, set by "
                       f"{escape.text(row['occupancy_limiter'])})")
        if pd.notna(row.get("registers_per_thread")):
            res.append(f"{int(row['registers_per_thread'])} registers a thread")
        if pd.notna(row.get("shared_mem_bytes")):
            res.append(f"{fmt.bytes_(row['shared_mem_bytes'])} of shared memory a block")
        spills = r["spilled_registers"].dropna()
        spill_txt = (f" The compiler spilled registers in {int((spills > 0).sum())} of {len(spills)} cases."
                     if len(spills) and (spills > 0).any() else " No case spilled registers." if len(spills) else "")
        facts = (f"{escape.text(final)}'s compiled kernel ({escape.text(row['config'])}) runs {join(res)}."
                 if res else "")
        if not below:
            return facts + spill_txt
        return (f"Where it is short of the goal, the compiled kernel alone cannot name the bottleneck. {facts}"
                f"{spill_txt} {self.stall_comparison()}").rstrip()

    def stall_comparison(self) -> str:
        """Nsight Compute's stall reasons for our kernel against the fastest SDPA backend's, at the causal goal
        shape the profile phase adds, when this run has it."""
        impls, stalls = self.run.frame("profile", "impls"), self.run.frame("profile", "stalls")
        if impls.empty or stalls.empty:
            return "This run has no profile of a goal shape to say where the time goes."
        goal = impls[(impls["status"] == "ok") & (impls["causal"] == True) & (impls["group"] == "main")]  # noqa: E712
        ours = goal[goal["impl"] == "triton"]
        theirs = goal[goal["impl"].str.startswith("sdpa")]
        if ours.empty or theirs.empty:
            return "This run has no profile of a causal goal shape beside an SDPA backend."

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
        text = (f"The Profiling page has both kernels at {shape}: our kernel's warps wait {o_tot:.2f} cycles per "
                f"issued instruction, {SDPA_LABELS.get(t['impl'], t['impl'])}'s {t_tot:.2f}. Our largest stall reason "
                f"is **{escape.text(lead)}** ({o_s.iloc[0]:.2f}; theirs {float(t_s.get(lead, 0.0)):.2f})")
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

    # --- tables ----------------------------------------------------------------------------

    def ratio_table(self) -> str:
        """Every implementation x case: TFLOP/s and the ratio to the fastest SDPA backend."""
        impls = [*self.version_names(), *dict.fromkeys(self.rows[self.rows["kind"] == "sdpa"]["impl"])]
        cols = {"impl": "Implementation"}
        data = []
        for impl in impls:
            r = {"impl": SDPA_LABELS.get(impl, impl)}
            for i, (dtype, causal, n) in enumerate(self.cases()):
                t = self.tflops(impl, dtype, causal, n)
                rat = self.ratio(impl, dtype, causal, n)
                if t is None:
                    st = self.rows[(self.rows["impl"] == impl) & (self.rows["dtype"] == dtype)
                                   & (self.rows["causal"] == causal) & (self.rows["seq_len"] == n)]["status"]
                    r[f"c{i}"] = st.iloc[0] if len(st) else "not run"
                else:
                    r[f"c{i}"] = f"{fmt.num(t)} ({fmt.ratio(rat)})" if rat is not None else fmt.num(t)
                cols[f"c{i}"] = case_label(dtype, causal, n)
            data.append(r)
        return table_html(pd.DataFrame(data), cols,
                          caption="TFLOP/s, and in brackets the ratio to the fastest SDPA backend of the same case")

    def journey_table(self) -> str:
        """Each version: what changed, what was predicted (and when), what was measured."""
        data = []
        for v in self.versions:
            for pred in v.predicted or [None]:
                causal = pred is not None and pred.masking == "causal"
                measured = self.speedup(v.name, v.baseline, causal) if v.baseline else None
                base = "the fastest SDPA backend" if v.baseline == "sdpa" else v.baseline
                data.append({
                    "name": v.name,
                    "masking": pred.masking if pred else "",
                    "change": v.change,
                    "prediction": f"{v.prediction} (written {v.predicted_at})",
                    "range": f"{fmt.ratio(pred.low)} to {fmt.ratio(pred.high)} of {base}" if pred else "none recorded",
                    "measured": fmt.ratio(measured) if measured is not None else "not measured",
                    "verdict": verdict(measured, pred.low, pred.high) if pred else "",
                    "notes": v.outcome,
                })
        return table_html(pd.DataFrame(data), {
            "name": "Version", "masking": "Mask", "change": "What changed", "prediction": "Prediction",
            "range": "Predicted TFLOP/s factor", "measured": "Measured here (geometric mean)", "verdict": "Verdict",
            "notes": "Author's notes from the development runs"})

    def resources_table(self) -> str:
        """Compiled-kernel resources per version and masking (the first dtype measured)."""
        data = []
        for name in self.version_names():
            for causal in (False, True):
                r = self.ok[(self.ok["impl"] == name) & (self.ok["causal"] == causal)]
                if r.empty:
                    continue
                row = r.iloc[0]

                def opt(col, f=lambda x: str(int(x))):
                    return f(row[col]) if pd.notna(row.get(col)) else "n/a"

                data.append({
                    "name": name, "masking": masking(causal), "config": row.get("config") or "n/a",
                    "ws": "yes" if row.get("warp_specialized") is True else "no",
                    "regs": opt("registers_per_thread"), "spills": opt("spilled_registers"),
                    "smem": opt("shared_mem_bytes", fmt.bytes_), "warps": opt("warps_per_block"),
                    "blocks": opt("blocks_per_sm"), "occ": opt("occupancy_pct", fmt.pct),
                    "lim": row.get("occupancy_limiter") or "n/a",
                })
        if not data:
            return "No version ran, so there are no compiled kernels to describe."
        return table_html(pd.DataFrame(data), {
            "name": "Version", "masking": "Mask", "config": "Tile config", "ws": "Warp-specialized",
            "regs": "Registers / thread", "spills": "Spilled", "smem": "Shared memory / block", "warps": "Warps / block",
            "blocks": "Blocks / SM", "occ": "Theoretical occupancy", "lim": "Limited by"})

    # --- figure ----------------------------------------------------------------------------

    def tflops_figure(self) -> str:
        """Versions along x, TFLOP/s up; one line per N; dashed: fastest SDPA; dotted: matmul ceiling."""
        facets = self.facets()
        names = self.version_names()
        dtypes = list(dict.fromkeys(d for d, _ in facets))
        causals = sorted({c for _, c in facets})
        fig = make_subplots(rows=len(dtypes), cols=len(causals), shared_yaxes="all", shared_xaxes=True,
                            subplot_titles=[f"{SHORT.get(d, d)}, {masking(c)}" for d in dtypes for c in causals],
                            horizontal_spacing=0.06, vertical_spacing=0.12)
        ns = sorted({n for _, _, n in self.cases()})
        shown = set()
        for i, dtype in enumerate(dtypes):
            for j, causal in enumerate(causals):
                for k, n in enumerate(ns):
                    color = PALETTE[k % len(PALETTE)]
                    ys = [self.tflops(v, dtype, causal, n) for v in names]
                    hover = [escape.plot(f"{v}, {case_label(dtype, causal, n)}: {fmt.num(y)} TFLOP/s")
                             if y is not None else escape.plot(f"{v}: not measured") for v, y in zip(names, ys)]
                    key = f"ours N={n}"
                    fig.add_trace(go.Scatter(x=names, y=ys, mode="lines+markers", name=key, legendgroup=key,
                                             showlegend=key not in shown, line=dict(color=color),
                                             hovertext=hover, hoverinfo="text"), row=i + 1, col=j + 1)
                    shown.add(key)
                    s = self.fastest_sdpa(dtype, causal, n)
                    if s:
                        key = f"fastest SDPA N={n}"
                        label = escape.plot(f"{SDPA_LABELS.get(s[0], s[0])}, {case_label(dtype, causal, n)}: "
                                            f"{fmt.num(s[1])} TFLOP/s")
                        fig.add_trace(go.Scatter(x=[names[0], names[-1]], y=[s[1], s[1]], mode="lines", name=key,
                                                 legendgroup=key, showlegend=key not in shown,
                                                 line=dict(color=color, dash="dash"), hovertext=[label, label],
                                                 hoverinfo="text"), row=i + 1, col=j + 1)
                        shown.add(key)
                ceil = self.ceiling(dtype)
                if ceil:
                    key = "matmul ceiling"
                    label = escape.plot(f"measured {SHORT.get(dtype, dtype)} matmul: {fmt.flops(ceil)}")
                    fig.add_trace(go.Scatter(x=[names[0], names[-1]], y=[ceil / 1e12] * 2, mode="lines", name=key,
                                             legendgroup=key, showlegend=key not in shown,
                                             line=dict(color=PALETTE[7], dash="dot"), hovertext=[label, label],
                                             hoverinfo="text"), row=i + 1, col=j + 1)
                    shown.add(key)
        fig.update_yaxes(title_text="TFLOP/s", rangemode="tozero", col=1)
        cases = join(f"N={n}" for n in ns)
        shape = join(dict.fromkeys(f"B={b}, H={h}, d={hd}" for b, h, hd in
                                   zip(self.rows["batch"], self.rows["heads"], self.rows["head_dim"])))
        caption = (f"TFLOP/s of each kernel version (solid, in journey order) against the fastest SDPA backend of the "
                   f"same case (dashed) and the measured matmul rate (dotted); {shape}; {cases}; "
                   f"4·B·H·N²·d FLOP per call, halved when causal.")
        return self.figure("tflops", fig, caption, height=300 * len(dtypes) + 120)
