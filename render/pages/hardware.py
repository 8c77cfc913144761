"""Hardware & ceilings: what the GPU is, what its datasheet promises, what it sustains."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from .. import escape, fmt
from ..figures import PALETTE
from ..tables import table_html
from .base import Page

COMPUTE = [("matmul_fp16", "fp16_tensor_flops_per_s", "fp16 tensor"),
           ("matmul_bf16", "bf16_tensor_flops_per_s", "bf16 tensor"),
           ("matmul_fp32", "fp32_flops_per_s", "fp32")]


class HardwarePage(Page):
    slug = "hardware"
    phase = "env"

    @property
    def device(self):
        return self.run.manifest.device

    @property
    def sheet(self):
        return self.run.manifest.datasheet

    @property
    def available(self) -> bool:
        rec = self.run.phase_record("env")
        return self.device is not None and rec is not None and rec.status == "complete"

    def measured(self, name: str):
        return next((c for c in self.run.manifest.measured_ceilings if c.name == name), None)

    def measured_rate(self, name: str) -> float | None:
        c = self.measured(name)
        return c.per_s_median if c is not None and c.status == "ok" else None

    def device_table(self) -> str:
        """Facts the device reports, with the datasheet's where it states the same thing."""
        d, m, s = self.device, self.run.manifest, self.sheet
        rows = [
            ("Device", d.name, s.marketing_name if s else None), ("Compute capability", d.compute_capability, None),
            ("SMs", d.sm_count, s.sm_count if s else None),
            ("Registers per SM", d.regs_per_sm, None), ("Shared memory per SM", fmt.bytes_(d.smem_per_sm_bytes), None),
            ("Shared memory per block (opt-in)", fmt.bytes_(d.smem_per_block_optin_bytes), None),
            ("Max warps per SM", d.max_warps_per_sm, None), ("Max blocks per SM", d.max_blocks_per_sm, None),
            ("L2 cache", fmt.bytes_(d.l2_bytes), fmt.bytes_(s.l2_bytes) if s else None),
            ("Memory", fmt.bytes_(d.memory_bytes), f"{fmt.bytes_(s.memory_bytes, binary=False)} {s.memory_type}" if s else None),
            ("Max SM / memory clock", f"{fmt.num(d.sm_clock_max_mhz, 4)} / {fmt.num(d.mem_clock_max_mhz, 4)} MHz", None),
            ("Driver / CUDA", f"{d.driver_version or 'n/a'} / {d.cuda_version or 'n/a'}", None),
        ]
        rows += [(k, v or "not installed", None) for k, v in m.software.items()]
        df = pd.DataFrame(rows, columns=["fact", "value", "sheet"])
        show = lambda v: "" if v is None else v  # noqa: E731
        return table_html(df, {"fact": "", "value": "Reported by this device", "sheet": "Datasheet"},
                          {"value": show, "sheet": show})

    def clocks_table(self) -> str:
        df = self.run.frame("env", "clocks")
        if df.empty:
            return "_No clock readings were recorded in this run._"
        return table_html(df, {"moment": "When", "sm_clock_mhz": "SM clock (MHz)", "mem_clock_mhz": "Memory clock (MHz)",
                               "temperature_c": "Temperature (°C)", "power_w": "Power (W)"},
                          {k: (lambda v: fmt.num(v, 4)) for k in ("sm_clock_mhz", "mem_clock_mhz", "temperature_c", "power_w")})

    def datasheet_note(self) -> str:
        if self.sheet is None:
            return (f'!!! note "No datasheet figures"\n    {escape.text(self.run.device_name)} is not in the datasheet table '
                    "(`collect/datasheets.py`), so only measured ceilings are shown. Add a row with its source to compare.\n")
        return (f"Datasheet figures are for the **{escape.text(self.sheet.marketing_name)}**; "
                f"source: {escape.text(self.sheet.source)}.")

    def _pairs(self):
        """(label, datasheet, measured, unit) for bandwidth and each compute ceiling."""
        s = self.sheet
        out = [("DRAM bandwidth", s.memory_bandwidth_bytes_per_s if s else None, self.measured_rate("copy_bandwidth"), "B/s")]
        for mname, sfield, label in COMPUTE:
            out.append((label, getattr(s, sfield) if s else None, self.measured_rate(mname), "FLOP/s"))
        return out

    def ceilings_table(self) -> str:
        rows = []
        for label, sheet, meas, unit in self._pairs():
            frac = meas / sheet if meas and sheet else None
            rows.append({"ceiling": label, "sheet": fmt.rate(sheet, unit), "measured": fmt.rate(meas, unit),
                         "frac": fmt.pct(100 * frac) if frac else "n/a"})
        df = pd.DataFrame(rows)
        return table_html(df, {"ceiling": "Ceiling", "sheet": "Datasheet", "measured": "Measured (median)",
                               "frac": "Measured / datasheet"})

    def ceilings_figure(self) -> str:
        pairs = self._pairs()
        fig = go.Figure()
        labels = [p[0] for p in pairs]
        # Bars in each ceiling's natural unit (TB/s or TFLOP/s) so both fit one readable axis.
        sheet_vals = [p[1] / 1e12 if p[1] else None for p in pairs]
        meas_vals = [p[2] / 1e12 if p[2] else None for p in pairs]
        units = ["TB/s" if p[3] == "B/s" else "TFLOP/s" for p in pairs]
        fig.add_bar(name="Datasheet", x=labels, y=sheet_vals, marker_color=PALETTE[7],
                    customdata=units, hovertemplate="%{x}: %{y:.3g} %{customdata}<extra>datasheet</extra>")
        fig.add_bar(name="Measured", x=labels, y=meas_vals, marker_color=PALETTE[0],
                    customdata=units, hovertemplate="%{x}: %{y:.3g} %{customdata}<extra>measured</extra>")
        fig.update_layout(barmode="group", yaxis_title="TB/s (bandwidth) or TFLOP/s (compute)", yaxis_type="log")
        copy = self.measured("copy_bandwidth")
        cond = copy.problem if copy else ""
        return self.figure("ceilings", fig, f"Datasheet vs measured ceilings; bandwidth from a {cond} counting bytes "
                           "read plus written, compute from large matmuls on random data (medians).")

    def ridge(self, which: str, compute: str = "fp16") -> float | None:
        """FLOP per byte where the bandwidth roof meets the compute roof."""
        mname = f"matmul_{compute}"
        sfield = dict((m, s) for m, s, _ in COMPUTE)[mname]
        if which == "datasheet":
            s = self.sheet
            if s is None or getattr(s, sfield) is None:
                return None
            return getattr(s, sfield) / s.memory_bandwidth_bytes_per_s
        flops, bw = self.measured_rate(mname), self.measured_rate("copy_bandwidth")
        return flops / bw if flops and bw else None

    def ridge_table(self) -> str:
        rows = []
        for compute in ("fp16", "bf16", "fp32"):
            rows.append({"compute": compute, "sheet": self.ridge("datasheet", compute), "meas": self.ridge("measured", compute)})
        df = pd.DataFrame(rows)
        f = lambda v: fmt.num(v)  # noqa: E731
        return table_html(df, {"compute": "Compute ceiling", "sheet": "Datasheet ridge (FLOP/byte)",
                               "meas": "Measured ridge (FLOP/byte)"}, {"sheet": f, "meas": f})

    def bandwidth_sentence(self) -> str:
        meas, s = self.measured_rate("copy_bandwidth"), self.sheet
        if meas is None:
            return "The copy bandwidth could not be measured in this run."
        if s is None:
            return f"A large device-to-device copy sustained **{fmt.bandwidth(meas)}** (bytes read plus written)."
        frac = meas / s.memory_bandwidth_bytes_per_s
        return (f"A large device-to-device copy sustained **{fmt.bandwidth(meas)}** (bytes read plus written), "
                f"{fmt.pct(100 * frac)} of the datasheet's {fmt.bandwidth(s.memory_bandwidth_bytes_per_s)}. "
                "Kernels in this report are judged against the measured figure, because that is what the memory system "
                "actually delivers to a streaming kernel.")

    def ridge_sentence(self) -> str:
        r_meas, r_sheet = self.ridge("measured"), self.ridge("datasheet")
        if r_meas is None:
            return "Without a measured copy bandwidth and fp16 matmul rate, no measured ridge point can be drawn."
        text = (f"With the measured ceilings, an fp16 kernel needs at least **{fmt.num(r_meas)} FLOP per byte** of DRAM "
                "traffic before compute, rather than memory, can be its limit")
        if r_sheet is not None:
            text += f" (the datasheet figures put the ridge at {fmt.num(r_sheet)} FLOP/byte)"
        return text + ". Every roofline in this report draws both."
