"""Hardware & ceilings: what the GPU is, what its datasheet promises, what it sustains."""
from __future__ import annotations

from functools import cached_property

import pandas as pd
from plotly.subplots import make_subplots

from collect.schema import datasheets

from .. import escape, fmt, model
from ..ceilings import BANDWIDTH_KEYS, COMPUTE_KEYS, ROOFS, Ceilings
from ..clock_reading import overshoot_words
from ..figures import PALETTE
from ..tables import table_html
from ..vocab import CLOCK_GAP, ELEMENT_BYTES, STUDY, STUDY_N, dtype_short, impl_label, join, masking
from .base import Page

SOURCE_WORDS = {"measured": "measured", "datasheet": "datasheet (not measured in this run)",
                "architectural": "architectural rate (not measured in this run)", "missing": "not known"}


# Where a run keeps the SM clock read in the spin before each timed call: (label, phase, table). Each row holds the
# median of its calls' readings (sm_clock_mhz) and, where recorded, the highest single one (sm_clock_max_mhz). The
# profile phase's kernels are left out: their clock is Nsight Compute's, read over the kernel, not before it.
TIMED_READINGS = (("Benchmarks", "bench", "rows"), ("Kernel iterations", "iterations", "rows"),
                  ("Decode: attention alone", "decode", "micro"), ("Profiling: the clock check", "profile", "clock_check"))
CEILINGS_LABEL = "Hardware: the ceilings"


def _cell(v) -> str:
    """A table cell: blank for an absent value (None or pandas' NaN), the value as text otherwise."""
    return "" if v is None or (isinstance(v, float) and v != v) else str(v)


