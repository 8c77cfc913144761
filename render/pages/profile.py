"""Profiling: what Nsight Compute measured per kernel, and what it says about the bottleneck.

Kernel names come from the profiler (C++ templates with angle brackets): they are untrusted text,
escaped in every table (table_html), in every hover label (escape.plot) and in prose (escape.text).
"""
from __future__ import annotations

import math
import re
from functools import cached_property

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from collect.schema.limiter import BUSY_PCT, UNIT_FIELDS, UNITS
from collect.schema.occupancy import limits_from_device, occupancy, occupancy_vs_registers, occupancy_vs_smem

from .. import escape, fmt, limits, model
from ..axes import log_ticks
from ..ceilings import TENSOR_KEY, Ceilings, Roof
from ..figures import PALETTE
from ..frames import index_by
from ..tables import table_html
from ..vocab import (ELEMENT_BYTES, HOTSPOT_ROLES, MATERIALISING, impl_color, impl_label, join, kernel_name,
                     limiter_words, plural, speedup_words, stall_words)
from .base import Page


def _shape_id(shape) -> str:
    """Figure-id part for a shape: N and d, and whether causal (two shapes may differ only there)."""
    return f"{shape[2]}-{shape[3]}" + ("-causal" if shape[5] else "")


# The memory levels of the hierarchical roofline: key, label, marker symbol, the counter behind it, its roof.
LEVELS = [("dram", "DRAM", "circle", "dram__bytes_read.sum + dram__bytes_write.sum", "dram"),
          ("l2", "L2", "square", "lts__t_bytes.sum", "l2"),
          ("l1", "L1", "diamond", "l1tex__t_bytes.sum", "smem"),
          ("shared", "shared memory", "triangle-up", "sm__sass_data_bytes_mem_shared.sum", "smem")]
# Levels nearer the SM than L2: a kernel whose count there is below this share of its own L2 traffic moved its
# data past the counter (TMA copies from L2 straight into shared memory, WGMMA reading its operands there), so
# the counter cannot give that kernel's intensity at the level.
NEAR_SM_MIN_SHARE = 0.10
# Kernels taking at least this share of a call's time decide whether a level can be measured for the call.
MAJOR_KERNEL_SHARE = 0.05
MIN_STALL_SHARE = 0.03  # reasons below this share of a kernel's stalls are summed as "other"
# Enough distinct colours for a dozen stall reasons: Okabe-Ito first, then Tableau's muted set.
STALL_COLORS = PALETTE[:7] + ["#8C564B", "#BCBD22", "#17BECF", "#9467BD", "#FF9896", "#AEC7E8", "#98DF8A"]
# Names of kernels that multiply matrices (GEMMs, and attention kernels built around them), for the
# tensor-core decision on GPUs without tensor FLOP counters.
# The fields of a profiled shape, in the order shapes() gives them.
SHAPE_FIELDS = ("batch", "heads", "seq_len", "head_dim", "dtype", "causal")
GEMM_NAME = re.compile(r"gemm|nvjet|xmma|mma|cutlass|fmha|flash|attn|sdpa|_fwd|matmul", re.I)
SIDE = {True: "memory-bound side", False: "compute-bound side"}
# Shares of their binding roof within this relative distance are not ranked: each is one profiled call, and
# a single call's kernel time moves by a few percent between runs (the clock check's single-kernel calls
# agree with our device time only to within several percent).
RANK_NOISE = 0.03
# A second roof at most this much above a call's lowest one is named beside it: with two roofs that close,
# moving fewer bytes at the first level alone would barely raise the call's ceiling.
CLOSE_ROOF = 1.10


def _esc(text) -> str:
    """Untrusted tool text for a Plotly label or hover."""
    return escape.plot(text)


def _clip(text: str, n: int = 36) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _ok(x) -> bool:
    return x is not None and not (isinstance(x, float) and math.isnan(x))


def _tensor_core_work(k: pd.DataFrame) -> pd.Series:
    """Per kernel: did it run matrix multiplies on the tensor cores? Decided by its tensor FLOP count where the
    profile has one, since a name list cannot know every kernel (our Gluon kernels' names match none of it).
    Without that count, tensor-pipe instructions decide only in a kernel named like a GEMM, because softmax and
    elementwise kernels issue some too; with neither counter, the name alone."""
    name = k["kernel_name"].map(lambda n: bool(GEMM_NAME.search(str(n)))) if not k.empty else pd.Series(dtype=bool)
    out = name.copy()
    if "tensor_inst" in k:
        inst = k["tensor_inst"].map(_ok)
        out[inst] = name[inst] & (k["tensor_inst"][inst] > 0)
    if "flops_tensor" in k:
        counted = k["flops_tensor"].map(_ok)
        out[counted] = k["flops_tensor"][counted] > 0
    return out.astype(bool)


def step_short(step) -> str:
    """' g8' for our kernel's recorded step, '' without one: for tick labels that must stay short."""
    return f" {step}" if isinstance(step, str) and step else ""


def _step_words(step) -> str:
    """' (Gluon tile kernel, g8)' for our kernel's recorded Gluon step; '' without one."""
    return f" ({kernel_name('gluon', step)}, {step})" if isinstance(step, str) and step else ""


def short_kernel_name(name: str) -> str:
    """'void at::native::foo<c10::Half, 4>(float*, ...)' -> 'foo': the function, no namespace or templates."""
    s = re.sub(r"^(void|static)\s+", "", name.strip())
    s = s.replace("(anonymous namespace)::", "").replace("<unnamed>::", "")
    cut = min([i for i in (s.find("<"), s.find("(")) if i > 0] or [len(s)])
    return s[:cut].split("::")[-1].strip() or name[:40]


