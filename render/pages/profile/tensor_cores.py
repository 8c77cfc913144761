"""Whether the tensor cores ran: the FLOP counters first, the GEMM kernels' tensor-pipe instructions where those
are missing."""
from __future__ import annotations

import re

import pandas as pd

from ... import escape, fmt
from ...fmt import known
from ...vocab import impl_label, join, plural
from .data import ProfileData, short_kernel_name


# Names of kernels that multiply matrices (GEMMs, and attention kernels built around them), for the
# tensor-core decision on GPUs without tensor FLOP counters.
GEMM_NAME = re.compile(r"gemm|nvjet|xmma|mma|cutlass|fmha|flash|attn|sdpa|_fwd|matmul", re.I)


def _tensor_core_work(k: pd.DataFrame) -> pd.Series:
    """Per kernel: did it run matrix multiplies on the tensor cores? Decided by its tensor FLOP count where the
    profile has one, since a name list cannot know every kernel (our Gluon kernels' names match none of it).
    Without that count, tensor-pipe instructions decide only in a kernel named like a GEMM, because softmax and
    elementwise kernels issue some too; with neither counter, the name alone."""
    name = k["kernel_name"].map(lambda n: bool(GEMM_NAME.search(str(n)))) if not k.empty else pd.Series(dtype=bool)
    out = name.copy()
    if "tensor_inst" in k:
        inst = k["tensor_inst"].map(known)
        out[inst] = name[inst] & (k["tensor_inst"][inst] > 0)
    if "flops_tensor" in k:
        counted = k["flops_tensor"].map(known)
        out[counted] = k["flops_tensor"][counted] > 0
    return out.astype(bool)


class TensorCores(ProfileData):
    """Per implementation: did its matrix multiplies run on the tensor cores, and on what evidence."""

    def tensor_core_verdicts(self, shape=None) -> dict[str, tuple[bool | None, str]]:
        """impl -> (tensor cores ran?, the evidence that decided it), deciding in this order: the tensor FLOP
        counters; where the GPU lacks them, the tensor-pipe instructions of the GEMM kernels only (softmax and
        elementwise kernels can issue tensor-pipe instructions too); failing both, nothing decides (the compiled
        code would, and this run does not hold it). Worked out once per shape: every roof asks."""
        shape = shape or self.headline
        cache = self.__dict__.setdefault("_tensor_core_verdicts_by_shape", {})
        if shape not in cache:
            cache[shape] = self._tensor_core_verdicts(shape)
        return dict(cache[shape])

    def _tensor_core_verdicts(self, shape) -> dict[str, tuple[bool | None, str]]:
        df = self._rows(shape)
        df = df[df["status"] == "ok"] if not df.empty else df
        out = {}
        for _, r in df.iterrows():
            k = self._case_kernels(r["case_id"])
            if known(r.get("flops_tensor")):
                out[r["impl"]] = (r["flops_tensor"] > 0, "counters")
                continue
            gemm = k[k["kernel_name"].map(lambda n: bool(GEMM_NAME.search(str(n))))] if not k.empty else k
            inst = gemm["tensor_inst"].dropna() if not gemm.empty else pd.Series(dtype=float)
            if len(inst):
                out[r["impl"]] = (bool((inst > 0).any()), "gemm-instructions")
            else:
                out[r["impl"]] = (None, "none")
        return out

    def tensor_core_sentence(self, shape=None) -> str:
        shape = shape or self.headline
        tc = self.tensor_core_verdicts(shape)
        if not tc:
            return ""
        evidence = {"counters": f"the tensor FLOP counters ({escape.code('sm__ops_path_tensor_*')})",
                    "gemm-instructions": "the tensor-pipe instruction counts of the GEMM kernels (this GPU has no "
                                         "tensor FLOP counters)"}
        out = []
        for ev, words in evidence.items():
            used = [i for i, (u, e) in tc.items() if e == ev and u]
            idle = [i for i, (u, e) in tc.items() if e == ev and u is False]
            if used:
                out.append(f"Tensor cores ran for {join(impl_label(i) for i in used)}, by {words}.")
            for i in idle:
                out.append(self._idle_sentence(shape, i, words))
        unknown = [i for i, (u, _) in tc.items() if u is None]
        if unknown:
            out.append(f"For {join(impl_label(i) for i in unknown)}, no counter decides it: the profile has neither "
                       "tensor FLOP counts nor tensor-pipe instructions of a GEMM kernel, and only the compiled code "
                       "could say.")
        return " ".join(out)

    def _idle_sentence(self, shape, impl: str, words: str) -> str:
        """Why an implementation's tensor cores count as idle, with what ran instead."""
        case = self._rows(shape)
        case = case[case["impl"] == impl].iloc[0]["case_id"]
        k = self._case_kernels(case)
        gemm = k[k["kernel_name"].map(lambda n: bool(GEMM_NAME.search(str(n))))] if not k.empty else k
        text = f"They did **not** run for {impl_label(impl)}, by {words}"
        if not gemm.empty and gemm["flops_fp32"].fillna(0).sum() > 0:
            text += (f": its {plural(len(gemm), 'GEMM kernel')} ran their multiplies as FP32 FMA instructions "
                     "on the ordinary pipes")
        issued = k[k["tensor_inst"].fillna(0) > 0] if not k.empty else k
        in_gemm = issued[issued.index.isin(gemm.index)]
        other = issued[~issued.index.isin(gemm.index)]
        names = list(dict.fromkeys(escape.text(short_kernel_name(n)) for n in other["kernel_name"]))
        if not in_gemm.empty:
            # Only the tensor FLOP counters can call a GEMM that issues tensor-pipe instructions idle: those
            # instructions did no counted tensor-core arithmetic, so say where they were and what decided it.
            rest = f", and {join(names)} the rest" if names else ""
            text += (f". Its tensor-pipe instruction count is not zero: its GEMM kernels issued "
                     f"{fmt.num(in_gemm['tensor_inst'].sum())} of those instructions{rest}, yet the tensor FLOP "
                     "counters counted no tensor-core operation in any of them")
        elif names:
            text += (f". Its tensor-pipe instruction count is not zero, but those instructions come from "
                     f"{join(names)}, not from a matrix multiply")
        return text + "."
