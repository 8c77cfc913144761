"""Cases that did not run, and what the untimed first call of each Triton case cost."""
from __future__ import annotations

import pandas as pd

from ... import fmt
from ...tables import table_html
from ...vocab import dtype_short, facet_label, impl_label, join, shape_label
from .common import FUSED, BenchSection


class Failures(BenchSection):
    """The cases that did not run, and the first call of each Triton case."""

    def failures_table(self) -> str:
        bad = self.rows[self.rows["status"] != "ok"]
        if bad.empty:
            return "Every case ran."
        out = []
        for (impl, status), grp in bad.groupby(["impl", "status"], sort=False):
            reasons = grp["reason"].fillna("").map(lambda r: r if status in ("unsupported", "error", "skipped") else "")
            for reason, g in grp.groupby(reasons, sort=False):
                masks = sorted({"causal" if c else "non-causal" for c in g["causal"]}, reverse=True)
                where = (f"{'; '.join(shape_label(s) for s in dict.fromkeys(g['shape']))}; "
                         f"N={join(sorted(set(g['seq_len'])))}; "
                         f"{join(dtype_short(d) for d in dict.fromkeys(g['dtype']))}; {join(masks)}")
                if status == "oom":
                    reason = self._oom_reason(g)
                out.append({"impl": impl_label(impl), "status": status, "n": len(g), "where": where, "reason": reason})
        return table_html(pd.DataFrame(out), {"impl": "Implementation", "status": "Status", "n": "Cases",
                                              "where": "Where", "reason": "Reason"})

    @staticmethod
    def _oom_reason(g: pd.DataFrame) -> str:
        """What an oom row's requested_bytes is: the one allocation that failed, on top of what the call already held
        (so it can be less than the device's memory), or, for a case not attempted, its predicted need."""
        skipped = g["reason"].fillna("").str.startswith("not attempted")
        failed, predicted = g[~skipped]["requested_bytes"].dropna(), g[skipped]["requested_bytes"].dropna()
        parts = []
        if len(failed):
            parts.append(f"one allocation of up to {fmt.bytes_(failed.max())} failed, on top of what the call "
                         "already held")
        if len(predicted):
            parts.append(f"not attempted: a predicted need of up to {fmt.bytes_(predicted.max())}")
        return "; ".join(parts) or "out of memory"

    # A first call that took less than this cannot have compiled our kernel: compiling one config takes
    # seconds (kernels/attention/portable.py), loading a compiled one from Triton's on-disk cache milliseconds.
    COMPILE_S = 0.5

    def first_call_note(self) -> str:
        """What the untimed first call of each Triton case cost, and, where it was too short to compile,
        that the kernel came from Triton's cache. Autotuning is not named: flash_attention's rows record the
        tile config that ran, not that an autotuner chose it."""
        t = self.rows[(self.rows["impl"] == FUSED) & self.rows["warmup_s"].notna()]
        if t.empty:
            return ""
        worst = t.loc[t["warmup_s"].idxmax()]
        text = (f"The first call of each Triton case (compilation, or loading the compiled kernel from Triton's "
                f"cache; excluded from every number above) took {fmt.num(t['warmup_s'].sum())} s over the {len(t)} "
                f"Triton cases, at most {fmt.num(worst['warmup_s'])} s ({shape_label(worst['shape'])}, "
                f"{facet_label(worst['dtype'], worst['causal'])}, N={worst['seq_len']}).")
        quick = int((t["warmup_s"] < self.COMPILE_S).sum())
        limit = f"under {fmt.num(self.COMPILE_S, 1)} s, too short to compile a kernel (compiling one takes seconds)"
        if quick == len(t):
            # The longest is named above: say what it means, not the count again.
            text += f" Even the longest is {limit}, so the kernels evidently came from Triton's cache."
        elif quick:
            text += f" {quick} of them took {limit}: those kernels evidently came from Triton's cache."
        return text
