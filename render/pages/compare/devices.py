"""Device by device: the measured ceilings, the attention forward pass and the bytes one call moves with the
occupancy it reaches, at the published study's shape."""
from __future__ import annotations

import pandas as pd
from plotly.subplots import make_subplots

from ... import escape, model
from ...axes import byte_hover, byte_ticks
from ...figures import PALETTE
from ...vocab import STUDY, impl_label
from .charts import Charts
from .common import Device, known

# Bench and profile charts compare devices at the published study's shape (vocab.STUDY), and only at it.
PROFILE_N = 2048
BENCH_PANELS = [("naive", "naive PyTorch"), ("triton", "Triton (ours)"), ("sdpa-fastest", "fastest other implementation")]


class Devices(Charts):
    """The ceilings, forward-pass and profile charts."""

    def ceilings_figure(self) -> str:
        """Measured copy bandwidth and fp16 matmul against the datasheet, per device."""
        devs = list(self.devices)
        ticks = self._device_ticks(devs)
        fig = make_subplots(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.04,
                            subplot_titles=["DRAM bandwidth (TB/s)", "fp16 tensor (TFLOP/s)"])
        for col, (mname, sheet_field) in enumerate((("copy_bandwidth", "memory_bandwidth_bytes_per_s"),
                                                    ("matmul_fp16", "fp16_tensor_flops_per_s")), start=1):
            meas, sheet = [], []
            for d in devs:
                m = d.run.manifest
                meas.append(next((c.per_s_median / 1e12 for c in m.measured_ceilings
                                  if c.name == mname and c.status == "ok" and c.per_s_median), None))
                v = getattr(m.datasheet, sheet_field, None) if m.datasheet else None
                sheet.append(v / 1e12 if v else None)
            unit = "TB/s" if col == 1 else "TFLOP/s"
            fig.add_bar(y=ticks, x=meas, orientation="h", name="measured", marker_color=PALETTE[0], showlegend=col == 1,
                        legendgroup="measured", hovertemplate=f"%{{y}}<br>measured %{{x:.3g}} {unit}<extra></extra>",
                        row=1, col=col)
            fig.add_bar(y=ticks, x=sheet, orientation="h", name="datasheet", marker_color=PALETTE[7],
                        marker_pattern_shape="/", showlegend=col == 1, legendgroup="sheet",
                        hovertemplate=f"%{{y}}<br>datasheet %{{x:.3g}} {unit}<extra></extra>", row=1, col=col)
        return self._bars("ceilings", fig, "Measured ceilings (a large device-to-device copy counting bytes read plus "
                                           "written; a large fp16 matmul) beside the datasheet's (hatched), per device. "
                                           "Published references carry only the datasheet: the write-up measured no "
                                           "ceilings.", len(devs), 2)

    def bench_figure(self, metric: str = "tflops") -> str:
        """TFLOP/s, latency or peak memory against N per implementation, one line per device."""
        spec = {
            "tflops": ("tflops", "TFLOP/s", "%{y:.3g} TFLOP/s", 1.0,
                       "Throughput against sequence length: 4·B·H·N²·d FLOP per call over the median latency"),
            "latency": ("latency_ms_median", "latency (ms)", "%{y:.3g} ms (median)", 1.0,
                        "Median forward latency against sequence length"),
            "memory": ("peak_mem_bytes", "peak memory (MiB)", "%{y:.4g} MiB", 1 / 2**20,
                       "Peak memory of one forward call against sequence length; measured runs count it above the "
                       "inputs, and the published figures may include them (see the note above)"),
        }
        if metric not in spec:
            raise ValueError(f"metric must be one of {', '.join(spec)}, got {metric!r}")
        column, ytitle, fmt_hover, scale, what = spec[metric]

        def series(d: Device, key: str):
            g = self._bench_series(d, key)
            if g.empty or key != "sdpa-fastest":
                return g
            # The quickest other implementation, by the page's names, whichever it is (FlashAttention-4 included);
            # PyTorch's own choice with the backend it ran.
            return g.assign(hover=[f" ({impl_label(i)}" + (f": {b}" if i == "sdpa" and isinstance(b, str) else "") + ")"
                                   for i, b in zip(g["impl"], g["backend_used"])])

        s = STUDY
        return self._line_figure(
            f"bench-{metric}", BENCH_PANELS, series, "seq_len", column, "seq_len N", ytitle,
            f"N=%{{x}}<br>{fmt_hover}", f"{what}, log-log, at the study shape B={s['batch']}, H={s['heads']}, "
                                       f"d={s['head_dim']}, fp16, non-causal; the third panel takes the quickest other "
                                       "implementation at each N (hover to see which).", scale=scale)

    def _profile_rows(self, dev: Device) -> pd.DataFrame:
        return self._memo((id(dev.run), "profile-rows"), lambda: self._profile_study(dev))

    def _profile_study(self, dev: Device) -> pd.DataFrame:
        df = self._frames(dev, "profile", "impls")
        if df.empty:
            return df
        m = (df["status"] == "ok") & (df["group"] == "main") & (df["seq_len"] == PROFILE_N)
        for k, v in STUDY.items():
            m &= df[k] == v
        return df[m]

    @staticmethod
    def _dram(row) -> float | None:
        """A call's DRAM bytes on the basis the Profiling page and Home use (model.call_dram_bytes), so that a
        device's bar is the figure its own pages print; a published total as published."""
        return model.call_dram_bytes(row)

    def _triton_kernel(self, dev: Device):
        rows = self._profile_rows(dev)
        k = self._frames(dev, "profile", "kernels")
        tri = rows[rows["impl"] == "triton"] if not rows.empty else rows
        if tri.empty or k.empty:
            return None
        k = k[k["case_id"].isin(set(tri["case_id"]))]
        if k.empty:
            return None
        return k.sort_values("duration_ms", ascending=False, na_position="last").iloc[0]

    def profile_figure(self) -> str:
        """DRAM bytes of one call (naive, Triton) and the Triton kernel's occupancy, per device."""
        devs = [d for d in self.devices if not self._profile_rows(d).empty]
        if not devs:
            return "_No device has a profile at the study shape._\n"
        ticks = self._device_ticks(devs)
        fig = make_subplots(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.04,
                            subplot_titles=["DRAM bytes per call", "Triton kernel occupancy (%)"])
        for impl, color in (("naive", PALETTE[7]), ("triton", PALETTE[3])):
            vals = []
            for d in devs:
                g = self._profile_rows(d)
                g = g[g["impl"] == impl]
                vals.append(self._dram(g.iloc[0]) if not g.empty else None)
            fig.add_bar(y=ticks, x=vals, orientation="h", name=f"{impl} DRAM bytes", marker_color=color,
                        marker_pattern_shape=self._hatch(devs),
                        customdata=byte_hover(vals),
                        hovertemplate=f"%{{y}}<br>{impl}: %{{customdata}}<extra></extra>", row=1, col=1)
        for field, label, color in (("theoretical_occupancy_pct", "theoretical", PALETTE[5]),
                                    ("achieved_occupancy_pct", "achieved", PALETTE[0])):
            vals = []
            for d in devs:
                k = self._triton_kernel(d)
                vals.append(float(k[field]) if k is not None and known(k[field]) else None)
            fig.add_bar(y=ticks, x=vals, orientation="h", name=f"occupancy, {label}", marker_color=color,
                        marker_pattern_shape=self._hatch(devs),
                        hovertemplate=f"%{{y}}<br>{label} occupancy %{{x:.3g}}%<extra></extra>", row=1, col=2)
        dram = [v for d in devs for v in [self._dram(r) for _, r in self._profile_rows(d).iterrows()] if v]
        fig.update_xaxes(type="log", title_text="bytes", row=1, col=1, **byte_ticks(dram, max_ticks=5))
        fig.update_xaxes(title_text="% of warp slots", row=1, col=2)
        fig.update_xaxes(range=[0, 100], row=1, col=2)
        s = STUDY
        text = self._bars("profile", fig, "Nsight Compute's DRAM bytes (read plus written, the writes at least the call's output, as "
                                          "on the Profiling page) for one call of naive "
                                          "PyTorch and of the Triton kernel, and the Triton kernel's theoretical and "
                                          f"achieved occupancy, at B={s['batch']}, H={s['heads']}, N={PROFILE_N}, "
                                          f"d={s['head_dim']}, fp16, non-causal; published figures are cross-hatched.",
                          len(devs), 2)
        gaps = [d.label for d in devs if all(self._dram(r) is None for _, r in self._profile_rows(d).iterrows())]
        if gaps:
            text += (f"\n_No DRAM byte counts in this data for: {escape.text('; '.join(gaps))}. For published figures, the "
                     "current schema cannot yet hold a total without its read/write split (see "
                     "`data/reference/*/README.md`)._\n")
        return text
