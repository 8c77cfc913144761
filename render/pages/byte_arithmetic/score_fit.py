"""Where the score matrix stops fitting: in L2 and in memory, for each head count, against the measured naive calls."""
from __future__ import annotations

from functools import cached_property

import pandas as pd

from ... import fmt, model
from ...tables import table_html
from ...vocab import shape_label
from .common import E, BytesSection

# The naive code as written hands its softmax output to the next kernel in fp32 (model.naive_as_written_bytes):
# the widest tensor one of its kernels writes and the next reads back, so it decides where those passes
# can still be served from L2.
E_P_FP32 = 4


class ScoreFit(BytesSection):
    """The limits on N at which the score matrix leaves L2 and memory, in a table and in words."""

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