class ProfilePage(Page):
    slug = "profile"
    phase = "profile"

    # ------------------------------------------------------------------ data access

    @property
    def ok(self) -> bool:
        d = self.data
        return d is not None and d.status == "ok" and any(r.status == "ok" for r in d.impls)

    @cached_property
    def _impls(self) -> pd.DataFrame:
        return self.run.frame("profile", "impls")

    @cached_property
    def _kernels(self) -> pd.DataFrame:
        return self.run.frame("profile", "kernels")

    def impls(self) -> pd.DataFrame:
        return self._impls

    def kernels(self) -> pd.DataFrame:
        return self._kernels

    @cached_property
    def ceilings(self) -> Ceilings:
        return Ceilings(self.run.manifest)

    def shapes(self) -> list[tuple]:
        """(batch, heads, seq_len, head_dim, dtype, causal) of the main comparison, headline first."""
        df = self.impls()
        df = df[df["group"] == "main"] if not df.empty else df
        keys = list(dict.fromkeys(zip(df["batch"], df["heads"], df["seq_len"], df["head_dim"], df["dtype"], df["causal"])))
        return keys

    @property
    def headline(self) -> tuple | None:
        s = self.shapes()
        return s[0] if s else None

    def shape_text(self, shape) -> str:
        b, h, n, d, dt, c = shape
        return f"B={b}, H={h}, N={n}, d={d}, {dt}" + (", causal" if c else "")

    # Sections ask for one shape's calls, and one call's kernels, once per call and roof: each frame is split
    # once, so a question is a lookup rather than a pass over every row (the page grew with rows²).
    @cached_property
    def _impls_by_shape(self) -> dict:
        return index_by(self.impls(), ("group",) + SHAPE_FIELDS)

    @cached_property
    def _kernels_by_case(self) -> dict:
        return {key: k.sort_values("launch") for key, k in index_by(self.kernels(), ("case_id",)).items()}

    def _rows(self, shape, group: str = "main") -> pd.DataFrame:
        df = self.impls()
        if df.empty or shape is None:
            return df
        return self._impls_by_shape.get((group, *shape), df.iloc[0:0])

    def _case_kernels(self, case_id: str) -> pd.DataFrame:
        df = self.kernels()
        return df if df.empty else self._kernels_by_case.get((case_id,), df.iloc[0:0])

    def _flops(self, row) -> float:
        """Counted FLOPs where the tensor-op counters exist, else the analytical count."""
        return row["flops_counted"] if _ok(row.get("flops_counted")) else row["flops_model"]

    @staticmethod
    def _output_bytes(row) -> float:
        return float(model.output_bytes(row["seq_len"], row["head_dim"], ELEMENT_BYTES.get(row["dtype"], 2),
                                        row["batch"] * row["heads"]))

    def _dram(self, row) -> float | None:
        """A call's DRAM bytes on this page's one basis, Home's too (model.dram_moved_bytes): read plus written,
        the writes at least the call's output, which can still sit in L2 when the counters stop."""
        if not _ok(row["dram_read_bytes"]):
            return None
        written = row["dram_write_bytes"] if _ok(row["dram_write_bytes"]) else None
        return model.dram_moved_bytes(row["dram_read_bytes"], written, self._output_bytes(row))

    def dram_note(self) -> str:
        """Once, where the DRAM bytes first appear in a table: what they count."""
        return ("DRAM bytes on this page, in the tables, the roofline's DRAM points and the byte comparison below, "
                "are bytes read plus bytes written, the writes counted as at least the call's output: L2 is a "
                "write-back cache, and output still held there when the kernel ends reaches DRAM after the counters "
                "have stopped. The kernel table alone shows the counters as they read.")

    def caption_conditions(self, shape) -> str:
        return f"{self.shape_text(shape)}; Nsight Compute with --clock-control none, one profiled call after warm-up"

    # ------------------------------------------------------------------ what this run shows

    def findings_first(self) -> str:
        """Two to four sentences: bytes, the binding roof, tensor cores, what limits our kernel."""
        shape = self.headline
        out = []
        df = self._rows(shape)
        df = df[df["status"] == "ok"] if not df.empty else df
        by = {r["impl"]: self._dram(r) for _, r in df.iterrows() if _ok(r["dram_read_bytes"])}
        if by.get("naive") and by.get("triton"):
            a, f = by["naive"], by["triton"]
            word = f"{fmt.ratio(a / f)} fewer" if f < a else f"{fmt.ratio(f / a)} more"
            out.append(f"At {self.shape_text(shape)}, our fused kernel moved {word} DRAM bytes than naive PyTorch "
                       f"({fmt.bytes_(f)} against {fmt.bytes_(a)}, the writes counted as at least each call's "
                       "output).")
        bind = self.binding_roofs(shape)
        if bind:
            groups: dict[str, list[str]] = {}
            for impl, (level, _) in bind.items():
                groups.setdefault(level, []).append(impl_label(impl))
            out.append("By the hierarchical roofline, the lowest roof over each call is "
                       + "; ".join(f"{lv} for {join(names)}" for lv, names in groups.items()) + ".")

        tc = self.tensor_core_verdicts(shape)
        idle = [impl_label(i) for i, (used, _) in tc.items() if used is False]
        if tc:
            out.append(f"Tensor cores did not run for {join(idle)}." if idle
                       else "Every profiled implementation ran its matrix multiplies on the tensor cores.")
        limit = self.limiter_headline()
        if limit:
            out = out[:3] + [limit]
        else:
            occ = self.occupancy_verdict(shape)
            if occ:
                out.append(occ)
        return " ".join(out[:4])

    # ------------------------------------------------------------------ status and method

    def status_note(self) -> str:
        """Why data is missing, when it is: the phase's own reason, then cases that did not run."""
        d = self.data
        out = []
        if d.status != "ok":
            out.append(f'!!! failure "No Nsight Compute data in this run"\n    {escape.text(d.reason or "no reason recorded")}\n')
            if d.fix:  # what the reader can do so that the next run has a profile
                out.append(f'!!! tip "How to get a profile"\n    {escape.text(d.fix)}\n')
        elif d.reason:
            out.append(f'!!! note "Partly missing"\n    {escape.text(d.reason)}\n')
        bad = [r for r in d.impls if r.status != "ok"]
        if d.status == "ok" and bad:
            lines = "\n".join(f"    - {escape.code(r.case_id)}: {escape.text(r.status)}, "
                              f"{escape.text(r.reason or 'no reason recorded')}" for r in bad)
            out.append(f'!!! warning "Cases without a profile"\n{lines}\n')
        return "\n".join(out)

    def command_block(self) -> str:
        d = self.data
        if not d.ncu_command:
            return "_Nsight Compute did not run, so there is no command line to show._"
        lines, cur = [], []
        for tok in d.ncu_command:
            if tok.startswith("--") and cur:
                lines.append(" ".join(cur))
                cur = []
            cur.append(tok if len(tok) < 100 else tok[:97] + "...")
        lines.append(" ".join(cur))
        return escape.code_block(" \\\n    ".join(lines), "text") + "\n"

    def passes_sentence(self) -> str:
        df = self.kernels()
        p = df["replay_passes"].dropna() if not df.empty else pd.Series(dtype=float)
        ver = f"Nsight Compute {escape.text(self.data.ncu_version)}" if self.data.ncu_version else "Nsight Compute"
        wall = f" The whole ncu run took {fmt.num(self.data.wall_s)} s." if _ok(self.data.wall_s) else ""
        if p.empty:
            return f"{ver} profiled {plural(len(df), 'kernel launch', 'kernel launches')}.{wall}"
        span = fmt.span(p.min(), p.max(), lambda n: f"{int(n)}")
        return (f"{ver} profiled {plural(len(df), 'kernel launch', 'kernel launches')}, replaying each {span} times "
                f"to collect every counter (the counters cannot all be read in one pass).{wall}")

    def flops_note(self) -> str:
        if self.data.flops_source == "counters":
            return ("FLOPs are counted by the hardware: the SASS counters for fp32 and fp16 add, multiply and fused "
                    "multiply-add, plus the tensor-core operation counters.")
        return ("This GPU (or this Nsight Compute) has no tensor-core operation counters, so the FLOPs below are "
                "**analytical**: 4·B·H·N²·d for QKᵀ and PV. Bytes and times are still measured.")

    # ------------------------------------------------------------------ the two clocks

    # Our device time and Nsight Compute's within this factor either way "agree", for single-kernel
    # calls of at least CLOCK_CHECK_MIN_MS (shorter ones are dominated by the launch itself).
    CLOCKS_AGREE = 1.10
    CLOCK_CHECK_MIN_MS = 0.02

    def clock_check_finding(self) -> str:
        """Our device time beside Nsight Compute's kernel time for the same calls: the proof of the one clock."""
        df = self.run.frame("profile", "clock_check")
        if df.empty:
            return ("This run holds no cross-check of the two clocks: the profile phase recorded no device time beside "
                    "Nsight Compute's for the same calls, so this page cannot show that they agree.")
        one = df[(df["kernels"] == 1) & (df["ncu_ms"] >= self.CLOCK_CHECK_MIN_MS)]
        many = df[df["kernels"] > 1]
        out = []
        if not one.empty:
            r = one["device_over_ncu"]
            agree = ((r <= self.CLOCKS_AGREE) & (r >= 1 / self.CLOCKS_AGREE)).sum()
            span = fmt.span(r.min(), r.max(), fmt.ratio)
            out.append(f"For the {plural(len(one), 'call')} of a single kernel lasting at least "
                       f"{self.CLOCK_CHECK_MIN_MS * 1e3:g} µs, our device time is {span} Nsight Compute's kernel time, "
                       f"within {fmt.pct(100 * (self.CLOCKS_AGREE - 1), 2)} in {agree} of {len(one)}.")
            if agree < len(one):
                worst = one.loc[(one["device_over_ncu"].map(lambda x: max(x, 1 / x))).idxmax()]
                out.append(f"The two clocks disagree most for {impl_label(worst['impl'])} at N={worst['seq_len']}: "
                           f"{fmt.ms(worst['device_ms'])} against {fmt.ms(worst['ncu_ms'])}.")
                why = self._config_mismatch(worst)
                if why:
                    out.append(why)
        if not many.empty:
            top = many.loc[many["gap_ms"].idxmax()]
            text = (f"Calls of several kernels take longer on our clock than their kernels add up to, by up to "
                    f"{fmt.ms(top['gap_ms'])} ({impl_label(top['impl'])}, {plural(int(top['kernels']), 'kernel')})")
            # A single kernel already carries an offset of its own (the events around it); only what exceeds
            # that is time between kernels.
            single = df[df["kernels"] == 1]["gap_ms"].dropna() if "gap_ms" in df else pd.Series(dtype=float)
            if not single.empty and single.median() > 0:
                text += (f". A single kernel's call already reads a median {fmt.num(single.median() * 1e3)} µs longer "
                         "on our clock (the events around it); what several kernels add beyond that is the time "
                         "between them, which per-kernel durations leave out.")
            else:
                text += ": the time between kernels, which per-kernel durations leave out."
            out.append(text)
        return " ".join(out)

    # SM clocks of one call under the profiler and on our clock within this share of each other are "the same".
    CLOCKS_SAME = 0.03

    def profiler_clock_finding(self) -> str:
        """The SM clock Nsight Compute read for the profiled calls beside the clock of the same calls on our
        clock. Leaving the clocks alone (--clock-control none) does not by itself make the two equal, and a
        reading is not the clock a kernel ran at until its time agrees, so the words come from what each measured."""
        checks = self.run.frame("profile", "clock_check")
        k = self.kernels()
        if checks.empty or k.empty or "sm_clock_mhz" not in checks or "sm_clock_mhz" not in k:
            return ("This run did not record the SM clock of both the profiled kernels and our timing of the same "
                    "calls, so this page cannot say whether the profiler saw the clocks the timed calls ran at.")
        k = k[k["sm_clock_mhz"].notna() & k["duration_ms"].notna()]
        # A call's clock under the profiler: its kernels' clocks weighted by their time, as its kernel time adds them.
        w = k.assign(cw=k["sm_clock_mhz"] * k["duration_ms"]).groupby("case_id")[["cw", "duration_ms"]].sum()
        ncu = (w["cw"] / w["duration_ms"]).rename("ncu_mhz")
        both = checks[checks["sm_clock_mhz"].notna()].join(ncu, on="case_id", how="inner")
        both = both[both["ncu_mhz"].notna()]
        if both.empty:
            return ("This run did not record the SM clock of both the profiled kernels and our timing of the same "
                    "calls, so this page cannot say whether the profiler saw the clocks the timed calls ran at.")
        mhz = lambda v: f"{fmt.num(v, 4)} MHz"  # noqa: E731
        span = lambda c: fmt.span(both[c].min(), both[c].max(), lambda v: fmt.num(v, 4)) + " MHz"  # noqa: E731
        out = [f"Nsight Compute read the SM clock of the profiled calls at {span('ncu_mhz')} (each call's reading "
               f"averaged over its kernels' time), and our timing of the same calls at {span('sm_clock_mhz')}."]
        rel = both["ncu_mhz"] / both["sm_clock_mhz"] - 1
        apart = both[rel.abs() > self.CLOCKS_SAME]
        limit = fmt.pct(100 * self.CLOCKS_SAME, 2)
        if apart.empty:
            out.append(f"Call by call the two were within {limit} of each other, so the profiles saw the clocks "
                       "the timed calls ran at.")
            return " ".join(out)
        lower = (rel[apart.index] < 0).sum()
        side = ("lower" if lower == len(apart) else "higher" if lower == 0 else "lower for some and higher for others")
        worst = apart.loc[rel[apart.index].abs().idxmax()]
        shape = self.shape_text((worst["batch"], worst["heads"], worst["seq_len"], worst["head_dim"], worst["dtype"],
                                 worst["causal"]))
        out.append(f"They differed by more than {limit} for {len(apart)} of {plural(len(both), 'call')}, the "
                   f"profiler's clock {side}, most for {impl_label(worst['impl'])} at {shape}: "
                   f"{mhz(worst['ncu_mhz'])} against {mhz(worst['sm_clock_mhz'])}.")
        out.append(self._clock_reading_tested(apart))
        return " ".join(out)

    # A call's kernel time "moved with" the profiler's clock reading where it changed by at least this share of
    # what the clock change predicts: a call bound by a compute roof scales fully with the SM clock, so even
    # half of that is well clear of the event offset and the run-to-run spread of one call.
    CLOCK_FOLLOW_SHARE = 0.5

    def _clock_reading_tested(self, apart: pd.DataFrame) -> str:
        """Whether the profiled kernels ran at the clock the profiler reported: a call bound by a compute roof that
        really ran at a lower SM clock takes longer by about as much, so its kernel time against our device time
        tests the reading. Calls of several kernels (time between kernels) and calls too short to time apart from
        their launch do not test it, nor do calls bound by memory (their time need not follow the SM clock)."""
        said = "Nsight Compute's kernel times, and the rates this report computes from them, were measured at "
        rows = []
        for _, c in apart.iterrows():
            if c["kernels"] != 1 or not _ok(c["ncu_ms"]) or c["ncu_ms"] < self.CLOCK_CHECK_MIN_MS:
                continue
            shape = (c["batch"], c["heads"], c["seq_len"], c["head_dim"], c["dtype"], c["causal"])
            bind = self.binding_roofs(shape).get(c["impl"])
            if bind is None or " compute" not in bind[0] or not _ok(c["device_ms"]) or not c["device_ms"]:
                continue
            predicted = c["sm_clock_mhz"] / c["ncu_mhz"] - 1  # how much longer the reported clock makes the call
            moved = c["ncu_ms"] / c["device_ms"] - 1
            rows.append({**c.to_dict(), "predicted": predicted, "moved": moved,
                         "follows": moved / predicted >= self.CLOCK_FOLLOW_SHARE})
        if not rows:
            return (f"No call bound by a compute roof ran as one kernel long enough to show whether its time moved with "
                    f"those clocks, so this run cannot tell whether {said}them.")
        t = pd.DataFrame(rows)
        if t["follows"].all():
            return said + "those clocks, not at the timed calls'."
        if t["follows"].any():
            return (f"The kernel times moved with those clocks for {join(self._call_words(r) for _, r in t[t['follows']].iterrows())} "
                    f"but not for {join(self._call_words(r) for _, r in t[~t['follows']].iterrows())}, so the "
                    "profiler's clock reading describes the clock only some profiled kernels ran at.")
        slowest, one = t["moved"].max(), len(t) == 1
        # The largest slowdown printed as a bound on all of them, so to enough figures that it is one.
        if slowest > 0:
            longer = ((f"the one call bound by a compute roof, whose time grows as the SM clock falls, took "
                       f"{fmt.pct(100 * slowest, 3)} longer" if one else f"the {len(t)} calls bound by a compute roof, "
                       f"whose time grows as the SM clock falls, took at most {fmt.pct(100 * slowest, 3)} longer")
                      + " under Nsight Compute than on our clock")
        else:
            longer = (("the one call bound by a compute roof, whose time grows as the SM clock falls, took no longer"
                       if one else f"none of the {len(t)} calls bound by a compute roof, whose time grows as the SM "
                       "clock falls, took longer") + " under Nsight Compute than on our clock")
        if (t["predicted"] > 0).all():
            longer += (f", where the clock reading{'' if one else 's'} would make {'it' if one else 'them'} "
                       f"{'' if one else 'up to '}{fmt.pct(100 * t['predicted'].max(), 2)} longer")
        ex = t.loc[t["predicted"].abs().idxmax()]
        return (f"The kernel times do not follow those readings: {longer}. {self._call_words(ex)}, "
                f"read at {fmt.num(ex['ncu_mhz'], 4)} MHz, took {fmt.num_vs(ex['ncu_ms'], ex['device_ms'])} ms "
                f"against {fmt.num_vs(ex['device_ms'], ex['ncu_ms'])} ms on our clock. So the profiler's clock "
                "reading does not describe the clock the kernels ran at, and the rates the Profiling page computes from "
                "these kernel times are not understated by a lower clock.")

    def _call_words(self, c) -> str:
        """'Triton (ours) at N=4096, d=128, causal' for a clock-check row."""
        return (f"{impl_label(c['impl'])} at N={c['seq_len']}, d={c['head_dim']}" + (", causal" if c["causal"] else ""))

    _TILE = re.compile(r"BLOCK_M=(\d+) BLOCK_N=(\d+) warps=(\d+) stages=(\d+)")

    def _config_mismatch(self, check: pd.Series) -> str | None:
        """Why a check of our kernel may compare two kernels: the profiled call ran another tile config
        than our clock (recorded), or, where our clock's was not recorded, than the bench phase timed."""
        impls = self.run.frame("profile", "impls")
        row = impls[impls["case_id"] == check["case_id"]] if "case_id" in impls else impls.iloc[0:0]
        profiled = row["config"].iloc[0] if len(row) and isinstance(row["config"].iloc[0], str) else None
        if profiled is None or not self._TILE.search(profiled):
            return None
        tiles = self._TILE.search(profiled).groups()
        ours = check.get("config")
        if isinstance(ours, str) and self._TILE.search(ours):
            if self._TILE.search(ours).groups() == tiles:
                return None
            return (f"The profiled call ran the tile config {escape.text(profiled)} and our clock "
                    f"{escape.text(ours)}: the two timed different kernels.")
        bench = self.run.frame("bench", "rows")
        if bench.empty or "kernel_config" not in bench:
            return None
        same = bench[(bench["impl"] == check["impl"]) & (bench["batch"] == check["batch"])
                     & (bench["heads"] == check["heads"]) & (bench["seq_len"] == check["seq_len"])
                     & (bench["head_dim"] == check["head_dim"]) & (bench["dtype"] == check["dtype"])
                     & (bench["causal"] == check["causal"])]
        cfg = same["kernel_config"].iloc[0] if len(same) else None
        if not isinstance(cfg, dict) or not {"BLOCK_M", "BLOCK_N", "num_warps", "num_stages"} <= set(cfg):
            return None
        timed = tuple(str(cfg[k]) for k in ("BLOCK_M", "BLOCK_N", "num_warps", "num_stages"))
        if timed == tiles:
            return None
        return (f"The profiled process autotuned its own tile config there ({escape.text(profiled)}), not the one "
                f"the bench phase timed at that case (BLOCK_M={timed[0]} BLOCK_N={timed[1]} warps={timed[2]} "
                f"stages={timed[3]}), and this run did not record which one our clock ran: the two clocks may have "
                "timed different kernels.")

    def clock_check_table(self) -> str:
        df = self.run.frame("profile", "clock_check")
        if df.empty:
            return ""
        df = df.assign(impl=df["impl"].map(impl_label),
                       shape=[f"B={b}, H={h}, N={n}, d={d}" + (", causal" if c else "")
                              for b, h, n, d, c in zip(df["batch"], df["heads"], df["seq_len"], df["head_dim"], df["causal"])])
        return table_html(df, {"impl": "Implementation", "shape": "Shape", "kernels": "Kernels",
                               "ncu_ms": "Nsight Compute (kernel sum)", "device_ms": "Our device time",
                               "device_over_ncu": "ours / Nsight Compute", "gap_ms": "difference"},
                          {"ncu_ms": fmt.ms, "device_ms": fmt.ms, "device_over_ncu": fmt.ratio, "gap_ms": fmt.ms})

    # ------------------------------------------------------------------ summary table

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
                         "tflops": flops / (r["duration_ms"] * 1e-3) if _ok(r["duration_ms"]) and r["duration_ms"] else None,
                         "dev_tflops": r["flops_model"] / (ours * 1e-3) if _ok(ours) and ours else None,
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
        counted = rows["flops_counted"].map(_ok) if not rows.empty else pd.Series(dtype=bool)
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
        pick = [r for _, r in df.iterrows() if _ok(dev.get(r["case_id"])) and dev[r["case_id"]]]
        pick = [r for r in pick if r["impl"] == "triton"] or pick
        if not pick:
            return out[0] + " This run recorded no device time for these calls, so that column is empty."
        r = pick[0]
        flops, ours = self._flops(r), dev[r["case_id"]]
        ncu_rate, dev_rate = flops / (r["duration_ms"] * 1e-3), r["flops_model"] / (ours * 1e-3)
        counted = (f"the counters saw {fmt.ratio(flops / r['flops_model'])} the analytical FLOPs and "
                   if _ok(r.get("flops_counted")) else "")
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

    # ------------------------------------------------------------------ tensor cores

    def tensor_core_verdicts(self, shape=None) -> dict[str, tuple[bool | None, str]]:
        """impl -> (tensor cores ran?, the evidence that decided it), deciding in this order: the tensor FLOP
        counters; where the GPU lacks them, the tensor-pipe instructions of the GEMM kernels only (softmax and
        elementwise kernels can issue tensor-pipe instructions too); failing both, nothing decides (the compiled
        code would, and this run does not hold it). Worked out once per shape: every roof asks."""
        shape = shape or self.headline
        cache = self.__dict__.setdefault("_tensor_core_verdicts_by_shape", {})
        if shape not in cache:
            cache[shape] = self._tensor_core_verdicts(shape)
        return dict(cache[shape])

    def _tensor_core_verdicts(self, shape) -> dict[str, tuple[bool | None, str]]:
        df = self._rows(shape)
        df = df[df["status"] == "ok"] if not df.empty else df
        out = {}
        for _, r in df.iterrows():
            k = self._case_kernels(r["case_id"])
            if _ok(r.get("flops_tensor")):
                out[r["impl"]] = (r["flops_tensor"] > 0, "counters")
                continue
            gemm = k[k["kernel_name"].map(lambda n: bool(GEMM_NAME.search(str(n))))] if not k.empty else k
            inst = gemm["tensor_inst"].dropna() if not gemm.empty else pd.Series(dtype=float)
            if len(inst):
                out[r["impl"]] = (bool((inst > 0).any()), "gemm-instructions")
            else:
                out[r["impl"]] = (None, "none")
        return out

    def tensor_core_sentence(self, shape=None) -> str:
        shape = shape or self.headline
        tc = self.tensor_core_verdicts(shape)
        if not tc:
            return ""
        evidence = {"counters": f"the tensor FLOP counters ({escape.code('sm__ops_path_tensor_*')})",
                    "gemm-instructions": "the tensor-pipe instruction counts of the GEMM kernels (this GPU has no "
                                         "tensor FLOP counters)"}
        out = []
        for ev, words in evidence.items():
            used = [i for i, (u, e) in tc.items() if e == ev and u]
            idle = [i for i, (u, e) in tc.items() if e == ev and u is False]
            if used:
                out.append(f"Tensor cores ran for {join(impl_label(i) for i in used)}, by {words}.")
            for i in idle:
                out.append(self._idle_sentence(shape, i, words))
        unknown = [i for i, (u, _) in tc.items() if u is None]
        if unknown:
            out.append(f"For {join(impl_label(i) for i in unknown)}, no counter decides it: the profile has neither "
                       "tensor FLOP counts nor tensor-pipe instructions of a GEMM kernel, and only the compiled code "
                       "could say.")
        return " ".join(out)

    def _idle_sentence(self, shape, impl: str, words: str) -> str:
        """Why an implementation's tensor cores count as idle, with what ran instead."""
        case = self._rows(shape)
        case = case[case["impl"] == impl].iloc[0]["case_id"]
        k = self._case_kernels(case)
        gemm = k[k["kernel_name"].map(lambda n: bool(GEMM_NAME.search(str(n))))] if not k.empty else k
        text = f"They did **not** run for {impl_label(impl)}, by {words}"
        if not gemm.empty and gemm["flops_fp32"].fillna(0).sum() > 0:
            text += (f": its {plural(len(gemm), 'GEMM kernel')} ran their multiplies as FP32 FMA instructions "
                     "on the ordinary pipes")
        issued = k[k["tensor_inst"].fillna(0) > 0] if not k.empty else k
        in_gemm = issued[issued.index.isin(gemm.index)]
        other = issued[~issued.index.isin(gemm.index)]
        names = list(dict.fromkeys(escape.text(short_kernel_name(n)) for n in other["kernel_name"]))
        if not in_gemm.empty:
            # Only the tensor FLOP counters can call a GEMM that issues tensor-pipe instructions idle: those
            # instructions did no counted tensor-core arithmetic, so say where they were and what decided it.
            rest = f", and {join(names)} the rest" if names else ""
            text += (f". Its tensor-pipe instruction count is not zero: its GEMM kernels issued "
                     f"{fmt.num(in_gemm['tensor_inst'].sum())} of those instructions{rest}, yet the tensor FLOP "
                     "counters counted no tensor-core operation in any of them")
        elif names:
            text += (f". Its tensor-pipe instruction count is not zero, but those instructions come from "
                     f"{join(names)}, not from a matrix multiply")
        return text + "."

    # ------------------------------------------------------------------ hierarchical roofline

    def roofs(self, shape) -> dict:
        """The roofs drawn for `shape`: DRAM, L2 and shared memory, the tensor roof of its dtype, and FP32."""
        c = self.ceilings
        keys = ["dram", "l2", "smem", TENSOR_KEY.get(shape[4], "fp16"), "fp32"]
        return {k: c.roof(k) for k in dict.fromkeys(keys)}

    def compute_roof(self, shape, impl: str) -> Roof:
        """The compute roof `impl` is judged against at `shape`: the tensor roof of the dtype, unless the profile
        shows its matrix multiplies ran without tensor cores; then the FP32 roof, since FMA work on the ordinary
        pipes cannot reach the tensor rate. Where nothing decides, the tensor roof stays: it is the higher one, so
        it never calls a kernel further from its roof than it is."""
        roofs = self.roofs(shape)
        used = self.tensor_core_verdicts(shape).get(impl, (None, ""))[0]
        return roofs["fp32"] if used is False else roofs[TENSOR_KEY.get(shape[4], "fp16")]

    def level_points(self, shape=None) -> pd.DataFrame:
        """One row per (implementation, level) the counters can measure: bytes, intensity, FLOP/s; and the
        levels they cannot, with why (column `why`, empty when plotted). Worked out once per shape: the
        figure, its findings and the Home page all ask (callers filter, never change, the frame)."""
        shape = shape or self.headline
        cache = self.__dict__.setdefault("_level_points_by_shape", {})
        if shape not in cache:
            cache[shape] = self._level_points(shape)
        return cache[shape]

    def _level_points(self, shape) -> pd.DataFrame:
        df = self._rows(shape)
        df = df[(df["status"] == "ok") & df["duration_ms"].notna()] if not df.empty else df
        out = []
        for _, r in df.iterrows():
            flops, t = self._flops(r), r["duration_ms"] * 1e-3
            k = self._case_kernels(r["case_id"])
            for level, label, symbol, counter, roof in LEVELS:
                by, why = self._level_bytes(r, k, level)
                out.append({"impl": r["impl"], "case_id": r["case_id"], "level": level, "label": label,
                            "symbol": symbol, "counter": counter, "roof": roof, "bytes": by,
                            "ai": flops / by if by else None, "flops_per_s": flops / t if t else None,
                            "flops": flops, "time_ms": r["duration_ms"], "why": why})
        return pd.DataFrame(out, columns=["impl", "case_id", "level", "label", "symbol", "counter", "roof", "bytes",
                                          "ai", "flops_per_s", "flops", "time_ms", "why"])

    def _level_bytes(self, r, k: pd.DataFrame, level: str) -> tuple[float | None, str]:
        """A call's bytes at one level, or (None, why not)."""
        if level == "dram":
            by = self._dram(r)
            return (by, "") if by else (None, "no DRAM count")
        if level == "l2":
            if not (_ok(r["l2_bytes"]) and r["l2_bytes"] > 0):
                return None, "no L2 count"
            if _ok(r["dram_read_bytes"]) and r["l2_bytes"] < r["dram_read_bytes"]:
                # Every byte read from DRAM crosses L2: a smaller L2 count cannot be the call's L2 traffic.
                return None, "l2-blind"
            return r["l2_bytes"], ""
        col = "l1_bytes" if level == "l1" else "shared_bytes"
        if k.empty or col not in k or k[col].isna().all():
            return None, "not counted on this GPU"
        total = k["duration_ms"].fillna(0).sum()
        major = k[k["duration_ms"].fillna(0) >= MAJOR_KERNEL_SHARE * total] if total else k
        if level == "shared":
            # Only a kernel that multiplies matrices can hide shared-memory traffic from the counter (WGMMA reads
            # its operands there); a kernel that uses no shared memory rightly counts none.
            major = major[_tensor_core_work(major)]
        blind = major[major[col].fillna(0) < NEAR_SM_MIN_SHARE * major["l2_bytes"].fillna(0)]
        if not blind.empty:
            return None, "bypassed"
        by = float(k[col].fillna(0).sum())
        return (by, "") if by > 0 else (None, "none")

    def _roof_caps(self, shape) -> dict[str, tuple[float, list[tuple[str, float]]]]:
        """impl -> (its achieved FLOP rate, every roof over it as (name, the FLOP rate it allows), lowest first).
        A level without a roof or a point does not count; the compute roof the call is judged against
        (compute_roof) does. Worked out once per shape, like level_points: the summary, the roofline finding
        and the clock check (once per call) all ask."""
        cache = self.__dict__.setdefault("_roof_caps_by_shape", {})
        if shape not in cache:
            cache[shape] = self._work_out_roof_caps(shape)
        return cache[shape]

    def _work_out_roof_caps(self, shape) -> dict[str, tuple[float, list[tuple[str, float]]]]:
        pts = self.level_points(shape)
        pts = pts[pts["ai"].notna()] if not pts.empty else pts
        roofs = self.roofs(shape)
        out = {}
        for impl, g in pts.groupby("impl", sort=False):
            top = self.compute_roof(shape, impl)
            caps = [(top.label + " compute" + ("" if top.source == "measured" else f" ({top.source})"),
                     top.value)] if top.ok else []
            for _, p in g.iterrows():
                roof = roofs[p["roof"]]
                if roof.ok:
                    tag = "" if roof.source == "measured" else f" ({roof.source})"
                    caps.append((f"{p['label']} bandwidth{tag}", roof.value * p["ai"]))
            if caps:
                out[impl] = (float(g["flops_per_s"].iloc[0]), sorted(caps, key=lambda c: c[1]))
        return out

    @staticmethod
    def _close_roofs_sentence(close: dict[str, tuple[str, float]], bind: dict[str, tuple[str, float]]) -> str:
        """One sentence on the calls with a second roof close above the lowest, with how far above where
        the sentence stays within four figures."""
        if len(close) <= 4:
            calls = [f"{impl_label(i)} (its {lv} roof {fmt.pct(100 * (r - 1))} above its {bind[i][0]} roof)"
                     for i, (lv, r) in close.items()]
        else:
            calls = [impl_label(i) for i in close]
        return (f"Over {join(calls)}, a second roof lies just above the lowest: relieving the lowest limit alone "
                "would raise such a call's ceiling by no more than that gap.")

    def binding_roofs(self, shape=None) -> dict[str, tuple[str, float]]:
        """impl -> (the lowest roof over its points, achieved / that roof)."""
        return {impl: (caps[0][0], rate / caps[0][1])
                for impl, (rate, caps) in self._roof_caps(shape or self.headline).items()}

    def close_roofs(self, shape=None) -> dict[str, tuple[str, float]]:
        """impl -> (its second-lowest roof, how far above the lowest), for the calls whose second roof lies
        within CLOSE_ROOF of the lowest."""
        return {impl: (caps[1][0], caps[1][1] / caps[0][1])
                for impl, (_, caps) in self._roof_caps(shape or self.headline).items()
                if len(caps) > 1 and caps[1][1] <= CLOSE_ROOF * caps[0][1]}

    def roofline_fig(self, shape=None) -> go.Figure:
        shape = shape or self.headline
        pts = self.level_points(shape)
        fig = go.Figure()
        plotted = pts[pts["ai"].notna()] if not pts.empty else pts
        xs = list(plotted["ai"]) if not plotted.empty else []
        ys = [v / 1e12 for v in plotted["flops_per_s"]] if not plotted.empty else []
        for impl, g in plotted.groupby("impl", sort=False):
            names = "<br>".join(_esc(_clip(n, 90)) for n in self._case_kernels(g["case_id"].iloc[0])["kernel_name"][:8])
            label = _esc(impl_label(impl))
            fig.add_scatter(
                x=list(g["ai"]), y=[v / 1e12 for v in g["flops_per_s"]], mode="lines+markers", name=label,
                legendgroup=impl, line=dict(color=impl_color(impl), width=1, dash="dot"),
                marker=dict(symbol=list(g["symbol"]), size=11, color=impl_color(impl), line=dict(width=1, color="white")),
                customdata=[[label, p["label"], _esc(p["counter"]), fmt.bytes_(p["bytes"]), fmt.num(p["flops"]),
                             fmt.ms(p["time_ms"]), names] for _, p in g.iterrows()],
                hovertemplate=("<b>%{customdata[0]}</b>, %{customdata[1]} (%{customdata[2]})<br>bytes %{customdata[3]}, "
                               "FLOPs %{customdata[4]}, time %{customdata[5]}<br>%{x:.3g} FLOP/byte, "
                               "%{y:.3g} TFLOP/s<br>kernels:<br>%{customdata[6]}<extra></extra>"))
        for level, label, symbol, counter, _ in LEVELS:  # the level key: one grey marker per symbol
            fig.add_scatter(x=[None], y=[None], mode="markers", name=f"{label} ({_esc(counter)})", legendgroup="levels",
                            legendgrouptitle_text="level (symbol)" if level == "dram" else None,
                            marker=dict(symbol=symbol, size=10, color=PALETTE[7]))
        roofs = self.roofs(shape)
        lo = min(xs + [1.0]) / 4
        hi = max(xs + [10.0]) * 4
        compute = [r for r in roofs.values() if r.unit == "FLOP/s" and r.ok]
        top = max((r.value for r in compute), default=None)
        for r in roofs.values():
            if r.ok and r.unit == "B/s" and top:
                hi = max(hi, top / r.value * 4)
        # Bandwidth roofs are labelled above the top compute roof, left of where each meets it, one row apiece.
        label_row = 0
        for r in roofs.values():
            if not r.ok:
                continue
            dash = "solid" if r.source == "measured" else "dash"
            tag = "" if r.source == "measured" else f" ({r.source})"
            if r.unit == "B/s":
                knee = top / r.value if top else hi
                x, y = [lo, knee], [lo * r.value / 1e12, knee * r.value / 1e12]
                label_row += 1
                tx, ty, pos = knee, (top or knee * r.value) * 1.45 ** label_row / 1e12, "middle left"
            else:
                x, y = [lo, hi], [r.value / 1e12] * 2
                tx, ty, pos = hi, r.value / 1e12, "bottom left"
            ys += y
            fig.add_scatter(x=x, y=y, mode="lines", showlegend=False, line=dict(color=PALETTE[7], dash=dash, width=1.5),
                            hovertemplate=f"{r.label} roof ({r.source}): {r.text()}<extra></extra>")
            fig.add_scatter(x=[tx], y=[ty], mode="text", text=[f"{r.label} {r.text()}{tag} "], textposition=pos,
                            showlegend=False, hoverinfo="skip", textfont=dict(size=11, color=PALETTE[7]))
        fig.update_xaxes(type="log", title_text="arithmetic intensity (FLOP per byte at each level)",
                         range=[math.log10(lo), math.log10(hi)], **log_ticks(xs + [lo, hi]))
        pts_y = [v / 1e12 for v in plotted["flops_per_s"]] if not plotted.empty else [1.0]
        y_lo, y_hi = min(pts_y) / 8, (top / 1e12 if top else max(pts_y)) * 1.45 ** (label_row + 1.5)
        fig.update_yaxes(type="log", title_text="achieved (TFLOP/s)", range=[math.log10(y_lo), math.log10(y_hi)],
                         **log_ticks([y_lo, y_hi]))
        return fig

    def roofline_figure(self, shape=None) -> str:
        shape = shape or self.headline
        if shape is None:
            return "_Nothing to draw._"
        src = "counted" if self.data.flops_source == "counters" else "analytical"
        return self.figure(f"roofline-{_shape_id(shape)}", self.roofline_fig(shape),
                           f"Hierarchical roofline: one colour per implementation, one symbol per memory level, each "
                           f"point the call's {src} FLOPs over the bytes one counter measured at that level (hover names "
                           "the counter), at the height of those FLOPs over Nsight Compute's kernel time. Roofs: "
                           "DRAM, L2 and shared memory bandwidth, the tensor and FP32 compute rates; solid where measured, dashed where the datasheet or the architecture stands in. "
                           f"{self.caption_conditions(shape)}.", height=520)

    def roofline_finding(self, shape=None) -> str:
        """Which side of the DRAM ridge each call sits, which roof binds, and the points left out and why."""
        shape = shape or self.headline
        roofs = self.roofs(shape)
        dram, tensor = roofs["dram"], roofs[TENSOR_KEY.get(shape[4], "fp16")]
        pts = self.level_points(shape)
        d = pts[(pts["level"] == "dram") & pts["ai"].notna()] if not pts.empty else pts
        top = {impl: self.compute_roof(shape, impl) for impl in d["impl"]} if not d.empty else {}
        if not dram.ok or not any(r.ok for r in top.values()):
            return "Without ceilings for this GPU the roofline cannot say which roof binds."
        # Each call's ridge is where the DRAM roof meets its own compute roof (compute_roof).
        sides = {True: [], False: []}
        for _, p in d.iterrows():
            r = top[p["impl"]]
            if r.ok:
                sides[bool(p["ai"] < r.value / dram.value)].append(impl_label(p["impl"]))

        def ridge(r: Roof) -> str:
            src = "measured" if dram.source == r.source == "measured" else "datasheet-based"
            if r.key == tensor.key:
                return f"{src} DRAM ridge point is {fmt.num(r.value / dram.value)} FLOP per byte"
            # Worded apart from the tensor roof's ridge, the figure the other pages quote under that name.
            return f"{src} ridge with the DRAM roof sits at {fmt.num(r.value / dram.value)} FLOP per byte"

        others = {}
        for impl, r in top.items():
            if r.key != tensor.key:
                others.setdefault(r.key, []).append(impl_label(impl))
        if not others:
            out = [f"The {ridge(tensor)}."]
        else:
            out = [f"The {ridge(tensor)} under the {tensor.label} roof." if tensor.ok else
                   f"This run has no {tensor.label} roof, so no call that used the tensor cores has a ridge."]
            for key, names in others.items():
                r = roofs[key]
                who = f"{join(names)}, whose matrix multiplies ran without tensor cores,"
                out.append(f"{who} {'is' if len(names) == 1 else 'are'} judged against the {r.label} roof instead, "
                           f"whose {ridge(r)}." if r.ok else
                           f"{who} cannot be judged against a compute roof: this run measured no {r.label} rate and "
                           "the datasheet gives none.")
        for mem in (True, False):
            if sides[mem]:
                out.append(f"On its {SIDE[mem]}: {join(sides[mem])}.")
        bind = self.binding_roofs(shape)
        if bind:
            src = "counted" if self.data.flops_source == "counters" else "analytical"
            out.append(self._closest_and_furthest(
                bind, f"Measured against the lowest roof over it ({src} FLOPs over Nsight Compute's kernel time)"))
        close = self.close_roofs(shape)
        if close:
            out.append(self._close_roofs_sentence(close, bind))
        gone = pts[pts["why"] == "bypassed"]
        if not gone.empty:
            by_level = [f"no {lv} point for {join(impl_label(i) for i in g['impl'])}"
                        for lv, g in gone.groupby("label", sort=False)]
            out.append(f"The counters cannot place every call: {'; '.join(by_level)}. In a kernel that takes much of "
                       "each of those calls, the counter saw less than a tenth of the kernel's L2 traffic, which is "
                       "what happens when TMA copies tiles from L2 straight into shared memory and WGMMA reads its "
                       f"operands there: {escape.code('l1tex__t_bytes')} and "
                       f"{escape.code('sm__sass_data_bytes_mem_shared')} count neither.")
        blind = pts[pts["why"] == "l2-blind"]
        if not blind.empty:
            out.append(f"No L2 point is drawn for {join(impl_label(i) for i in dict.fromkeys(blind['impl']))}: "
                       f"{escape.code('lts__t_bytes')} counted fewer bytes for {'it' if blind['impl'].nunique() == 1 else 'them'} "
                       "than DRAM delivered, and every byte read from DRAM crosses L2, so the counter does not see "
                       "all of the call's L2 traffic (tensor-memory-accelerator copies among it).")
        out.append(self._l2_roof_exceeded(shape))
        missing = [r for r in roofs.values() if not r.ok]
        fallback = [r for r in roofs.values() if r.ok and r.source != "measured"]
        if fallback:
            many = len(fallback) > 1
            out.append(f"This run did not measure the {join(r.label for r in fallback)} roof{'s' if many else ''}; "
                       f"the dashed line{'s stand' if many else ' stands'} in with the datasheet or architectural "
                       "figure, which the GPU may not reach.")
        if missing:
            out.append(f"No {join(r.label for r in missing)} roof is drawn: it was not measured in this run and the "
                       "datasheet gives none.")
        return " ".join(x for x in out if x)

    @staticmethod
    def _closest_and_furthest(bind: dict[str, tuple[str, float]], lead: str) -> str:
        """Which call comes closest to its binding roof and which stays furthest, naming as equal the calls whose
        shares are within RANK_NOISE of the end's (a ranking there would be noise)."""
        order = sorted(bind.items(), key=lambda kv: kv[1][1], reverse=True)

        def group_words(group, one: str, many: str) -> str:
            if len(group) == 1:
                (i, (roof, v)), = group
                return f"{impl_label(i)} {one}, at {fmt.pct(100 * v)} of its {roof} roof"
            if len(group) == 2:
                each = " and ".join(f"{impl_label(i)}, at {fmt.pct(100 * v)} of its {roof} roof," for i, (roof, v) in group)
                return f"{each} {many}"
            lo, hi = group[-1][1][1], group[0][1][1]  # one range, not a figure per call
            return (f"{join(impl_label(i) for i, _ in group)} {many}, at {fmt.span(100 * lo, 100 * hi, fmt.pct)} of "
                    "their lowest roofs")

        if len(order) == 1:
            return f"{lead}, {group_words(order, 'reaches', '')}."
        top = [kv for kv in order if kv[1][1] >= order[0][1][1] * (1 - RANK_NOISE)]
        if len(top) == len(order):
            return f"{lead}, {group_words(top, '', 'come equally close')}."
        rest = order[len(top):]
        low = [kv for kv in rest if kv[1][1] <= rest[-1][1][1] * (1 + RANK_NOISE)]
        close = group_words(top, "comes closest", "come equally close")
        far = group_words(low[::-1], "stays furthest", "stay equally far")
        if len(top) == 1 and len(low) == 1:
            return f"{lead}, {close}, and {far}."
        return f"{lead}, {close}. {far[0].upper() + far[1:]}."

    def _l2_roof_exceeded(self, shape=None) -> str:
        """Where a kernel of the calls drawn at `shape` moved L2 traffic faster than the measured L2 roof, that roof
        is a rate one microbenchmark reached, not a ceiling: say so, with the fastest such kernel. Only those
        calls' kernels: the register-cap experiment's, whose L2 traffic is mostly their own spills, are drawn in
        no roofline, so they cannot explain a point at or above its roof."""
        shape = shape or self.headline
        roof = self.roofs(shape)["l2"]
        k = self.kernels()
        if not roof.ok or roof.source != "measured" or k.empty:
            return ""
        k = k[k["case_id"].isin(set(self._rows(shape)["case_id"]))]
        k = k[k["l2_bytes"].notna() & k["duration_ms"].notna() & (k["duration_ms"] > 0)]
        if k.empty:
            return ""
        rate = k["l2_bytes"] / (k["duration_ms"] * 1e-3)
        over = k[rate > roof.value]
        if over.empty:
            return ""
        top = over.loc[rate[over.index].idxmax()]
        return (f"The L2 roof is a rate, not a ceiling: {plural(len(over), 'profiled kernel')} moved L2 traffic faster "
                f"than the {fmt.bandwidth(roof.value)} the L2 microbenchmark sustained, up to "
                f"{fmt.bandwidth(rate[top.name])} ({escape.code(short_kernel_name(top['kernel_name']))}), so a point at "
                "or above that roof is not a contradiction.")

    # ------------------------------------------------------------------ occupancy

    def _main_kernels(self, shape=None, min_share: float = 0.05) -> pd.DataFrame:
        """Kernels of the main implementations at `shape` that take at least `min_share` of their call."""
        shape = shape or self.headline
        rows = self._rows(shape)
        df = self.kernels()
        if df.empty or rows.empty:
            return df
        df = df[df["case_id"].isin(set(rows["case_id"]))].copy()
        tot = df.groupby("case_id")["duration_ms"].transform("sum")
        df = df[(df["duration_ms"].fillna(0) >= min_share * tot.fillna(0))]
        df["label"] = [_clip(f"{impl} #{n}: {short_kernel_name(k)}") for impl, n, k in zip(df["impl"], df["launch"], df["kernel_name"])]
        return df

    def occupancy_table(self, shape=None) -> str:
        df = self._main_kernels(shape)
        if df.empty:
            return "_No occupancy data._"
        limiter = []
        for _, r in df.iterrows():
            o = self._occupancy(r)
            if o is None:
                limiter.append("n/a")
                continue
            limiter.append("one block per SM by design (persistent grid)" if self._persistent(r) else ", ".join(o.limiters))
        df = df.assign(limiter=limiter)
        intf = lambda v: "n/a" if not _ok(v) else str(int(v))  # noqa: E731
        return table_html(df, {"label": "Kernel", "theoretical_occupancy_pct": "Theoretical", "achieved_occupancy_pct": "Achieved",
                               "block_limit_registers": "Block limit: registers", "block_limit_smem": "Block limit: shared mem",
                               "block_limit_warps": "Block limit: warps", "block_limit_blocks": "Block limit: blocks",
                               "limiter": "Limited by", "registers_per_thread": "Registers / thread",
                               "smem_per_block_bytes": "Shared mem / block", "block_size": "Threads / block",
                               "waves_per_sm": "Waves per SM"},
                          {"theoretical_occupancy_pct": fmt.pct, "achieved_occupancy_pct": fmt.pct,
                           "block_limit_registers": intf, "block_limit_smem": intf, "block_limit_warps": intf,
                           "block_limit_blocks": intf, "registers_per_thread": intf, "block_size": intf,
                           "smem_per_block_bytes": fmt.bytes_, "waves_per_sm": lambda v: fmt.num(v)})

    def occupancy_figure(self, shape=None) -> str:
        shape = shape or self.headline
        df = self._main_kernels(shape)
        if df.empty:
            return "_No occupancy data._"
        labels = [_esc(x) for x in df["label"]]
        full = [_esc(x if len(x) <= 200 else x[:197] + "...") for x in df["kernel_name"]]
        fig = go.Figure()
        fig.add_bar(name="theoretical", y=labels, x=df["theoretical_occupancy_pct"], orientation="h",
                    marker_color=PALETTE[7], customdata=full,
                    hovertemplate="%{customdata}<br>theoretical %{x:.3g}%<extra></extra>")
        fig.add_bar(name="achieved", y=labels, x=df["achieved_occupancy_pct"], orientation="h", marker_color=PALETTE[0],
                    customdata=full, hovertemplate="%{customdata}<br>achieved %{x:.3g}%<extra></extra>")
        fig.update_layout(barmode="group", xaxis_title="Occupancy (% of the SM's warp slots)", xaxis_range=[0, 100],
                          yaxis=dict(autorange="reversed", tickmode="array", tickvals=labels, ticktext=labels))
        return self.figure(f"occupancy-{_shape_id(shape)}", fig,
                           "Theoretical occupancy (what the launch's registers, shared memory and block size allow) "
                           "against achieved occupancy (warps actually resident, averaged over the run), per kernel "
                           f"taking at least 5% of its call. {self.caption_conditions(shape)}.",
                           height=140 + 44 * len(labels))

    def _triton_kernel(self, shape=None):
        df = self._main_kernels(shape, min_share=0.0)
        if df.empty:
            return None
        df = df[df["impl"] == "triton"]
        return None if df.empty else df.sort_values("duration_ms", ascending=False).iloc[0]

    @cached_property
    def _limits(self):
        return limits_from_device(self.run.manifest.device)

    def _occupancy(self, k):
        """The occupancy model for one profiled kernel row; None where the device's limits or the
        kernel's block size, registers or shared memory are not known."""
        if self._limits is None or not all(_ok(k[c]) for c in ("block_size", "registers_per_thread",
                                                               "smem_per_block_bytes")):
            return None
        return occupancy(self._limits, int(k["block_size"]), int(k["registers_per_thread"]),
                         int(k["smem_per_block_bytes"]),
                         int(k["smem_config_bytes"]) if _ok(k["smem_config_bytes"]) else None)

    def occupancy_curves_fig(self, shape=None) -> go.Figure | None:
        k = self._triton_kernel(shape)
        lim = self._limits
        if k is None or lim is None or not all(_ok(k[c]) for c in ("block_size", "registers_per_thread", "smem_per_block_bytes")):
            return None
        threads, regs, smem = int(k["block_size"]), int(k["registers_per_thread"]), int(k["smem_per_block_bytes"])
        fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.08)
        r_curve = occupancy_vs_registers(lim, threads, smem)
        s_curve = occupancy_vs_smem(lim, threads, regs)
        fig.add_scatter(x=[x for x, _ in r_curve], y=[y for _, y in r_curve], mode="lines", line_shape="hv",
                        name="registers", line=dict(color=PALETTE[0]), row=1, col=1,
                        hovertemplate="%{x} registers/thread: %{y:.3g}%<extra></extra>")
        fig.add_scatter(x=[x / 1024 for x, _ in s_curve], y=[y for _, y in s_curve], mode="lines", line_shape="hv",
                        name="shared memory", line=dict(color=PALETTE[2]), row=1, col=2,
                        hovertemplate="%{x:.3g} KiB/block: %{y:.3g}%<extra></extra>")
        here = occupancy(lim, threads, regs, smem).occupancy_pct
        fig.add_scatter(x=[regs], y=[here], mode="markers", marker=dict(size=12, color=PALETTE[3], symbol="star"),
                        name="the Triton kernel", row=1, col=1,
                        hovertemplate=f"measured kernel: {regs} registers/thread, %{{y:.3g}}%<extra></extra>")
        fig.add_scatter(x=[smem / 1024], y=[here], mode="markers", marker=dict(size=12, color=PALETTE[3], symbol="star"),
                        showlegend=False, row=1, col=2,
                        hovertemplate=f"measured kernel: {fmt.bytes_(smem)} per block, %{{y:.3g}}%<extra></extra>")
        fig.update_yaxes(title_text="theoretical occupancy (%)", range=[0, 105], row=1, col=1)
        fig.update_yaxes(range=[0, 105], row=1, col=2)
        fig.update_xaxes(title_text="registers per thread", row=1, col=1)
        fig.update_xaxes(title_text="shared memory per block (KiB)", row=1, col=2)
        return fig

    def occupancy_curves_figure(self, shape=None) -> str:
        shape = shape or self.headline
        fig = self.occupancy_curves_fig(shape)
        if fig is None:
            return "_The Triton kernel's launch or this GPU's limits are missing, so no occupancy curve can be drawn._"
        k = self._triton_kernel(shape)
        return self.figure(f"occupancy-curves-{_shape_id(shape)}", fig,
                           f"Theoretical occupancy of a {int(k['block_size'])}-thread block as registers per thread (left, "
                           f"shared memory fixed at the kernel's {fmt.bytes_(k['smem_per_block_bytes'])}) and shared memory "
                           f"per block (right, registers fixed at {int(k['registers_per_thread'])}) vary, from this GPU's "
                           "limits and the CUDA occupancy rules (collect/schema/occupancy.py); the star is the measured kernel. "
                           f"{self.caption_conditions(shape)}.", height=400)

    def _kernel_words(self, k) -> str:
        """'our Triton kernel (_hopper_fwd_ws_persistent)' for the kernel of a profiled launch."""
        impl = self.impls()
        row = impl[impl["case_id"] == k["case_id"]]
        who = impl_label(row.iloc[0]["impl"]) if not row.empty else "the kernel"
        return f"{who}, {escape.code(short_kernel_name(str(k['kernel_name'])))}"

    def _persistent(self, k) -> bool:
        """A grid of exactly one block per SM: a persistent kernel, each block looping over its share of the work.
        (A small problem's grid can be smaller than the SM count without being persistent.)"""
        sms = self.run.manifest.device.sm_count if self.run.manifest.device else None
        return bool(sms and _ok(k.get("grid_size")) and k["grid_size"] == sms)

    def _warps_note(self, k) -> str:
        """The config's warps against the launch's, when they differ (warp specialization adds warpgroups)."""
        cfg = self.impls()
        cfg = cfg[cfg["case_id"] == k["case_id"]]["config"]
        m = re.search(r"warps=(\d+)", str(cfg.iloc[0]) if len(cfg) else "")
        if not m or not _ok(k.get("block_size")):
            return ""
        asked, launched = int(m.group(1)), int(k["block_size"]) // 32
        if asked == launched:
            return ""
        return (f" Its config says warps={asked}, yet it launches {launched} warps per block: the config counts the "
                f"warps of one warpgroup, and the warp-specialized kernel runs {launched // asked if launched % asked == 0 else 'several'} "
                "warpgroups side by side (a producer that issues the loads and consumers that compute).")

    def occupancy_verdict(self, shape=None) -> str:
        """One sentence on what sets our kernel's occupancy: its design (a persistent grid) or a resource."""
        k = self._triton_kernel(shape)
        if k is None or not _ok(k.get("block_size")):
            return ""
        if self._persistent(k):
            return (f"Our Triton kernel is persistent ({plural(int(k['grid_size']), 'block')} for "
                    f"{self.run.manifest.device.sm_count} SMs), so it runs one block per SM by design.")
        o = self._occupancy(k)
        if o is None:
            return ""
        return (f"Our Triton kernel's occupancy is limited by {join(o.limiters)}, which allow "
                f"{plural(o.active_blocks, 'block')} per SM.")

    def occupancy_finding(self, shape=None) -> str:
        k = self._triton_kernel(shape)
        if k is None or not _ok(k["registers_per_thread"]):
            return "The Triton kernel has no occupancy data in this run."
        parts = [f"The kernel analysed here is {self._kernel_words(k)}: {int(k['block_size'])} threads per block, "
                 f"{int(k['registers_per_thread'])} registers per thread and {fmt.bytes_(k['smem_per_block_bytes'])} of "
                 f"shared memory per block.{self._warps_note(k)}"]
        o = self._occupancy(k)
        if o is not None:
            allow = (f"Registers allow {plural(o.blocks_by_registers, 'block')} per SM, shared memory "
                     f"{o.blocks_by_smem}, warp slots {o.blocks_by_warps} and the block limit {o.blocks_by_blocks}")
            if self._persistent(k):
                parts.append(f"{allow}. But the kernel is persistent: it launches {plural(int(k['grid_size']), 'block')} "
                             f"for {self.run.manifest.device.sm_count} SMs, each looping over its share of the tiles, so "
                             "one block per SM is its design, not a shortage of any resource, and no register cap would "
                             f"put a second block beside it: theoretical occupancy {fmt.pct(o.occupancy_pct)}.")
            else:
                parts.append(f"{allow}, so {plural(o.active_blocks, 'block')} fit{'s' if o.active_blocks == 1 else ''}: "
                             f"theoretical occupancy "
                             f"{fmt.pct(o.occupancy_pct)}, limited by {' and '.join(o.limiters)}.")
            th = k["theoretical_occupancy_pct"]
            if _ok(th) and abs(th - o.occupancy_pct) > 0.5:
                parts.append(f"Nsight Compute reports {fmt.pct(th)} instead: the driver chose a shared-memory carveout "
                             "or launch setting the model does not see.")
        if _ok(k["achieved_occupancy_pct"]) and _ok(k["theoretical_occupancy_pct"]) and k["theoretical_occupancy_pct"] > 0:
            ratio = k["achieved_occupancy_pct"] / k["theoretical_occupancy_pct"]
            where = "at its ceiling" if ratio >= 0.9 else "below its ceiling"
            parts.append(f"Achieved occupancy is {fmt.pct(k['achieved_occupancy_pct'])}, {where} "
                         f"({fmt.pct(100 * ratio)} of the theoretical {fmt.pct(k['theoretical_occupancy_pct'])}).")
        return " ".join(parts)

    # ------------------------------------------------------------------ what limits each kernel

    @cached_property
    def _limiters(self) -> pd.DataFrame:
        """The main kernel of every fused call whose units were measured, with its verdict judged again from
        its counters (collect/schema/limiter.py); a stored verdict that disagrees is refused."""
        k = self.kernels()
        cols = ["case_id", "launch", "impl", "shape", "label", "kernel_step", *UNIT_FIELDS, "verdict", "evidence"]
        if k.empty or not set(UNIT_FIELDS) <= set(k.columns) or k[list(UNIT_FIELDS)].isna().all().all():
            return pd.DataFrame(columns=cols)
        im = self.impls()
        im = im[(im["group"] == "main") & (im["status"] == "ok") & ~im["impl"].isin(MATERIALISING)
                & (im["impl"] != "sdpa")]
        rows = []
        for _, r in im.iterrows():
            mine = self._case_kernels(r["case_id"])
            mine = mine[mine[list(UNIT_FIELDS)].notna().any(axis=1)] if not mine.empty else mine
            if mine.empty:
                continue
            kk = mine.sort_values("duration_ms", ascending=False, na_position="last").iloc[0]
            units = {f: (float(kk[f]) if _ok(kk[f]) else None) for f in UNIT_FIELDS}
            verdict = limits.verdict(self.run, kk)
            shape = (int(r["batch"]), int(r["heads"]), int(r["seq_len"]), int(r["head_dim"]), r["dtype"], bool(r["causal"]))
            step = next((x for x in (kk.get("kernel_step"), r.get("kernel_step")) if _ok(x)), None)
            rows.append(dict(case_id=kk["case_id"], launch=int(kk["launch"]), impl=r["impl"], shape=shape,
                             label=impl_label(r["impl"]) + _step_words(step), kernel_step=step, **units,
                             verdict=verdict.word if verdict else None, evidence=verdict.evidence if verdict else None))
        return pd.DataFrame(rows, columns=cols)

    def limiter_shapes(self) -> list[tuple]:
        """The shapes at which our kernel's units were measured, in profile order."""
        df = self._limiters
        return list(dict.fromkeys(df[df["impl"] == "triton"]["shape"])) if not df.empty else []

    def limiter_table(self) -> str:
        df = self._limiters
        if df.empty:
            return ("_This run's profile has no pipe or Speed-of-Light counters (it predates them, or Nsight Compute "
                    "could not collect them), so no kernel's limiter is judged._")
        t = df.assign(shape_text=[self.shape_text(s) for s in df["shape"]],
                      verdict_text=[limiter_words(v) for v in df["verdict"]])
        cols = {"shape_text": "Shape", "label": "Kernel"}
        cols.update({f: name[0].upper() + name[1:] + " (% of peak)" for _, f, name in UNITS})
        cols["verdict_text"] = "What limits it"
        return table_html(t, cols, {f: fmt.pct for f in UNIT_FIELDS})

    def utilisation_figure(self) -> str:
        df = self._limiters
        if df.empty:
            return ""
        # One row per kernel and shape, one column per unit: a cell's colour is its busy share, and the
        # colour scale turns at the share the rule calls a limit, so a limiting unit stands out.
        y = [_esc(f"{impl_label(i)}{step_short(s)} · B{b} H{h} N{n} d{d}{' causal' if c else ''}")
             for i, s, (b, h, n, d, _, c) in zip(df["impl"], df["kernel_step"], df["shape"])]
        x = [_esc(name) for _, _, name in UNITS]
        z = df[list(UNIT_FIELDS)].astype(float).values
        turn = BUSY_PCT / 100
        fig = go.Figure(go.Heatmap(
            z=z, x=x, y=y, zmin=0, zmax=100, texttemplate="%{z:.0f}",
            colorscale=[[0, "#f7fbff"], [turn * 0.5, "#9ecae1"], [turn - 1e-6, "#2171b5"], [turn, "#cb181d"], [1, "#67000d"]],
            colorbar=dict(title="% of peak", tickvals=[0, 20, 40, 60, BUSY_PCT, 100]),
            hovertemplate="%{y}<br>%{x}: %{z:.3g}% of its peak<extra></extra>"))
        fig.update_layout(yaxis=dict(autorange="reversed", automargin=True), xaxis=dict(side="top", automargin=True))
        return self.figure("utilisation", fig,
                           "How busy each unit was while the kernel ran, as a share of its own peak (the cell's number): "
                           "the tensor, exponential (XU), FMA, ALU and load/store pipes and the instruction issue slots "
                           "(sm__pipe_*_cycles_active, sm__inst_executed_pipe_*, sm__inst_issued, as % of peak "
                           "sustained while the SM was active), and DRAM, L2 and L1/shared throughput (Speed of "
                           f"Light). Cells at {BUSY_PCT:.0f}% or more, where a unit counts as the limit, turn red. "
                           "Nsight Compute with --clock-control none, one profiled call after warm-up",
                           height=160 + 28 * len(y))

    def limiter_finding(self) -> str:
        """Per shape: our kernel's verdict, the busiest unit, and the fastest peer's verdict beside it."""
        df = self._limiters
        out = []
        for shape in self.limiter_shapes():
            at = df[df["shape"] == shape]
            ours = at[at["impl"] == "triton"].iloc[0]
            busiest = max(UNITS, key=lambda u: ours[u[1]] if _ok(ours[u[1]]) else -1)
            text = (f"At {self.shape_text(shape)}, our kernel{escape.text(_step_words(ours.kernel_step))} "
                    f"is limited by **{escape.text(limiter_words(ours.verdict))}**: {escape.text(ours.evidence or '')}")
            peers = at[at["impl"] != "triton"]
            same = [impl_label(p) for p, v in zip(peers["impl"], peers["verdict"]) if v == ours.verdict]
            by_verdict: dict[str, list[str]] = {}
            for p, v in zip(peers["impl"], peers["verdict"]):
                if v != ours.verdict:
                    by_verdict.setdefault(v, []).append(impl_label(p))
            other = [f"{join(names)} by {escape.text(limiter_words(v))}" for v, names in by_verdict.items()]
            if same:
                text += f". {join(same)} {'is' if len(same) == 1 else 'are'} limited the same way"
            if other:
                text += f"{'; ' if same else '. '}{join(other)}"
            out.append(text + f" (our busiest unit: the {busiest[2]}).")
        return "\n\n".join(out)

    def limiter_headline(self) -> str:
        """One sentence for the top of the page: our kernel's verdict at each limiter shape, grouped."""
        df = self._limiters
        shapes = self.limiter_shapes()
        if not shapes:
            return ""
        by: dict[str, list[str]] = {}
        for shape in shapes:
            ours = df[(df["shape"] == shape) & (df["impl"] == "triton")].iloc[0]
            by.setdefault(ours.verdict, []).append(self.shape_text(shape))
        parts = [f"{escape.text(limiter_words(v))} at {join(s)}" for v, s in by.items()]
        return (f"By its counters, our kernel is limited by {'; '.join(parts)} (a unit counts as the limit at "
                f"{BUSY_PCT:.0f}% of its peak; below that, the largest share of stalls names what the warps wait for).")

    # ------------------------------------------------------------------ SASS hot spots

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
            step = r.get("kernel_step") if _ok(r.get("kernel_step")) else None
            out.append(dict(case_id=case_id, launch=int(launch), impl=r["impl"], shape=shape,
                            title=escape.text(f"{impl_label(r['impl'])}{_step_words(step)}, {self.shape_text(shape)}")))
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
                             why="; ".join(stall_words(r) for r in reasons.index[:2])))
        t = pd.DataFrame(rows).sort_values("share", ascending=False)
        return table_html(t, {"role": "What the instructions do", "share": "Share of the kernel's samples",
                              "n": "Instructions", "ops": "Opcodes", "why": "Main stall reasons there"},
                          {"share": fmt.pct})

    def hotspot_finding(self, case_id: str, launch: int) -> str:
        hs = self._hotspots(case_id, launch)
        if hs.empty:
            return ""
        top = hs.iloc[:3]
        parts = [f"{escape.code(o)} ({HOTSPOT_ROLES.get(r, r)}, {fmt.pct(sh)}"
                 + (f", mostly {escape.text(t)})" if _ok(t) else ")")
                 for o, r, sh, t in zip(top["opcode"], top["role"], top["share_pct"], top["top_reason"])]
        covered = hs["share_pct"].sum()
        return (f"Its three hottest instructions are {join(parts)}; the {len(hs)} listed hold "
                f"{fmt.pct(covered)} of its warp samples.")

    # ------------------------------------------------------------------ stalls

    def stall_frame(self, shape=None) -> pd.DataFrame:
        """Share of stall (excluding 'selected', which is issuing) per reason, per main kernel."""
        ks = self._main_kernels(shape)
        st = self.run.frame("profile", "stalls")
        if ks.empty or st.empty:
            return pd.DataFrame(columns=["label", "kernel_name", "reason", "share"])
        st = st[st["reason"] != "selected"].merge(ks[["case_id", "launch", "label", "kernel_name"]], on=["case_id", "launch"])
        tot = st.groupby("label")["warps_per_issue"].transform("sum")
        st = st.assign(share=(st["warps_per_issue"] / tot).where(tot > 0))
        st.loc[st["share"] < MIN_STALL_SHARE, "reason"] = "other"
        return st.groupby(["label", "kernel_name", "reason"], as_index=False, sort=False)["share"].sum()

    def stalls_figure(self, shape=None) -> str:
        shape = shape or self.headline
        df = self.stall_frame(shape)
        if df.empty:
            return "_No warp-state data in this run._"
        fig = go.Figure()
        order = [r for r in df.groupby("reason")["share"].sum().sort_values(ascending=False).index if r != "other"]
        order += ["other"] if (df["reason"] == "other").any() else []
        labels = [_esc(x) for x in dict.fromkeys(df["label"])]
        raw_labels = list(dict.fromkeys(df["label"]))
        for i, reason in enumerate(order):
            sub = df[df["reason"] == reason].set_index("label").reindex(raw_labels)
            color = PALETTE[7] if reason == "other" else STALL_COLORS[i % len(STALL_COLORS)]
            fig.add_bar(name=_esc(reason), y=labels, x=100 * sub["share"].fillna(0), orientation="h", marker_color=color,
                        customdata=[_esc(x) for x in sub["kernel_name"].fillna("")],
                        hovertemplate=f"{_esc(reason)}: %{{x:.3g}}% of stalls<br>%{{customdata}}<extra></extra>")
        fig.update_layout(barmode="stack", xaxis_title="Share of warp stalls (%)", xaxis_range=[0, 100],
                          yaxis=dict(autorange="reversed", tickmode="array", tickvals=labels, ticktext=labels),
                          # Measured from the figure's edge, not the plot's: long kernel labels narrow the plot.
                          legend=dict(xref="container", entrywidth=130, traceorder="normal"))
        return self.figure(f"stalls-{_shape_id(shape)}", fig,
                           "Why warps were not issuing: each stall reason's share of the warps stalled per issued "
                           "instruction (smsp__average_warps_issue_stalled_*), reasons under 3% summed as other. "
                           f"{self.caption_conditions(shape)}.", height=220 + 36 * len(labels) + 24 * (len(order) // 4))

    def stall_finding(self, shape=None) -> str:
        df = self.stall_frame(shape)
        k = self._triton_kernel(shape)
        if df.empty or k is None:
            return ""
        # By label, not kernel name: with the portable path shipped at this shape both Triton rows run one kernel.
        mine = df[(df["label"] == k["label"]) & (df["reason"] != "other")].sort_values("share", ascending=False)
        if mine.empty:
            return ""
        top = mine.iloc[0]
        text = (f"The Triton kernel's largest stall reason is **{escape.text(top['reason'])}**, "
                f"{fmt.pct(100 * top['share'])} of its stalls")
        if len(mine) > 1:
            text += f", then {escape.text(mine.iloc[1]['reason'])} at {fmt.pct(100 * mine.iloc[1]['share'])}"
        return text + "."

    # ------------------------------------------------------------------ bytes vs model

    def bytes_frame(self, shape=None) -> pd.DataFrame:
        shape = shape or self.headline
        df = self._rows(shape)
        df = df[(df["status"] == "ok") & df["dram_read_bytes"].notna()] if not df.empty else df
        if df.empty:
            return pd.DataFrame()
        b, h, n, d, dt, c = shape
        e = ELEMENT_BYTES.get(dt, 2)
        out = []
        for _, r in df.iterrows():
            fused = r["impl"] not in MATERIALISING
            mdl = (model.fused_traffic_bytes if fused else model.naive_traffic_bytes)(n, d, e, b * h)
            dram = self._dram(r)
            out.append({"impl": r["impl"], "case_id": r["case_id"], "model_kind": "fused 4eNd" if fused else "naive 4eNd + 4eN²",
                        "model": float(mdl), "dram": dram, "ratio": dram / mdl if mdl else None, "l2": r["l2_bytes"],
                        "config": r["config"]})
        return pd.DataFrame(out)

    def bytes_figure(self, shape=None) -> str:
        shape = shape or self.headline
        df = self.bytes_frame(shape)
        if df.empty:
            return "_No DRAM byte counts in this run._"
        fig = go.Figure()
        x = [_esc(impl_label(i)) for i in df["impl"]]
        fig.add_bar(name="model (byte arithmetic)", x=x, y=df["model"], marker_color=PALETTE[7],
                    customdata=[_esc(k) for k in df["model_kind"]], hovertemplate="%{x}: model %{y:.4s}B (%{customdata})<extra></extra>")
        fig.add_bar(name="measured DRAM (read + write ≥ output)", x=x, y=df["dram"], marker_color=PALETTE[0],
                    hovertemplate="%{x}: measured %{y:.4s}B<extra></extra>")
        fig.add_bar(name="measured L2 traffic", x=x, y=df["l2"], marker_color=PALETTE[5],
                    hovertemplate="%{x}: L2 %{y:.4s}B<extra></extra>")
        fig.update_layout(barmode="group")
        fig.update_yaxes(type="log", title_text="bytes per call",
                         **log_ticks(list(df["model"]) + list(df["dram"]) + list(df["l2"].dropna()), "B", si=True))
        return self.figure(f"bytes-{_shape_id(shape)}", fig,
                           "Bytes each implementation moved, measured by the DRAM and L2 counters, beside the byte-"
                           "arithmetic model (naive: 4eNd + 4eN² per head; fused: 4eNd per head). "
                           f"{self.caption_conditions(shape)}.")

    def bytes_table(self, shape=None) -> str:
        df = self.bytes_frame(shape)
        if df.empty:
            return ""
        return table_html(df, {"impl": "Implementation", "model_kind": "Model", "model": "Model bytes", "dram": "Measured DRAM",
                               "ratio": "Measured / model", "l2": "Measured L2"},
                          {"model": fmt.bytes_, "dram": fmt.bytes_, "l2": fmt.bytes_, "ratio": fmt.ratio})

    def bytes_gap_explained(self, shape=None) -> str:
        """The gap between measured and modelled bytes, in numbers from this run, level by level."""
        shape = shape or self.headline
        df = self.bytes_frame(shape)
        if df.empty:
            return ""
        b, h, n, d, dt, c = shape
        e = ELEMENT_BYTES.get(dt, 2)
        tensor = b * h * e * n * d  # one of Q, K, V or O
        rows = {r["case_id"]: r for _, r in self._rows(shape).iterrows()}
        parts = []
        for impl in ("triton", "triton-portable"):
            t = df[df["impl"] == impl]
            if not t.empty:
                text = self._reread_text(rows[t.iloc[0]["case_id"]], n, tensor)
                if text:
                    parts.append(text)
        nv = df[df["impl"] == "naive"]
        if not nv.empty:
            r = nv.iloc[0]
            text = (f"The naive path moved {fmt.bytes_(r['dram'])} through DRAM, {fmt.ratio(r['ratio'])} the model's "
                    f"{fmt.bytes_(r['model'])}")
            if r["ratio"] > 1.05:
                text += (": the model counts the score and probability matrices once each in the input dtype, while "
                         "this implementation scales the scores in a separate kernel and its softmax writes fp32 "
                         "probabilities that are cast back, so N² elements cross DRAM more often (see the kernel table).")
            elif r["ratio"] < 0.95:
                text += (": part of the N² matrices stayed in L2 between kernels, so DRAM saw fewer bytes than the "
                         "model's one pass per kernel.")
            else:
                text += ", about what the model predicts."
            parts.append(text)
        short = [impl_label(rows[cid]["impl"]) for cid in df["case_id"]
                 if _ok(rows[cid]["dram_write_bytes"]) and rows[cid]["dram_write_bytes"] < 0.9 * tensor]
        if short:
            l2 = self.run.manifest.device.l2_bytes if self.run.manifest.device else None
            size = f" ({fmt.bytes_(l2)} here)" if l2 else ""
            parts.append(f"DRAM writes of {join(short)} are below the {fmt.bytes_(tensor)} of output they produce: "
                         f"L2 is a write-back cache{size}, so output still held in L2 when the kernel ended reaches "
                         "DRAM later, after the counters stopped.")
        return "\n\n".join(parts)

    def _reread_text(self, r, n: int, tensor: float) -> str:
        """Each query tile of a fused kernel reads all of its head's K and V: the requests that makes, against what
        each level's counter saw. A level that saw fewer bytes than the requests served the rest from a level
        nearer the SM, or (when none did) its counter did not see them."""
        m = re.search(r"BLOCK_M=(\d+)", r["config"] or "")
        if not m:
            return ""
        bm = int(m.group(1))
        blocks = -(-n // bm)
        requests = tensor * (2 + 2 * blocks)  # Q read and O written once; K and V once per query tile
        who = impl_label(r["impl"])
        out = [f"The model counts K and V once, but {who}'s {blocks} query blocks of {bm} rows per head each read all "
               f"of their head's K and V: with Q read and O written once, that is {fmt.bytes_(requests)} of re-reads "
               "and requests."]
        k = self._case_kernels(r["case_id"])
        _, why_l1 = self._level_bytes(r, k, "l1")
        l1, l2, dram = r["l1_bytes"], r["l2_bytes"], r["dram_read_bytes"]
        if why_l1 == "bypassed":
            out.append(f"Its loads bypass L1 (the L1 counter saw {fmt.bytes_(l1)}), as TMA copies do.")
        elif _ok(l1):
            out.append(f"The L1 counter saw {fmt.ratio(l1 / requests)} those requests.")
        if _ok(l2):
            seen = l2 / requests
            text = f"L2 saw {fmt.ratio(seen)} of them"
            if seen < 0.95 and why_l1 != "bypassed" and _ok(l1) and l1 >= 0.95 * requests:
                text += ": L1 served the rest"
            elif seen < 0.95:
                text += (": fewer bytes than the tiles the kernel requests, and no level nearer the SM counted the "
                         "rest, so these counters do not show where every re-read was served")
            out.append(text + ".")
        if _ok(dram):
            kv = max((dram - tensor) / (2 * tensor), 0)
            held = ("L2 held them between query blocks" if kv < 0.5 * blocks else
                    "the caches did not hold them between query blocks")
            out.append(f"K and V came from DRAM about {fmt.num(kv, 2)} times instead of {blocks}: {held}.")
        return " ".join(out)

    # ------------------------------------------------------------------ register caps

    def register_cap_note(self) -> str:
        """Whether capping registers could add a block per SM to our kernel, from its own block limits:
        only where registers, not shared memory, set how many blocks fit."""
        rows = []
        for shape in self.limiter_shapes() or ([self.headline] if self.headline else []):
            k = self._triton_kernel(shape)
            if k is None or not (_ok(k.get("block_limit_registers")) and _ok(k.get("block_limit_smem"))):
                continue
            rows.append((shape, int(k["block_limit_registers"]), int(k["block_limit_smem"])))
        if not rows:
            return "This run's profile has no block limits for our kernel, so whether a register cap could help is not known."
        bound = [(s, r, m) for s, r, m in rows if m <= r]
        free = [(s, r, m) for s, r, m in rows if m > r]
        out = []
        if bound:
            counts = {(r, m) for _, r, m in bound}
            tail = (f": shared memory allows {plural(next(iter(counts))[1], 'block')} per SM and registers "
                    f"{next(iter(counts))[0]}" if len(counts) == 1 else "")
            out.append(f"At {join(self.shape_text(s) for s, _, _ in bound)}, our kernel's shared memory allows no "
                       f"more blocks per SM than its registers do{tail}, so no register cap (`maxnreg`) could put "
                       "another block on an SM. The register-cap experiment of earlier runs is therefore not run: it "
                       "could not answer its question on the kernel that ships.")
        for s, r, m in free:
            out.append(f"At {self.shape_text(s)}, registers allow {plural(r, 'block')} per SM and shared memory {m}: "
                       "a register cap could add a block there, and this run does not test whether it would help.")
        return " ".join(out)
