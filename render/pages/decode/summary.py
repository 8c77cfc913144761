"""What this run shows, what a step must read, and how the run decoded: the page's opening."""
from __future__ import annotations

import pandas as pd

from ... import escape, fmt
from ...tables import table_html
from ...vocab import join
from .data import DecodeData, FLOOR_TARGETS, STEP_WORDS, _capital, _ok, than


class Summary(DecodeData):
    """The opening findings, the run's summary and models table, and the bandwidth floor said once."""

    # Where the floors' bandwidth came from (DecodeFile.floor_bandwidth_source), in words; a source this page does
    # not know is shown as the run names it.
    SOURCE_WORDS = {"env copy_bandwidth": "the copy bandwidth measured on the [Hardware & ceilings](hardware.md) page",
                    "decode phase copy": "a copy this phase timed itself, since the Hardware page's was not measured"}

    def summary(self) -> str:
        d = self.data
        counts = self.rows["status"].value_counts()
        status = join(f"{counts[s]} {s}" for s in ("ok", "oom", "unsupported", "error", "skipped") if s in counts)
        # Planned, not decoded: the count holds the rows that did not run. A phase that stopped before its end saved
        # only the rows before it stopped; how many it planned is not recorded.
        counted = ("This run's decode phase stopped before its end, after saving" if self.cut_short() else
                   "This run planned")
        text = (f"{counted} {len(self.rows)} rows ({status}) on {escape.text(join(self.models()))}. "
                f"{self._warmup_words()} Prompts, as the run describes them: {escape.text(d.prompt)}. ")
        if d.dtype_reason:
            text += f"Weights, activations and float caches are {escape.text(d.dtype_reason)}. "
        if d.graph_step:
            # The graph step and its int8 twin, by name: the persistent step is a CUDA-graph variant too, and runs
            # one kernel of its own, not the graph step's.
            graphs = [self.named(v) for v in ("graph", "int8-graph") if v in self.variants()] or ["the CUDA-graph step"]
            text += (f"{_capital(join(graphs))} compute{'s' if len(graphs) == 1 else ''} {'its' if len(graphs) == 1 else 'their'} "
                     f"step with {escape.text(STEP_WORDS.get(d.graph_step, d.graph_step))}. ")
        if d.floor_bandwidth_bytes_per_s:
            source = d.floor_bandwidth_source
            text += (f"Bandwidth floors use {fmt.bandwidth(d.floor_bandwidth_bytes_per_s)} "
                     f"({self.SOURCE_WORDS.get(source) or escape.text(source or 'source not recorded')}).")
        else:
            text += "No copy bandwidth was measured, so this run has no bandwidth floors."
        if d.notes:
            text += "\n" + "".join(map(escape.note, d.notes))
        return text

    def _warmup_words(self) -> str:
        """How each row warmed up before its timed steps: the plan's count of steps, and the loops whose warm-up
        the rows show to differ (the plan's count alone read as every row's)."""
        steps = f"{self.data.warmup_steps} steps"
        ways = []
        if self._recorded("cold_step_ms"):
            ways.append("every position it then times for transformers' eager loop")
        if not self.ok[self.ok["variant"] == "hf-generate"].empty:
            ways.append("one untimed pair of calls over the same positions for model.generate")
        text = (f"Each row warms up before its timed steps: {steps} for most loops, {join(ways)}." if ways else
                f"Each row warms up for {steps} before its timed steps.")
        if self.has_trials() or self.has_judged_configs():
            text += " The graph steps also time their attention choices then."
        return text

    def models_table(self) -> str:
        rows = [{"name": m.name, "weights": m.weights + (f" (seed {m.seed})" if m.seed is not None else ""),
                 "shape": f"{m.n_layer} layers, {m.n_head} heads × {m.head_dim}, width {m.n_embd}",
                 "params": f"{m.parameters / 1e6:.0f} M", "wbytes": fmt.bytes_(m.weight_bytes_per_step),
                 "pos": m.n_positions, "attn": m.hf_attn_implementation or "n/a"} for m in self.data.models]
        return table_html(pd.DataFrame(rows), {"name": "Model", "weights": "Weights", "shape": "Shape",
                                               "params": "Parameters", "wbytes": "Weights read per step",
                                               "pos": "Positions", "attn": "transformers attention"})

    def findings_first(self) -> str:
        """At most three sentences: the targets and the floor, our step against transformers' loops, and what
        transformers' eager loop pays the first time it meets a cache length (else the token agreement)."""
        out = []
        rows = self._target_rows()
        judged = [r for r in rows if r["verdict"] != "not measured"]
        met = sum(r["verdict"] == "met" for r in judged)
        floors = [(m, self.row(m, "graph", b, c)) for m, b, c, _ in FLOOR_TARGETS]
        floors = [(m, g) for m, g in floors if g is not None and _ok(g.achieved_over_floor)]
        shapes = {(int(g.batch), int(g.context)) for _, g in floors}
        if judged:
            text = f"{met} of the {len(judged)} targets this run measured are met"
            if floors and len(shapes) == 1:
                b, c = shapes.pop()
                text += (f"; at batch {b} and context {c} the CUDA-graph step takes "
                         + join(f"{fmt.ratio(g.achieved_over_floor)}{' its bandwidth floor' if i == 0 else ''} for "
                                f"{escape.text(m)}" for i, (m, g) in enumerate(floors)))
            out.append(text + ".")
        shape = self._baseline_shape()
        if shape is not None:
            model, b, c = shape
            g = self.row(model, "graph", b, c)
            # Runs before the eager loop warmed every position it timed (no cold_step_ms) timed its first pass.
            eager = self.row(model, "hf-eager", b, c)
            first = (" (timed at cache lengths it met for the first time)"
                     if eager is not None and not _ok(eager.get("cold_step_ms")) and _ok(eager.get("peak_mem_bytes")) else "")
            others = [v for v in ("hf-generate", "hf-eager", "hf-compiled") if self.row(model, v, b, c) is not None]
            if others and others[0] == "hf-generate":  # what a user calls stands for the eager loop too
                others = [v for v in others if v != "hf-eager"]
            others = others[:2]
            parts = [than(g.step_ms_median, self.row(model, v, b, c).step_ms_median,
                          self.named(v) + (first if v == "hf-eager" else ""), " per token" if v == "hf-generate" else "")
                     for v in others]
            if parts:
                out.append(f"For {escape.text(model)} at batch {b} and context {c}, our CUDA-graph step is "
                           f"{join(parts)}.")
                # Three sentences at most: the spread over runs says how far those ratios follow the host; where no
                # other run shows it, a loop that left its GPU idle for much of its step says so (the idle shares
                # are in 'Step time against context').
                out.append(self.host_spread_sentence(model, b, c, "graph", others)
                           or self.host_caveat(model, b, c, "graph", others).strip())
        if len([x for x in out if x]) < 3:
            out.append(self._agreement_sentence())
        return " ".join(x for x in out if x) or "This run has no decode step to report."
    def floor_statement(self) -> str:
        """What bounds a step from below, said once: the floor's bandwidth, and how fast reading alone went."""
        d = self.data
        if not d.floor_bandwidth_bytes_per_s:
            return "This run measured no copy bandwidth, so its steps have no bandwidth floor."
        text = (f"The floor prices a step's bytes at the measured copy bandwidth, "
                f"{fmt.bandwidth(d.floor_bandwidth_bytes_per_s)} (a copy's reads plus writes).")
        m = self._micro_ok()
        m = m[m["bandwidth_fraction"].notna()] if not m.empty else m
        if not m.empty and m["bandwidth_fraction"].max() > 1:
            top = m.loc[m["bandwidth_fraction"].idxmax()]
            text += (f" Reading alone goes faster: the decode attention below read its cache at up to "
                     f"{fmt.pct(100 * top.bandwidth_fraction)} of that rate, likely because memory that only reads "
                     "never turns around to write (a cause this run does not measure). So the floor is a yardstick, not a hard bound: a step that only read "
                     f"could take as little as {fmt.num(1 / top.bandwidth_fraction)} of it.")
        else:
            text += (" No read measured on this GPU went faster than that, so the floor is the least a step can "
                     "take at the bandwidth this run saw.")
        return text
