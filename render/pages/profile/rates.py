"""What each implementation did: the per-call table, its two rates, and the kernel launches behind it."""
from __future__ import annotations

import pandas as pd

from ... import escape, fmt
from ...fmt import known
from ...tables import table_html
from ...vocab import impl_label, is_rival, plural
from .data import ProfileData, shape_list, short_kernel_name


class Rates(ProfileData):
    """The implementation and kernel tables, and how this page's rate relates to the other pages'."""

    def impl_table(self, shape=None) -> str:
        shape = shape or self.headline
        df = self._rows(shape)
        if df.empty:
            return "_No implementation was profiled at this shape._"
        rows = []
        tc = self.tensor_core_verdicts(shape)
        dev = self._device_ms()
        for _, r in df.iterrows():
            flops = self._flops(r)
            dram = self._dram(r)
            used = tc.get(r["impl"], (None, ""))[0]
            ours = dev.get(r["case_id"])
            rows.append({"impl": impl_label(r["impl"]), "status": r["status"], "kernels": r["kernels"], "t": r["duration_ms"],
                         "dram": dram, "l2": r["l2_bytes"], "flops": flops,
                         "counted_share": r["flops_counted"] / r["flops_model"]
                         if known(r.get("flops_counted")) and r["flops_model"] else None,
                         "ai": flops / dram if dram else None,
                         "tflops": flops / (r["duration_ms"] * 1e-3) if known(r["duration_ms"]) and r["duration_ms"] else None,
                         "dev_tflops": r["flops_model"] / (ours * 1e-3) if known(ours) and ours else None,
                         "tensor": {True: "yes", False: "no", None: "unknown"}[used], "config": r["config"] or ""})
        t = pd.DataFrame(rows)
        # Each figure names its clock and FLOP count: the other pages' rates use our device time and the
        # analytical count, this table's Achieved uses Nsight Compute's time and (where it can) the counters.
        what = self._flops_words(df)
        return table_html(t, {"impl": "Implementation", "status": "Status", "kernels": "Kernels",
                              "t": "Kernel time (Nsight Compute)", "dram": "DRAM bytes (read + write ≥ output)", "l2": "L2 bytes",
                              "flops": f"FLOPs ({what})", "counted_share": "Counted / analytical FLOPs",
                              "ai": "FLOP / DRAM byte",
                              "tflops": f"Achieved: {what} FLOPs / Nsight Compute time",
                              "dev_tflops": "Analytical FLOPs / our device time",
                              "tensor": "Tensor cores ran", "config": "Triton config"},
                          {"t": fmt.ms, "dram": fmt.bytes_, "l2": fmt.bytes_, "flops": lambda v: fmt.num(v),
                           "counted_share": fmt.ratio,
                           "ai": lambda v: fmt.num(v), "tflops": fmt.flops, "dev_tflops": fmt.flops})

    def _flops_words(self, rows: pd.DataFrame) -> str:
        """What the FLOPs of these rows are (see _flops)."""
        counted = rows["flops_counted"].map(known) if not rows.empty else pd.Series(dtype=bool)
        return "counted" if counted.all() else "analytical" if not counted.any() else "counted or analytical"

    def _device_ms(self) -> dict:
        """case id -> our device time of the profiled call (the clock cross-check), where the run recorded it."""
        df = self.run.frame("profile", "clock_check")
        return {} if df.empty else dict(zip(df["case_id"], df["device_ms"]))

    def rates_note(self, shape=None) -> str:
        """How this page's achieved rate relates to the rate the other pages show for the same call: the FLOP
        count and the clock, each as a factor, worked through for our kernel."""
        shape = shape or self.headline
        df = self._rows(shape)
        df = df[(df["status"] == "ok") & df["duration_ms"].notna()] if not df.empty else df
        if df.empty:
            return ""
        what = self._flops_words(df)
        out = [f"The two rates differ in clock and in FLOP count. Achieved divides the {what} FLOPs by Nsight "
               "Compute's kernel time, as the roofline below does; the column beside it divides the analytical FLOPs "
               "(4·B·H·N²·d, halved when causal) by our device time for the same call, as the Benchmarks and "
               "Iterations pages do."]
        dev = self._device_ms()
        pick = [r for _, r in df.iterrows() if known(dev.get(r["case_id"])) and dev[r["case_id"]]]
        pick = [r for r in pick if r["impl"] == "triton"] or pick
        if not pick:
            return out[0] + " This run recorded no device time for these calls, so that column is empty."
        r = pick[0]
        flops, ours = self._flops(r), dev[r["case_id"]]
        ncu_rate, dev_rate = flops / (r["duration_ms"] * 1e-3), r["flops_model"] / (ours * 1e-3)
        counted = (f"the counters saw {fmt.ratio(flops / r['flops_model'])} the analytical FLOPs and "
                   if known(r.get("flops_counted")) else "")
        out.append(f"For {impl_label(r['impl'])}, {counted}our device time is {fmt.ratio(ours / r['duration_ms'])} "
                   f"Nsight Compute's kernel time, which takes {fmt.flops(ncu_rate)} to {fmt.flops(dev_rate)}.")
        bench = self._bench_tflops(r)
        if bench is not None:
            out.append(f"The Benchmarks page, which times the same case in the bench phase, shows {fmt.flops(bench)} "
                       "for it.")
        return " ".join(out)

    # Another implementation's counted/analytical FLOPs worth naming beside ours: this much more than ours.
    COUNTED_GAP = 0.02

    def counted_work_note(self, shape=None) -> str:
        """Where another implementation's counters saw more FLOPs over the analytical count than ours did: counted
        FLOPs include work that produces nothing the attention needs (rows padded to a whole tile, masked tiles
        computed anyway, the softmax's own arithmetic), so its Achieved rate overstates its useful work by more."""
        shape = shape or self.headline
        df = self._rows(shape)
        df = df[(df["status"] == "ok") & df["flops_counted"].map(known) & (df["flops_model"] > 0)] if not df.empty else df
        share = {r["impl"]: r["flops_counted"] / r["flops_model"] for _, r in df.iterrows()}
        ours = share.get("triton")
        rivals = {i: v for i, v in share.items() if is_rival(i)}
        if ours is None or not rivals:
            return ""
        top = max(rivals, key=rivals.get)
        if rivals[top] <= ours * (1 + self.COUNTED_GAP):
            return ""
        timed = df[df["impl"].isin([top, "triton"]) & df["duration_ms"].map(known) & (df["duration_ms"] > 0)]
        useful = dict(zip(timed["impl"], timed["flops_model"] / (timed["duration_ms"] * 1e-3)))
        text = (f"Counted FLOPs include work the attention does not need: rows padded to a whole tile, masked tiles "
                f"computed anyway, the softmax's own arithmetic. {impl_label(top)}'s counters saw "
                f"{fmt.ratio(rivals[top])} the analytical FLOPs here, ours {fmt.ratio(ours)}, so its Achieved rate "
                "overstates its useful work by more than ours does")
        if len(useful) == 2:
            text += (f": on the analytical count it ran at {fmt.flops(useful[top])} under Nsight Compute, ours at "
                     f"{fmt.flops(useful['triton'])}")
        return text + "."

    def _bench_tflops(self, r) -> float | None:
        """FLOP/s of the bench phase's row for the profiled case, where the bench phase timed that case."""
        b = self.run.frame("bench", "rows")
        if b.empty or "tflops" not in b:
            return None
        same = b[(b["impl"] == r["impl"]) & (b["batch"] == r["batch"]) & (b["heads"] == r["heads"])
                 & (b["seq_len"] == r["seq_len"]) & (b["head_dim"] == r["head_dim"]) & (b["dtype"] == r["dtype"])
                 & (b["causal"] == r["causal"]) & (b["status"] == "ok")]
        t = same["tflops"].dropna()
        return float(t.iloc[0]) * 1e12 if len(t) else None

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
        cols = {"impl": "Implementation", "launch": "#", "kernel_name": "Kernel (as Nsight Compute names it)",
                "duration_ms": "Time (Nsight Compute)", "dram": "DRAM bytes (as counted)", "l2_hit_rate_pct": "L2 hit rate",
                "registers_per_thread": "Registers / thread", "local_bytes": "Local (spill) bytes",
                "block_size": "Threads / block", "flops_tensor": "Tensor FLOPs", "tensor_inst": "Tensor-pipe instructions"}
        if df["flops_tensor"].notna().any():  # the FLOP counters decide; the instruction count would mislead
            cols.pop("tensor_inst")
        return table_html(df, cols,
                          {"duration_ms": fmt.ms, "dram": fmt.bytes_, "l2_hit_rate_pct": fmt.pct, "local_bytes": fmt.bytes_,
                           "kernel_name": lambda v: v if len(v) <= 160 else v[:157] + "...",
                           "flops_tensor": lambda v: fmt.num(v), "tensor_inst": lambda v: fmt.num(v)})

    # A kernel whose local-memory traffic is at least this share of its L1 traffic spills enough to name.
    SPILL_SHARE = 0.05

    def spill_note(self) -> str:
        """The implementations whose main kernels spill registers to local memory in a share of their L1 traffic
        worth naming, at the shape where they spill most: spill traffic is memory traffic the roofline's L1 point
        and the L1/shared throughput count too, and a kernel waiting on it waits on memory."""
        k = self.kernels()
        if k.empty or "local_bytes" not in k or not k["local_bytes"].map(known).any():
            return ""
        ids = {cid for shape in self.shapes() for cid in self._rows(shape)["case_id"]}
        k = k[k["case_id"].isin(ids) & k["local_bytes"].map(known) & k["l1_bytes"].map(known) & (k["l1_bytes"] > 0)]
        k = k.assign(share=k["local_bytes"] / k["l1_bytes"])
        spills = k[k["share"] >= self.SPILL_SHARE]
        if spills.empty:
            return ("No profiled kernel spilled registers to local memory in more than "
                    f"{fmt.pct(100 * self.SPILL_SHARE, 2)} of its L1 traffic.")
        out = []
        shapes = {cid: self.shape_text(s) for s in self.shapes() for cid in self._rows(s)["case_id"]}
        for impl, g in spills.groupby("impl", sort=False):
            top = g.loc[g["local_bytes"].idxmax()]
            regs = f", at {int(top['registers_per_thread'])} registers a thread," if known(top["registers_per_thread"]) else ""
            out.append(f"{impl_label(impl)}'s kernel{regs} spills registers to local memory: at "
                       f"{shape_list([shapes[top['case_id']]])} {fmt.bytes_(top['local_bytes'])} of spill traffic, "
                       f"{fmt.pct(100 * top['share'])} of its L1 traffic.")
            # The range over the other shapes gets its own sentence: with the figures above, one would carry five.
            if len(g) > 1:
                out.append(f"At the {plural(len(g), 'profiled shape')} where it spills, that share runs "
                           f"{fmt.span(100 * g['share'].min(), 100 * g['share'].max(), fmt.pct)}.")
        out.append("The roofline's L1 point and the L1/shared throughput count that traffic too.")
        return " ".join(out)

    def tensor_inst_note(self) -> str:
        """Why the tensor-pipe instruction count is not the evidence for tensor cores where FLOP counters exist:
        kernels that did no tensor FLOPs issue some (found in this run's own counters)."""
        k = self.kernels()
        if k.empty or not k["flops_tensor"].notna().any():
            return ""
        odd = k[(k["tensor_inst"].fillna(0) > 0) & (k["flops_tensor"] == 0)]
        if odd.empty:
            return ""
        top = odd.sort_values("tensor_inst", ascending=False).iloc[0]
        return (f"The tensor-pipe instruction counter ({escape.code('sm__inst_executed_pipe_tensor')}) is left out of "
                f"the table: in this run it counts {fmt.num(top['tensor_inst'])} instructions for "
                f"{escape.code(short_kernel_name(top['kernel_name']))}, a kernel whose tensor FLOP counters read zero, "
                f"so it counts instructions other than matrix multiplies too ({plural(len(odd), 'such kernel')} in this "
                "run). Whether the tensor cores ran is decided by the tensor FLOP counters.")
