"""Byte arithmetic: the traffic model of attention evaluated for this run's GPU, beside what was measured."""
from __future__ import annotations

import math
from functools import cached_property

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from .. import escape, fmt, model
from ..axes import log_ticks
from ..bench_data import BenchData
from ..ceilings import Ceilings
from ..figures import PALETTE
from ..tables import table_html
from ..vocab import (CLOCK_GAP, MATERIALISING, clock_gap, dtype_short, facet_label, impl_color, impl_label, join, plural,
                     path_label, shape_label)
from .base import Page

E = 2  # bytes per element: every dtype the bench phase sweeps (fp16, bf16) is two bytes wide
# The naive code as written hands its softmax output to the next kernel in fp32 (model.naive_as_written_bytes):
# the widest tensor one of its kernels writes and the next reads back, so it decides where those passes
# can still be served from L2.
E_P_FP32 = 4
# measured / predicted causal speedup within this band either way "matches" the block count.
MATCH = 1.05
# Skipping the tiles above the diagonal at most halves the work: no mask can make a call more than this much
# faster, whatever T is.
MASK_MAX = 2.0


def _matmul_ceiling(dtype: str) -> str:
    return {"bfloat16": "bf16"}.get(dtype, "fp16")


class ByteArithmeticPage(Page):
    slug = "bytes"
    phase = "bench"

    @cached_property
    def bench(self) -> BenchData:
        return BenchData(self.run)

    @cached_property
    def ceilings(self) -> Ceilings:
        return Ceilings(self.run.manifest)

    @property
    def available(self) -> bool:
        return self.run.has("bench") and self.run.manifest.device is not None

    @property
    def device(self):
        return self.run.manifest.device

    @property
    def l2_bytes(self) -> int | None:
        sheet = self.run.manifest.datasheet
        return self.device.l2_bytes or (sheet.l2_bytes if sheet else None)

    def shapes(self) -> list[tuple]:
        return self.bench.shapes()

    def seq_lens(self, shape) -> list[int]:
        return self.bench.seq_lens(shape)

    def bandwidth(self) -> float | None:
        return self.ceilings.measured_rate("copy_bandwidth")

    def ridge(self, dtype: str = "float16") -> float | None:
        return self.ceilings.ridge(_matmul_ceiling(dtype))

    # --- the device ------------------------------------------------------------------------

    def device_sentence(self) -> str:
        d = self.device
        bw, peak = self.bandwidth(), self.ceilings.measured_rate("matmul_fp16")
        text = (f"Evaluated for **{escape.text(d.name)}**, with an L2 cache of {fmt.bytes_(self.l2_bytes)} and "
                f"{fmt.bytes_(d.memory_bytes)} of memory. Every element is two bytes (fp16 and bf16 alike).")
        if bw and peak:
            text += (f" The measured copy bandwidth of {fmt.bandwidth(bw)} and fp16 matmul rate of {fmt.flops(peak)} "
                     f"put the measured fp16 ridge point at **{fmt.num(self.ridge())} FLOP/byte**")
            r_sheet = self.ceilings.ridge("fp16", which="datasheet")
            text += f" ({fmt.num(r_sheet)} from the datasheet)." if r_sheet is not None else "."
        else:
            text += " Without a measured copy bandwidth and fp16 matmul rate, no measured ridge point is known."
        return text

    # --- what this run shows ---------------------------------------------------------------

    def findings_first(self) -> str:
        """Two to four sentences computed from the model and the measurements."""
        out = []
        shape = self.shapes()[0]
        d, ns = shape[2], self.seq_lens(shape)
        out.append(f"At {shape_label(shape)}, the model has naive attention moving {fmt.ratio(model.traffic_ratio(ns[0], d))} "
                   f"the bytes of a fused kernel at N={ns[0]} and {fmt.ratio(model.traffic_ratio(ns[-1], d))} at "
                   f"N={ns[-1]}, because only the naive path stores the N × N score matrix.")
        ridge = self.ridge()
        if ridge is not None:
            dims = sorted({s[2] for s in self.shapes()})
            never = [dd for dd in dims if model.naive_crosses_ridge_n(ridge, dd, E) is None]
            if len(never) == len(dims):
                out.append(f"On this GPU naive attention is memory-bound at every length: its intensity never passes "
                           f"d/2 FLOP per byte, below the measured ridge of {fmt.num(ridge)}.")
            else:
                out.append(f"On this GPU the ridge is low enough ({fmt.num(ridge)} FLOP per byte) that naive attention "
                           f"turns compute-bound at long sequences for d={join(sorted(set(dims) - set(never)))}.")
        c = self.causal
        c = c[c["verdict"].notna()] if not c.empty else c
        if not c.empty:
            # Only rows where the masked and unmasked calls ran one kernel, at comparable clocks, put the count to
            # the test.
            tested = c[~c["verdict"].isin([DIFFERENT_KERNELS, CLOCKS_APART])]
            why = join([w for w, v in (("ran different kernels", DIFFERENT_KERNELS),
                                       ("ran at SM clocks too far apart", CLOCKS_APART)) if (c["verdict"] == v).any()],
                       "or")
            held = int((tested["verdict"] == "as predicted").sum())
            short = int((tested["verdict"] == "short of the block count").sum())
            spread = int((tested["verdict"] == "within the timing spread").sum())
            against = int(tested["verdict"].isin(["slower with the mask", "beats the block count"]).sum())
            if tested.empty:
                text = (f"Whether counting the key tiles a causal kernel skips explains Triton's causal speedup is not "
                        f"tested here: in all {len(c)} rows the masked and unmasked calls {why}")
            else:
                # The verb is the outcome: the count cannot be said to predict what it missed in every row.
                verb = ("predicts" if held == len(tested) else "overestimates" if short == len(tested) else
                        "was put to the test against")
                where = ("the one row" if len(tested) == 1 else "both rows" if len(tested) == 2 else
                         f"all {len(tested)} rows")
                text = (f"Counting the key tiles a causal kernel skips {verb} Triton's causal speedup in {where} where "
                        f"the masked and unmasked calls ran one kernel{self._tested_rows(tested)}")
                if verb == "overestimates":
                    text += (f": {_span(tested['measured'])} measured against {_span(tested['predicted'])} "
                             "predicted")
                elif verb != "predicts":
                    parts = [f"{held} as predicted"] + ([f"{short} short of it"] if short else []) + \
                        ([f"{spread} within the timing spread"] if spread else []) + \
                        ([f"{against} against it (named in the causal section below)"] if against else [])
                    text += f": {join(parts)}"
                if len(tested) < len(c):
                    text += f"; in the other {len(c) - len(tested)} they {why}, so the count does not apply"
            out.append(text + ".")
        return " ".join(out)

    @staticmethod
    def _tested_rows(tested: pd.DataFrame) -> str:
        """Names the rows that tested the count where they are one shape and length: two dtypes of one shape
        are one data point seen twice, not two independent checks."""
        cases = set(zip(tested["shape"], tested["n"]))
        if len(cases) != 1:
            return ""
        shape, n = next(iter(cases))
        dtypes = join([dtype_short(d) for d in dict.fromkeys(tested["dtype"])])
        lead = f", one shape in {_COUNT_WORDS.get(len(tested), len(tested))} dtypes" if len(tested) > 1 else ""
        return f"{lead} ({shape_label(shape)}, N={n}, {dtypes})"

    # --- traffic ---------------------------------------------------------------------------

    def traffic_table(self, shape) -> str:
        b, h, d = shape
        heads = b * h
        bw = self.bandwidth()
        naive_ms = self.bench.latency(shape, "float16", False, "naive")
        rows = []
        for n in self.seq_lens(shape):
            naive_all = model.naive_traffic_bytes(n, d, E, heads)
            rows.append({
                "n": n, "s": fmt.bytes_(model.s_matrix_bytes(n, E)), "ends": fmt.bytes_(model.endpoint_bytes(n, d, E)),
                "naive": fmt.bytes_(model.naive_traffic_bytes(n, d, E)), "fused": fmt.bytes_(model.fused_traffic_bytes(n, d, E)),
                "ratio": fmt.ratio(model.traffic_ratio(n, d)), "naive_all": fmt.bytes_(naive_all),
                "fused_all": fmt.bytes_(model.fused_traffic_bytes(n, d, E, heads)),
                "floor": fmt.ms(naive_all / bw * 1e3) if bw else "n/a",
                "meas": fmt.ms(naive_ms[n]) if n in naive_ms.index else "did not run",
            })
        return table_html(pd.DataFrame(rows), {
            "n": "N", "s": "S, one head", "ends": "Q, K, V, O, one head", "naive": "naive traffic, one head",
            "fused": "fused traffic, one head", "ratio": "naive / fused = 1 + N/d",
            "naive_all": f"naive, all {heads} heads", "fused_all": f"fused, all {heads} heads",
            "floor": "naive traffic at measured bandwidth", "meas": "naive measured (fp16, non-causal)"},
            caption=f"{shape_label(shape)}, two-byte elements.")

    def traffic_finding(self, shape) -> str:
        """Measured naive latency against the time its modelled traffic takes at the measured bandwidth."""
        b, h, d = shape
        bw = self.bandwidth()
        naive_ms = self.bench.latency(shape, "float16", False, "naive")
        if bw is None or naive_ms.empty:
            return ("Without a measured copy bandwidth and an fp16 non-causal naive run, the traffic model cannot be "
                    "set against a latency here.")
        ratios = {n: naive_ms[n] / (model.naive_traffic_bytes(n, d, E, b * h) / bw * 1e3) for n in naive_ms.index}
        lo, hi = min(ratios.values()), max(ratios.values())
        span = f"about {fmt.ratio(lo)}" if hi / lo < 1.05 else f"{fmt.ratio(lo)} to {fmt.ratio(hi)}"
        text = (f"For {shape_label(shape)} (fp16, non-causal), naive PyTorch took {span} the time its modelled "
                "traffic needs at the measured bandwidth. ")
        written = {n: naive_ms[n] / (model.naive_as_written_bytes(n, d, E, b * h) / bw * 1e3) for n in naive_ms.index}
        extra = model.naive_as_written_bytes(max(ratios), d, E, b * h) / model.naive_traffic_bytes(max(ratios), d, E, b * h)
        wlo, whi = min(written.values()), max(written.values())
        wspan = f"about {fmt.ratio(wlo)}" if whi / wlo < 1.05 else f"{fmt.ratio(wlo)} to {fmt.ratio(whi)}"
        text += ("The code as written moves more than the model: it scales the scores in a kernel of its own (one more "
                 "read and write of S), and its softmax writes P in fp32, four bytes an element, which a cast then "
                 f"reads back. That is {fmt.ratio(extra)} the model's bytes at N={max(ratios)}; against those bytes "
                 f"it took {wspan} the time. ")
        if wlo >= 1:
            text += "The rest is time in which the GPU is not streaming at full rate."
        else:
            text += ("Where it took less, part of that traffic never reached DRAM: score matrices small enough to stay "
                     "in the L2 cache between the passes.")
        return text

    # --- cache and memory limits -----------------------------------------------------------

    @cached_property
    def limits(self) -> list[dict]:
        """Per shape: where S stops fitting in L2 and where naive stops fitting in memory, predicted and seen."""
        out = []
        rows = self.bench.rows
        mem, l2 = self.device.memory_bytes, self.l2_bytes
        for shape in self.shapes():
            heads = shape[0] * shape[1]
            naive = rows[(rows["shape"] == shape) & (rows["impl"] == "naive")]
            oom = sorted(set(naive[naive["status"] == "oom"]["seq_len"]))
            ok = naive[(naive["status"] == "ok") & naive["peak_mem_bytes"].notna()]
            live = None
            if not ok.empty:
                top = ok.loc[ok["seq_len"].idxmax()]
                live = float(top["peak_mem_bytes"]) / model.s_matrix_bytes(int(top["seq_len"]), E, heads)
            out.append({
                "shape": shape, "heads": heads,
                "l2_one": model.max_n_s_fits(l2, E) if l2 else None,
                "l2_all": model.max_n_s_fits(l2, E, heads) if l2 else None,
                "l2_p32": model.max_n_s_fits(l2, E_P_FP32, heads) if l2 else None,
                "oom_model": model.max_n_before_oom(mem, heads, E) if mem else None,
                "live": live,
                "oom_live": model.max_n_before_oom(mem, heads, E, live) if mem and live else None,
                "first_oom": oom[0] if oom else None,
                "ns": self.seq_lens(shape),
            })
        return out

    def limits_table(self) -> str:
        rows = [{**r, "shape": shape_label(r["shape"]),
                 "seen": f"N={r['first_oom']:,}" if r["first_oom"] else f"none up to N={r['ns'][-1]:,}"}
                for r in self.limits]
        n_or = lambda v: "n/a" if v is None or v != v else f"{int(v):,}"  # noqa: E731
        return table_html(pd.DataFrame(rows), {
            "shape": "Shape", "heads": "B·H heads", "l2_one": "S of one head fits L2 up to N",
            "l2_all": "S of all heads fit L2 up to N", "l2_p32": "fp32 P of all heads fits L2 up to N",
            "oom_model": "naive fits memory up to N (two live S tensors)",
            "live": "naive peak / one S tensor (measured)", "oom_live": "naive fits up to N (measured tensors)",
            "seen": "naive first out of memory"},
            {"l2_one": n_or, "l2_all": n_or, "l2_p32": n_or, "oom_model": n_or, "oom_live": n_or,
             "live": lambda v: "n/a" if v is None or v != v else fmt.num(v)})

    def limits_finding(self) -> str:
        parts = []
        for r in self.limits:
            s, ns = shape_label(r["shape"]), r["ns"]
            if r["l2_all"] is not None:
                # The passes stay in L2 only while every tensor handed between the naive code's kernels fits,
                # the fp32 P included, so the narrower two-byte S alone would put the limit too late.
                fit = min(r["l2_all"], r["l2_p32"])
                if fit < ns[0]:
                    where = "at every length swept the naive path's passes over S and P go to DRAM"
                elif fit >= ns[-1]:
                    where = "at every length swept the naive path's passes over S and P could stay in the cache"
                else:
                    where = (f"up to N={max(n for n in ns if n <= fit):,} the naive path's passes over S and P could "
                             f"stay in the cache, and from N={min(n for n in ns if n > fit):,} on they go to DRAM")
                parts.append(f"For {s}, the {r['heads']} two-byte score matrices share the L2 only up to "
                             f"N={r['l2_all']:,} (one head alone: N={r['l2_one']:,}), and the fp32 P the code as "
                             f"written also hands between kernels fits only up to N={r['l2_p32']:,}, so {where}.")
            if r["oom_model"] is None:
                continue
            first = r["first_oom"]
            if first is None:
                verdict = (f"the sweep stopped at N={ns[-1]:,}, short of it" if ns[-1] <= r["oom_model"] else
                           f"yet naive ran at N={ns[-1]:,}, so it held fewer than two score tensors at once")
                parts.append(f"The model with two live score tensors lets naive run up to N={r['oom_model']:,}; "
                             f"{verdict}.")
                continue
            if first > r["oom_model"]:
                agree = "consistent with the model"
            else:
                agree = "earlier than that model allows"
                if r["live"]:
                    agree += (f": naive's measured peak at its longest successful length was {fmt.num(r['live'])} "
                              f"score-sized tensors, and with that many the limit moves to N={r['oom_live']:,}")
            parts.append(f"Naive first ran out of memory at N={first:,}; two live score tensors would fit up to "
                         f"N={r['oom_model']:,}, so this is {agree}.")
        return " ".join(parts)

    # --- arithmetic intensity --------------------------------------------------------------

    def intensity_table(self) -> str:
        ridge = self.ridge()
        rows = []
        for shape in self.shapes():
            d = shape[2]
            for n in self.seq_lens(shape):
                a_n, a_f = model.naive_intensity(n, d, E), model.fused_intensity(n, d, E)
                bound = lambda a: "n/a" if ridge is None else ("compute" if a >= ridge else "memory")  # noqa: E731
                rows.append({"d": d, "n": n, "naive": fmt.num(a_n), "nb": bound(a_n), "fused": fmt.num(a_f),
                             "fb": bound(a_f)})
        df = pd.DataFrame(rows).drop_duplicates()
        return table_html(df, {"d": "d", "n": "N", "naive": "naive FLOP/byte", "nb": "naive: bound by (model)",
                               "fused": "fused FLOP/byte", "fb": "fused: bound by (model)"},
                          caption=f"Against the measured fp16 ridge point of {fmt.num(ridge)} FLOP/byte.")

    def intensity_finding(self) -> str:
        ridge = self.ridge()
        if ridge is None:
            return "No measured ridge point in this run, so the intensities cannot be placed against it."
        parts = []
        for d in sorted({s[2] for s in self.shapes()}):
            lim = model.naive_intensity_limit(d, E)
            cross = model.naive_crosses_ridge_n(ridge, d, E)
            if cross is None:
                parts.append(f"With d={d}, naive's intensity approaches {fmt.num(lim)} FLOP/byte and never passes it, "
                             f"below the ridge of {fmt.num(ridge)}: memory-bound at every N.")
            else:
                parts.append(f"With d={d}, naive's intensity approaches {fmt.num(lim)} FLOP/byte, above the ridge of "
                             f"{fmt.num(ridge)}: this GPU's ridge is low enough that naive turns compute-bound from "
                             f"N≈{fmt.num(cross)}.")
        n_cross = model.fused_crosses_ridge_n(ridge, E)
        ns = sorted(set(self.bench.rows["seq_len"]))
        share = ("every length swept" if ns[0] >= n_cross else "none of the lengths swept" if ns[-1] < n_cross
                 else f"the lengths from N={min(n for n in ns if n >= n_cross)} on")
        parts.append(f"A fused kernel's intensity N/2 reaches the ridge at N≈{fmt.num(n_cross)}, which puts {share} on "
                     "the compute side of it.")
        return " ".join(parts)

    def roofline_figure(self, shape) -> str:
        """Measured TFLOP/s of each implementation at its modelled intensity, under this GPU's roofs."""
        dtype, causal = next(((dt, c) for dt, c in self.bench.facets(shape) if not c), self.bench.facets(shape)[0])
        ceiling = _matmul_ceiling(dtype)
        bw, peak = self.bandwidth(), self.ceilings.measured_rate(f"matmul_{ceiling}")
        d = shape[2]
        ns = self.seq_lens(shape)
        x = np.logspace(0, math.log10(max(model.fused_intensity(ns[-1], d, E), 10) * 2), 80)
        fig = go.Figure()
        sheet_bw, sheet_peak = self.ceilings.sheet_rate("dram"), self.ceilings.sheet_rate(ceiling)
        ys = []
        for label, b_, p_, dash in (("measured roofs", bw, peak, "solid"), ("datasheet roofs", sheet_bw, sheet_peak, "dash")):
            if b_ and p_:
                y = [model.attainable_flops(a, p_, b_) / 1e12 for a in x]
                ys += y
                fig.add_trace(go.Scatter(x=x, y=y, mode="lines", name=label,
                                         line=dict(color=PALETTE[7], dash=dash, width=1.5), hoverinfo="skip"))
        ok = self.bench.facet_rows(self.bench.ok, shape, dtype, causal)
        xs = list(x)
        for impl in self.bench.impls():
            g = ok[(ok["impl"] == impl) & ok["tflops"].notna()].sort_values("seq_len")
            if g.empty:
                continue
            used = g["backend_used"].fillna("")
            mat = [impl in MATERIALISING or (impl == "sdpa" and u == "math") for u in used]
            ai = [model.naive_intensity(n, d, E) if m else model.fused_intensity(n, d, E)
                  for n, m in zip(g["seq_len"], mat)]
            ys += list(g["tflops"])
            label = escape.plot(impl_label(impl))
            fig.add_trace(go.Scatter(x=ai, y=g["tflops"], mode="markers+lines", name=label,
                                     marker=dict(color=impl_color(impl), size=8),
                                     line=dict(color=impl_color(impl), width=1), customdata=g["seq_len"],
                                     hovertemplate=f"{label}<br>N=%{{customdata}}<br>%{{x:.3g}} FLOP/byte (model)"
                                                   "<br>%{y:.3g} TFLOP/s (measured)<extra></extra>"))
        ridge = self.ridge(dtype)
        if ridge:
            fig.add_vline(x=ridge, line_dash="dot", line_color=PALETTE[7], line_width=1)
        fig.update_xaxes(type="log", title_text="arithmetic intensity (FLOP per DRAM byte, from the model)",
                         **log_ticks(xs))
        fig.update_yaxes(type="log", title_text="throughput (TFLOP/s)", **log_ticks(ys))
        return self.figure(f"roofline-{'x'.join(map(str, shape))}", fig,
                           f"Each implementation's measured TFLOP/s at its modelled intensity (naive and SDPA math: "
                           f"N·d/(2(N+d)); fused: N/2), one point per N, under the {ceiling} roofs; dotted: the "
                           f"measured ridge point. {shape_label(shape)}, {facet_label(dtype, causal)}.")

    # --- causal ----------------------------------------------------------------------------

    @cached_property
    def causal(self) -> pd.DataFrame:
        """Triton's measured causal speedup beside the block-count prediction, per shape, dtype and N, each row
        with the model's verdict on it."""
        out = []
        for shape in self.shapes():
            for dtype in dict.fromkeys(dt for dt, _ in self.bench.facets(shape)):
                full = self._timed(shape, dtype, False)
                caus = self._timed(shape, dtype, True)
                flash_f = self._timed(shape, dtype, False, "sdpa-flash")
                flash_c = self._timed(shape, dtype, True, "sdpa-flash")
                configs = self._configs(shape, dtype)
                paths = {c: self.bench.paths(shape, dtype, c) for c in (False, True)}
                for n in [n for n in full.index if n in caus.index]:
                    cfg_c, cfg_f = configs.get((True, n), {}), configs.get((False, n), {})
                    bm, bn = cfg_c.get("BLOCK_M"), cfg_c.get("BLOCK_N")
                    pred = model.predicted_causal_speedup(n, bm, bn) if bm and bn else None
                    f, c = full.loc[n], caus.loc[n]
                    measured, overlap, clk_f, clk_c = _compare(f, c)
                    gap = _clock_gap(clk_f, clk_c)
                    apart = _apart(gap)
                    fl = (_compare(flash_f.loc[n], flash_c.loc[n])
                          if n in flash_f.index and n in flash_c.index else (None, False, None, None))
                    path_c, path_f = paths[True].get(n), paths[False].get(n)
                    # Runs that did not record a path on both sides cannot tell: they count as one kernel.
                    same_path = path_c is None or path_f is None or path_c == path_f
                    out.append({
                        "shape": shape, "dtype": dtype, "n": n, "measured": measured, "predicted": pred,
                        "paths": (path_label(path_c or path_f) if (path_c or path_f) else None) if same_path else
                        f"{path_label(path_c)} / {path_label(path_f)}",
                        "t": -(-n // bm) if bm else None, "bm": bm, "bn": bn, "same_config": cfg_c == cfg_f,
                        "diag": model.causal_diagonal_visits(n, bm, bn) if pred else None,
                        "visited": model.causal_blocks_visited(n, bm, bn)[0] if pred else None,
                        "programs": shape[0] * shape[1] * -(-n // bm) if bm else None,
                        "flash": fl[0], "flash_verdict": _flash_verdict(fl[0], fl[1], _apart(_clock_gap(fl[2], fl[3]))),
                        "overlap": bool(overlap), "clk_f": clk_f, "clk_c": clk_c, "clock_gap": gap, "clocks_apart": apart,
                        "verdict": _causal_verdict(measured, pred, bool(overlap), same_path, apart),
                    })
        return pd.DataFrame(out, columns=["shape", "dtype", "n", "measured", "predicted", "paths", "t", "bm", "bn",
                                          "same_config", "diag", "visited", "programs", "flash", "flash_verdict",
                                          "overlap", "clk_f", "clk_c", "clock_gap", "clocks_apart", "verdict"])

    def _timed(self, shape, dtype, causal, impl: str = "triton") -> pd.DataFrame:
        f = self.bench.facet_rows(self.bench.ok, shape, dtype, causal)
        f = f[(f["impl"] == impl) & f["latency_ms_median"].notna()]
        if "sm_clock_mhz" not in f:  # runs from before the bench phase read clocks
            f = f.assign(sm_clock_mhz=None)
        return f.set_index("seq_len")[["latency_ms_median", "latency_ms_p10", "latency_ms_p90",
                                       "sm_clock_mhz"]].sort_index()

    def _configs(self, shape, dtype) -> dict:
        t = self.bench.facet_rows(self.bench.ok, shape, dtype, True)
        t = pd.concat([t, self.bench.facet_rows(self.bench.ok, shape, dtype, False)])
        t = t[t["impl"] == "triton"]
        return {(c, n): cfg for c, n, cfg in zip(t["causal"], t["seq_len"], t["kernel_config"])}

    def causal_table(self) -> str:
        df = self.causal
        if df.empty:
            return "No seq_len has both a causal and a non-causal Triton measurement."
        df = df.assign(shape_l=df["shape"].map(shape_label), dt=df["dtype"].map(dtype_short),
                       blocks=[f"{int(a)}×{int(b)}" if a == a and a else "not recorded" for a, b in zip(df["bm"], df["bn"])])
        r = lambda v: "n/a" if v is None or v != v else fmt.ratio(v)  # noqa: E731
        df = df.assign(paths=df["paths"].fillna("not recorded"), clocks=[_clock_note(x) for _, x in df.iterrows()],
                       flash_verdict=df["flash_verdict"].fillna("n/a"))
        return table_html(df, {"shape_l": "Shape", "dt": "dtype", "n": "N", "paths": "path (causal / not)",
                               "blocks": "BLOCK_M×BLOCK_N (causal)",
                               "t": "T query blocks", "predicted": "predicted 2T/(T+1)", "measured": "Triton measured",
                               "verdict": "the block count", "clocks": "Triton's SM clocks (unmasked / masked)",
                               "flash": "FlashAttention-2 (SDPA) measured", "flash_verdict": "FlashAttention-2 (SDPA): the mask"},
                          {"predicted": r, "measured": r, "flash": r, "t": lambda v: "n/a" if v != v or v is None else int(v)})

    def causal_finding(self) -> str:
        """The block count checked against every row: which rows it explains and which it does not."""
        df = self.causal
        if df.empty:
            return "The causal speedup cannot be measured: no length has both a causal and a non-causal Triton run."
        known = df[df["predicted"].notna()]
        if known.empty:
            return ("The Triton rows do not record their tile sizes, so T, and with it the prediction, is unknown; "
                    f"the measured causal speedup was {fmt.ratio(df['measured'].min())} to "
                    f"{fmt.ratio(df['measured'].max())}, against the limit of 2× that (T+1)/(2T) tends to.")
        counts = known["verdict"].value_counts()
        parts = [f"{counts[v]} {v}" for v in VERDICTS if v in counts]
        out = [f"Checked row by row against the block count: {join(parts)} (of {len(known)} rows)."]
        short = known[known["verdict"] == "short of the block count"]
        if len(short):
            worst = short.loc[(short["measured"] / short["predicted"]).idxmin()]
            out.append(
                f"A shortfall is what the count leaves out. At N={worst['n']} ({shape_label(worst['shape'])}), "
                f"{int(worst['diag'])} of the {int(worst['visited'])} tiles visited straddle the diagonal: they "
                "cost a full tile and keep about half of it.")
            out.append(
                f"The query tile that visits the most key tiles visits {int(worst['t'])}, "
                f"{fmt.ratio(2 * worst['t'] / (worst['t'] + 1))} the average of (T+1)/2, and "
                f"{int(worst['programs']):,} programs share {self.device.sm_count} SMs, so the longest ones "
                f"{'set the finishing time' if worst['programs'] < 4 * self.device.sm_count else 'are partly hidden behind shorter ones'}; "
                "per-program costs (loading the Q tile, storing O, the launch) do not shrink with masking at all.")
        slower = known[known["verdict"].isin(["slower with the mask", "within the timing spread"])
                       & (known["measured"] < 1)]
        if len(slower):
            clear = slower[slower["verdict"] == "slower with the mask"]
            text = (f"Doing less work cannot by itself make a run slower, yet the causal run is slower in "
                    f"{len(slower)} of {len(known)} rows (N={join(sorted(set(slower['n'])))}).")
            if len(clear) < len(slower):
                text += (f" In {len(slower) - len(clear)} of them the p10 to p90 spreads of the two timings overlap, so "
                         "the difference is inside the run-to-run spread.")
            if len(clear):
                text += (f" In {len(clear)} the spreads do not overlap: the block count does not explain "
                         f"{'that row' if len(clear) == 1 else 'those rows'}, which point at a cost that the mask "
                         "adds rather than removes (a different kernel variant or schedule for the causal case).")
            out.append(text)
        over = known[known["verdict"] == "beats the block count"]
        if len(over):
            top = over.loc[(over["measured"] / over["predicted"]).idxmax()]
            differ = over[~over["same_config"]]
            text = (f"{plural(len(over), 'row')} beat{'s' if len(over) == 1 else ''} the bound the count sets, "
                    f"up to {fmt.ratio(top['measured'])} against {fmt.ratio(top['predicted'])} at N={top['n']} "
                    f"({shape_label(top['shape'])}, {dtype_short(top['dtype'])}), which skipping tiles alone cannot "
                    "do.")
            text += (f" The causal case ran a different tile config in {len(differ)} of them." if len(differ) else
                     " The same tile config ran both ways, so the block count does not explain "
                     f"{'it' if len(over) == 1 else 'them'}.")
            out.append(text)
        out += self._clock_sentences(df) + self._flash_sentences(df)
        return " ".join(out)

    def _clock_sentences(self, df: pd.DataFrame) -> list[str]:
        """Which rows compare Triton calls run at SM clocks more than CLOCK_GAP apart, the widest gap, and, for
        any ratio above what a mask can give, whether the clocks account for it."""
        out = []
        known = [(g, i) for i, g in zip(df.index, df["clock_gap"]) if g is not None and g == g]
        apart = [(g, i) for g, i in known if g > CLOCK_GAP]
        if apart:
            g, i = max(apart)
            w = df.loc[i]
            out.append(f"In {len(apart)} of {plural(len(known), 'row')} the unmasked and masked Triton calls ran at "
                       f"median SM clocks more than {fmt.pct(100 * CLOCK_GAP, 2)} apart (clocks are read, never set; "
                       f"the table marks them), widest at {self._row_label(w)}: {fmt.num(w['clk_f'], 4)} MHz unmasked "
                       f"against {fmt.num(w['clk_c'], 4)} MHz masked.")
            out.append("A compute-bound call's time scales about inversely with its clock, so those ratios carry the "
                       "gap and are not read as the mask's saving.")
        widest = max(apart)[1] if apart else None
        for i, w in df[df["measured"] > MASK_MAX].iterrows():
            label = (f"{'In that row' if i == widest else 'At ' + self._row_label(w)} the measured ratio of "
                     f"{fmt.ratio(w['measured'])} is more than the {MASK_MAX:g}× any mask can give, since skipping "
                     "tiles at most halves the work")
            one_clock = w["measured"] * w["clk_f"] / w["clk_c"] if w["clocks_apart"] else None
            if one_clock is not None and one_clock <= MASK_MAX:
                out.append(f"{label}: the masked call's higher clock, not the mask, accounts for the excess, and at "
                           f"one clock the ratio would be about {fmt.ratio(one_clock)}.")
            elif w["verdict"] == DIFFERENT_KERNELS:
                out.append(f"{label}: the two calls ran different kernels, and their clocks do not account for it.")
            else:
                out.append(f"{label}, and the two calls' clocks do not account for it.")
        return out

    def _flash_sentences(self, df: pd.DataFrame) -> list[str]:
        """FlashAttention-2 (SDPA) held to the same rule: a mask that skips work cannot make it slower."""
        slower = df[df["flash_verdict"] == "slower with the mask"]
        if slower.empty:
            return []
        w = slower.loc[slower["flash"].idxmin()]
        where = (f"at {self._row_label(w)}" if len(slower) == 1 else
                 f"in {len(slower)} rows, most at {self._row_label(w)}")
        return [f"FlashAttention-2 (SDPA) is slower with the mask {where}: {fmt.ratio(w['flash'])}, outside the p10 to p90 "
                f"spreads of the two timings and at SM clocks within {fmt.pct(100 * CLOCK_GAP, 2)} of each other. "
                "That is a cost the mask adds rather than removes, which no count of skipped tiles explains."]

    @staticmethod
    def _row_label(w) -> str:
        return f"N={w['n']} ({shape_label(w['shape'])}, {dtype_short(w['dtype'])})"


_COUNT_WORDS = {2: "two", 3: "three", 4: "four"}


def _span(values: pd.Series) -> str:
    return fmt.span(values.min(), values.max(), fmt.ratio)


def _clock_note(w) -> str:
    """The table's mark for a row whose two Triton calls ran at SM clocks more than CLOCK_GAP apart."""
    gap = w["clock_gap"]
    if gap is None or gap != gap:
        return "not recorded"
    if gap <= CLOCK_GAP:
        return f"within {fmt.pct(100 * CLOCK_GAP, 2)}"
    note = f"{fmt.num(w['clk_f'], 4)} / {fmt.num(w['clk_c'], 4)} MHz, {fmt.pct(100 * gap)} apart"
    if w["measured"] > MASK_MAX and w["clk_c"] > w["clk_f"]:
        note += f": the clocks, not the mask, put the ratio above {MASK_MAX:g}×"
    return note


# Where the causal and non-causal calls ran different kernels (the path rules choose by length and
# mask), their ratio is not the mask's saving, and the block count is not asked about it.
DIFFERENT_KERNELS = "different kernels with and without the mask"
# A compute-bound call's time scales about inversely with its SM clock (read, never set): where the two calls
# ran at clocks more than CLOCK_GAP apart, their ratio carries that gap, and the count is not asked about it.
CLOCKS_APART = "at SM clocks too far apart to compare"
VERDICTS = ("as predicted", "short of the block count", "within the timing spread", "slower with the mask",
            "beats the block count", DIFFERENT_KERNELS, CLOCKS_APART)


def _compare(full: pd.Series, caus: pd.Series) -> tuple:
    """Unmasked over masked median time, whether the two p10-p90 spreads overlap (the difference is then inside
    the run-to-run spread), and the two calls' median SM clocks (None where not recorded)."""
    overlap = (full["latency_ms_p10"] <= caus["latency_ms_p90"] and caus["latency_ms_p10"] <= full["latency_ms_p90"])
    clk = [float(x) if x is not None and x == x else None for x in (full["sm_clock_mhz"], caus["sm_clock_mhz"])]
    return full["latency_ms_median"] / caus["latency_ms_median"], bool(overlap), clk[0], clk[1]


def _clock_gap(unmasked: float | None, masked: float | None) -> float | None:
    """The masked call's clock against the unmasked one's, the call its ratio is taken over."""
    return clock_gap(masked, unmasked)


def _apart(gap: float | None) -> bool:
    return gap is not None and gap > CLOCK_GAP


def _flash_verdict(measured: float | None, overlap: bool, apart: bool) -> str | None:
    """What the mask did to FlashAttention-2 (SDPA) at one length: the same questions as Triton's rows, without a tile
    count to hold it to (flash's tiles are not recorded)."""
    if measured is None or measured != measured:
        return None
    if apart:
        return CLOCKS_APART
    if overlap:
        return "within the timing spread"
    if measured < 1:
        return "slower with the mask"
    if measured > MASK_MAX:
        return f"above the {fmt.ratio(MASK_MAX)} a mask can give"
    return "faster with the mask"


def _causal_verdict(measured: float, predicted: float | None, overlap: bool, same_kernel: bool = True,
                    clocks_apart: bool = False) -> str | None:
    """What the block count says about one row: explained (as predicted, or short of it for the reasons it
    leaves out) or not (slower with less work, or faster than skipping tiles allows); not asked at all when
    the masked and unmasked calls ran different kernels, or at SM clocks too far apart."""
    if predicted is None:
        return None
    if not same_kernel:
        return DIFFERENT_KERNELS
    if clocks_apart:
        return CLOCKS_APART
    if measured < 1:
        return "within the timing spread" if overlap else "slower with the mask"
    if measured > predicted * MATCH:
        return "beats the block count"
    if measured >= predicted / MATCH:
        return "as predicted"
    return "short of the block count"
