"""Home: the headline findings of the narrated run, each computed from its data and linked to its page.

A phase the run lacks gives a headline that says so. Every outcome word (fewer, faster, limited by)
is chosen here from the numbers, so the headlines hold on whatever GPU collected the run.
"""
from __future__ import annotations

from functools import cached_property

import pandas as pd

from plotly.subplots import make_subplots

from collect.schema import PHASES
from collect.schema.limiter import UNIT_FIELDS
from collect.schema.occupancy import limits_from_device, occupancy

from .. import escape, fmt, limits, model
from ..fmt import known
from ..tables import table_html
from ..bench_data import BenchData, rivals
from ..clock_reading import overshoot_words, timed_reading
from ..decode_memory import idle_share, own_decode_rows
from ..vocab import (CLOCK_GAP, ELEMENT_BYTES, EVEN, INT8_PAIRS, STUDY, STUDY_N, clock_caveat, clocks_apart,
                     decode_float, decode_words, dtype_short, floor_pace, impl_color, impl_label, join, kernel_name, plural,
                     speedup_words, verdict_words, versus)
from .base import Page

FUSED = "triton"
# Peak memories within this fraction of each other are "the same".
SAME = 0.005
# A read faster than this share of the copy bandwidth beats the rate the decode floor is priced at (a copy counts
# its reads plus its writes and loses time turning between them): the floor is then a yardstick, not a bound, as
# the Decode page says by the same test.
READ_BEATS_COPY = 1.0
# Warp schedulers per SM on every GPU from Volta on: occupancy in warps per scheduler is what one can switch between.
SCHEDULERS_PER_SM = 4
LIMIT_WORDS = {"registers": "registers", "smem": "shared memory", "warps": "warp slots", "blocks": "the per-SM block limit"}


def _shape_text(b, h, d, dtype, causal, n=None) -> str:
    ns = f"N={n}, " if n is not None else ""
    return f"B={b}, H={h}, {ns}d={d}, {dtype_short(dtype)}, {'causal' if causal else 'non-causal'}"


def _headline_case(f: pd.DataFrame, impl: str, b: int, h: int, n: int, d: int, dtype: str = "float16") -> pd.DataFrame:
    """Bench rows of `impl` at one non-causal case: the headline table's cases (fp16 unless told)."""
    return f[(f["impl"] == impl) & (f["dtype"] == dtype) & ~f["causal"].astype(bool) & (f["batch"] == b)
             & (f["heads"] == h) & (f["seq_len"] == n) & (f["head_dim"] == d)]


