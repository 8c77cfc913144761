"""The profile's calls and kernels as frames, looked up by shape and case, and the helpers every section uses.

Kernel names come from the profiler (C++ templates with angle brackets): they are untrusted text,
escaped in every table (table_html), in every hover label (escape.plot) and in prose (escape.text).
"""
from __future__ import annotations

import re
from functools import cached_property

import pandas as pd

from ... import escape, model
from ...ceilings import Ceilings
from ...frames import index_by
from ...fmt import known
from ...vocab import ELEMENT_BYTES, GLUON_STEP_KERNEL, KERNELS, kernel_name
from ..base import Page


def _shape_id(shape) -> str:
    """Figure-id part for a shape: N and d, and whether causal (two shapes may differ only there)."""
    return f"{shape[2]}-{shape[3]}" + ("-causal" if shape[5] else "")


# The fields of a profiled shape, in the order shapes() gives them.
SHAPE_FIELDS = ("batch", "heads", "seq_len", "head_dim", "dtype", "causal")


def _esc(text) -> str:
    """Untrusted tool text for a Plotly label or hover."""
    return escape.plot(text)


def _clip(text: str, n: int = 36) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _step_words(step) -> str:
    """': Gluon tile kernel, g8' after an implementation's label, for our kernel's recorded Gluon step; '' without
    one. A colon, not parentheses: the labels carry parentheses of their own ('Triton (ours)')."""
    return f": {kernel_name('gluon', step)}, {step}" if isinstance(step, str) and step else ""


def step_link(step, *more: tuple[str, str]) -> str:
    """' ([Gluon tile kernel](glossary.md#gluon-tile-kernel), step g8)' for prose: the kernel's public name linked
    to the glossary, which says what each step changed; '' without a recorded step. `more`: (step, where) pairs
    of the same kernel at other calls, named beside the first ('steps g8 non-causal and g28 causal'; the first
    step's own `where` then comes as the pair ("g8", "non-causal") too). Steps come from the data, so they are
    escaped; the name and anchor are our own words."""
    pairs = [(step, "")] if not more else list(more)
    steps = [s for s, _ in pairs if isinstance(s, str) and s]
    if not steps:
        return ""
    keys = {GLUON_STEP_KERNEL.get(s) for s in steps}
    key = keys.pop() if len(keys) == 1 else None
    name = KERNELS[key] if key else kernel_name("gluon", steps[0]) if len(steps) == 1 else "Gluon kernels"
    # MkDocs' heading anchors: lower case, spaces as hyphens (the glossary's headings are plain words).
    linked = f"[{name}](glossary.md#{name.lower().replace(' ', '-')})" if key else name
    if len(set(steps)) == 1:
        return f" ({linked}, step {escape.text(steps[0])})"
    named = [f"{escape.text(s)} {w}".strip() for s, w in pairs if isinstance(s, str) and s]
    return f" ({linked}, steps {' and '.join([', '.join(named[:-1]), named[-1]])})"


def count_word(n: int) -> str:
    """Small counts as words, for the start of a sentence or a count of warpgroups: 'two'; larger as figures."""
    return {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}.get(n, str(n))


def shape_list(texts) -> str:
    """Shapes in a sentence, each in parentheses and kept apart by semicolons: their own commas would
    otherwise run into the list's ('(B=2, H=8, ...); (B=4, ...) and (...)')."""
    items = [f"({t})" for t in texts]
    if len(items) <= 1:
        return "".join(items)
    return "; ".join(items[:-1]) + " and " + items[-1]


def short_kernel_name(name: str) -> str:
    """'void at::native::foo<c10::Half, 4>(float*, ...)' -> 'foo': the function, no namespace or templates."""
    s = re.sub(r"^(void|static)\s+", "", name.strip())
    s = s.replace("(anonymous namespace)::", "").replace("<unnamed>::", "")
    cut = min([i for i in (s.find("<"), s.find("(")) if i > 0] or [len(s)])
    return s[:cut].split("::")[-1].strip() or name[:40]


