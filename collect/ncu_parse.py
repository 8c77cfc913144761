"""Read what Nsight Compute prints: the raw-page CSV, its console messages and --query-metrics.

Standard library only: the tests parse a real export on a machine without a GPU, and render/ may
import this module. The CSV comes from

    ncu --import REPORT.ncu-rep --page raw --csv --print-units base

one row per kernel launch, one column per metric, and a second row with each metric's unit.
"""
from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field

from .ncu_setup import PERMISSION_FIX, permission_fix  # the fix for ERR_NVGPUCTRPERM, in words a reader can act on

CASE_TAG = re.compile(r"case=([A-Za-z0-9_.\-]+)")
_PASSES = re.compile(r"==PROF==\s+Profiling\s+\"(?P<name>.*?)\".*?(?P<n>\d+)\s+pass(?:es)?\b")
_MISSING_METRIC = re.compile(r"Failed to find metric\s+\"?([A-Za-z0-9_.]+)\"?")
_METRIC_NAME = re.compile(r"^[a-z][a-z0-9]*__[a-z0-9_]+(\.[a-z0-9_]+)*$")
STALL_COLUMN = re.compile(r"^smsp__average_warps_issue_stalled_(?P<reason>.+)_per_issue_active\.ratio$")

_PREFIX = {"": 1.0, "K": 1e3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15,
           "m": 1e-3, "u": 1e-6, "n": 1e-9, "p": 1e-12}
_BASE_UNITS = ("byte", "second", "hz", "cycle", "inst", "sector", "request", "warp", "block", "thread",
               "register", "wavefront")


@dataclass
class KernelRecord:
    """One row of the raw page: identity columns plus metrics in base units (None where n/a)."""

    ncu_id: int
    name: str
    case_id: str | None
    columns: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, float | None] = field(default_factory=dict)

    def get(self, *names: str) -> float | None:
        """The first of `names` that this row has a value for."""
        for n in names:
            v = self.metrics.get(n)
            if v is not None:
                return v
        return None


class NcuFailure(Exception):
    """Nsight Compute ran but produced no usable profile; the message says why and what to do."""

    def __init__(self, status: str, reason: str, fix: str | None = None):
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.fix = fix  # what the reader can do about it, where there is something


def parse_number(text: str | None) -> float | None:
    """'1,234,567' -> 1234567.0; 'n/a', '' and non-numbers -> None (ncu prints n/a for skipped metrics)."""
    if text is None:
        return None
    s = text.strip().replace(",", "").replace("\u202f", "").replace(" ", "")
    if not s or s.lower() in ("n/a", "nan", "-", "(!)"):
        return None
    try:
        return float(s)
    except ValueError:
        return None


# ncu 2025 prints durations as 'ns' even with --print-units base; older versions print 'nsecond'.
_TIME = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def _unit_scale(part: str) -> float:
    """Scale of one side of a unit, e.g. 'Kbyte' -> 1e3, 'nsecond' or 'ns' -> 1e-9, 'byte' -> 1."""
    p = part.strip()
    if p in _TIME:
        return _TIME[p]
    low = p.lower()
    for base in _BASE_UNITS:
        if low.endswith(base) and len(p) - len(base) <= 1:
            prefix = p[: len(p) - len(base)]
            if base == "hz":  # 'Ghz', 'Mhz'
                return _PREFIX.get(prefix.upper() if prefix in ("k",) else prefix, 1.0)
            return _PREFIX.get(prefix, 1.0)
    return 1.0


def to_base(value: float | None, unit: str | None) -> float | None:
    """A value in its printed unit -> the base unit ('Kbyte' -> bytes, 'usecond' -> seconds, 'Mhz' -> Hz).

    With --print-units base the scale is 1 already; this keeps a CSV exported without it correct."""
    if value is None or not unit:
        return value
    num, _, den = unit.partition("/")
    scale = _unit_scale(num)
    if den:
        scale /= _unit_scale(den)
    return value * scale


def _csv_start(text: str) -> int:
    """Offset of the CSV header ("ID",...): ncu and the target may print lines before it."""
    m = re.search(r'^"ID","', text, flags=re.M)
    if m is None:
        raise NcuFailure("error", "Nsight Compute printed no kernel table (no CSV header starting with \"ID\"); "
                         "the report holds no profiled kernel.")
    return m.start()


def _nvtx_columns(header: list[str]) -> list[str]:
    return [h for h in header if "push/pop" in h.lower() or "range" in h.lower() or "nvtx" in h.lower()]


