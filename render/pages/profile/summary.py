"""What this run shows, and how it was measured: the page's opening and its method notes."""
from __future__ import annotations

import pandas as pd

from ... import escape, fmt
from ...fmt import known
from ...vocab import impl_label, join, plural
from .data import ProfileData, shape_list
from .roofline import EXCEEDED, RANK_NOISE


class Summary(ProfileData):
    """The opening findings, the phase's status, the ncu command, its passes and where the FLOPs come from."""

    def findings_first(self) -> str:
        """Two to four sentences: bytes, the binding roof, tensor cores, what limits our kernel."""
        shape = self.headline
        out = []
        df = self._rows(shape)
        df = df[df["status"] == "ok"] if not df.empty else df
        by = {impl: v for impl, v in ((r["impl"], self._dram(r)) for _, r in df.iterrows()) if v is not None}
        if by.get("naive") and by.get("triton"):
            a, f = by["naive"], by["triton"]
            word = f"{fmt.ratio(a / f)} fewer" if f < a else f"{fmt.ratio(f / a)} more"
            counted = df[df["impl"].isin(["naive", "triton"])]["dram_read_bytes"].notna().all()
            basis = ("the writes counted as at least each call's output" if counted
                     else "each the total its source published")
            out.append(f"At {self.shape_text(shape)}, our fused kernel moved {word} DRAM bytes than naive PyTorch "
                       f"({fmt.bytes_(f)} against {fmt.bytes_(a)}, {basis}).")
        roofs = self.roofline_summary(shape)
        if roofs:
            out.append(roofs)

        tc = self.tensor_core_verdicts(shape)
        idle = [impl_label(i) for i, (used, _) in tc.items() if used is False]
        unknown = [impl_label(i) for i, (used, _) in tc.items() if used is None]
        if idle:
            out.append(f"Tensor cores did not run for {join(idle)}.")
        elif tc and not unknown:
            out.append("Every profiled implementation ran its matrix multiplies on the tensor cores.")
        elif len(unknown) < len(tc):  # "every" only where a counter decided every call
            out.append(f"Tensor cores ran for every profiled implementation a counter decides; for {join(unknown)} "
                       "none does.")
        limit = self.limiter_headline()
        if limit:
            out = out[:3] + [limit]
        else:
            occ = self.occupancy_verdict(shape)
            if occ:
                out.append(occ)
        return " ".join(out[:4])


    def roofline_summary(self, shape) -> str:
        """The binding roof of each call at `shape`, two roofs within the noise of each other named together; then,
        shape by shape and in either masking, the calls whose binding roof is another there, with that roof: a
        verdict holds for its shape and masking, and a list told of one masking must not read as both's."""
        bind = self.binding_words(shape)
        if not bind:
            return ""
        others = [s for s in self.shapes() if s != shape]
        # The masking said wherever the profile has both: "at (B=2, ...)" alone would read as either.
        both = len({s[5] for s in [shape, *others]}) > 1
        out = [f"At {self._shape_and_masking(shape, both)}, by the hierarchical roofline, the lowest roof over each "
               f"call is {self._roof_groups(shape, bind)}."]
        differ = []
        for other in others:
            there = self.binding_words(other)
            moved = {i: w for i, w in there.items() if bind.get(i) != w}
            if moved:
                differ.append(f"At {self._shape_and_masking(other, both)}, it is {self._roof_groups(other, moved)}.")
        if not others:
            return out[0]
        if not differ:
            scope = "profiled shape and masking" if both else "profiled shape"
            return out[0] + f" Each call's lowest roof is the same at every other {scope} it ran at."
        return " ".join(out + differ + ["Any call not named for one of these has the same lowest roof there as at the "
                                        "first shape; the roofline of each shape, below, gives every call's."])

    def _shape_and_masking(self, shape, both: bool) -> str:
        """'(B=2, H=8, N=2048, d=64, float16), non-causal' where the profile holds both maskings; shape_text in
        parentheses otherwise (it names the causal masking only)."""
        if both and not shape[5]:
            return f"{shape_list([self.base_text(shape[:5])])}, non-causal"
        return shape_list([self.shape_text(shape)])

    def _roof_groups(self, shape, words: dict[str, str]) -> str:
        """'DRAM bandwidth for naive PyTorch and SDPA math; tensor fp16 compute for ...': the calls by the roof that
        binds them, a tie within the noise marked as such."""
        tied = self.tied_roofs(shape)
        groups: dict[str, list[str]] = {}
        above: dict[str, list[str]] = {}
        for impl, w in words.items():
            if w.startswith(EXCEEDED):  # a roof the call's point is at or above binds nothing: said apart
                above.setdefault(w.removeprefix(EXCEEDED), []).append(impl_label(impl))
                continue
            if impl in tied:
                w += f" (within {fmt.pct(100 * RANK_NOISE, 2)} of each other)"
            groups.setdefault(w, []).append(impl_label(impl))
        the = lambda lv: f"the {lv}" if lv.startswith("measured ") else lv  # noqa: E731  ('the measured L2 read rate')
        parts = [f"{the(lv)} for {join(names)}" for lv, names in groups.items()]
        parts += [f"{the(lv)} for {join(names)}, whose point{'s sit' if len(names) > 1 else ' sits'} at or above it: a "
                  f"rate a microbenchmark measured and the kernel beat, so it does not bind {'them' if len(names) > 1 else 'it'}"
                  for lv, names in above.items()]
        return "; ".join(parts)

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
        wall = f" The whole ncu run took {fmt.num(self.data.wall_s)} s." if known(self.data.wall_s) else ""
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
