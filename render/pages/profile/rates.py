"""What each implementation did: the per-call table, its two rates, and the kernel launches behind it."""
from __future__ import annotations

import pandas as pd

from ... import escape, fmt
from ...fmt import known
from ...tables import table_html
from ...vocab import impl_label, plural
from .data import ProfileData, short_kernel_name


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
                              "flops": f"FLOPs ({what})", "ai": "FLOP / DRAM byte",
                              "tflops": f"Achieved: {what} FLOPs / Nsight Compute time",
                              "dev_tflops": "Analytical FLOPs / our device time",
                              "tensor": "Tensor cores ran", "config": "Triton config"},
                          {"t": fmt.ms, "dram": fmt.bytes_, "l2": fmt.bytes_, "flops": lambda v: fmt.num(v),
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
                "registers_per_thread": "Registers / thread", "block_size": "Threads / block",
                "flops_tensor": "Tensor FLOPs", "tensor_inst": "Tensor-pipe instructions"}
        if df["flops_tensor"].notna().any():  # the FLOP counters decide; the instruction count would mislead
            cols.pop("tensor_inst")
        return table_html(df, cols,
                          {"duration_ms": fmt.ms, "dram": fmt.bytes_, "l2_hit_rate_pct": fmt.pct,
                           "kernel_name": lambda v: v if len(v) <= 160 else v[:157] + "...",
                           "flops_tensor": lambda v: fmt.num(v), "tensor_inst": lambda v: fmt.num(v)})

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
