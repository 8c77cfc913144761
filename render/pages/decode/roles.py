"""Kernel by kernel: what each of a layer's kernels costs in the fused step, against the bytes it moves; and
operation by operation, the same for the persistent step's operations inside its one kernel (their spans
of the step's critical path, from a traced step)."""
from __future__ import annotations

from functools import cached_property

import pandas as pd

from collect.schema.decode import LAYER_ROLES

from ... import escape, fmt
from ...tables import table_html
from .data import DecodeData, ROLE_BYTES_APART, ROLE_EVEN, _ok


class Roles(DecodeData):
    """The per-role frame, its finding and table."""

    ROLE_WORDS = {"embed": "embedding", "qkv": "norm + qkv product + cache write", "attention": "attention",
                  "proj": "output projection + residual", "fc": "norm + first MLP product + GELU",
                  "out": "second MLP product + residual", "head": "final norm + LM head", "argmax": "argmax"}

    @cached_property
    def roles(self) -> pd.DataFrame:
        return self.run.frame("decode", "kernel_roles")

    def has_roles(self) -> bool:
        return not self.roles.empty

    def role_words(self, role: str) -> str:
        """What a kernel of this role does, in words; a role name from the data is shown as inert text."""
        return self.ROLE_WORDS.get(role, escape.text(role))

    @cached_property
    def _role_frame(self) -> pd.DataFrame:
        """Each role of each profiled fused graph step with its time per kernel and, where its bytes are known,
        their time at copy bandwidth and what the kernel adds above it (µs). Callers copy before adding columns."""
        r = self.roles.copy()
        if r.empty:
            return r
        bw = self.data.floor_bandwidth_bytes_per_s if self.data else None
        per = r["kernels_per_step"].where(r["kernels_per_step"] > 0)
        r["us_each"] = 1000 * r["ms_per_step"] / per
        r["bytes_us_each"] = (1e6 * r["bytes_per_step"] / per / bw) if bw else float("nan")
        r["over_us_each"] = r["us_each"] - r["bytes_us_each"]
        return r

    def role_finding(self) -> str:
        """Per profiled fused graph step: what each of its kernels adds above its own bytes at copy bandwidth,
        the spread over the roles that read bytes, and what that comes to over the step."""
        r = self._role_frame
        if r.empty:
            return ""
        out = []
        for (model, variant, b, c), g in r.groupby(["model", "variant", "batch", "context"], sort=False):
            step = self.row(model, variant, b, c)
            g = g[g["over_us_each"].notna()]
            if g.empty or step is None:
                continue
            hi, lo = g.loc[g["over_us_each"].idxmax()], g.loc[g["over_us_each"].idxmin()]
            over_ms = float((g["over_us_each"] * g["kernels_per_step"]).sum()) / 1000
            unit = self.unit(variant)
            out.append(f"- **{escape.text(model)}, batch {b}, context {c}, {escape.text(self.short(variant))}.** Each {unit} "
                       f"takes {fmt.num(lo.over_us_each)} µs ({self.role_words(lo.role)}) to "
                       f"{fmt.num(hi.over_us_each)} µs ({self.role_words(hi.role)}) longer than "
                       f"reading its bytes at copy bandwidth would. Over the step that is {fmt.ms(over_ms)} of its "
                       f"{fmt.ms(step.step_ms_median)}." + self._role_spread_words(g, unit)
                       + self._head_apart_words(g, model, b))
        return "\n".join(out) + "\n" if out else ""

    def _head_apart_words(self, g: pd.DataFrame, model: str, batch: int) -> str:
        """Where the LM head pays well above every layer kernel (ROLE_EVEN): what else it does besides its
        reads, from the model's shape: it writes fp32 logits, and its product is the step's widest."""
        info = self.model_info(model)
        head = g[g["role"] == "head"]
        layer = g[g["role"].isin(LAYER_ROLES)]
        if info is None or head.empty or layer.empty or layer["over_us_each"].max() <= 0:
            return ""
        over = float(head["over_us_each"].iloc[0])
        if over <= ROLE_EVEN * float(layer["over_us_each"].max()):
            return ""
        logits = batch * info.vocab_size * 4
        bw = self.data.floor_bandwidth_bytes_per_s
        flops = 2 * batch * info.n_embd * info.vocab_size
        widest = 2 * batch * info.n_embd * 4 * info.n_embd  # a layer's largest product: either MLP product
        return (f" The final norm + LM head stands apart, {fmt.num(over)} µs above its reads. Besides them it "
                f"writes its fp32 logits ({fmt.bytes_(logits)}, {fmt.num(1e6 * logits / bw)} µs at copy bandwidth), "
                f"and its product, {fmt.num(flops / 1e9)} GFLOP, is {fmt.ratio(flops / widest)} the largest in a "
                "layer.")

    @staticmethod
    def unit(variant: str) -> str:
        """What a role's row counts: the fused step's kernels, or the persistent step's operations (the spans
        of its one kernel's critical path)."""
        return "operation" if variant == "persistent" else "kernel"

    def _role_spread_words(self, g: pd.DataFrame, unit: str = "kernel") -> str:
        """Whether what a layer's kernels pay above their bytes follows the bytes: compared between the layer
        role with the fewest bytes per kernel and the one with the most, where those differ severalfold."""
        g = g[g["role"].isin(LAYER_ROLES) & (g["bytes_us_each"] > 0)]
        if len(g) < 2:
            return ""
        few, most = g.loc[g["bytes_us_each"].idxmin()], g.loc[g["bytes_us_each"].idxmax()]
        if most.bytes_us_each < ROLE_BYTES_APART * few.bytes_us_each or few.over_us_each <= 0:
            return ""
        few_w, most_w = self.role_words(few.role), self.role_words(most.role)
        if most.over_us_each <= ROLE_EVEN * few.over_us_each:
            return (f" Of a layer's five {unit}s, the one with the fewest bytes to read ({few_w}) pays about as "
                    f"much above them as the one with the most ({most_w}): a cost per {unit}, not per byte.")
        return (f" Here, of a layer's five {unit}s, the one with the most bytes to read ({most_w}) also pays more "
                f"above them than the one with the fewest ({few_w}), so not all of the excess is a fixed cost "
                f"per {unit}.")

    def role_table(self) -> str:
        r = self._role_frame.copy()
        if r.empty:
            return ""
        r["shape"] = [f"{m}, batch {b}, context {c}, {self.short(v)}"
                      for m, b, c, v in zip(r["model"], r["batch"], r["context"], r["variant"])]
        r["does"] = [self.ROLE_WORDS.get(x, x) for x in r["role"]]  # plain: the table escapes its cells
        opt = lambda fn: (lambda x: "" if not _ok(x) else fn(x))  # noqa: E731
        us = opt(lambda x: f"{fmt.num(x)} µs")
        return table_html(r, {"shape": "Shape", "does": "Kernel (persistent step: operation)",
                              "kernels_per_step": "Per step",
                              "us_each": "GPU time each", "bytes_us_each": "Its bytes at copy bandwidth",
                              "over_us_each": "Above its bytes"},
                          formats={"kernels_per_step": opt(lambda x: f"{x:.0f}"), "us_each": us, "bytes_us_each": us,
                                   "over_us_each": us})
