"""What this run shows: the page's opening sentences, from the model, the ridge point and the causal rows."""
from __future__ import annotations

import pandas as pd

from ... import fmt, model
from ...vocab import dtype_short, join, shape_label
from .causal_verdicts import CLOCKS_APART, DIFFERENT_KERNELS
from .common import E, BytesSection

_COUNT_WORDS = {2: "two", 3: "three", 4: "four"}


def _span(values: pd.Series) -> str:
    return fmt.span(values.min(), values.max(), fmt.ratio)


class Opening(BytesSection):
    """The page's first paragraph."""

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
                out.append(f"By the model, naive attention cannot be compute-bound on this GPU at any length: its "
                           f"intensity never passes d/2 FLOP per byte, below the measured ridge of {fmt.num(ridge)}.")
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
                        f"the masked and unmasked calls ran one kernel at comparable SM clocks{self._tested_rows(tested)}")
                if verb == "overestimates":
                    text += (f": {_span(tested['measured'])} measured against {_span(tested['predicted'])} "
                             "predicted")
                elif verb != "predicts":
                    parts = [f"{held} as predicted"] + ([f"{short} short of it"] if short else []) + \
                        ([f"{spread} within the timing spread"] if spread else []) + \
                        ([f"{against} against it (named in the causal section below)"] if against else [])
                    text += f": {join(parts)}"
                if len(tested) < len(c):
                    reasons = [(n, w) for w, v in (("ran different kernels", DIFFERENT_KERNELS),
                                                   ("ran one kernel at SM clocks too far apart", CLOCKS_APART))
                               if (n := int((c["verdict"] == v).sum()))]
                    rest = len(c) - len(tested)
                    text += (f"; in the other {rest} they {reasons[0][1]}" if len(reasons) == 1 else
                             f"; of the other {rest}, {join([f'{n} {w}' for n, w in reasons])}")
                    text += ", so the count does not apply"
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
