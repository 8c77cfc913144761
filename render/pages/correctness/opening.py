"""What this run shows and what the page measures: the opening findings, the grid covered, the path it ran."""
from __future__ import annotations

import re

from ... import fmt
from ...tables import table_html
from ...vocab import DTYPE_SHORT, facet_label, join, kernel_name
from .rounding import rounding_verdict
from .common import PORTABLE, CorrectnessSection, as_text, sci


def _step_key(step: str) -> tuple:
    """g9 before g10: a step's number, not its spelling, orders it."""
    m = re.fullmatch(r"([a-z]+)(\d+)", step)
    return (m.group(1), int(m.group(2))) if m else (step, 0)


class Opening(CorrectnessSection):
    """The opening findings, the grid's summary, the path it ran and its ragged lengths."""

    def findings_first(self) -> str:
        """Two to four sentences: how many cases pass, the closest call, and how the errors sit against the rounding
        of the output."""
        g = self.grid
        if g.empty:
            return "This run's correctness file has no kernel cases."
        n, passed = len(g), int((g["passed"] == True).sum())  # noqa: E712
        out = [f"The fused kernel passes {passed} of {n} cases against a float64 reference."]
        used = g[g["tol_usage"].notna()] if "tol_usage" in g else g.iloc[0:0]
        if not used.empty:
            r = used.loc[used["tol_usage"].idxmax()]
            out.append(f"The closest call used {fmt.pct(100 * r['tol_usage'])} of its tolerance "
                       f"({facet_label(r['dtype'], bool(r['causal']))}, N={int(r['seq_len'])}, d={int(r['head_dim'])}).")
        c = self.rounding_cases()
        if not c.empty:
            within, high = int((c["ulp_ratio"] <= 1).sum()), float(c["ulp_ratio"].max())
            verdict = rounding_verdict(c["ulp_ratio"])
            lead = {"within one": "Its errors are what rounding the output to the format costs",
                    "within two": "Its errors are about one rounding of the output to the format",
                    "beyond": "Some of its errors are **more than the format's rounding explains**"}[verdict]
            # The ulp is defined further down the page; the opening is read first, so it says what one is.
            out.append(f"{lead}: a case's largest error is at most half an ulp (a unit in the last place: the "
                       f"format's spacing at the output's magnitude) of its largest output in {within} of "
                       f"{len(c)} cases with more than one key, and {fmt.ratio_vs(high, 1)} it at most.")
        return " ".join(out)

    def summary(self) -> str:
        """What the grid covered, and the cases that did not pass (the opening already counts the passes)."""
        g, reg = self.grid, self.regular
        if g.empty:
            return "This run's correctness file has no kernel cases."
        axes = [f"seq_len {join(sorted(set(reg['seq_len'])))}", f"head_dim {join(sorted(set(reg['head_dim'])))}",
                f"batch {join(sorted(set(reg['batch'])))}", "causal and non-causal" if reg["causal"].nunique() > 1
                else ("causal only" if bool(reg["causal"].iloc[0]) else "non-causal only"),
                join([DTYPE_SHORT.get(d, d) for d in self.dtypes])] if not reg.empty else []
        n = len(g)
        passed = int((g["passed"] == True).sum())  # noqa: E712 - the column holds None too
        failed = int(((g["status"] == "ok") & (g["passed"] == False)).sum())  # noqa: E712
        not_run = g[g["status"] != "ok"]["status"].value_counts()
        main = set(self._main_dims())
        by_lengths: dict[tuple, list] = {}
        for d, grp in reg.groupby("head_dim"):
            if d not in main:
                by_lengths.setdefault(tuple(sorted(set(grp["seq_len"]))), []).append(d)
        partial = [f"head_dim {join(dims)} only at seq_len {join(ns)}" for ns, dims in by_lengths.items()]
        partial += self._partial_batches()
        added = len(self.added)
        grid = f"**{len(reg)} cases** of a grid" if added else f"**{n} cases**"
        parts = [f"The kernel was checked on {grid} ({'; '.join(axes + partial)}; {self._heads()})"
                 + (f", and on {added} cases added to reach the kernels only larger shapes take (below)." if added
                    else ".")]
        if passed < n:
            detail = [f"{failed} ran and exceeded the tolerance"] if failed else []
            detail += [f"{c} {s}" for s, c in not_run.items()]
            parts.append(f"**{passed} of {n} pass**; {join(detail)} (each is listed under *Cases that did not pass*).")
        return " ".join(parts)

    def _partial_batches(self) -> list[str]:
        """Batch sizes the grid ran at only some of its (seq_len, head_dim) pairs: without them the case count does
        not follow from the axes listed (run a's batch 2 ran at head_dim 64 and 128 alone)."""
        reg = self.regular
        pairs = set(zip(reg["seq_len"], reg["head_dim"]))
        out = []
        for b, grp in reg.groupby("batch"):
            mine = set(zip(grp["seq_len"], grp["head_dim"]))
            if mine == pairs:
                continue
            dims = set(grp["head_dim"])
            if mine == {p for p in pairs if p[1] in dims}:
                out.append(f"batch {b} only at head_dim {join(sorted(dims))}")
            else:
                out.append(f"batch {b} only at {len(mine)} of the {len(pairs)} (seq_len, head_dim) pairs")
        return out

    def _paths(self) -> set[str]:
        """The kernel paths the grid's rows ran: as recorded, else (older runs) read from their tile config."""
        g = self.grid
        recorded = {str(x) for x in g["kernel_path"].dropna()}
        return recorded or {m.group(1) for m in (re.match(r"(\w+) path", as_text(c)) for c in g["config"]) if m}

    def _kernels(self) -> list[str]:
        """The public names of the kernels the grid's rows ran (the Gluon kernel by its step, where recorded)."""
        g = self.grid[self.grid["kernel_path"].notna()]
        if g.empty:
            return [kernel_name(p) for p in sorted(self._paths())]
        return sorted({kernel_name(p, as_text(st) or None) for p, st in zip(g["kernel_path"], g["kernel_step"])})

    @staticmethod
    def _steps_and_kernels(df) -> tuple[list[str], set[str]]:
        """The Gluon steps `df`'s rows recorded, in order, and the other kernel paths they ran."""
        steps = sorted({str(x) for x in df["kernel_step"].dropna()}, key=lambda x: (len(x), x)) if not df.empty else []
        others = {str(p) for p in df["kernel_path"].dropna()} - {"gluon"} if not df.empty else set()
        return steps, others

    def steps_exercised(self) -> str:
        """Which Gluon steps the grid's rows ran, from the step each row recorded, and apart from them which only the
        cases added for the large-shape routes reached (the grid's axes do not include those cases); unknown where
        no row recorded a step."""
        g = self.grid
        if g.empty or g["kernel_path"].isna().all():
            return ("Which kernel step each row ran was not recorded in this run, so which of the Gluon kernel's steps "
                    "the grid exercised is unknown.")
        steps, others = self._steps_and_kernels(self.regular)
        added_steps, added_others = self._steps_and_kernels(self.added)
        only_steps = [st for st in added_steps if st not in steps]
        only_others = sorted(added_others - others)
        if not steps and not others:
            text = ("The grid's own rows recorded no kernel, so which of the Gluon kernel's steps the grid exercised is "
                    "unknown.")
        elif not steps:
            text = ("No row of the grid ran the Gluon kernel here: it exercised the "
                    f"{join([kernel_name(p) for p in sorted(others)])}.")
        else:
            rest = f", besides the {join([kernel_name(p) for p in sorted(others)])}" if others else ""
            text = f"By the step each row recorded, the grid exercised the Gluon steps {join(steps)}{rest}."
        reached = ([f"the Gluon step{'s' if len(only_steps) > 1 else ''} {join(only_steps)}"] if only_steps else []) + \
            [f"the {kernel_name(p)}" for p in only_others]
        if reached:
            text += f" Only the cases added to reach the kernel routes of larger shapes (below) ran {join(reached)}."
        return text

    def paths_summary(self) -> str:
        """Which kernel path the grid ran, which steps, and how the portable path did on the same cases."""
        g, p = self.grid, self.portable
        if g.empty:
            return ""
        paths = self._paths()
        if not paths:
            return ""
        names = self._kernels()
        ran = (f"These rows ran flash_attention as it ships, which chose the **{join(names)}** "
               f"on this GPU (the [glossary](glossary.md#our-kernels) names each). {self.steps_exercised()}")
        if p.empty:
            return ran + (" The portable path is what runs on every GPU without the Hopper path, so no second "
                          "grid was needed here.") if paths == {"portable"} else ran
        n, passed = len(p), int((p["passed"] == True).sum())  # noqa: E712 - the column holds None too
        shape = ["dtype", "causal", "batch", "heads", "seq_len", "head_dim"]
        same = set(map(tuple, p[shape].values.tolist())) == set(map(tuple, g[shape].values.tolist()))
        worst = []
        for dt, grp in p[p["status"] == "ok"].groupby("dtype"):
            if grp["max_abs_err"].notna().any():
                r = grp.loc[grp["max_abs_err"].idxmax()]
                worst.append(f"{DTYPE_SHORT.get(dt, dt)} {sci(r['max_abs_err'])} (N={int(r['seq_len'])}, "
                             f"d={int(r['head_dim'])}{', causal' if r['causal'] else ''})")
        verdict = f"**all {n} pass**" if passed == n else f"**{passed} of {n} pass**"
        text = (f"{ran} {f'The same {n} cases' if same else f'{n} of these cases,'} held to the portable path "
                f"(`{PORTABLE}` rows): {verdict}"
                + (f"; worst absolute errors {join(worst)}" if worst else "") + ".")
        bad = p[p["passed"] != True]  # noqa: E712
        if not bad.empty:
            bad = bad.assign(reason=[self._why(r) for _, r in bad.iterrows()])
            cols = {k: v for k, v in self._COLS.items() if k not in ("impl", "config", "kernel")}
            text += "\n\n" + table_html(bad, cols, self._FMT)
        return text

    def route_cases(self) -> str:
        """The cases added because their shapes reach a kernel that no regular case reaches, with the kernel each ran."""
        a = self.added
        if a.empty:
            return ("This run's grid has no cases added to reach the kernel routes only larger shapes take (a quick "
                    "profile, or a run from before they were added), so a kernel flash_attention chooses only there, if "
                    "any, was not checked against the float64 reference in this run.")
        passed = int((a["passed"] == True).sum())  # noqa: E712
        verdict = f"all {len(a)} pass" if passed == len(a) else f"**{passed} of {len(a)} pass**"
        # the tile config shows what the kernel column cannot: a path's own choice by length (the Hopper kernel's
        # split causal schedule)
        cols = {k: v for k, v in self._COLS.items() if k not in ("impl", "status", "max_rel_err", "worst_query",
                                                                   "reason")}
        ran = {str(x) for x in a["kernel_path"].dropna()}
        where = (", so every kernel it can choose here is checked against the reference" if ran & {"gluon", "hopper"}
                 else ". On this GPU, where those rules do not apply, they ran the "
                 f"{join([kernel_name(p) for p in sorted(ran)]) or 'kernel recorded below'}")
        return ("flash_attention chooses some of its kernels only from a length or a count of query rows (batch × heads "
                "× N) that the grid above never reaches. For every route of its table for Hopper GPUs (compute "
                "capability 9.x) that no grid case takes, the collect adds the cheapest case that takes it, at both "
                f"dtypes{where}: {verdict}." + "\n\n" + table_html(self.with_kernel(a), cols, self._FMT_WITH_KERNEL))

    def ragged_lengths(self) -> str:
        """The grid's lengths that no tile divides (every tile size the kernels take, the 192-row query tile of the
        warp-specialized Gluon steps included, is a multiple of 16), apart from them those only the cases added for
        the large-shape routes run at, and the query tiles that are not powers of two, which leave a ragged last
        tile at power-of-two lengths too."""
        ragged = lambda df: sorted(n for n in set(df["seq_len"]) if n % 16) if not df.empty else []  # noqa: E731
        odd = ragged(self.regular)
        extra = [n for n in ragged(self.added) if n not in odd]
        also = (f" The cases added to reach the kernel routes of larger shapes (below) add the ragged "
                f"length{'s' if len(extra) > 1 else ''} {join(extra)}, which the grid does not include."
                if extra else "")
        also += self._odd_tiles()
        if not odd:
            return ("Every length in this run's grid is a multiple of 16, so the masked tail tile may never have run in "
                    "it: this grid does not test it." + also)
        return (f"The lengths {join(odd)} in this run's grid are not multiples of 16, the smallest tile, so no tile "
                "size divides them and the masked tail tile runs in every one of those cases." + also)

    def _odd_tiles(self) -> str:
        """' The 192-row query tile of ... is not a power of two: ...': each query tile (BLOCK_M) a case ran with that
        is not a power of two, which kernels took it and at which lengths, and whether any of those lengths is a
        multiple of 16 that only such a tile leaves ragged; '' where every tile that ran is a power of two."""
        tiles: dict[int, dict] = {}
        for _, r in self.grid.iterrows():
            m = re.search(r"BLOCK_M=(\d+)", as_text(r.get("config")))
            bm = int(m.group(1)) if m else 0
            if bm and bm & (bm - 1):  # not a power of two
                t = tiles.setdefault(bm, {"kernels": {}, "ns": set()})
                step = as_text(r.get("kernel_step"))
                name = kernel_name(r["kernel_path"], step or None) if as_text(r.get("kernel_path")) else "kernel"
                t["kernels"].setdefault(name, set()).update([step] if step else [])
                t["ns"].add(int(r["seq_len"]))
        out = []
        for bm, t in sorted(tiles.items()):
            ns = sorted(t["ns"])
            only = [n for n in ns if n % 16 == 0 and n % bm]
            whose = join([name + (f" (step{'s' if len(steps) > 1 else ''} {join(sorted(steps, key=_step_key))})"
                                  if steps else "") for name, steps in t["kernels"].items()])
            out.append(f" The {bm}-row query tile of the {whose} is not a power of two, so it leaves "
                       "a ragged last tile at power-of-two lengths too; "
                       + (f"in this run's cases it ran at N={join(ns)}, and at N={join(only)} only it leaves one."
                          if only else
                          f"in this run's cases it ran only at N={join(ns)}, which no tile divides."
                          if all(n % 16 for n in ns) else f"in this run's cases it ran at N={join(ns)}."))
        return "".join(out)
