"""The model, evaluated for this GPU, and the traffic it predicts per shape beside the measured naive times."""
from __future__ import annotations

import pandas as pd

from ... import escape, fmt, model
from ...tables import table_html
from ...vocab import dtype_short, join, plural, shape_label
from .common import E, BytesSection


class Traffic(BytesSection):
    """The device sentence under the model, and the traffic table and finding of each shape."""

    def device_sentence(self) -> str:
        d = self.device
        bw, peak = self.bandwidth(), self.ceilings.measured_rate("matmul_fp16")
        text = (f"Evaluated for **{escape.text(d.name)}**, with an L2 cache of {fmt.bytes_(self.l2_bytes)} and "
                f"{fmt.bytes_(d.memory_bytes)} of memory. {self._l2_source()}{self._element_words()}")
        if bw and peak:
            text += (f" The measured copy bandwidth of {fmt.bandwidth(bw)} and fp16 matmul rate of {fmt.flops(peak)} "
                     f"put the measured fp16 ridge point at **{fmt.num(self.ridge())} FLOP/byte**")
            r_sheet = self.ceilings.ridge("fp16", which="datasheet")
            text += f" ({fmt.num(r_sheet)} from the datasheet)." if r_sheet is not None else "."
        else:
            text += " Without a measured copy bandwidth and fp16 matmul rate, no measured ridge point is known."
        return text

    def _element_words(self) -> str:
        """'Every element is two bytes (fp16 and bf16 alike).', naming only the dtypes of the bench phase's rows that
        ran."""
        ok = self.bench.ok
        ran = [dtype_short(d) for d in dict.fromkeys(ok["dtype"])] if not ok.empty else []
        if len(ran) > 1:
            return f"Every element is two bytes ({join(ran)} alike)."
        return f"Every element is two bytes ({ran[0]})." if ran else "Every element is two bytes."

    def _l2_source(self) -> str:
        """Which L2 size the page's limits use where the device and the datasheet disagree, and whether any swept
        length would fall on the other side of an L2 limit with the datasheet's; empty where they agree."""
        if not self.device.l2_bytes and self.l2_sheet_bytes:
            return "The L2 size is the datasheet's: the device did not report one. "
        if not self.l2_figures_differ:
            return ""
        text = (f"The L2 size is the one the device reports; its datasheet gives {fmt.bytes_(self.l2_sheet_bytes)}, "
                "and with that figure ")
        moved = self.l2_side_changes()
        if not moved:
            return text + ("no length swept falls on the other side of any L2 limit below, so the page's L2 "
                           "conclusions hold for either figure. ")
        cases = [f"N={n:,} at {shape_label(shape)} ({label})" for shape, n, label in moved]
        return text + (f"{plural(len(moved), 'length')} swept would fall on the other side of an L2 limit below "
                       f"({'; '.join(cases)}), so there the conclusion depends on which figure is right. ")

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
                "meas": fmt.ms(naive_ms[n]) if n in naive_ms.index else self._naive_absent(shape, n),
            })
        return table_html(pd.DataFrame(rows), {
            "n": "N", "s": "S, one head", "ends": "Q, K, V, O, one head", "naive": "naive traffic, one head",
            "fused": "fused traffic, one head", "ratio": "naive / fused = 1 + N/d",
            "naive_all": f"naive, all {heads} heads", "fused_all": f"fused, all {heads} heads",
            "floor": "naive traffic at measured bandwidth", "meas": "naive measured (fp16, non-causal)"},
            caption=f"{shape_label(shape)}, two-byte elements.")

    def _naive_absent(self, shape, n: int) -> str:
        """Why the table has no naive latency at (shape, N): what the bench row says, else that none was planned."""
        rows = self.bench.rows
        row = rows[(rows["shape"] == shape) & (rows["impl"] == "naive") & (rows["seq_len"] == n)
                   & (rows["dtype"] == "float16") & ~rows["causal"].astype(bool)]
        if row.empty:
            return "not run at this shape"
        status = str(row.iloc[0]["status"])
        return "out of memory" if status == "oom" else status.replace("_", " ")

    def traffic_finding(self, shape) -> str:
        """Measured naive latency against the time its modelled traffic takes at the measured bandwidth."""
        b, h, d = shape
        bw = self.bandwidth()
        naive_ms = self.bench.latency(shape, "float16", False, "naive")
        if naive_ms.empty:
            return (f"Naive PyTorch (fp16, non-causal) did not run at {shape_label(shape)} in this run, so the traffic "
                    "model has no latency to be set against here.")
        if bw is None:
            return "Without a measured copy bandwidth the traffic model cannot be set against a latency here."
        ratios = {n: naive_ms[n] / (model.naive_traffic_bytes(n, d, E, b * h) / bw * 1e3) for n in naive_ms.index}
        lo, hi = min(ratios.values()), max(ratios.values())
        span = f"about {fmt.ratio(lo)}" if hi / lo < 1.05 else f"{fmt.ratio(lo)} to {fmt.ratio(hi)}"
        text = (f"For {shape_label(shape)} (fp16, non-causal), naive PyTorch took {span} the time its modelled "
                "traffic needs at the measured bandwidth. ")
        written = {n: naive_ms[n] / (model.naive_as_written_bytes(n, d, E, b * h) / bw * 1e3) for n in naive_ms.index}
        ns = sorted(ratios)
        # The fp32 P and the scaling pass grow with N² and the endpoints with N, so the factor over the model's
        # bytes changes with the length: each time is set against the bytes of its own length.
        extra = {n: model.naive_as_written_bytes(n, d, E, b * h) / model.naive_traffic_bytes(n, d, E, b * h)
                 for n in ns}
        wlo, whi = min(written.values()), max(written.values())
        wspan = f"about {fmt.ratio(wlo)}" if whi / wlo < 1.05 else f"{fmt.ratio(wlo)} to {fmt.ratio(whi)}"
        factor = (f"{fmt.ratio(extra[ns[0]])} the model's bytes at every length it ran"
                  if fmt.ratio(extra[ns[0]]) == fmt.ratio(extra[ns[-1]]) else
                  f"{fmt.ratio(extra[ns[0]])} the model's bytes at N={ns[0]} and {fmt.ratio(extra[ns[-1]])} at "
                  f"N={ns[-1]}")
        text += ("The code as written moves more than the model: it scales the scores in a kernel of its own (one more "
                 "read and write of S), and its softmax writes P in fp32, four bytes an element, which a cast then "
                 f"reads back. That is {factor}. Against the bytes it moves at each length, it took {wspan} the "
                 "time. ")
        if wlo >= 1:
            text += "The rest is time in which the GPU is not streaming at full rate."
        else:
            text += ("Where it took less, part of that traffic never reached DRAM: score matrices small enough to stay "
                     "in the L2 cache between the passes.")
        return text
