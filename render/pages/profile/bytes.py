"""Measured bytes against the byte arithmetic: DRAM and L2 counters beside the model, and why they differ."""
from __future__ import annotations

import re

import pandas as pd
import plotly.graph_objects as go

from ... import fmt, model
from ...axes import byte_hover, byte_ticks
from ...figures import PALETTE
from ...fmt import known
from ...tables import table_html
from ...vocab import ELEMENT_BYTES, MATERIALISING, impl_label, join
from .data import ProfileData, _esc, _shape_id
from .roofline import Roofline


class Bytes(ProfileData):
    """The bytes frame, figure and table, and the gap explained level by level."""

    def bytes_frame(self, shape=None) -> pd.DataFrame:
        shape = shape or self.headline
        df = self._rows(shape)
        df = df[df["status"] == "ok"] if not df.empty else df
        b, h, n, d, dt, c = shape
        e = ELEMENT_BYTES.get(dt, 2)
        out = []
        for _, r in df.iterrows():
            dram = self._dram(r)
            if dram is None:  # no DRAM counter read for this call
                continue
            fused = r["impl"] not in MATERIALISING
            mdl = (model.fused_traffic_bytes if fused else model.naive_traffic_bytes)(n, d, e, b * h)
            out.append({"impl": r["impl"], "case_id": r["case_id"], "model_kind": "fused 4eNd" if fused else "naive 4eNd + 4eN²",
                        "model": float(mdl), "dram": dram, "ratio": dram / mdl if mdl else None, "l2": r["l2_bytes"],
                        "config": r["config"]})
        return pd.DataFrame(out)

    def bytes_figure(self, shape=None) -> str:
        shape = shape or self.headline
        df = self.bytes_frame(shape)
        if df.empty:
            return "_No DRAM byte counts in this run._"
        fig = go.Figure()
        x = [_esc(impl_label(i)) for i in df["impl"]]
        fig.add_bar(name="model (byte arithmetic)", x=x, y=df["model"], marker_color=PALETTE[7],
                    customdata=[[b, _esc(k)] for b, k in zip(byte_hover(df["model"]), df["model_kind"])],
                    hovertemplate="%{x}: model %{customdata[0]} (%{customdata[1]})<extra></extra>")
        fig.add_bar(name="measured DRAM (read + write ≥ output)", x=x, y=df["dram"], marker_color=PALETTE[0],
                    customdata=byte_hover(df["dram"]), hovertemplate="%{x}: measured %{customdata}<extra></extra>")
        fig.add_bar(name="measured L2 traffic", x=x, y=df["l2"], marker_color=PALETTE[5],
                    customdata=byte_hover(df["l2"]), hovertemplate="%{x}: L2 %{customdata}<extra></extra>")
        fig.update_layout(barmode="group")
        fig.update_yaxes(type="log", title_text="bytes per call",
                         **byte_ticks(list(df["model"]) + list(df["dram"]) + list(df["l2"].dropna())))
        return self.figure(f"bytes-{_shape_id(shape)}", fig,
                           "Bytes each implementation moved, measured by the DRAM and L2 counters, beside the byte-"
                           "arithmetic model (naive: 4eNd + 4eN² per head; fused: 4eNd per head). "
                           f"{self.caption_conditions(shape)}.")

    def bytes_table(self, shape=None) -> str:
        df = self.bytes_frame(shape)
        if df.empty:
            return ""
        df = df.assign(impl=df["impl"].map(impl_label))  # the names the figure and the other tables use
        return table_html(df, {"impl": "Implementation", "model_kind": "Model", "model": "Model bytes", "dram": "Measured DRAM",
                               "ratio": "Measured / model", "l2": "Measured L2"},
                          {"model": fmt.bytes_, "dram": fmt.bytes_, "l2": fmt.bytes_, "ratio": fmt.ratio})

    def bytes_gap_explained(self, shape=None) -> str:
        """The gap between measured and modelled bytes, in numbers from this run, level by level."""
        shape = shape or self.headline
        df = self.bytes_frame(shape)
        if df.empty:
            return ""
        b, h, n, d, dt, c = shape
        e = ELEMENT_BYTES.get(dt, 2)
        tensor = b * h * e * n * d  # one of Q, K, V or O
        rows = {r["case_id"]: r for _, r in self._rows(shape).iterrows()}
        parts = []
        for impl in ("triton", "triton-portable"):
            t = df[df["impl"] == impl]
            if not t.empty:
                text = self._reread_text(rows[t.iloc[0]["case_id"]], n, tensor)
                if text:
                    parts.append(text)
        nv = df[df["impl"] == "naive"]
        if not nv.empty:
            r = nv.iloc[0]
            text = (f"The naive path moved {fmt.bytes_(r['dram'])} through DRAM, {fmt.ratio(r['ratio'])} the model's "
                    f"{fmt.bytes_(r['model'])}")
            if r["ratio"] > 1.05:
                text += (": the model counts the score and probability matrices once each in the input dtype, while "
                         "this implementation scales the scores in a separate kernel and its softmax writes fp32 "
                         "probabilities that are cast back, so N² elements cross DRAM more often (see the kernel table).")
            elif r["ratio"] < 0.95:
                text += (": part of the N² matrices stayed in L2 between kernels, so DRAM saw fewer bytes than the "
                         "model's one pass per kernel.")
            else:
                text += ", about what the model predicts."
            parts.append(text)
        short = [impl_label(rows[cid]["impl"]) for cid in df["case_id"]
                 if known(rows[cid]["dram_write_bytes"]) and rows[cid]["dram_write_bytes"] < 0.9 * tensor]
        if short:
            l2 = self.run.manifest.device.l2_bytes if self.run.manifest.device else None
            size = f" ({fmt.bytes_(l2)} here)" if l2 else ""
            parts.append(f"DRAM writes of {join(short)} are below the {fmt.bytes_(tensor)} of output they produce: "
                         f"L2 is a write-back cache{size}, so output still held in L2 when the kernel ended reaches "
                         "DRAM later, after the counters stopped.")
        return "\n\n".join(parts)

    def _reread_text(self, r, n: int, tensor: float) -> str:
        """Each query tile of a fused kernel reads all of its head's K and V: the requests that makes, against what
        each level's counter saw. A level that saw fewer bytes than the requests served the rest from a level
        nearer the SM, or (when none did) its counter did not see them."""
        requests = self.tile_requests(r)
        if requests is None:
            return ""
        bm = int(re.search(r"BLOCK_M=(\d+)", r["config"]).group(1))
        blocks = -(-n // bm)
        who = impl_label(r["impl"])
        # How often the tiles read K and V over: every query block all of them, or under a causal mask only the
        # key tiles up to the diagonal (tile_requests counts Q and O once besides).
        reads = (requests / tensor - 2) / 2
        what = "their head's K and V up to the diagonal" if r["causal"] else "all of their head's K and V"
        out = [f"The model counts K and V once, but {who}'s {blocks} query blocks of {bm} rows per head each read "
               f"{what}: with Q read and O written once, that is {fmt.bytes_(requests)} of re-reads and requests."]
        k = self._case_kernels(r["case_id"])
        _, why_l1 = self._level_bytes(r, k, "l1")
        l1, l2, dram = r["l1_bytes"], r["l2_bytes"], r["dram_read_bytes"]
        if why_l1 == "bypassed":
            # TMA named only where a kernel's name says it copies that way (Roofline.names_tma): a T4 has none.
            tma = "kernel_name" in k and any(Roofline.names_tma(n) for n in k["kernel_name"].dropna())
            how = ", as TMA copies do" if tma else ""
            out.append(f"Its loads bypass L1 (the L1 counter saw {fmt.bytes_(l1)}){how}.")
        elif known(l1):
            out.append(f"The L1 counter saw {fmt.ratio(l1 / requests)} those requests.")
        if known(l2):
            seen = l2 / requests
            text = f"L2 saw {fmt.ratio(seen)} of them"
            if seen < 0.95 and why_l1 != "bypassed" and known(l1) and l1 >= 0.95 * requests:
                text += ": L1 served the rest"
            elif seen < 0.95 and why_l1 == "bypassed":
                text += (": fewer bytes than the tiles the kernel requests, though a TMA copy reaches shared memory "
                         "through L2 alone, so the counter misses part of these loads or they were merged before it "
                         "counted them (the roofline's L2 point carries the same caveat)")
            elif seen < 0.95:
                text += (": fewer bytes than the tiles the kernel requests, and no level nearer the SM counted the "
                         "rest, so these counters do not show where every re-read was served")
            out.append(text + ".")
        if known(dram):
            kv = max((dram - tensor) / (2 * tensor), 0)
            held = ("L2 held them between query blocks" if kv < 0.5 * reads else
                    "the caches did not hold them between query blocks")
            out.append(f"K and V came from DRAM about {fmt.num(kv, 2)} times instead of {fmt.num(reads, 2)}: {held}.")
        return " ".join(out)
