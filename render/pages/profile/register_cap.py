"""Register caps: whether capping registers could add a block per SM to our kernel, and the experiment's rows
where a run still holds them."""
from __future__ import annotations

from ... import fmt
from ...fmt import known
from ...tables import table_html
from ...vocab import impl_label, join, plural
from .data import ProfileData, shape_list


class RegisterCaps(ProfileData):
    """The register-cap note, from our kernel's own block limits, and the experiment's table where it ran."""

    def register_cap_note(self) -> str:
        """Whether capping registers could add a block per SM to our kernel, from its own block limits:
        only where registers, not shared memory, set how many blocks fit."""
        rows = []
        for shape in self.limiter_shapes() or ([self.headline] if self.headline else []):
            k = self._triton_kernel(shape)
            if k is None or not (known(k.get("block_limit_registers")) and known(k.get("block_limit_smem"))):
                continue
            rows.append((shape, int(k["block_limit_registers"]), int(k["block_limit_smem"])))
        ran = self._regcap_words()
        if not rows:
            return ("This run's profile has no block limits for our kernel, so whether a register cap could help is "
                    "not known." + (f" {ran}" if ran else ""))
        bound = [(s, r, m) for s, r, m in rows if m <= r]
        free = [(s, r, m) for s, r, m in rows if m > r]
        out = []
        if bound:
            counts = {(r, m) for _, r, m in bound}
            tail = (f": shared memory allows {plural(next(iter(counts))[1], 'block')} per SM and registers "
                    f"{next(iter(counts))[0]}" if len(counts) == 1 else "")
            out.append(f"At {shape_list(self.shape_text(s) for s, _, _ in bound)}, our kernel's shared memory allows no "
                       f"more blocks per SM than its registers do{tail}, so no register cap (`maxnreg`) could put "
                       "another block on an SM.")
            if not ran:  # the experiment retired: said only where this run indeed holds none of its rows
                out.append("The register-cap experiment of earlier runs is therefore not run: it could not answer its "
                           "question on the kernel that ships.")
        for s, r, m in free:
            out.append(f"At {shape_list([self.shape_text(s)])}, registers allow {plural(r, 'block')} per SM and shared memory {m}: "
                       "a register cap could add a block there" + ("." if ran else ", and this run does not test "
                                                                    "whether it would help."))
        if ran:
            out.append(ran)
        return " ".join(out)

    def _regcap_words(self) -> str:
        """An older run's register-cap experiment (a negative result is kept): which kernel and shape it capped,
        whether any cap beat the same tile config uncapped beyond the run-to-run spread, then its rows."""
        df = self.run.frame("profile", "regcap")
        if df.empty:
            return ""
        im = self.impls()
        im = im[im["case_id"].isin(set(df["case_id"]))] if not im.empty else im
        where = ""
        if not im.empty:
            r = im.iloc[0]
            shape = (r["batch"], r["heads"], r["seq_len"], r["head_dim"], r["dtype"], bool(r["causal"]))
            where = f", on {impl_label(r['impl'])} at {shape_list([self.shape_text(shape)])}"
        df = df.assign(tile=[f"{m}x{n}, {w} warps, {s} stages" for m, n, w, s in
                             zip(df["block_m"], df["block_n"], df["num_warps"], df["num_stages"])],
                       cap=["none" if not known(x) else str(int(x)) for x in df["maxnreg"]])
        # Each tile config's rows together, the uncapped one first.
        df = df.assign(_first=df["cap"] != "none", _tile=df["tile"].map({t: i for i, t in enumerate(dict.fromkeys(df["tile"]))}))
        df = df.sort_values(["_tile", "_first"], kind="stable")
        faster = []
        for tile, g in df.groupby("tile", sort=False):
            base = g[(g["cap"] == "none") & g["latency_ms_p10"].map(known)]
            if base.empty:
                continue
            b = base.iloc[0]
            faster += [f"{tile} at maxnreg {c}" for c, p90 in zip(g["cap"], g["latency_ms_p90"])
                       if c != "none" and known(p90) and p90 < b["latency_ms_p10"]]
        verdict = (f"Beyond the run-to-run spread, a cap beat the same tile config uncapped for {join(faster)}"
                   if faster else
                   "No cap made a tile config faster than the same config uncapped beyond the run-to-run spread")
        timed = df[df["latency_ms_median"].map(known)]
        free, capped = timed[timed["cap"] == "none"], timed[timed["cap"] != "none"]
        if faster and not free.empty and not capped.empty:
            best = free.loc[free["latency_ms_median"].idxmin()]
            if capped["latency_ms_median"].min() > best["latency_ms_median"]:  # a cap that helps a slower config
                verdict += f", yet no capped config ran faster than the fastest uncapped one, {best['tile']}"
        verdict += "."
        intf = lambda v: "n/a" if not known(v) else str(int(v))  # noqa: E731
        cols = {"tile": "Tile config", "cap": "maxnreg", "status": "Status", "registers_per_thread": "Registers / thread",
                "block_limit_registers": "Blocks by registers", "block_limit_smem": "Blocks by shared mem",
                "theoretical_occupancy_pct": "Theoretical occupancy", "local_bytes": "Spill traffic",
                "latency_ms_median": "Latency (median, our clock)"}
        if (df["status"] != "ok").any():  # a failed cap is a result too: say why
            cols["reason"] = "Reason"
        table = table_html(df, cols,
                           {"registers_per_thread": intf, "block_limit_registers": intf, "block_limit_smem": intf,
                            "theoretical_occupancy_pct": fmt.pct, "local_bytes": fmt.bytes_,
                            "latency_ms_median": fmt.ms})
        return (f"This run still holds the register-cap experiment{where}: each tile config with and without "
                f"`maxnreg`. {verdict}\n\n{table}")