class HomePage(Page):
    slug = "home"
    phase = "env"

    # --- the list the home page shows ----------------------------------------------------------

    def findings_first(self) -> str:
        """At most three sentences: what fusing did to the bytes, where our kernel stands, what paces decode."""
        out = []
        pair = self._profile_pair() if self.run.has("profile") else None
        if pair is not None:
            a, f = self._dram(pair[0]), self._dram(pair[1])
            word = f"cut the DRAM bytes of one call {fmt.ratio(a / f)}" if f < a else "did not cut DRAM bytes"
            out.append(f"On {self.device_name}, fusing attention {word} at B={pair[2][0]}, H={pair[2][1]}, "
                       f"N={pair[2][2]}, d={pair[2][3]}{self._fusion_share(a / f, pair[2][2], pair[2][3])}.")
        f = self._bench_facet() if self.run.has("bench") else None
        if f is not None and not f.empty:
            tri = f[f["impl"] == FUSED].set_index("seq_len")["latency_ms_median"].sort_index()
            naive = f[f["impl"] == "naive"].set_index("seq_len")["latency_ms_median"]
            # "The fastest other implementation" as the Benchmarks page defines it: FlashAttention-4 too.
            fastest = rivals(f).groupby("seq_len")["latency_ms_median"].min()
            common = [n for n in tri.index if n in naive.index and n in fastest.index]
            if common:
                n = common[-1]
                out.append(f"At N={n}, our Triton kernel is {versus(naive[n] / tri[n], 'naive PyTorch')} and "
                           f"{versus(fastest[n] / tri[n], 'the fastest other implementation')}.")
        if self.run.has("decode"):
            closest = self._floor_row()
            if closest is not None:
                r = float(closest["achieved_over_floor"])
                loop = decode_words(closest["variant"], "prose") or escape.text(closest["variant"])
                # The shape of the Decode headline below, so the two name one loop at one ratio; _decode keeps
                # one model, so the sentence names it.
                out.append(f"In decode, {escape.text(closest['model'])}'s loop closest to its bandwidth floor at "
                           f"batch {int(closest['batch'])} and context {int(closest['context'])} ({loop}) takes "
                           f"{fmt.ratio(r)} the floor: {floor_pace(r, idle_share(closest))}.")
        return " ".join(out) or "This run holds no phase beyond the device facts yet."

    def headlines(self) -> str:
        """Every headline as a Markdown list, each ending in a link to the page that explains it."""
        items = [("Bytes moved", self.bytes_headline()), ("Speed", self.speed_headline()),
                 ("What limits our kernel", self.limiter_headline()),
                 ("Decode against its floor", self.decode_floor_headline()),
                 ("int8 KV cache", self.int8_headline())]
        return "\n".join(f"- **{title}.** {text}" for title, text in items) + "\n"

    def _not_collected(self, phase: str, what: str, link: str) -> str:
        rec = self.run.phase_record(phase)
        how = "failed" if rec is not None and rec.status == "failed" else "was not collected"
        return f"The `{phase}` phase {how} in this run, so {what} is not known for {self.device_name}. {link}"

    # --- bytes -------------------------------------------------------------------------------

    def _profile_pair(self):
        """(naive row, fused row, shape) from the profile at the study shape (else its first main shape)."""
        df = self.run.frame("profile", "impls")
        if df.empty:
            return None
        df = df[(df["group"] == "main") & (df["status"] == "ok") & df["dram_read_bytes"].notna()]
        if df.empty:
            return None
        keys = list(dict.fromkeys(zip(df["batch"], df["heads"], df["seq_len"], df["head_dim"], df["dtype"], df["causal"])))
        study = (STUDY["batch"], STUDY["heads"], STUDY_N, STUDY["head_dim"], STUDY["dtype"], STUDY["causal"])
        for key in ([study] if study in keys else []) + keys:
            g = df[(df["batch"] == key[0]) & (df["heads"] == key[1]) & (df["seq_len"] == key[2])
                   & (df["head_dim"] == key[3]) & (df["dtype"] == key[4]) & (df["causal"] == key[5])]
            naive, fused = g[g["impl"] == "naive"], g[g["impl"] == FUSED]
            if not naive.empty and not fused.empty:
                return naive.iloc[0], fused.iloc[0], key
        return None

    @staticmethod
    def _fusion_share(cut: float, n: int, d: int) -> str:
        """How much of a measured byte cut keeping S and P on chip explains (1 + N/d), where the cut is larger:
        the rest is naive PyTorch's own extra passes, which a better unfused code would not make. The two multiply
        (the cut is fusion's factor times the passes'), so each is said as a factor, never as a share of the whole."""
        own = model.traffic_ratio(n, d)
        # A remainder within the "on par" band is no factor of its own: the model's count is the whole cut.
        if cut <= own * EVEN:
            return ""
        return (f"; keeping the scores on chip accounts for a factor of {fmt.ratio(own)} of that (1 + N/d), and naive "
                "PyTorch's extra passes as written (a scaling pass, an fp32 softmax and its cast) the remaining factor "
                f"of {fmt.ratio(cut / own)}")

    @staticmethod
    def _dram(row) -> float | None:
        """A call's DRAM bytes on the report's one basis (model.call_dram_bytes)."""
        return model.call_dram_bytes(row)

    def bytes_headline(self) -> str:
        pair = self._profile_pair() if self.run.has("profile") else None
        if pair is not None:
            naive, fused, (b, h, n, d, dt, c) = pair
            a, f = self._dram(naive), self._dram(fused)
            if f < a:
                verdict = f"{fmt.ratio(a / f)} fewer bytes"
            elif f > a:
                verdict = f"{fmt.ratio(f / a)} more bytes: at this shape fusing did not cut DRAM traffic"
            else:
                verdict = "the same number of bytes"
            return (f"On {self.device_name}, one call of naive PyTorch moved {fmt.bytes_(a)} through DRAM and our "
                    f"fused Triton kernel {fmt.bytes_(f)}: {verdict} (Nsight Compute's DRAM counters, read plus "
                    f"written, each call's writes counted as at least its output, which can still sit in L2 when "
                    f"the counters stop; {_shape_text(b, h, d, dt, c, n)}). [Profiling](profiling.md)")
        b, h, d, dt = STUDY["batch"], STUDY["heads"], STUDY["head_dim"], STUDY["dtype"]
        e = ELEMENT_BYTES[dt]
        a = model.naive_traffic_bytes(STUDY_N, d, e, b * h)
        f = model.fused_traffic_bytes(STUDY_N, d, e, b * h)
        rec = self.run.phase_record("profile")
        if self.run.has("profile"):
            why = "the profile has no DRAM counts for naive PyTorch and the Triton kernel at one shape"
        elif rec is not None and rec.status == "failed":
            why = "the profile phase failed"
        else:
            why = "no profile was collected"
        return (f"Not measured in this run ({why}). The byte-arithmetic model predicts that naive attention moves "
                f"{fmt.bytes_(a)} and a fused kernel {fmt.bytes_(f)} at {_shape_text(b, h, d, dt, False, STUDY_N)}: "
                f"{fmt.ratio(a / f)} fewer, which is 1 + N/d. [Byte arithmetic](byte-arithmetic.md)")

    # --- speed -------------------------------------------------------------------------------

    @cached_property
    def _bench(self) -> pd.DataFrame:
        df = self.run.frame("bench", "rows")
        return df[(df["status"] == "ok") & df["latency_ms_median"].notna()] if not df.empty else df

    def _bench_facet(self) -> pd.DataFrame:
        df = self._bench
        if df.empty:
            return df
        m = pd.Series(True, index=df.index)
        for k, v in STUDY.items():
            m &= df[k] == v
        if m.any() and (df[m]["impl"] == FUSED).any():
            return df[m]
        tri = df[df["impl"] == FUSED]
        if tri.empty:
            return tri
        r = tri.iloc[0]
        return df[(df["batch"] == r["batch"]) & (df["heads"] == r["heads"]) & (df["head_dim"] == r["head_dim"])
                  & (df["dtype"] == r["dtype"]) & (df["causal"] == r["causal"])]

    def speed_headline(self) -> str:
        link = "[Benchmarks](benchmarks.md)"
        if not self.run.has("bench"):
            return self._not_collected("bench", "how fast our kernel is", link)
        f = self._bench_facet()
        if f.empty:
            return f"Our Triton kernel did not complete a single benchmark case in this run. {link}"
        r0 = f.iloc[0]
        shape = _shape_text(r0["batch"], r0["heads"], r0["head_dim"], r0["dtype"], r0["causal"])
        tri = f[f["impl"] == FUSED].set_index("seq_len")["latency_ms_median"].sort_index()
        naive = f[f["impl"] == "naive"].set_index("seq_len")["latency_ms_median"]
        others = rivals(f)
        parts = []
        common = [n for n in tri.index if n in naive.index]
        naive_n = common[-1] if common else None
        if common:
            parts.append(f"{versus(naive[naive_n] / tri[naive_n], 'naive PyTorch')} at N={naive_n}")
        else:
            parts.append("never measured beside naive PyTorch (naive ran at no length ours did)")
        common = [n for n in tri.index if n in set(others["seq_len"])]
        if common:
            n = common[-1]
            best = others[others["seq_len"] == n].sort_values("latency_ms_median").iloc[0]
            used = best["backend_used"] if "backend_used" in best else None
            # Named as every page names it ("SDPA cuDNN"), not by SDPA's bare backend word ("cudnn"); PyTorch's own
            # choice says which backend it picked.
            picked = impl_label(f"sdpa-{used}") if known(used) else None
            backend = (f"{impl_label('sdpa')}: {picked}" if best["impl"] == "sdpa" and picked else
                       picked if best["impl"].startswith("sdpa") and picked else impl_label(best["impl"]))
            # "there" only where naive's longest length is this one too: naive runs out of memory first.
            where = "there" if n == naive_n else f"at N={n}"
            parts.append(f"{versus(best['latency_ms_median'] / tri[n], 'the fastest other implementation')} {where} "
                         f"({escape.text(backend)})")
        else:
            parts.append("never measured beside another implementation")
        return (f"On {self.device_name} ({shape}, median device time), our Triton kernel is {join(parts)}. {link}")

    # --- occupancy ---------------------------------------------------------------------------

    def _fused_kernel(self):
        pair = self._profile_pair()
        df = self.run.frame("profile", "kernels")
        if df.empty:
            return None
        if pair is not None:
            case = pair[1]["case_id"]
        else:
            impls = self.run.frame("profile", "impls")
            impls = impls[(impls["impl"] == FUSED) & (impls["group"] == "main") & (impls["status"] == "ok")]
            if impls.empty:
                return None
            case = impls.iloc[0]["case_id"]
        k = df[df["case_id"] == case]
        return None if k.empty else k.sort_values("duration_ms", ascending=False, na_position="last").iloc[0]

    def limiter_headline(self) -> str:
        """What limits our kernel at the study shape, judged from its counters (collect/schema/limiter.py);
        where the profile predates those counters, what sets its occupancy instead, said as a fact."""
        link = "[Profiling](profiling.md)"
        if not self.run.has("profile"):
            return self._not_collected("profile", "what limits our kernel", link)
        k = self._fused_kernel()
        if k is None:
            return f"The profile has no launch of our Triton kernel, so what limits it is not known. {link}"
        verdict = limits.verdict(self.run, k)
        if verdict is None:
            return self.occupancy_headline()
        impls = self.run.frame("profile", "impls").set_index("case_id")
        r = impls.loc[k["case_id"]]
        shape = (f"B={int(r['batch'])} H={int(r['heads'])} N={int(r['seq_len'])} d={int(r['head_dim'])}"
                 + (" causal" if r["causal"] else ""))
        step = k["kernel_step"] if "kernel_step" in k and known(k["kernel_step"]) else None
        which = f" ({escape.text(kernel_name('gluon', step))}, {escape.text(step)})" if step else ""
        return (f"By its counters at {shape}, our kernel{which} is limited by "
                f"{escape.text(verdict_words(verdict))}: {escape.text(verdict.evidence)}.{self._warps_fact(k)} "
                f"{link}")

    def _warps_fact(self, k) -> str:
        """How many warps each scheduler has to switch between, the occupancy behind it said as a fact: whether
        that is too few is what the stall shares say, not the occupancy alone."""
        occ, dev = k["theoretical_occupancy_pct"], self.run.manifest.device
        if not known(occ) or dev is None or not dev.max_warps_per_sm:
            return ""
        per_scheduler = occ / 100 * dev.max_warps_per_sm / SCHEDULERS_PER_SM
        return (f" Its theoretical occupancy is {fmt.pct(occ)} of the warp slots: {fmt.num(per_scheduler, 2)} warps "
                "per scheduler to issue from while others wait.")

    def _limiter_at(self, head_dim: int, step: str | None = None) -> str:
        """The verdict on our kernel at the profile's non-causal shape of this head_dim, with that shape; where
        the table's row ran another kernel step than the profiled call, the verdict is not that row's."""
        impls = self.run.frame("profile", "impls")
        kern = self.run.frame("profile", "kernels")
        if impls.empty or kern.empty or not set(UNIT_FIELDS) <= set(kern.columns):
            return "not profiled"
        im = impls[(impls["impl"] == FUSED) & (impls["group"] == "main") & (impls["status"] == "ok")
                   & (impls["head_dim"] == head_dim) & (impls["causal"] == False)]  # noqa: E712
        for _, r in im.iterrows():
            k = kern[kern["case_id"] == r["case_id"]].sort_values("duration_ms", ascending=False, na_position="last")
            if k.empty:
                continue
            profiled = k.iloc[0]["kernel_step"] if "kernel_step" in k and known(k.iloc[0]["kernel_step"]) else None
            at = f"B={int(r['batch'])}, H={int(r['heads'])}, N={int(r['seq_len'])}"
            if step and profiled and step != profiled:
                return (f"not profiled for this row's kernel ({escape.text(step)}; the profile ran "
                        f"{escape.text(profiled)} at {at})")
            v = limits.verdict(self.run, k.iloc[0])
            if v is not None:
                return f"{limits.verdict_phrase(v)} (profiled at {at}{self._profiled_clock_words(r, k.iloc[0])})"
        return "not profiled"

    def _profiled_clock_words(self, case, kernel) -> str:
        """Where Nsight Compute read our kernel's SM clock more than CLOCK_GAP from the one read before the same case's
        timed calls (the Profiling page's rule, clock_reading.timed_reading): both clocks, since a unit's share is of
        the cycles at the profiler's clock, and a reading before a call is not the call's clock to carry it to."""
        mhz = kernel.get("sm_clock_mhz") if hasattr(kernel, "get") else None
        if not known(mhz):
            return ""
        shape = (case["batch"], case["heads"], case["seq_len"], case["head_dim"], case["dtype"], False)
        timed = timed_reading(self.run, self._bench_data, FUSED, shape, case["case_id"])
        if timed is None or not clocks_apart(timed[0], float(mhz)):
            return ""
        return (f", a share of its cycles at the {fmt.num(float(mhz), 4)} MHz Nsight Compute read, against "
                f"{fmt.num(timed[0], 4)} MHz read before its timed calls")

    @cached_property
    def _bench_data(self) -> BenchData:
        return BenchData(self.run)

    def occupancy_headline(self) -> str:
        link = "[Profiling](profiling.md)"
        if not self.run.has("profile"):
            return self._not_collected("profile", "what limits our kernel's occupancy", link)
        k = self._fused_kernel()
        if k is None:
            return f"The profile has no launch of our Triton kernel, so its occupancy is not known. {link}"
        blocks_per_sm = {name: int(k[f"block_limit_{name}"]) for name in LIMIT_WORDS if known(k[f"block_limit_{name}"])}
        source = "Nsight Compute's block limits"
        if not blocks_per_sm:
            lim = limits_from_device(self.run.manifest.device)
            need = ("block_size", "registers_per_thread", "smem_per_block_bytes")
            if lim is None or not all(known(k[c]) for c in need):
                return f"Nsight Compute reported no occupancy limits for our Triton kernel in this run. {link}"
            o = occupancy(lim, int(k["block_size"]), int(k["registers_per_thread"]), int(k["smem_per_block_bytes"]))
            blocks_per_sm = {"registers": o.blocks_by_registers, "smem": o.blocks_by_smem, "warps": o.blocks_by_warps,
                      "blocks": o.blocks_by_blocks}
            source = "the occupancy rules applied to its launch (Nsight Compute reported no block limits)"
        least = min(blocks_per_sm.values())
        sms = self.run.manifest.device.sm_count if self.run.manifest.device else None
        grid = int(k["grid_size"]) if "grid_size" in k and known(k["grid_size"]) else None
        if sms and grid == sms and least <= 1:
            # A persistent kernel: one block per SM by design, so no resource limit is the finding.
            text = (f"Our Triton kernel is persistent: it launches {plural(grid, 'block')} for {sms} SMs and each "
                    f"block loops over its share of the work, so it runs one block per SM by design, not because "
                    f"registers or shared memory run out.")
            th = k["theoretical_occupancy_pct"]
            if known(th):
                text += f" That block's warps fill {fmt.pct(th)} of the SM's warp slots."
            return f"{text} {link}"
        binding = [name for name, v in blocks_per_sm.items() if v == least]
        detail = {"registers": f"{int(k['registers_per_thread'])} registers per thread" if known(k["registers_per_thread"]) else None,
                  "smem": f"{fmt.bytes_(k['smem_per_block_bytes'])} of shared memory per block" if known(k["smem_per_block_bytes"]) else None,
                  "warps": f"{int(k['block_size'])} threads per block" if known(k["block_size"]) else None,
                  "blocks": None}
        why = [LIMIT_WORDS[b] + (f" ({detail[b]})" if detail[b] else "") for b in binding]
        tie = " (tied)" if len(binding) > 1 else ""
        text = (f"Our Triton kernel's occupancy is limited by {join(why)}{tie}: they allow "
                f"{plural(least, 'block')} per SM, the fewest of any resource, per {source}.")
        th, ach = k["theoretical_occupancy_pct"], k["achieved_occupancy_pct"]
        if known(th):
            text += f" Theoretical occupancy is {fmt.pct(th)}"
            text += f" and {fmt.pct(ach)} was achieved." if known(ach) else "."
        return f"{text} {link}"

    # --- decode ------------------------------------------------------------------------------

    @cached_property
    def _decode(self) -> pd.DataFrame:
        df, _ = own_decode_rows(self.run)
        if df.empty:
            return df
        df = df[df["status"] == "ok"]
        models = list(dict.fromkeys(df["model"]))
        return df[df["model"] == ("gpt2" if "gpt2" in models else models[0])] if models else df

    def _floor_row(self):
        """The loop closest to its floor at the sweep's longest context (of the batch swept over the most
        contexts), or None where no step has a floor."""
        df = self._decode
        df = df[df["achieved_over_floor"].notna() & df["floor_ms"].notna()] if not df.empty else df
        if df.empty:
            return None
        counts = df.groupby("batch")["context"].nunique().sort_values(kind="stable", ascending=False)
        g = df[df["batch"] == counts.index[0]]
        return g[g["context"] == g["context"].max()].sort_values("achieved_over_floor").iloc[0]

    def decode_floor_headline(self) -> str:
        link = "[Decode](decode.md)"
        if not self.run.has("decode"):
            return self._not_collected("decode", "how close decode comes to its bandwidth floor", link)
        best = self._floor_row()
        if best is None:
            return f"No decode step in this run has a bandwidth floor (no copy bandwidth was measured). {link}"
        b, c = int(best["batch"]), int(best["context"])
        r = float(best["achieved_over_floor"])
        fastest = self._fastest_read()
        beaten = fastest is not None and fastest > READ_BEATS_COPY
        text = (f"Decoding {escape.text(best['model'])} at batch {b} and context {c}, the loop closest to its "
                f"floor ({decode_words(best['variant'], 'prose') or escape.text(best['variant'])}) takes "
                f"{fmt.ms(best['step_ms_median'])} per step, {fmt.ratio(r)} its bandwidth floor of "
                f"{fmt.ms(best['floor_ms'])} (the weights and cache a step must read, at the measured copy "
                f"bandwidth{', which reading alone beats: a yardstick, not a hard bound' if beaten else ''}): "
                f"{floor_pace(r, idle_share(best))}.")
        if beaten:
            # By how much, in a sentence of its own: the one before already carries four figures.
            text += (f" The decode microbenchmark read its cache up to {fmt.pct(100 * (fastest - 1))} faster than "
                     "that copy bandwidth.")
        return f"{text}{self._faster_in_time(best)} {link}"

    def _faster_in_time(self, best) -> str:
        """A sentence where another loop at the floor row's shape took less time per step than the loop closest to
        its floor (run h100-20261205b: the int8 cache's graph at 0.365 ms beside the bf16 graph's 0.377 ms), so that
        "closest to its floor" is not read as "fastest": which loop, its time, and its own floor. '' otherwise."""
        df = self._decode
        g = df[(df["model"] == best["model"]) & (df["batch"] == best["batch"]) & (df["context"] == best["context"])
               & df["step_ms_median"].notna()]
        if g.empty:
            return ""
        quick = g.sort_values("step_ms_median", kind="stable").iloc[0]
        if quick["variant"] == best["variant"] or not quick["step_ms_median"] < best["step_ms_median"]:
            return ""
        loop = decode_words(quick["variant"], "prose") or escape.text(quick["variant"])
        floor = (f", against a lower floor of its own, {fmt.ms(quick['floor_ms'])}"
                 if known(quick.get("floor_ms")) and quick["floor_ms"] < best["floor_ms"] else "")
        return f" The fastest step there in time is that of {loop}: {fmt.ms(quick['step_ms_median'])}{floor}."


    def _fastest_read(self) -> float | None:
        """The decode microbenchmark's fastest read as a share of the copy bandwidth (its rows that ran ok and were
        timed, as the Decode page's floor statement reads them); None where it has none."""
        m = self.run.frame("decode", "micro")
        if m.empty or "bandwidth_fraction" not in m:
            return None
        m = m[(m["status"] == "ok") & m["latency_ms_median"].notna() & m["bandwidth_fraction"].notna()]
        return float(m["bandwidth_fraction"].max()) if not m.empty else None

    def int8_headline(self) -> str:
        link = "[Decode](decode.md)"
        if not self.run.has("decode"):
            return self._not_collected("decode", "what the int8 cache saves", link)
        df = self._decode
        df = df[df["kv_cache_bytes"].notna()] if not df.empty else df
        best = None
        for (b, c), g in df.groupby(["batch", "context"]):
            e = g[g["variant"] == "eager"]
            q = g[g["variant"].str.startswith("int8")]
            if not e.empty and not q.empty and (best is None or e.iloc[0]["kv_cache_bytes"] > best[2]["kv_cache_bytes"]):
                best = (int(b), int(c), e.iloc[0], q, g.drop_duplicates("variant").set_index("variant"))
        f = decode_float(self.run.phase("decode").dtype)  # the float cache's type: fp16 on a T4
        if best is None:
            return f"No shape in this run ran both the {f} and an int8 cache. {link}"
        b, c, e, q, loops = best
        twins = dict(INT8_PAIRS)
        cache = q.iloc[0]["kv_cache_bytes"]
        text = (f"At batch {b} and context {c}, the int8 cache holds {fmt.bytes_(cache)} against the {f} cache's "
                f"{fmt.bytes_(e['kv_cache_bytes'])} ({fmt.pct(100 * cache / e['kv_cache_bytes'])}).")
        peaks = []
        names = {"int8-dequant": "dequantizing the whole cache every step", "int8-kernel": "reading it with the int8 kernel",
                 "int8-graph": "reading it with the int8 kernel in a CUDA graph"}
        for _, r in q.iterrows():
            # Each int8 loop against the float-cache loop it differs from by the cache alone.
            twin_variant = twins.get(r["variant"], "eager")
            twin_variant = twin_variant if twin_variant in loops.index else "eager"
            twin = loops.loc[twin_variant]
            if not known(r["peak_mem_bytes"]) or not known(twin["peak_mem_bytes"]):
                continue
            diff = r["peak_mem_bytes"] - twin["peak_mem_bytes"]
            twin_name = decode_words(twin_variant, "prose") or escape.text(twin_variant)
            # In bytes, not as a share of the peak: the peak is the whole process's, which holds more than
            # this loop (the phase keeps every model it decodes resident), and a share of it would shrink.
            if abs(diff) <= SAME * twin["peak_mem_bytes"]:
                rel = f"leaves the peak as it is with {twin_name}"
            else:
                rel = f"{'raises' if diff > 0 else 'lowers'} the peak by {fmt.bytes_(abs(diff))} against {twin_name}"
            peaks.append(f"{names.get(r['variant'], escape.text(r['variant']))} {rel}")
        if peaks:
            joined = "; ".join(peaks)
            text += f" {joined[0].upper()}{joined[1:]}."
        else:
            text += " No peak memory was recorded for these rows."
        return f"{text} {link}"

    # --- the headline table --------------------------------------------------------------------

    # Columns of the headline table: (key, header). A column is added by adding its key here and a value
    # for that key in _headline_cells.
    HEADLINE_COLUMNS = (("case", "Case (B, H, N, fp16, non-causal)"), ("ours", "Triton (ours)"),
                        ("of_measured", "Of the measured matmul rate"), ("of_sheet", "Of the datasheet peak"),
                        ("sdpa-cudnn", "SDPA cuDNN"), ("sdpa-flash", "FlashAttention-2 (SDPA)"),
                        ("fa4", "FlashAttention-4"),
                        ("limiter", "What limits ours (Profiling)"))

    def _headline_cases(self) -> list[tuple[int, int, int, int]]:
        """(batch, heads, N, head_dim) per head_dim the bench phase ran ours at in fp16 without a mask: the
        longest N of its most-measured batch and heads."""
        f = self._bench
        if f.empty:
            return []
        f = f[(f["impl"] == FUSED) & (f["dtype"] == "float16") & (f["causal"] == False) & f["tflops"].notna()]  # noqa: E712
        out = []
        for d, g in f.groupby("head_dim"):
            bh = g.groupby(["batch", "heads"])["seq_len"].nunique().sort_values(kind="stable").index[-1]
            g = g[(g["batch"] == bh[0]) & (g["heads"] == bh[1])]
            out.append((int(bh[0]), int(bh[1]), int(g["seq_len"].max()), int(d)))
        return out

    def _tflops(self, impl: str, b: int, h: int, n: int, d: int) -> float | None:
        return self._headline_value(impl, b, h, n, d, "tflops")

    def _headline_value(self, impl: str, b: int, h: int, n: int, d: int, column: str) -> float | None:
        """One column of a headline case's timed row (fp16, no mask), None where the row or the value is missing."""
        f = self._bench
        if column not in f:
            return None
        f = f[(f["impl"] == impl) & (f["dtype"] == "float16") & (f["causal"] == False) & (f["batch"] == b)  # noqa: E712
              & (f["heads"] == h) & (f["seq_len"] == n) & (f["head_dim"] == d) & f["tflops"].notna()]
        v = f[column].iloc[0] if len(f) else None
        return float(v) if known(v) else None

    def _step(self, impl: str, b: int, h: int, n: int, d: int) -> str | None:
        """The Gluon step a bench row ran, where it recorded one."""
        f = self._bench
        if "kernel_step" not in f:
            return None
        f = f[(f["impl"] == impl) & (f["dtype"] == "float16") & (f["causal"] == False) & (f["batch"] == b)  # noqa: E712
              & (f["heads"] == h) & (f["seq_len"] == n) & (f["head_dim"] == d)]
        steps = [s for s in f["kernel_step"] if known(s)]
        return steps[0] if steps else None

    def _headline_cells(self, b: int, h: int, n: int, d: int) -> dict:
        from ..ceilings import Ceilings

        c = Ceilings(self.run.manifest)
        ours = self._tflops(FUSED, b, h, n, d)
        measured, sheet = c.measured_rate("matmul_fp16"), c.sheet_rate("fp16")
        cells = {"case": f"d={d} (B={b}, H={h}, N={n})",
                 "ours": f"{fmt.num(ours)} TFLOP/s" if ours else "not measured",
                 "of_measured": fmt.pct(100 * ours * 1e12 / measured) if ours and measured else "n/a",
                 "of_sheet": fmt.pct(100 * ours * 1e12 / sheet) if ours and sheet else "n/a"}
        cells["limiter"] = self._limiter_at(d, self._step(FUSED, b, h, n, d))
        clock = self._headline_value(FUSED, b, h, n, d, "sm_clock_mhz")
        cells["clock_caveat"] = False  # not a column: whether the caption must say what the caveat means
        for impl in ("sdpa-cudnn", "sdpa-flash", "fa4"):
            t = self._tflops(impl, b, h, n, d)
            # ours against theirs, by TFLOP/s: the same FLOP count, so their time over ours
            caveat = clock_caveat(clock, self._headline_value(impl, b, h, n, d, "sm_clock_mhz")) if t and ours else ""
            cells["clock_caveat"] |= bool(caveat)
            cells[impl] = (f"{fmt.num(t)} TFLOP/s; ours {speedup_words(ours / t)}{caveat}" if t and ours else
                           f"{fmt.num(t)} TFLOP/s" if t else self._not_timed(impl, b, h, n, d))
        return cells

    def _not_timed(self, impl: str, b: int, h: int, n: int, d: int) -> str:
        """A headline cell with no TFLOP/s: what the row's status says ('unsupported on this GPU' where the
        implementation cannot run here, e.g. FlashAttention-4 before compute capability 8.0), else 'not measured'."""
        f = self.run.frame("bench", "rows")  # every row, not only those that ran (self._bench)
        f = _headline_case(f, impl, b, h, n, d) if not f.empty else f
        status = set(f["status"]) if "status" in f else set()
        return ("unsupported on this GPU" if status == {"unsupported"} else "out of memory" if status == {"oom"}
                else "not measured")

    def headline_table(self) -> str:
        """Our kernel's TFLOP/s at each head_dim beside the ceilings and SDPA's backends, then decode against its
        floor for each model: the numbers the findings stand on."""
        cases = self._headline_cases() if self.run.has("bench") else []
        text = ""
        if cases:
            rows = [self._headline_cells(*k) for k in cases]
            caption = ("TFLOP/s: 4·B·H·N²·d FLOP over the bench phase's median device time; the ceilings are the "
                       f"Hardware page's; on par: within {fmt.pct(100 * (EVEN - 1), 0)} either way")
            if any(r["clock_caveat"] for r in rows):
                caption += (f"; at a higher (lower) clock reading: ours had a median SM clock reading more than "
                            f"{fmt.pct(100 * CLOCK_GAP, 0)} above (below) theirs, a lean the verdict may owe to the "
                            "clock; a reading is of the rest before each call, so it does not say by how much "
                            "(Hardware page)")
                # A gap no wider than the rest's own swing past the maximum says little about the calls: named beside the marks.
                error = overshoot_words(self._bench[self._bench["status"] == "ok"], self.run.manifest.device)
                caption += f". {error.strip().rstrip('.')}" if error else ""
            if any("not profiled for this row's kernel" in str(r.get("limiter", "")) for r in rows):
                # Step labels (g33) appear in the table before any page text defines them.
                caption += ("; g followed by a number: the step of the Gluon kernel that ran (each step is a version "
                            "on the Iterations page)")
            text = table_html(pd.DataFrame(rows), dict(self.HEADLINE_COLUMNS), caption=caption)
        return text + ("\n\n" + self.decode_table() if self.run.has("decode") else "")

    def decode_table(self) -> str:
        """Each model's CUDA-graph step against its bandwidth floor at the sweep's shape (its most-swept batch
        at its longest context)."""
        df, _ = own_decode_rows(self.run)
        df = df[(df["status"] == "ok") & (df["variant"] == "graph") & df["achieved_over_floor"].notna()] \
            if not df.empty else df
        rows = []
        for model, g in (df.groupby("model", sort=False) if not df.empty else []):
            b = g.groupby("batch")["context"].nunique().sort_values(kind="stable").index[-1]
            r = g[g["batch"] == b].sort_values("context").iloc[-1]
            rows.append({"model": model, "shape": f"batch {int(r['batch'])}, context {int(r['context'])}",
                         "step": fmt.ms(r["step_ms_median"]), "floor": fmt.ms(r["floor_ms"]),
                         "x": fmt.ratio(r["achieved_over_floor"]),
                         "pace": floor_pace(float(r["achieved_over_floor"]), idle_share(r))})
        if not rows:
            return ""
        bw = self.run.phase("decode").floor_bandwidth_bytes_per_s
        caption = ("Bandwidth floor: the weights and cache one step must read, at this run's measured copy bandwidth"
                   f"{f' ({fmt.bandwidth(bw)})' if bw else ''}; × floor: the step's time over it, as on the Decode page")
        return table_html(pd.DataFrame(rows), {"model": "Decode", "shape": "Shape", "step": "CUDA-graph step",
                                               "floor": "Bandwidth floor", "x": "× floor", "pace": "What sets the pace"},
                          caption=caption)

    def collects(self) -> str:
        """Where the narrated run was written by more than one collect, say so (Reproduce lists which did what)."""
        m = self.run.manifest
        commits = list(dict.fromkeys(r.git_commit for r in m.phases if r.git_commit))
        if len(commits) < 2:
            return ""
        return (f"This run's phases were collected by {len(commits)} collects at different commits; "
                "[Reproduce](reproduce.md) says which phase ran where.")

    # --- the phase table -----------------------------------------------------------------------

    def phase_table(self) -> str:
        """Every phase of the registry, the pages that narrate it, and what happened to it in this run."""
        rows = []
        for spec in PHASES:
            state = self.run.phase_summary(spec.name)  # the words every page uses for a phase's state
            pages = ", ".join(f"[{p.title}]({p.doc})" for p in spec.pages)
            rows.append(f"| `{spec.name}` | {pages} | {escape.text(state)} |")
        return "| Phase | Pages | In this run |\n|---|---|---|\n" + "\n".join(rows) + "\n"

    # --- the headline figure -------------------------------------------------------------------

    def _headline_rows(self):
        """(impl, DRAM bytes, source of the bytes, device time in ms) for naive, ours and the fastest other implementation,
        at the study shape: bytes from Nsight Compute where the profile has them, else the model; time from the
        bench phase (device time)."""
        b, h, d, dt = STUDY["batch"], STUDY["heads"], STUDY["head_dim"], STUDY["dtype"]
        bench = self._bench
        f = bench[(bench["batch"] == b) & (bench["heads"] == h) & (bench["head_dim"] == d) & (bench["dtype"] == dt)
                  & (bench["causal"] == STUDY["causal"]) & (bench["seq_len"] == STUDY_N)] if not bench.empty else bench
        prof = self.run.frame("profile", "impls")
        if not prof.empty:
            prof = prof[(prof["group"] == "main") & (prof["status"] == "ok") & (prof["batch"] == b)
                        & (prof["heads"] == h) & (prof["head_dim"] == d) & (prof["dtype"] == dt)
                        & (prof["causal"] == STUDY["causal"]) & (prof["seq_len"] == STUDY_N)]
        others = rivals(f) if not f.empty else f
        fastest = others.sort_values("latency_ms_median").iloc[0]["impl"] if not others.empty else None
        out = []
        for impl in [i for i in ("naive", FUSED, fastest) if i]:
            t = f[f["impl"] == impl]["latency_ms_median"] if not f.empty else []
            p = prof[prof["impl"] == impl] if not prof.empty else prof
            if len(p) and known(p.iloc[0]["dram_read_bytes"]):
                by, src = self._dram(p.iloc[0]), "Nsight Compute"
            else:
                e = ELEMENT_BYTES[dt]
                by = (model.naive_traffic_bytes if impl in ("naive", "sdpa-math") else model.fused_traffic_bytes)(
                    STUDY_N, d, e, b * h)
                src = "model"
            out.append((impl, float(by), src, float(t.iloc[0]) if len(t) else None))
        return out

    def headline_figure(self) -> str:
        """Bytes moved and time per call for naive, ours and the fastest other implementation, side by side."""
        rows = self._headline_rows()
        if not rows or all(r[3] is None and r[2] == "model" for r in rows):
            return ""
        labels = [escape.plot(impl_label(i)) for i, *_ in rows]
        fig = make_subplots(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.06,
                            subplot_titles=["DRAM bytes per call (MiB)", "device time per call (ms)"])
        colors = [impl_color(i) for i, *_ in rows]
        fig.add_bar(y=labels, x=[r[1] / 2**20 for r in rows], orientation="h", marker_color=colors, showlegend=False,
                    customdata=[r[2] for r in rows], hovertemplate="%{y}: %{x:.4g} MiB (%{customdata})<extra></extra>",
                    row=1, col=1)
        fig.add_bar(y=labels, x=[r[3] for r in rows], orientation="h", marker_color=colors, showlegend=False,
                    hovertemplate="%{y}: %{x:.3g} ms<extra></extra>", row=1, col=2)
        fig.update_xaxes(title_text="MiB", rangemode="tozero", row=1, col=1)
        fig.update_xaxes(title_text="ms", rangemode="tozero", row=1, col=2)
        fig.update_yaxes(autorange="reversed")
        fig.update_layout(margin=dict(t=60))
        srcs = sorted({r[2] for r in rows})
        how = ("DRAM bytes read plus written, from Nsight Compute, the writes at least the call's output"
               if srcs == ["Nsight Compute"] else
               "DRAM bytes from Nsight Compute where profiled, else from the byte-arithmetic model (hover says which)")
        return self.figure("headline", fig,
                           f"One attention call at the study shape (B={STUDY['batch']}, H={STUDY['heads']}, "
                           f"N={STUDY_N}, d={STUDY['head_dim']}, {dtype_short(STUDY['dtype'])}, non-causal): {how}; "
                           "time is the bench phase's median device time.", height=300)

