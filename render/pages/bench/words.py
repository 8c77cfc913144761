"""Speedups into words: Triton's standing against another implementation over N, told by its pattern (one
side, a crossover, an excursion, back and forth), with the calls' own spread taken into account."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ... import escape, fmt
from ...bench_data import spread  # noqa: F401  (the one definition; sections import it from here)
from ...vocab import EVEN, join, path_label, side
# The one definition of a timed case's verdict; the page's sections import it from here.
from ...vocab import band_words, case_side, case_words, edge_of  # noqa: F401

# A speedup that changes by at least this factor from the shortest to the longest N "grows" or "narrows".
TREND = 1.15
# A gap that grows (or narrows) by TREND and then moves less than TREND over at least this many lengths, to the last,
# "holds" there: the trend is told up to where it stops rather than from end to end.
PLATEAU_LENGTHS = 3
# Below TREND, a gap that changes by less than this factor "holds roughly steady": the "on par" band, within which
# timing noise alone moves a ratio. Between the two it widens or narrows "a little": 1.08x to 1.21x is no steady gap.
DRIFT = EVEN


def loglog_slope(x, y) -> float | None:
    """Least-squares exponent k of y ~ x^k, or None with fewer than two usable points."""
    pts = [(math.log(a), math.log(b)) for a, b in zip(x, y) if a and b and a > 0 and b > 0]
    if len(pts) < 2:
        return None
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    return None if sxx == 0 else sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx


def call_then_words(method: str) -> str:
    """A recorded method such as 'f(x, y) on the inputs, which ...': the call as code, the words after it as
    prose (a code span around the whole would set the explanation in code too)."""
    method = str(method)
    end = method.find(")") + 1 if method.find("(") > 0 else 0
    if not end:
        return escape.text(method)
    return escape.code(method[:end]) + " " + escape.text(method[end:]) if method[end:].strip() else escape.code(method)


def _path_name(p: str) -> str:
    return f"the {escape.text(path_label(p))}"


def describe_gap(ns: list[int], speedups: list[float], other: str, spreads=None, paths=None, same=None,
                 indicative=None) -> str:
    """Sentences on Triton against `other` over N (speedup = other's time / Triton's), with at most two ratios
    in the main one: the pattern is the finding, the table below the page holds every ratio.

    spreads: per N, (ratio of the p10s, ratio of the p90s) or None (see edge_of); paths: per N, the kernel
    path Triton took, named where a crossover coincides with a change of path; same: per N, the path both
    calls took where they ran one kernel (same path and tile config), so there is no standing to give;
    indicative: per N, whether the table marks that verdict *indicative* (offset.Offset.indicative: ours so short
    that device time's offset alone can move the ratio past the band), so the prose says so of the same lengths."""
    k = len(ns)
    spreads = list(spreads) if spreads is not None else [None] * k
    paths = list(paths) if paths is not None else [None] * k
    same = list(same) if same is not None else [None] * k
    indicative = [bool(x) for x in indicative] if indicative is not None else [False] * k
    lead, every, only = "", "every N measured", "the only length both ran"
    twins = [i for i in range(k) if same[i]]
    if twins:
        kinds = list(dict.fromkeys(same[i] for i in twins))
        lead = (f"At N={join(ns[i] for i in twins)}, flash_attention itself took {join(_path_name(p) for p in kinds)} "
                f"with the same tile config, so Triton and {other} are one kernel there and have no standing.")
        keep = [i for i in range(k) if not same[i]]
        ns, speedups, spreads, paths, indicative = ([x[i] for i in keep]
                                                    for x in (ns, speedups, spreads, paths, indicative))
        every, only = "every other N", "the only other length both ran"
        if not ns:
            return lead
        lead += " "
    if not ns:
        return f"No sequence length has a measurement of both Triton and {other}."
    return lead + _Standing(ns, speedups, spreads, paths, other, indicative).sentences(every, only)


@dataclass
class _Standing:
    """Triton's standing against one other implementation over the lengths both ran, told by its pattern:
    one side throughout, one crossover, one run of lengths off the "on par" band, or back and forth."""

    ns: list[int]
    speedups: list[float]
    spreads: list
    paths: list
    other: str
    indicative: list[bool] = field(default_factory=list)  # per length: the table marks its verdict indicative
    shown: set[int] = field(default_factory=set)  # lengths whose verdict a sentence already printed

    def __post_init__(self):
        self.words = [case_words(s, sp) for s, sp in zip(self.speedups, self.spreads)]
        self.sides = [case_side(s, sp) for s, sp in zip(self.speedups, self.spreads)]
        self.indicative = list(self.indicative) or [False] * len(self.ns)

    def sentences(self, every: str, only: str) -> str:
        ns, words = self.ns, self.words
        if len(ns) == 1:
            said = (words[0].replace("on par", f"on par with {self.other}", 1) if words[0].startswith("on par")
                    else f"{words[0]} than {self.other}")
            return f"At N={ns[0]}, {only}, Triton is {said}{' (indicative)' if self.indicative[0] else ''}."
        return self._pattern(every) + self._indicative_note()

    def _pattern(self, every: str) -> str:
        sides = self.sides
        if len(set(sides)) == 1:
            return self._one_side(every)
        changes = [i for i in range(1, len(sides)) if sides[i] != sides[i - 1]]
        if len(changes) == 1:
            return self._one_change(changes[0])
        off = [i for i, sd in enumerate(sides) if sd != "par"]
        if len({sides[i] for i in off}) == 1 and off == list(range(off[0], off[-1] + 1)):
            return self._one_excursion(off)
        return self._back_and_forth()

    def _indicative_note(self) -> str:
        """Which of these verdicts the table marks *indicative*, said after the pattern rather than inside it: the
        pattern names two or three of the lengths, the qualifier must reach every one it holds for. Where every
        length off the band is among them, the standing itself rests on indicative verdicts alone: said too."""
        k = len(self.ns)
        marked = [i for i in range(k) if self.indicative[i]]
        if not marked:
            return ""
        if len(marked) == k:
            return " Every verdict in this comparison is *indicative*."
        many = len(marked) > 1
        text = (f" In this comparison the verdict{'s' if many else ''} at {_lengths(self.ns, marked)} "
                f"{'are' if many else 'is'} *indicative*")
        off = [i for i in range(k) if self.sides[i] != "par"]
        if off and len({self.sides[i] for i in off}) == 1 and set(off) <= set(marked):
            text += f", and at no other length is Triton {'faster' if self.sides[off[0]] == 'win' else 'slower'}"
        return text + "."

    @property
    def span(self) -> str:
        return f"{self.words[0]} at N={self.ns[0]} and {self.words[-1]} at N={self.ns[-1]}"

    def edges(self) -> str:
        """The edge verdicts the sentence before did not print, one short sentence each."""
        return "".join(f" At N={self.ns[i]} it is {self.words[i]}." for i in range(len(self.ns))
                       if i not in self.shown and edge_of(self.speedups[i], self.spreads[i]))

    def _one_side(self, every: str) -> str:
        if self.sides[0] == "par":
            edges = self.edges()
            # Where an edge follows, the medians are not within the band at every N: say so rather than contradict it.
            how = f"{band_words()} by the medians" + (" except where said below" if edges else "")
            return f"Triton is on par with {self.other} at {every} ({how})." + edges
        word = "faster" if self.sides[0] == "win" else "slower"
        gaps = [max(x, 1 / x) for x in self.speedups]
        f0, f1 = gaps[0], gaps[-1]
        peak = max(range(len(gaps)), key=gaps.__getitem__)
        # A gap widest mid-range that falls back by more than the "on par" band has narrowed again.
        low = min(range(len(gaps)), key=gaps.__getitem__)
        if 0 < peak < len(gaps) - 1 and gaps[peak] / f1 >= EVEN and gaps[peak] / f0 >= TREND:
            trend = f"the gap grows up to N={self.ns[peak]}, then narrows"
        elif max(f0, f1) / min(f0, f1) < TREND <= gaps[peak] / gaps[low]:
            # Ends alike but the lengths between them apart: "steady" would hide the swing the table shows.
            trend = (f"the gap moves with N with no steady trend, narrowest at N={self.ns[low]} and widest at "
                     f"N={self.ns[peak]}")
        elif (held := self._plateau(gaps)) is not None:
            trend = held
        else:
            trend = ("the gap grows with N" if f1 / f0 >= TREND else "the gap narrows with N" if f0 / f1 >= TREND
                     else "the gap widens a little with N" if f1 / f0 >= DRIFT
                     else "the gap narrows a little with N" if f0 / f1 >= DRIFT
                     else "the gap holds roughly steady across N")
        return f"Triton is {word} than {self.other} at {every}, {self.span}: {trend}."

    def _plateau(self, gaps: list[float]) -> str | None:
        """Where the gap grows (or narrows) by TREND or more up to some length and then stops: from the earliest length
        after which at least PLATEAU_LENGTHS lengths, that one included, lie within TREND of each other (less than the
        page calls growth), the gap having moved by TREND or more from the first length to it, 'the gap grows up to N=2048, then holds at about
        15.7×' (within DRIFT, the "on par" band: steady) or 'then stays between 14.7× and 15.9×' (between DRIFT and
        TREND). None where no such length is, or the gap keeps moving to the last length."""
        f0, f1 = gaps[0], gaps[-1]
        if max(f0, f1) / min(f0, f1) < TREND:
            return None
        for p in range(1, len(gaps) - PLATEAU_LENGTHS + 1):
            tail = gaps[p:]
            if max(tail) / min(tail) >= TREND or max(gaps[p], f0) / min(gaps[p], f0) < TREND:
                continue  # still moving after p, or hardly moved before it
            word = "grows" if f1 > f0 else "narrows"
            lo, hi = min(tail), max(tail)
            held = (f"then holds at about {_gap_ratio(f1)}" if hi / lo < DRIFT else
                    f"then stays between {_gap_ratio(lo)} and {_gap_ratio(hi)}")
            return f"the gap {word} up to N={self.ns[p]}, {held}"
        return None

    def _one_change(self, i: int) -> str:
        self.shown |= {0, len(self.ns) - 1}
        # Who moves is who was behind: from a lead, on par means the other caught up, so Triton "draws level" only
        # from behind.
        if self.sides[i] == "par" and self.sides[i - 1] == "win":
            change = f"Triton's lead over {self.other} closes"
        else:
            verb = {"win": "pulls ahead of", "loss": "falls behind", "par": "draws level with"}[self.sides[i]]
            change = f"Triton {verb} {self.other}"
        where = ""
        a, b = self.paths[i - 1], self.paths[i]
        if isinstance(a, str) and isinstance(b, str) and a != b:
            where = f", where our dispatcher switches from {_path_name(a)} to {_path_name(b)}"
        return (f"{change} between N={self.ns[i - 1]} and N={self.ns[i]}{where}: {self.span}." + self.edges())

    def _one_excursion(self, off: list[int]) -> str:
        """One run of lengths off the band, on par either side of it: not a standing that changes back and forth."""
        word = "faster" if self.sides[off[0]] == "win" else "slower"
        peak = max(off, key=lambda i: max(self.speedups[i], 1 / self.speedups[i]))
        self.shown.add(peak)
        widest = f"{self.words[peak]} at N={self.ns[peak]}" if len(off) > 1 else self.words[peak]
        return (f"Triton is {word} than {self.other} only at N={join(self.ns[i] for i in off)} ({widest}), on par "
                "elsewhere." + self.edges())

    def _back_and_forth(self) -> str:
        ns, words = self.ns, self.words
        groups = {w: [n for n, sd in zip(ns, self.sides) if sd == key]
                  for key, w in (("win", "faster"), ("loss", "slower"), ("par", "on par"))}
        parts = [f"{w} at N={join(g)}" for w, g in groups.items() if g]
        worst = min(range(len(ns)), key=lambda i: self.speedups[i])
        best = max(range(len(ns)), key=lambda i: self.speedups[i])
        self.shown |= {worst, best}
        return (f"Triton's standing against {self.other} changes back and forth with N: {join(parts, 'and')}; from "
                f"{words[worst]} at N={ns[worst]} to {words[best]} at N={ns[best]}.") + self.edges()


def _gap_ratio(g: float) -> str:
    """A gap (the slower side's time over the faster's, at least 1) as the page prints a factor: '15.7×'."""
    return fmt.ratio(g)


def _lengths(ns: list[int], idx: list[int]) -> str:
    """'N=512, 1024 and 2048' for a few lengths; a run of more than three consecutive ones of the lengths measured
    as its ends ('N=512 to 8192'), so that naming them never fills a sentence with figures."""
    if len(idx) > 3 and idx == list(range(idx[0], idx[-1] + 1)):
        return f"N={ns[idx[0]]} to {ns[idx[-1]]}"
    return f"N={join(ns[i] for i in idx)}"


def against_naive(speedups: list[float]) -> str:
    """How a kernel compares with naive PyTorch over the lengths tried, trend included ('slower than naive
    PyTorch at every length it tried, by a roughly constant factor'), from its speedups in order of N. The trend
    is judged as _Standing._one_side judges a gap: TREND and more grows or narrows, DRIFT up to TREND a little,
    and only a change under DRIFT (the "on par" band) is constant."""
    if not speedups:
        return "not compared with naive PyTorch at any length"
    sides = {side(s) for s in speedups}
    if sides == {"par"}:
        return "on par with naive PyTorch at every length it tried"
    if len(sides) > 1:
        return "faster than naive PyTorch at some lengths and not at others"
    word = "faster" if sides == {"win"} else "slower"
    gaps = [max(s, 1 / s) for s in speedups]
    grew = gaps[-1] / gaps[0]
    trend = ("by a widening margin" if grew >= TREND else "by a narrowing margin" if 1 / grew >= TREND
             else "by a margin that widens a little" if grew >= DRIFT
             else "by a margin that narrows a little" if 1 / grew >= DRIFT
             else "by a roughly constant factor")
    return f"{word} than naive PyTorch at every length it tried, {trend}"
