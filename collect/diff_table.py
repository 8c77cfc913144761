"""A diff as a terminal table: what changed first, sorted by ratio, then the counts and the notes."""
from __future__ import annotations

from .diff import counts
from .schema.diff import DiffCase, DiffFile, NoiseFloorFile

DIRECTION = "ratio = B time / A time: below 1, B is faster; above 1, B is slower"
PACE_KEY = ("pace: host (host-bound in either run), GPU (GPU-bound) or - (unrecorded); floor: the noise floor of the "
            "case's class and pace where one was measured, else of its class")


def _interval(c: DiffCase) -> str:
    return f"[{c.ratio_low:.3f}, {c.ratio_high:.3f}]" if c.ratio_low is not None else "(no samples)"


def _pace(host: bool | None) -> str:
    """A case's or a floor's pace in a word: host-bound, GPU-bound, or '-' (unrecorded; a floor pooled over both)."""
    return "-" if host is None else "host" if host else "GPU"


def _plain(text: str) -> str:
    """A string from a data file, safe to print: control and invisible characters shown as escapes."""
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in str(text))


def table(d: DiffFile, show_all: bool = False) -> str:
    """The diff as lines of text. Unchanged cases are left out unless `show_all` (a sweep has hundreds)."""
    rows = sorted(d.cases, key=lambda c: c.ratio)
    shown = rows if show_all or not d.same_device else [c for c in rows if c.verdict in ("faster", "slower")]
    head = (f"A: {_plain(d.run_a)} ({_plain(d.device_a)}, kernel {_plain(d.kernel_version_a or 'unrecorded')})\n"
            f"B: {_plain(d.run_b)} ({_plain(d.device_b)}, kernel {_plain(d.kernel_version_b or 'unrecorded')})\n"
            f"{DIRECTION}; interval: {d.confidence:.0%} bootstrap of the medians ({d.resamples} resamples, seed {d.seed})")
    if not d.same_device:
        head += "\nTWO DIFFERENT GPUs: ratios only, no verdict on a change"
    lines = [head, ""]
    if shown:
        lines += [PACE_KEY, ""]
        lines.append(f"{'verdict':<10} {'ratio':>7} {'interval':>18} {'floor':>6} {'pace':<4} {'A ms':>10} {'B ms':>10}  "
                     "case")
        for c in shown:
            lines.append(f"{c.verdict:<10} {c.ratio:>7.3f} {_interval(c):>18} {c.floor:>6.3f} "
                         f"{_pace(c.host_bound):<4} {c.a_ms:>10.4f} {c.b_ms:>10.4f}  {_plain(c.label)}")
    elif d.cases:
        lines.append("No case changed beyond its interval and noise floor (--all lists every case).")
    n = counts(d)
    if d.same_device:
        lines += ["", f"{len(d.cases)} cases in both runs: {n['faster']} faster, {n['slower']} slower, "
                      f"{n['no change']} no change" + ("" if show_all or not d.cases else " (--all lists them)")]
    else:
        lines += ["", f"{len(d.cases)} cases in both runs, compared by ratio only"]
    for name, only in (("A", d.only_a), ("B", d.only_b)):
        if only:
            lines.append(f"{len(only)} cases measured in {name} only:")
            lines += [f"  {_plain(u.label)}" + (f" (other run: {_plain(u.other_status)})" if u.other_status else "")
                      for u in only]
    lines += [""] + [f"note: {_plain(x)}" for x in d.notes]
    return "\n".join(lines)


def noise_table(n: NoiseFloorFile) -> str:
    """A noise floor as lines of text, one class a line."""
    lines = [f"Noise floor of {_plain(n.device)} at commit {n.git_commit[:12]} from {len(n.run_ids)} repeat runs "
             f"({', '.join(map(_plain, n.run_ids))}); floor = p{n.quantile:g} of the pairwise factors", "",
             f"{'phase':<11} {'implementation':<22} {'d':>4} {'mask':<7} {'pace':<4} {'cases':>5} {'pairs':>5} "
             f"{'median':>7} {'floor':>7}"]
    for c in n.classes:
        mask = "-" if c.causal is None else ("causal" if c.causal else "full")
        lines.append(f"{c.phase:<11} {_plain(c.impl):<22} {c.head_dim or '-':>4} {mask:<7} "
                     f"{_pace(c.host_bound):<4} {c.cases:>5} {c.pairs:>5} "
                     f"{c.median_factor:>7.3f} {c.floor:>7.3f}")
    lines += [""] + [f"note: {_plain(x)}" for x in n.notes]
    return "\n".join(lines)