def parse_raw_csv(text: str) -> list[KernelRecord]:
    """Kernel records, in profiling order, from `ncu --page raw --csv` output."""
    reader = csv.reader(io.StringIO(text[_csv_start(text):]))
    rows = [r for r in reader if r]
    header = rows[0]
    body = rows[1:]
    units: dict[str, str] = {}
    if body and not body[0][0].strip():  # the units row has no ID
        units = dict(zip(header, body[0]))
        body = body[1:]
    metric_cols = [h for h in header if _METRIC_NAME.match(h)]
    nvtx_cols = _nvtx_columns(header)
    out = []
    for r in body:
        cells = dict(zip(header, r))
        ncu_id = parse_number(cells.get("ID"))
        if ncu_id is None:
            continue
        case_id = None
        for c in nvtx_cols:
            found = CASE_TAG.findall(cells.get(c, ""))
            if found:
                case_id = found[-1]  # innermost
                break
        metrics = {m: to_base(parse_number(cells.get(m)), units.get(m)) for m in metric_cols}
        identity = {h: v for h, v in cells.items() if h not in metrics}
        out.append(KernelRecord(ncu_id=int(ncu_id), name=cells.get("Kernel Name", ""), case_id=case_id,
                                columns=identity, metrics=metrics))
    return out


def parse_passes(console: str) -> list[tuple[str, int]]:
    """(kernel name, replay passes) per profiled launch, in order, from ncu's ==PROF== lines."""
    return [(m.group("name"), int(m.group("n"))) for m in _PASSES.finditer(console)]


def missing_metrics(console: str) -> list[str]:
    """Metrics ncu refused because this GPU or version does not have them."""
    return sorted(set(_MISSING_METRIC.findall(console)))


def error_lines(console: str) -> list[str]:
    return [ln.strip() for ln in console.splitlines() if ln.strip().startswith("==ERROR==")]


def check_console(console: str, returncode: int | None, report_exists: bool = False) -> None:
    """Raise NcuFailure with a reason a reader can act on when ncu's output shows that there is no
    usable profile. Errors that still left a report (one case crashing the target after others were
    profiled) are not raised here: the caller keeps the data and notes them."""
    if "ERR_NVGPUCTRPERM" in console:
        raise NcuFailure("error", "Nsight Compute may not read the GPU performance counters on this machine "
                         f"(ERR_NVGPUCTRPERM). To fix it, {PERMISSION_FIX}.", fix=permission_fix())
    missing = missing_metrics(console)
    if missing:
        raise NcuFailure("error", f"this GPU or ncu version has no metric(s) {', '.join(missing)}.")
    if re.search(r"No kernels were profiled", console):
        seen = re.findall(r"^\s*\d+\.\s+(\S.*)$", console.split("Available Kernels:", 1)[1], flags=re.M) \
            if "Available Kernels:" in console else []
        ran = f" Kernels that did run: {', '.join(seen[:8])}." if seen else ""
        raise NcuFailure("error", "no kernel matched the profiling filter (ncu: \"No kernels were profiled\"): "
                         "nothing ran between cudaProfilerStart and cudaProfilerStop, or the NVTX/kernel "
                         f"filter names a range or kernel that never ran.{ran}")
    if report_exists:
        return
    errors = error_lines(console)
    if errors:
        raise NcuFailure("error", f"Nsight Compute failed: {errors[0][:400]}")
    tail = " | ".join(console.strip().splitlines()[-3:])[:400]
    raise NcuFailure("error", f"Nsight Compute wrote no report (exit status {returncode}); last output: {tail}")


def parse_query_metrics(text: str) -> set[str]:
    """Base metric names (no .sum/.pct suffix) from `ncu --query-metrics`."""
    names = set()
    for line in text.splitlines():
        tok = line.strip().split(" ", 1)[0] if line.strip() else ""
        if tok and _METRIC_NAME.match(tok):
            names.add(tok)
    return names


def base_name(metric: str) -> str:
    """'dram__bytes_read.sum' -> 'dram__bytes_read'; 'lts__t_sector_hit_rate.pct' -> 'lts__t_sector_hit_rate'."""
    return metric.split(".", 1)[0]


def stall_reasons(rec: KernelRecord) -> dict[str, float]:
    """Warp stall reason -> warps stalled per issued instruction, for reasons with a value."""
    out = {}
    for name, value in rec.metrics.items():
        m = STALL_COLUMN.match(name)
        if m and value is not None:
            out[m.group("reason")] = value
    return out


def block_dims(text: str | None) -> int | None:
    """'(128, 1, 1)' -> 128; the raw page prints block and grid sizes this way."""
    if not text:
        return None
    nums = [int(x) for x in re.findall(r"\d+", text)]
    if not nums:
        return None
    prod = 1
    for n in nums:
        prod *= n
    return prod
