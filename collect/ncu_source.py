"""SASS hot spots from Nsight Compute's source page: the instructions where each kernel's warps were
sampled most, and why they were waiting there.

    ncu --import REPORT.ncu-rep --page source --csv --print-source sass

prints, per profiled kernel in report order, a `"Kernel Name","<name>"` line, a header row and one
row per SASS instruction: its address, its text, "Warp Stall Sampling (All Samples)" and one
`stall_<reason>` column per stall reason (the SourceCounters section's PC sampling). Standard
library only, so the tests parse a real export without a GPU.
"""
from __future__ import annotations

import csv
import io
import re
from collections import Counter
from dataclasses import dataclass, field

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"  # warp-level executions (SourceCounters); absent from older exports
_STALL = re.compile(r"^stall_(?P<reason>[a-z_]+)$")  # the "(Not Issued)" columns do not match
# The source page abbreviates some reasons; the raw page (and StallRow) spell them out.
REASON_NAMES = {
    "long_sb": "long_scoreboard", "short_sb": "short_scoreboard", "mio": "mio_throttle", "lg": "lg_throttle",
    "math": "math_pipe_throttle", "no_inst": "no_instruction", "imc": "imc_miss", "tex": "tex_throttle",
    "sleep": "sleeping", "dispatch": "dispatch_stall",
}

# What an instruction does, from its opcode: the groups the Profiling page reads hot spots in.
ROLES = (
    ("mma", re.compile(r"^(HGMMA|HMMA|IMMA|QGMMA|IGMMA|WGMMA|UTC\w*MMA|DMMA|BMMA)")),
    ("exp", re.compile(r"^MUFU")),
    # Waiting for the warpgroup's own asynchronous MMAs to finish (wgmma.wait_group) or fencing them.
    ("mma-wait", re.compile(r"^WARPGROUP")),
    ("barrier", re.compile(r"^(BAR|BSYNC|WARPSYNC|NANOSLEEP|SYNCS\.ARRIVE)")),
    ("async-wait", re.compile(r"^(SYNCS\.PHASECHK|DEPBAR|LDGDEPBAR|ARRIVES)")),
    ("tma", re.compile(r"^(UTMA|UBLKCP|UTMACCTL|UTMAPF)")),
    ("load", re.compile(r"^(LDG|LDS|LDSM|LD|LDC|LDGSTS|ULDC)")),
    ("store", re.compile(r"^(STG|STS|STSM|ST|RED|ATOM)")),
    ("convert", re.compile(r"^(F2F|F2FP|I2F|F2I|HADD2\.F32)")),
    ("math", re.compile(r"^(FFMA|FMUL|FADD|FMNMX|HFMA2|HMUL2|HADD2|FSEL|FSETP|IMAD|IADD|LEA|LOP|SHF|ISETP|SEL)")),
    ("control", re.compile(r"^(BRA|EXIT|RET|CALL|BSSY|YIELD|ELECT|VOTE|S2R|S2UR|CS2R|R2UR)")),
)


@dataclass
class Instruction:
    address: str
    sass: str
    samples: float
    stalls: dict[str, float] = field(default_factory=dict)
    executed: float = 0.0

    @property
    def opcode(self) -> str:
        return opcode(self.sass)


@dataclass
class KernelSource:
    """One kernel's block of the source page."""

    name: str
    instructions: list[Instruction] = field(default_factory=list)

    @property
    def samples(self) -> float:
        return sum(i.samples for i in self.instructions)


def base_name(kernel_name: str) -> str:
    """The kernel's function name alone ('flash_fwd_kernel'): the source page and the raw page demangle
    template arguments differently ('(int)64' against '64'), but agree on this."""
    head = re.split(r"[<(]", kernel_name.removeprefix("void ").strip(), maxsplit=1)[0]
    return head.split("::")[-1].strip()


def opcode(sass: str) -> str:
    """'@!P0 HGMMA.64x128x16.F32 R24, ...' -> 'HGMMA.64x128x16.F32'; '' for an empty line."""
    words = [w for w in sass.replace(",", " ").split() if w]
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0] if words else ""


def role(op: str) -> str:
    """What the instruction does: one of ROLES' names, else 'other'."""
    for name, pattern in ROLES:
        if pattern.match(op):
            return name
    return "other"


def _number(text: str) -> float:
    text = (text or "").replace(",", "").strip()
    try:
        return float(text)
    except ValueError:
        return 0.0


def parse_source_csv(text: str) -> list[KernelSource]:
    """Every kernel block of the page, in report order."""
    kernels: list[KernelSource] = []
    header: list[str] | None = None
    for row in csv.reader(io.StringIO(text)):
        if not row:
            continue
        if row[0] == "Kernel Name":
            kernels.append(KernelSource(row[1] if len(row) > 1 else ""))
            header = None
            continue
        if not kernels:
            continue  # ncu's own messages before the first kernel
        if header is None:
            header = row
            continue
        cells = dict(zip(header, row))
        if "Address" not in cells or "Source" not in cells:
            continue
        stalls = {}
        for col, val in cells.items():
            m = _STALL.match(col)
            if m:
                reason = m.group("reason")
                stalls[REASON_NAMES.get(reason, reason)] = _number(val)
        kernels[-1].instructions.append(Instruction(cells["Address"], cells["Source"].strip(),
                                                    _number(cells.get(SAMPLES, "")), stalls,
                                                    _number(cells.get(EXECUTED, ""))))
    return kernels


@dataclass
class HotSpot:
    rank: int
    address: str
    opcode: str
    role: str
    sass: str
    samples: float
    share_pct: float        # of the kernel's samples
    top_reason: str | None  # the stall reason sampled most at this instruction
    top_reason_pct: float | None  # of this instruction's samples


def hotspots(kernel: KernelSource, top: int = 20) -> list[HotSpot]:
    """The `top` instructions with the most samples, with their share and main stall reason."""
    total = kernel.samples
    if total <= 0:
        return []
    ranked = sorted((i for i in kernel.instructions if i.samples > 0), key=lambda i: (-i.samples, i.address))
    out = []
    for n, ins in enumerate(ranked[:top]):
        reasons = {r: v for r, v in ins.stalls.items() if v > 0}
        top_reason = max(reasons.items(), key=lambda kv: (kv[1], kv[0]))[0] if reasons else None
        what = role(ins.opcode)
        if ins.opcode == "NOP" and top_reason == "barrier":  # a warp parked here waits at the barrier before it
            what = "barrier"
        out.append(HotSpot(rank=n, address=ins.address, opcode=ins.opcode, role=what,
                           sass=ins.sass[:200], samples=ins.samples, share_pct=100.0 * ins.samples / total,
                           top_reason=top_reason,
                           top_reason_pct=100.0 * reasons[top_reason] / ins.samples if top_reason else None))
    return out


def stall_summary(kernel: KernelSource, top: int = 40) -> dict:
    """Where one kernel's sampled warps were, three ways: the share of samples by instruction role and by
    stall reason (percent of the kernel's samples, largest first) and its `top` hot spots."""
    total = kernel.samples
    by_role: Counter = Counter()
    by_reason: Counter = Counter()
    for ins in kernel.instructions:
        by_role[role(ins.opcode)] += ins.samples
        by_reason.update(ins.stalls)

    def pct(counts: Counter) -> dict[str, float]:
        if total <= 0:
            return {}
        return {k: round(100 * v / total, 2) for k, v in counts.most_common() if v > 0}

    return {"kernel": kernel.name[:200], "samples": total, "by_role_pct": pct(by_role),
            "by_reason_pct": pct(by_reason), "hotspots": [vars(h) for h in hotspots(kernel, top)]}