class ProfileData(Page):
    """The profile phase's data: the base of every section of the Profiling page."""

    slug = "profile"
    phase = "profile"

    @property
    def ok(self) -> bool:
        d = self.data
        return d is not None and d.status == "ok" and any(r.status == "ok" for r in d.impls)

    @cached_property
    def _impls(self) -> pd.DataFrame:
        return self.run.frame("profile", "impls")

    @cached_property
    def _kernels(self) -> pd.DataFrame:
        return self.run.frame("profile", "kernels")

    def impls(self) -> pd.DataFrame:
        return self._impls

    def kernels(self) -> pd.DataFrame:
        return self._kernels

    @cached_property
    def ceilings(self) -> Ceilings:
        return Ceilings(self.run.manifest)

    def shapes(self) -> list[tuple]:
        """(batch, heads, seq_len, head_dim, dtype, causal) of the main comparison, headline first."""
        df = self.impls()
        df = df[df["group"] == "main"] if not df.empty else df
        keys = list(dict.fromkeys(zip(df["batch"], df["heads"], df["seq_len"], df["head_dim"], df["dtype"], df["causal"])))
        return keys

    @property
    def headline(self) -> tuple | None:
        s = self.shapes()
        return s[0] if s else None

    def shape_text(self, shape) -> str:
        b, h, n, d, dt, c = shape
        return f"B={b}, H={h}, N={n}, d={d}, {dt}" + (", causal" if c else "")

    @staticmethod
    def base_text(base) -> str:
        """A shape without its masking, (batch, heads, seq_len, head_dim, dtype): for a sentence on both maskings."""
        b, h, n, d, dt = base
        return f"B={b}, H={h}, N={n}, d={d}, {dt}"

    # Sections ask for one shape's calls, and one call's kernels, once per call and roof: each frame is split
    # once, so a question is a lookup rather than a pass over every row (the page grew with rows²).
    @cached_property
    def _impls_by_shape(self) -> dict:
        return index_by(self.impls(), ("group",) + SHAPE_FIELDS)

    @cached_property
    def _kernels_by_case(self) -> dict:
        return {key: k.sort_values("launch") for key, k in index_by(self.kernels(), ("case_id",)).items()}

    def _rows(self, shape, group: str = "main") -> pd.DataFrame:
        df = self.impls()
        if df.empty or shape is None:
            return df
        return self._impls_by_shape.get((group, *shape), df.iloc[0:0])

    def _case_kernels(self, case_id: str) -> pd.DataFrame:
        df = self.kernels()
        return df if df.empty else self._kernels_by_case.get((case_id,), df.iloc[0:0])

    def _flops(self, row) -> float:
        """Counted FLOPs where the tensor-op counters exist, else the analytical count."""
        return row["flops_counted"] if known(row.get("flops_counted")) else row["flops_model"]

    @staticmethod
    def _dram(row) -> float | None:
        """A call's DRAM bytes on the report's one basis (model.call_dram_bytes)."""
        return model.call_dram_bytes(row)

    def dram_note(self) -> str:
        """Once, where the DRAM bytes first appear in a table: what they count."""
        return ("DRAM bytes on this page, in the tables, the roofline's DRAM points and the byte comparison below, "
                "are bytes read plus bytes written, the writes counted as at least the call's output: L2 is a "
                "write-back cache, and output still held there when the kernel ends reaches DRAM after the counters "
                "have stopped. The kernel table alone shows the counters as they read.")

    def tile_requests(self, r) -> float | None:
        """Bytes a fused call's tiles request from memory, from its recorded tile config: Q read and O written
        once, and each query tile reading its head's K and V (causal: only the key tiles up to the diagonal,
        whole tiles of BLOCK_N). None where the call has no tile config (a library kernel)."""
        m = re.search(r"BLOCK_M=(\d+)", r["config"] or "") if isinstance(r.get("config"), str) else None
        if not m:
            return None
        bm = int(m.group(1))
        bn = re.search(r"BLOCK_N=(\d+)", r["config"])
        bn = int(bn.group(1)) if bn else bm
        n = int(r["seq_len"])
        tensor = float(r["batch"] * r["heads"] * ELEMENT_BYTES.get(r["dtype"], 2) * n * r["head_dim"])
        tiles = -(-n // bm)
        keys = [min(n, -(-((i + 1) * bm) // bn) * bn) if r["causal"] else n for i in range(tiles)]
        return tensor * (2 + 2 * sum(keys) / n)

    def caption_conditions(self, shape) -> str:
        return f"{self.shape_text(shape)}; Nsight Compute with --clock-control none, one profiled call after warm-up"