class HardwarePage(Page):
    slug = "hardware"
    phase = "env"

    @property
    def device(self):
        return self.run.manifest.device

    @property
    def sheet(self):
        return self.run.manifest.datasheet

    @cached_property
    def ceilings(self) -> Ceilings:
        return Ceilings(self.run.manifest)

    @property
    def available(self) -> bool:
        rec = self.run.phase_record("env")
        return self.device is not None and rec is not None and rec.status == "complete"

    def measured(self, name: str):
        return self.ceilings.measured(name)

    def measured_rate(self, name: str) -> float | None:
        return self.ceilings.measured_rate(name)

    def ridge(self, which: str, compute: str = "fp16") -> float | None:
        return self.ceilings.ridge(compute, which=which)

    # --- what this run shows ---------------------------------------------------------------

    def findings_first(self) -> str:
        out = []
        bw, sheet_bw = self.measured_rate("copy_bandwidth"), self.ceilings.sheet_rate("dram")
        if bw and sheet_bw:
            # The measured rate first, then its share: a figure in brackets after "the datasheet's bandwidth"
            # would read as the datasheet's own.
            out.append(f"The memory system sustained {fmt.bandwidth(bw)} on a large copy, "
                       f"{fmt.pct(100 * bw / sheet_bw)} of the datasheet's DRAM bandwidth.")
        elif bw:
            out.append(f"A large copy sustained {fmt.bandwidth(bw)} of DRAM bandwidth; the datasheet table has no row "
                       "for this GPU to compare it with.")
        else:
            out.append("The DRAM copy bandwidth was not measured in this run.")
        fp16, sheet16 = self.measured_rate("matmul_fp16"), self.ceilings.sheet_rate("fp16")
        if fp16 and sheet16:
            out.append(f"The best fp16 matmul reached {fmt.flops(fp16)}, {fmt.pct(100 * fp16 / sheet16)} of the "
                       f"datasheet's dense tensor-core peak of {fmt.flops(sheet16)}.")
        r = self.ridge("measured")
        if r is not None:
            out.append(f"So an fp16 kernel needs {fmt.num(r)} FLOP per byte of DRAM traffic before compute, not "
                       "memory, can be its limit.")
        return " ".join(out[:3])

    def peak_clock_note(self) -> str:
        """The arithmetic behind the datasheet's tensor-core peak (SMs x FLOP per SM per clock x the clock it is counted
        at) and, where the device's maximum SM clock differs, the same SMs' rate at that maximum; '' for a sheet whose
        clock the table does not hold."""
        peak, s = datasheets.tensor_peak_clock(self.sheet), self.sheet
        if peak is None or not s.fp16_tensor_flops_per_s:
            return ""
        mhz, per_sm = peak
        text = (f"Its dense fp16 tensor-core peak is {fmt.count(s.sm_count)} SMs × {fmt.count(per_sm)} FLOP a clock each "
                f"× {fmt.num(mhz, 4)} MHz = {fmt.flops(s.fp16_tensor_flops_per_s)}: the clock at which the whitepaper's "
                "rate per SM multiplies out to the datasheet's figure (`collect/schema/datasheets.py`).")
        top = getattr(self.device, "sm_clock_max_mhz", None)
        if fmt.known(top) and top and fmt.num(mhz, 4) != fmt.num(top, 4):
            more = top > mhz
            text += (f" At the {fmt.num(top, 4)} MHz maximum SM clock this device reports, the same SMs would issue "
                     f"{fmt.num(s.fp16_tensor_flops_per_s * top / mhz / 1e12)} TFLOP/s, "
                     f"{fmt.pct(100 * abs(top / mhz - 1))} {'more' if more else 'less'} than that figure"
                     + (", so a matmul running near that clock could pass the datasheet's peak without passing its SMs' "
                        "own rate." if more else "."))
        return text

    def unmeasured_roofs(self) -> str:
        """Which cache roofs this run did not measure, where some were not."""
        missing = [ROOFS[k][2] for k in ("l2", "smem") if self.ceilings.roof(k).source != "measured"]
        if not missing:
            return ""
        return (f"The {' and '.join(missing)} bandwidth {'was' if len(missing) == 1 else 'were'} not measured "
                "in this run; the rooflines fall back on the figures the table below names.")

    # --- tables ----------------------------------------------------------------------------

    def device_table(self) -> str:
        """Facts the device reports, with the datasheet's where it states the same thing."""
        d, m, s = self.device, self.run.manifest, self.sheet
        rows = [
            ("Device", d.name, s.marketing_name if s else None), ("Compute capability", d.compute_capability, None),
            # Counts with thousands separators, as every other table prints them (65,536 registers, not 65536).
            ("SMs", fmt.count(d.sm_count), fmt.count(s.sm_count) if s and s.sm_count else None),
            ("Registers per SM", fmt.count(d.regs_per_sm), None),
            ("Shared memory per SM", fmt.bytes_(d.smem_per_sm_bytes), None),
            ("Shared memory per block (opt-in)", fmt.bytes_(d.smem_per_block_optin_bytes), None),
            ("Max warps per SM", fmt.count(d.max_warps_per_sm), None),
            ("Max blocks per SM", fmt.count(d.max_blocks_per_sm), None),
            ("L2 cache", fmt.bytes_(d.l2_bytes), fmt.bytes_(s.l2_bytes) if s else None),
            # The device counts its memory in bytes; a vendor's "141 GB" is nearer the binary GiB (an H200 reports
            # 140 GiB, 150 GB): the device's figure in both units, so the decimal one cannot read as more memory
            # than the vendor's.
            ("Memory", f"{fmt.bytes_(d.memory_bytes)} ({fmt.bytes_(d.memory_bytes, binary=False)})",
             f"{fmt.bytes_(s.memory_bytes, binary=False)} {s.memory_type}" if s else None),
            ("Max SM / memory clock", f"{fmt.num(d.sm_clock_max_mhz, 4)} / {fmt.num(d.mem_clock_max_mhz, 4)} MHz", None),
            ("Driver / CUDA", f"{d.driver_version or 'n/a'} / {d.cuda_version or 'n/a'}", None),
        ]
        rows += [(k, v or "not installed", None) for k, v in m.software.items()]
        df = pd.DataFrame(rows, columns=["fact", "value", "sheet"], dtype=object)
        return table_html(df, {"fact": "", "value": "Reported by this device", "sheet": "Vendor's figure"},
                          {"value": _cell, "sheet": _cell})

    def clocks_table(self) -> str:
        df = self.run.frame("env", "clocks")
        if df.empty:
            return "_No clock readings were recorded in this run._"
        return table_html(df, {"moment": "When", "sm_clock_mhz": "SM clock (MHz)", "mem_clock_mhz": "Memory clock (MHz)",
                               "temperature_c": "Temperature (°C)", "power_w": "Power (W)"},
                          # nvidia-smi reads clocks in whole MHz and temperatures in whole degrees: four significant
                          # figures would print "345.0" and "36.00", a precision the reading does not have.
                          {"sm_clock_mhz": fmt.count, "mem_clock_mhz": fmt.count, "temperature_c": fmt.count,
                           "power_w": lambda v: fmt.num(v, 3)})

    # --- clocks ----------------------------------------------------------------------------------

    def clocks_lead(self) -> str:
        """Who touched the clocks: collect never does; what the profiler did comes from its recorded flags, since a run
        collected elsewhere may not have passed `--clock-control none`, and a run without the profile phase has none."""
        f = self.run.manifest.profiler_flags or []
        value = f[f.index("--clock-control") + 1] if "--clock-control" in f[:-1] else None
        untouched = "nothing in `collect/` changes clocks or power limits"
        if not f:
            return f"Clocks were read, never set: {untouched}."
        if value == "none":
            return (f"Clocks were read, never set: {untouched}, and Nsight Compute ran with `--clock-control none`, "
                    "which leaves them as they are.")
        if value:
            return (f"{untouched.capitalize()}, but Nsight Compute set them while it profiled, as its flag "
                    f"{escape.code(f'--clock-control {value}')} asks.")
        return (f"{untouched.capitalize()}, but Nsight Compute, given no `--clock-control` flag, locked them at base "
                "while it profiled, its default.")

    def smi_sentence(self) -> str:
        """What the table of clocks is: the driver's own samples at a few moments, outside any timed call."""
        df = self.run.frame("env", "clocks")
        if df.empty:
            return ""
        sources = join(escape.text(s) for s in dict.fromkeys(df["source"].dropna()))
        n = len(df)
        return (f"The table lists what {sources or 'the driver'} reported at {'one moment' if n == 1 else f'{n} moments'} "
                "of the run, outside any timed call: the clock at that moment, not the clock a timed call ran at.")

    def _ceiling_readings(self) -> pd.DataFrame:
        """The SM clock read before the calls of every ceiling measured: each shape of a sweep, else the one."""
        clocks = [p.sm_clock_mhz for c in self.run.manifest.measured_ceilings if c.status == "ok"
                  for p in (c.sweep or [c])]
        return pd.DataFrame({"sm_clock_mhz": clocks}, dtype=float)

    @cached_property
    def _reading_sources(self) -> list[tuple[str, pd.DataFrame]]:
        """(label, rows) of every source of timed calls' clock readings, read once for the table and the sentence."""
        return [(CEILINGS_LABEL, self._ceiling_readings())] + [
            (label, self.run.frame(phase, table)) for label, phase, table in TIMED_READINGS if self.run.has(phase)]

    def clock_readings(self) -> pd.DataFrame:
        """Per source of timed calls: how many measurements read the SM clock, the lowest and highest median reading,
        the highest single reading, and how many medians print above the device's reported maximum."""
        top = getattr(self.device, "sm_clock_max_mhz", None)
        rows = []
        for label, df in self._reading_sources:
            med = pd.to_numeric(df.get("sm_clock_mhz", pd.Series(dtype=float)), errors="coerce").dropna()
            if med.empty:
                continue
            single = pd.to_numeric(df.get("sm_clock_max_mhz", pd.Series(dtype=float)), errors="coerce").dropna()
            # Compared as printed (whole MHz): a median of 1,980.3 on a 1,980 MHz device would read as above it
            # while both print the same.
            above = int((med.round() > round(top)).sum()) if fmt.known(top) and top else None
            rows.append({"source": label, "n": len(med), "lo": med.min(), "hi": med.max(),
                         "top": max(med.max(), single.max()) if not single.empty else None, "above": above})
        return pd.DataFrame(rows, columns=["source", "n", "lo", "hi", "top", "above"])

    def clock_method(self) -> str:
        """How this run's timed calls read the SM clock, as each phase recorded it (PhaseRecord.sm_clock_method): the
        spin's own counters, or its requested cycles over CUDA-event time, which counts the spin's launch in."""
        by = {}
        for rec in self.run.manifest.phases:
            if rec.sm_clock_method:
                by.setdefault(rec.sm_clock_method, []).append(rec.name)
        counters = ("the spin's own cycle counter (`clock64`) over the GPU's nanosecond timer (`globaltimer`), both "
                    "stamped as the spin starts and ends")
        events = ("the cycles the spin was asked to wait over its time between two CUDA events, which counts the "
                  "spin's launch in and so reads low before short calls")
        if not by:
            return "This run does not record how its timed calls read the SM clock."
        if set(by) == {"counters"}:
            return f"This run read it from {counters}."
        if set(by) == {"events"}:
            return (f"This run read it as {events}. Collect now reads {counters}, wherever that spin can be built; this "
                    "run was collected before that change, or on a GPU where the spin could not be built.")
        said = {"counters": "from the spin's own counters", "events": "from CUDA events",
                "both": "partly from each (a phase resumed after the change)"}
        parts = [f"{join(names)} {said[m]}" for m, names in by.items()]
        return (f"This run's phases read it in two ways: {'; '.join(parts)}. The counters are {counters}; the events "
                f"read {events}.")

    def readings_table(self) -> str:
        df = self.clock_readings()
        if df.empty:
            return "_No timed call of this run recorded an SM clock reading._"
        # Whole MHz, as the clock steps; a phase that keeps only each measurement's median has no single reading.
        mhz = lambda v: fmt.num(v, 4) if fmt.known(v) else "not recorded"  # noqa: E731
        return table_html(df, {"source": "Timed calls of", "n": "Measurements", "lo": "Lowest median (MHz)",
                               "hi": "Highest median (MHz)", "top": "Highest single reading (MHz)",
                               "above": "Medians above the reported maximum"},
                          {"n": fmt.count, "lo": mhz, "hi": mhz, "top": mhz,
                           "above": lambda v: fmt.count(v) if fmt.known(v) else "n/a"})

    def readings_against_times(self) -> str:
        """Whether the calls' times follow their clock readings, from the bench rows that keep every call's time: the
        measurement whose readings spread widest (lowest to highest), beside its calls' times. Were a call's time
        inversely proportional to its reading, the times would spread at least as far. This is why no page rescales a
        ratio by two calls' readings (vocab.clocks_apart)."""
        f = self.run.frame("bench", "rows")
        need = ("sm_clock_min_mhz", "sm_clock_max_mhz", "latency_samples_ms", "n_timed_runs")
        if f.empty or not set(need) <= set(f.columns):
            return ""
        f = f[(f["status"] == "ok") & f["sm_clock_min_mhz"].notna() & f["sm_clock_max_mhz"].notna()
              & f["latency_samples_ms"].notna()]
        every = f[[isinstance(s, list) and len(s) == n and min(s) > 0
                   for s, n in zip(f["latency_samples_ms"], f["n_timed_runs"])]]
        if every.empty:
            return ""
        clocks = every["sm_clock_max_mhz"] / every["sm_clock_min_mhz"] - 1
        times = every["latency_samples_ms"].map(lambda s: max(s) / min(s) - 1)
        r = every.loc[clocks.idxmax()]
        c, t = clocks[r.name], times[r.name]
        # Were each call's time inversely proportional to its reading, the slowest over the quickest would be at least
        # the highest reading over the lowest.
        how = "far less than" if t < c / 2 else "less than" if t < c else "as much as"
        samples = r["latency_samples_ms"]
        return (f"The widest spread of readings within one measurement of the bench phase was "
                f"{escape.text(impl_label(r['impl']))}'s at B={int(r['batch'])}, H={int(r['heads'])}, N={int(r['seq_len'])}, "
                f"d={int(r['head_dim'])}, {dtype_short(r['dtype'])}, {masking(r['causal'])}: from "
                f"{fmt.num(r['sm_clock_min_mhz'], 4)} to {fmt.num(r['sm_clock_max_mhz'], 4)} MHz, "
                f"{fmt.pct(100 * c)} apart. Its {fmt.count(len(samples))} calls took {fmt.ms(min(samples))} to "
                f"{fmt.ms(max(samples))}, the slowest {fmt.pct(100 * t)} over the quickest: {how} the readings' "
                "spread, which times inversely proportional to the readings would at least match. A reading is of the "
                "rest before a call, so no page rescales a comparison by two calls' readings; where they lie apart it "
                "says which call read higher.")

    def overshoot_sentence(self) -> str:
        """Where readings pass the device's reported maximum: by how much (the words every page shares), and that
        this is the rest's own clock, not a misreading; '' where none does."""
        all_rows = pd.concat([df for _, df in self._reading_sources], ignore_index=True)
        words = overshoot_words(all_rows, self.device)
        if not words:
            top = getattr(self.device, "sm_clock_max_mhz", None)
            return (f"No reading passed the device's reported maximum of {fmt.num(top, 4)} MHz." if fmt.known(top)
                    and top and not all_rows.empty else "")
        return (words.strip() + " On an H100 such readings proved to be the rest's own clock, not a misreading: a "
                "probe found the spin's counters agreeing with the host's clock and the rest's clock really running "
                "past the reported maximum, by a different amount from call to call (scripts/probe_spin_clock.py).")

    def ceilings_clock_sentence(self) -> str:
        """What the SM clock beside each ceiling is, and which compute ceilings were read well under the maximum:
        a matmul's rate follows the clock, so such a ceiling is the chip's rate at a lower clock."""
        rows = [(ROOFS[k][2], c.sm_clock_mhz) for k in COMPUTE_KEYS
                if (c := self.measured(ROOFS[k][0])) is not None and c.status == "ok" and c.sm_clock_mhz]
        if not rows:
            return ""
        text = ("The SM clock beside each ceiling is the median of the readings taken in the short spin before each of "
                "its timed calls, not during them ([Clocks seen](#clocks-seen) says how).")
        top = getattr(self.device, "sm_clock_max_mhz", None)
        low = [(label, mhz) for label, mhz in rows if fmt.known(top) and top and mhz < (1 - CLOCK_GAP) * top]
        if not low:
            return text
        one = len(low) == 1
        text += (f" The {join(label for label, _ in low)} ceiling{'' if one else 's'} {'was' if one else 'were'} "
                 f"read at {join(fmt.num(mhz, 4) for _, mhz in low)} MHz, more than {fmt.pct(100 * CLOCK_GAP, 1)} "
                 f"below the device's reported maximum of {fmt.num(top, 4)} MHz.")
        return text + (" A matmul's rate follows the SM clock, so "
                       f"{'that ceiling is' if one else 'those ceilings are'} likely {'a rate' if one else 'rates'} at a "
                       "lower clock, not the chip's at its maximum (the readings are of the rest before each call: "
                       "[Clocks seen](#clocks-seen)).")

    def datasheet_note(self) -> str:
        if self.sheet is None:
            return (f'!!! note "No datasheet figures"\n    {escape.text(self.run.device_name)} is not in the datasheet '
                    "table (`collect/schema/datasheets.py`), so only measured ceilings are shown. Add a row with its source "
                    "to compare.\n")
        text = (f"Vendor's figures are for the **{escape.text(self.sheet.marketing_name)}**; source: "
                f"{escape.text(self.sheet.source)}.")
        peak = self.peak_clock_note()
        if peak:
            text += " " + peak
        d = self.run.manifest.device
        if d is not None and d.l2_bytes and self.sheet.l2_bytes and abs(d.l2_bytes / self.sheet.l2_bytes - 1) > 0.05:
            # The pages that reason about what fits in L2 use the device's own figure.
            text += (f" The device reports {fmt.bytes_(d.l2_bytes)} of L2, where the vendor's figure (from the source "
                     f"named above, which may describe another GPU of the architecture) is "
                     f"{fmt.bytes_(self.sheet.l2_bytes)}; every page that asks what fits in L2 uses the device's figure.")
        return text

    def ceilings_table(self) -> str:
        rows = []
        for key in (*BANDWIDTH_KEYS, *COMPUTE_KEYS):
            name, _, label, unit = ROOFS[key]
            meas = self.measured_rate(name)
            sheet = self.ceilings.sheet_rate(key)
            c = self.measured(name)
            # Newer runs' problem text already says it (collect/env.py); older ones only have the sweep.
            sweep = (f"best of {len(c.sweep)} shapes" if c is not None and c.sweep and "best of" not in (c.problem or "")
                     else "")
            clock = f"SM clock {fmt.num(c.sm_clock_mhz, 4)} MHz" if c is not None and c.sm_clock_mhz else ""
            how = "; ".join(x for x in (c.problem if c is not None else "", sweep, clock) if x)
            if c is not None and c.status != "ok":
                how = f"{c.status}: {c.reason or 'no reason recorded'}"
            rows.append({"ceiling": f"{label} ({'bandwidth' if unit == 'B/s' else 'compute'})",
                         "sheet": fmt.rate(sheet, unit) + (" (architectural)" if key == "smem" and sheet else "")
                         if sheet else "not stated",
                         "measured": fmt.rate(meas, unit) if meas else "not measured",
                         "frac": fmt.pct(100 * meas / sheet) if meas and sheet else "n/a", "how": how})
        return table_html(pd.DataFrame(rows), {"ceiling": "Ceiling", "sheet": "Datasheet", "measured": "Measured (median)",
                                               "frac": "Measured / datasheet", "how": "How it was measured"})

    def roofs_sentence(self) -> str:
        """Which roofs the rooflines use and where each comes from."""
        parts = []
        for key in (*BANDWIDTH_KEYS, *COMPUTE_KEYS):
            roof = self.ceilings.roof(key)
            parts.append(f"{roof.label}: {SOURCE_WORDS[roof.source]}")
        # Only the Profiling page draws one roof per level; Byte arithmetic draws the measured and datasheet roofs
        # side by side (rooflines_drawn says so below), so this sentence must not speak for it.
        lead = ("The [Profiling](profiling.md) page's hierarchical rooflines take each roof from the best source this run has"
                if self.run.has("profile") else "The best source this run has for each roof")
        return f"{lead} ({'; '.join(parts)})."

    def ceilings_figure(self) -> str:
        """Bandwidths (TB/s) and compute rates (TFLOP/s) in two panels, each on its own linear axis."""
        fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12)
        for col, keys, unit in ((1, BANDWIDTH_KEYS, "TB/s"), (2, COMPUTE_KEYS, "TFLOP/s")):
            labels = [ROOFS[k][2] for k in keys]
            sheet = [(self.ceilings.sheet_rate(k) or 0) / 1e12 or None for k in keys]
            meas = [(self.measured_rate(ROOFS[k][0]) or 0) / 1e12 or None for k in keys]
            fig.add_bar(name="datasheet", x=labels, y=sheet, marker_color=PALETTE[7], showlegend=col == 1,
                        legendgroup="sheet", hovertemplate=f"%{{x}}: %{{y:.3g}} {unit}<extra>datasheet</extra>",
                        row=1, col=col)
            fig.add_bar(name="measured", x=labels, y=meas, marker_color=PALETTE[0], showlegend=col == 1,
                        legendgroup="measured", hovertemplate=f"%{{x}}: %{{y:.3g}} {unit}<extra>measured</extra>",
                        row=1, col=col)
            fig.update_yaxes(title_text=f"{'bandwidth' if col == 1 else 'compute'} ({unit})", rangemode="tozero",
                             row=1, col=col)
        fig.update_layout(barmode="group")
        copy = self.measured("copy_bandwidth")
        cond = copy.problem if copy else "copy"
        return self.figure("ceilings", fig,
                           f"Datasheet and measured ceilings, bandwidth and compute on separate axes. DRAM from a {cond} "
                           "counting bytes read plus written; L2 and shared memory from read microbenchmarks where "
                           "measured (the shared-memory datasheet bar is the architectural rate); compute from large "
                           "matmuls on random data (medians).")

    def ridge_table(self) -> str:
        rows = []
        for compute in COMPUTE_KEYS:
            rows.append({"compute": ROOFS[compute][2], "sheet": self.ridge("datasheet", compute),
                         "meas": self.ridge("measured", compute)})
        f = lambda v: fmt.num(v)  # noqa: E731
        return table_html(pd.DataFrame(rows), {"compute": "Compute ceiling", "sheet": "Datasheet ridge (FLOP/byte)",
                                               "meas": "Measured ridge (FLOP/byte)"}, {"sheet": f, "meas": f})

    def bandwidth_sentence(self) -> str:
        meas, s = self.measured_rate("copy_bandwidth"), self.sheet
        if meas is None:
            return "The copy bandwidth could not be measured in this run."
        if s is None:
            return f"A large device-to-device copy sustained **{fmt.bandwidth(meas)}** (bytes read plus written)."
        return (f"A large device-to-device copy sustained **{fmt.bandwidth(meas)}** (bytes read plus written), "
                f"{fmt.pct(100 * meas / s.memory_bandwidth_bytes_per_s)} of the datasheet's "
                f"{fmt.bandwidth(s.memory_bandwidth_bytes_per_s)}. Kernels in this report are judged against the "
                "measured figure, the rate a kernel that reads and writes as much as a copy can expect."
                + self._read_only_sentence(meas))

    def _read_only_sentence(self, copy: float) -> str:
        """Where a read-only stream of this run (decode attention reading its cache) beat the copy: the roof is a
        yardstick for kernels that mostly read, not a bound."""
        decode = self.run.phase("decode")
        rows = [r for r in getattr(decode, "micro", None) or [] if r.status == "ok" and r.achieved_bytes_per_s]
        if not rows:
            return ""
        best = max(rows, key=lambda r: r.achieved_bytes_per_s)
        if best.achieved_bytes_per_s <= copy:
            return (f" No read-only stream of this run beat it: decode attention reading its cache reached at most "
                    f"{fmt.bandwidth(best.achieved_bytes_per_s)}.")
        return (f" A stream that only reads can go faster: decode attention reading its cache reached "
                f"{fmt.bandwidth(best.achieved_bytes_per_s)} ({fmt.ratio(best.achieved_bytes_per_s / copy)} the copy's "
                "rate, on the [Decode](decode.md) page), so a kernel that mostly reads can sit above this roof.")

    def ridge_sentence(self) -> str:
        r_meas, r_sheet = self.ridge("measured"), self.ridge("datasheet")
        if r_meas is None:
            return "Without a measured copy bandwidth and fp16 matmul rate, no measured ridge point can be drawn."
        text = (f"With the measured ceilings, an fp16 kernel needs at least **{fmt.num(r_meas)} FLOP per byte** of DRAM "
                "traffic before compute, rather than memory, can be its limit")
        if r_sheet is not None:
            text += f" (the datasheet figures put the ridge at {fmt.num(r_sheet)} FLOP/byte)"
        return f"{text}. {self.rooflines_drawn()}"

    def rooflines_drawn(self) -> str:
        """Which roofs the report's rooflines draw. The two pages differ: Byte arithmetic draws the measured DRAM
        and matmul roofs beside the datasheet's wherever each pair is known (roofline_figure there); Profiling
        draws one roof per level, the best source's (Ceilings.roof), so it shows the datasheet only where a
        ceiling was not measured."""
        c = self.ceilings
        sets = [name for name, known in (
            ("measured", c.measured_rate("copy_bandwidth") and c.measured_rate("matmul_fp16")),
            ("datasheet", c.sheet_rate("dram") and c.sheet_rate("fp16"))) if known]
        first = (f"The rooflines on the [Byte arithmetic](byte-arithmetic.md) page draw {' and '.join(f'the {s}' for s in sets)} "
                 f"roof{'s' if len(sets) == 1 else 's side by side'}" if sets else
                 "The rooflines on the [Byte arithmetic](byte-arithmetic.md) page have no roofs to draw")
        sources = {c.roof(k).source for k in (*BANDWIDTH_KEYS, *COMPUTE_KEYS)} - {"missing"}
        if sources == {"measured"}:
            best = "here every one measured, so no datasheet roof appears there"
        elif "measured" in sources:
            best = "measured where this run measured it and the datasheet's or the architectural figure elsewhere"
        else:
            best = "here none measured"
        if not self.run.has("profile"):
            return first + "."
        return f"{first}; the [Profiling](profiling.md) page draws one roof per level from the best source ({best})."

    # --- what a T4 would show ----------------------------------------------------------------

    def t4_prediction_rows(self) -> pd.DataFrame:
        """One call at the study shape on a T4, predicted from the byte and FLOP model and the T4's
        datasheet roofs: the time neither its FLOPs nor its DRAM bytes can beat."""
        sheet = datasheets.by_key("t4")
        cols = ["impl", "roof", "flop_ms", "byte_ms", "floor_ms", "bound"]
        if sheet is None or self.sheet is not None and self.sheet.key == "t4":
            return pd.DataFrame(columns=cols)
        n, d, heads, e = STUDY_N, STUDY["head_dim"], STUDY["batch"] * STUDY["heads"], ELEMENT_BYTES[STUDY["dtype"]]
        flops = model.flops(n, d, heads=heads, causal=STUDY["causal"])
        # Naive PyTorch by the bytes its code as written moves (a scaling pass, an fp32 P and its cast): a T4's
        # 4 MiB L2 holds none of its scores, and the model's ideal unfused count would put its floor too low.
        fused, naive = model.fused_traffic_bytes(n, d, e, heads), model.naive_as_written_bytes(n, d, e, heads)
        bw = sheet.memory_bandwidth_bytes_per_s
        cases = [("ours-turing", "fp16 tensor cores", sheet.fp16_tensor_flops_per_s, fused),
                 ("ours-portable", "fp32 FMA (no tensor cores)", sheet.fp32_flops_per_s, fused),
                 ("sdpa", "fp16 tensor cores", sheet.fp16_tensor_flops_per_s, fused),
                 ("naive", "fp16 tensor cores", sheet.fp16_tensor_flops_per_s, naive)]
        rows = []
        for impl, roof, rate, by in cases:
            if not rate or not bw:
                continue
            f_ms, b_ms = 1e3 * flops / rate, 1e3 * by / bw
            rows.append(dict(impl=impl, roof=roof, flop_ms=f_ms, byte_ms=b_ms, floor_ms=max(f_ms, b_ms),
                             bound="FLOPs" if f_ms >= b_ms else "DRAM bytes"))
        return pd.DataFrame(rows, columns=cols)

    T4_WORDS = {"ours-turing": "Our kernel, Turing tensor-core path (the T4 default)",
                "ours-portable": "Our kernel, portable path (Triton compiles it without tensor cores on a T4)",
                "sdpa": "SDPA's fused kernels (tensor cores)",
                "naive": "naive PyTorch as written (scores through DRAM, its softmax in fp32)"}

    def t4_prediction(self) -> str:
        t = self.t4_prediction_rows()
        if t.empty:
            return ""
        by = dict(zip(t["impl"], t["floor_ms"]))
        shape = (f"B={STUDY['batch']}, H={STUDY['heads']}, N={STUDY_N}, d={STUDY['head_dim']}, "
                 f"{dtype_short(STUDY['dtype'])}, {masking(STUDY['causal'])}")
        text = (f"**A prediction, not a measurement.** On a T4 (its datasheet's roofs, `collect/schema/datasheets.py`), "
                f"one call at {shape} cannot take less than the larger of its FLOPs over the compute roof it runs on "
                "and its DRAM bytes over the memory bandwidth.")
        if "ours-portable" in by and "sdpa" in by and "ours-turing" in by:
            on_tc = by["ours-turing"] / by["sdpa"]
            text += (f" Without tensor cores our kernel's floor is {fmt.ratio(by['ours-portable'] / by['sdpa'])} "
                     f"SDPA's; on the Turing kernel's tensor cores it is {fmt.ratio(on_tc)}"
                     + (", since both then run on the same roof and move the same bytes." if abs(on_tc - 1) < 1e-9
                        else "."))
        table = table_html(t.assign(impl=[self.T4_WORDS.get(i, i) for i in t["impl"]]),
                           {"impl": "Call", "roof": "Compute roof", "flop_ms": "FLOPs / roof", "byte_ms": "DRAM bytes / bandwidth",
                            "floor_ms": "Predicted floor", "bound": "Bound by"},
                           {"flop_ms": fmt.ms, "byte_ms": fmt.ms, "floor_ms": fmt.ms})
        return text + "\n\n" + table
