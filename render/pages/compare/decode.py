"""Decode, device by device: step time against context per variant, and the int8 cache against the bf16 one."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from ... import escape, fmt
from ...decode_memory import memory_is_own, own_decode_rows
from ...figures import PALETTE
from ...vocab import DECODE_VARIANTS, HOST_BOUND, decode_float, decode_words, join, plural
from .charts import Charts
from .common import Device

INT8_VARIANTS = ("int8-dequant", "int8-graph", "int8-kernel")


def _runs(ids: list[str]) -> str:
    """'3 runs, a, b and c', or, past three, '26 runs, a to z' (in the order the runs were collected)."""
    named = join(ids) if len(ids) <= 3 else f"{ids[0]} to {ids[-1]}"
    return f"{plural(len(ids), 'run')}, {named}"


class Decode(Charts):
    """The decode step-time chart and the int8 chart."""

    def _decode_rows(self, dev: Device) -> pd.DataFrame:
        return self._memo((id(dev.run), "decode-rows"), lambda: self._model_rows(dev))

    def _model_rows(self, dev: Device) -> pd.DataFrame:
        """ok decode rows of the one model every device has run: gpt2 where present, its memory figures
        its own loops' where the run says what the other models held (render/decode_memory.py)."""
        df, _ = own_decode_rows(dev.run)
        if df.empty:
            return df
        df = df[(df["status"] == "ok")]
        models = list(dict.fromkeys(df["model"]))
        if not models:
            return df
        model = "gpt2" if "gpt2" in models else models[0]
        return df[df["model"] == model]

    def _sweep_batch(self, df: pd.DataFrame) -> int | None:
        f = df[df["step_ms_median"].notna()]
        if f.empty:
            return None
        counts = f.groupby("batch")["context"].nunique().sort_values(kind="stable", ascending=False)
        return int(counts.index[0])

    def decode_figure(self) -> str:
        present = set()
        for d in self.devices:
            df = self._decode_rows(d)
            if not df.empty:
                present |= set(df[df["step_ms_median"].notna()]["variant"])
        # The cache's float type as each run's decode.json names it (fp16 on a T4), once per type compared.
        f = " or ".join(dict.fromkeys(decode_float(d.run.phase("decode").dtype) for d in self.devices
                                   if not self._decode_rows(d).empty))
        panels = [(v, decode_words(v, "panel", f)) for v in DECODE_VARIANTS
                  if v in present and decode_words(v, "panel") is not None]
        if not panels:
            return "_No device has decode step times._\n"

        def sweep(d: Device) -> dict:
            df = self._decode_rows(d)
            if df.empty:
                return {}
            b = self._sweep_batch(df)
            g = df[(df["batch"] == b) & df["step_ms_median"].notna()].sort_values("context")
            g = g.assign(hover=[f"<br>{m}, batch {b}" for m in g["model"]])
            return {v: rows.drop_duplicates("context") for v, rows in g.groupby("variant")}

        def series(d: Device, variant: str):
            return self._memo((id(d.run), "decode-sweep"), lambda: sweep(d)).get(variant)

        return self._line_figure(
            "decode-step", panels, series, "context", "step_ms_median", "context (prompt tokens)", "step time (ms)",
            "context %{x}<br>%{y:.3g} ms per step", "Median time of one decode step against context, log-log, per "
            "decode variant, at each device's sweep batch (hover for the model and batch)."
            + self._panel_caveats(panels), xlog=True)

    def _panel_caveats(self, panels) -> str:
        """What keeps a panel from comparing one kernel on two GPUs: devices whose rows of the variant ran different
        steps (the persistent variant runs the warp-specialized step where it can), and panels whose steps kept the
        GPU busy for less than 1/HOST_BOUND of the step on some device, which time that host's CPU as much as the GPU."""
        steps, hosted = [], []
        for v, title in panels:
            ran = {}
            for d in self.devices:
                df = self._decode_rows(d)
                df = df[(df["variant"] == v) & df["step_ms_median"].notna()] if not df.empty else df
                if df.empty:
                    continue
                impls = df["step_impl"].dropna() if "step_impl" in df else []
                if len(impls):
                    ran.setdefault(str(impls.mode().iloc[0]), []).append(d.run.id)
                busy = (df["kernel_ms_per_step"] / df["step_ms_median"]).dropna() if "kernel_ms_per_step" in df else []
                if len(busy) and busy.median() < 1 / HOST_BOUND and title not in hosted:
                    hosted.append(title)
            if len(ran) > 1:
                steps.append(f"the {title} panel's runs ran different steps ("
                             + "; ".join(f"{k} in {_runs(ds)}" for k, ds in ran.items())  # raw: _render escapes
                             + "), so its lines differ by kernel as well as by device")
        text = ""
        if steps:
            text += " " + "; ".join(steps)[0].upper() + "; ".join(steps)[1:] + "."
        if hosted:
            text += (f" In the {join(hosted)} panel{'s' if len(hosted) > 1 else ''} the GPU was busy for less than "
                     f"{fmt.pct(100 / HOST_BOUND, 2)} of a step on some device: those lines time the host's CPU as much "
                     "as the GPU, and two runs on one GPU can differ there by the host alone.")
        return text

    def _int8(self, dev: Device) -> dict | None:
        """At the shape with the largest bf16 cache where an int8 variant ran too: sizes and peaks."""
        df = self._decode_rows(dev)
        if df.empty:
            return None
        df = df[df["kv_cache_bytes"].notna() & df["peak_mem_bytes"].notna()]
        best = None
        for (b, c), g in df.groupby(["batch", "context"]):
            e = g[g["variant"] == "eager"]
            q = g[g["variant"].isin(INT8_VARIANTS)]
            if e.empty or q.empty:
                continue
            e = e.iloc[0]
            if best is None or e["kv_cache_bytes"] > best["eager"]["kv_cache_bytes"]:
                best = {"batch": int(b), "context": int(c), "eager": e,
                        **{v: q[q["variant"] == v].iloc[0] for v in INT8_VARIANTS if v in set(q["variant"])}}
        return best

    def int8_figure(self) -> str:
        """The int8 cache's size and peak memory as a share of the bf16 cache's, per device."""
        data = [(d, self._int8(d)) for d in self.devices]
        data = [(d, x) for d, x in data if x is not None]
        if not data:
            return "_No device ran a bf16 and an int8 cache at one shape._\n"
        ticks = self._device_ticks([d for d, _ in data])
        fig = go.Figure()
        series = [("cache", None, "KV cache size", PALETTE[0]),
                  ("peak", "int8-dequant", "peak memory, int8 dequantized each step", PALETTE[3]),
                  ("peak", "int8-kernel", "peak memory, int8 read by a kernel", PALETTE[1]),
                  ("peak", "int8-graph", "peak memory, int8 read by a kernel in a CUDA graph", PALETTE[2])]
        for kind, variant, name, color in series:
            vals, hover = [], []
            for d, x in data:
                e = x["eager"]
                if kind == "cache":
                    q = next((x[v] for v in INT8_VARIANTS if v in x), None)
                    num, den = (q["kv_cache_bytes"], e["kv_cache_bytes"]) if q is not None else (None, None)
                else:
                    q = x.get(variant)
                    num, den = (q["peak_mem_bytes"], e["peak_mem_bytes"]) if q is not None else (None, None)
                vals.append(100 * num / den if num is not None and den else None)
                hover.append(f"batch {x['batch']}, context {x['context']}: "
                             f"{fmt.bytes_(num)} against bf16's {fmt.bytes_(den)}" if num is not None else "")
            if all(v is None for v in vals):
                continue
            fig.add_bar(y=ticks, x=vals, orientation="h", name=name, marker_color=color, customdata=[escape.plot(h) for h in hover],
                        marker_pattern_shape=self._hatch([d for d, _ in data]),
                        hovertemplate=f"%{{y}}<br>{name}: %{{x:.3g}}% of bf16<br>%{{customdata}}<extra></extra>")
        fig.add_vline(x=100, line_dash="dash", line_color=PALETTE[7], line_width=1)
        fig.update_layout(xaxis_title="% of the bf16 cache's figure (100 = the same)")
        return self._bars("int8", fig, "The int8 KV cache against the bf16 cache at each device's largest shape where "
                                       "both ran: cache size, and peak memory over the timed steps for each int8 "
                                       "variant, as a percentage of the bf16 figure (hover for the bytes); beyond the "
                                       "dashed line the int8 variant needs more than bf16; published figures are "
                                       f"cross-hatched.{self._memory_basis([d for d, _ in data])}", len(data), 3)

    def _memory_basis(self, devices: list[Device]) -> str:
        """A caption's note on the runs whose peaks also hold another model's weights."""
        mixed = []
        for d in devices:
            decode = d.run.phase("decode")
            if decode is not None and not memory_is_own(decode.models):
                mixed.append(d.run.id)
        if not mixed:
            return ""
        runs = join(mixed) if len(mixed) <= 3 else f"{len(mixed)} runs ({mixed[0]} to {mixed[-1]})"
        return (f" The peaks of {runs} also hold the other models their decode phase kept loaded (those runs do not "
                "say how much), which brings their int8 peaks closer to 100%.")
