"""Files derived from runs rather than measured: a comparison of two runs (`python -m collect diff`) and the
noise floor of one GPU, measured from repeat runs of one commit (`python -m collect noise`).

Neither lives in a run folder: a diff is written where its command says (by default data/diffs/), a noise
floor in data/noise/<device-slug>.json. The report computes the diff it shows from the runs themselves,
as the same DiffFile, so the file and the page cannot disagree.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .common import COUNT, GIT_COMMIT, IDENT, MS, NAME, PCT, RATIO, RUN_ID, SIZE, TEXT, doc, strict, with_fields

# The tables a case comes from: the phase whose rows it is.
DIFF_PHASES = ("bench", "iterations", "decode")
# faster / slower: B's time differs from A's beyond both the interval and the noise floor; 'no change'
# otherwise; 'ratio only' when A and B ran on different GPUs, where a ratio is no verdict on a change.
VERDICTS = ("faster", "slower", "no change", "ratio only")
# 'samples': the interval comes from resampling both runs' stored samples; 'medians': a run kept no
# samples for the case (schema before 6), so there is a ratio of medians and no interval.
BASES = ("samples", "medians")
# 'paced': the noise file's floor of the case's class and pace; 'measured': its floor pooled over the class's paces
# (the case's pace unrecorded, or too few pairs of that pace for a floor of its own); 'default': neither covers it.
FLOOR_SOURCES = ("paced", "measured", "default")
# An unambiguous case id: the phase, then each field of the row's case key as name=value.
CASE_ID = r"^[A-Za-z0-9][A-Za-z0-9._+/=-]{0,511}$"


def class_fields(phase: str, head_dim: str) -> dict[str, tuple[str, Any]]:
    """The fields naming a case's class (phase x implementation x head size x mask: NoiseClass.CASE_KEY, and
    collect/diff.py's Case.klass), name -> (type, field), for with_fields; a record words its phase and head size."""
    return {
        "phase": ("str", doc(phase, choices=DIFF_PHASES)),
        "impl": ("str", doc("Implementation (bench, iterations) or decode variant.", pattern=IDENT)),
        "head_dim": ("int | None", doc(head_dim, **SIZE)),
        "causal": ("bool | None", doc("Causal mask on; null for decode.")),
    }


@strict
@dataclass
@with_fields(class_fields("The phase whose rows the class holds.", "Head size d; null for decode, whose model fixes it."),
             after=None)
class NoiseClass:
    """The run-to-run spread of one class of case (implementation x head size x mask) across repeat runs, pooled
    over the class's paces or of its host-bound or GPU-bound cases alone."""

    CASE_KEY = ("phase", "impl", "head_dim", "causal", "host_bound")

    cases: int = doc("Cases of the class measured ok in every repeat run.", **COUNT)
    pairs: int = doc("Pairs of repeat runs times cases: the ratios the floor is a percentile of.", **COUNT)
    median_factor: float = doc("Median over those pairs of the larger median time over the smaller one.",
                               lo=1.0, hi=1e9)
    floor: float = doc("The noise floor: that factor at the file's quantile. A diff counts a change in this class "
                       "only when its ratio is further from 1 than this factor (either way).", lo=1.0, hi=1e9,
                       at_least="median_factor")
    host_bound: bool | None = doc(
        "The pace of the cases this floor is of: true, those host-bound in any repeat run; false, those GPU-bound in "
        "every repeat that recorded their pace; null, every case of the class, pooled over both paces (the floor a "
        "case of unrecorded pace, or of a pace with too few pairs for a record of its own, is held to). Pooled, a "
        "class's floor can be set by its host-bound lengths, whose time swings with the host. Absent (null) in files "
        "before schema version 8.", None)


@strict
@dataclass
class NoiseFloorFile:
    """data/noise/<device-slug>.json: one GPU's noise floor, from repeat runs of one commit."""

    schema_version: int = doc("Version of this data contract.")
    device: str = doc("The GPU every repeat ran on, as the driver names it.", **NAME)
    git_commit: str = doc("The commit every repeat ran.", pattern=GIT_COMMIT)
    run_ids: list[str] = doc("The repeat runs (at least two; three or more on different machine leases is the aim).",
                             max_len=80)
    quantile: float = doc("The percentile of the pairwise factors each class's floor is.", **PCT)
    classes: list[NoiseClass] = doc("One record per class of case pooled over its paces, and one per class and pace "
                                    "whose cases give enough pairs for a floor of their own.", default_factory=list)
    notes: list[str] = doc("What the reader should know (fewer than three repeats, classes with few cases).",
                           default_factory=list, **TEXT)


@strict
@dataclass
@with_fields(class_fields("The phase whose rows were compared.", "Head size d; null for decode."), after="label")
class DiffCase:
    """One case measured ok in both runs: B's time over A's, its interval, and the verdict."""

    CASE_KEY = ("case",)

    case: str = doc("The case: its phase, then each field of its row's case key as name=value.", pattern=CASE_ID, max_len=512)
    label: str = doc("The case in a few words, for tables and charts.", **NAME)
    a_ms: float = doc("Run A's median time (device time; a decode step's loop time).", **MS)
    b_ms: float = doc("Run B's median time.", **MS)
    ratio: float = doc("b_ms / a_ms: below 1, B is faster; above 1, B is slower.", **RATIO)
    ratio_low: float | None = doc("Lower end of the bootstrap interval of the ratio; null without samples.",
                                  **RATIO, at_most="ratio")
    ratio_high: float | None = doc("Upper end of the interval; null without samples.", **RATIO,
                                   at_least="ratio")
    basis: str = doc("'samples' (interval from both runs' samples) or 'medians' (a run kept none: no interval).",
                     choices=BASES)
    floor: float = doc("The noise floor this case was held to (a factor).", lo=1.0, hi=1e9)
    floor_source: str = doc("'paced' (the GPU's noise-floor file, its floor of this case's class and pace), "
                            "'measured' (that file's floor of the class pooled over both paces: the case's pace is "
                            "unrecorded, or the file has no floor of its own for it) or 'default' (no floor covers "
                            "this class).", choices=FLOOR_SOURCES)
    verdict: str = doc("'faster' or 'slower' when the interval (where there is one) excludes 1 and the ratio is "
                       "beyond the floor; 'no change' otherwise; 'ratio only' across two GPUs.", choices=VERDICTS)
    host_bound: bool | None = doc("Whether the host set the case's pace: true where it did in either run (a call "
                                  "whose loop ran well past its device time with a host time to explain it, or a "
                                  "decode step whose kernels kept the GPU busy for too little of it), false where the "
                                  "GPU did in each run that recorded it, null where neither run recorded it.", None)


@strict
@dataclass
class UnmatchedCase:
    """A case measured ok in one run only."""

    CASE_KEY = ("case",)

    case: str = doc("The case, as in DiffCase.", pattern=CASE_ID, max_len=512)
    label: str = doc("The case in a few words.", **NAME)
    phase: str = doc("The phase whose rows hold it.", choices=DIFF_PHASES)
    median_ms: float = doc("Its median time in the run that measured it.", **MS)
    other_status: str | None = doc("Its status in the other run (oom, error, ...); null when that run has no row "
                                   "for it.", None, pattern=IDENT)


@strict
@dataclass
class DiffFile:
    """A comparison of run B against run A, case by case (python -m collect diff A B)."""

    schema_version: int = doc("Version of this data contract.")
    run_a: str = doc("Run A, the before.", pattern=RUN_ID)
    run_b: str = doc("Run B, the after.", pattern=RUN_ID)
    device_a: str = doc("A's GPU.", **NAME)
    device_b: str = doc("B's GPU.", **NAME)
    same_device: bool = doc("Whether both ran on one kind of GPU; when not, every verdict is 'ratio only'.")
    kernel_version_a: str | None = doc("The version of our kernel A shipped, where recorded.", pattern=IDENT)
    kernel_version_b: str | None = doc("The version B shipped.", pattern=IDENT)
    confidence: float = doc("Confidence of each interval.", lo=0, hi=1, lo_open=True, hi_open=True)
    resamples: int = doc("Bootstrap resamples per case.", lo=1, hi=1e7)
    seed: int = doc("Seed of the resampling, so the same runs give the same intervals.", **COUNT)
    default_floor: float = doc("The floor used for a class the noise-floor file does not cover.", lo=1.0, hi=1e9)
    noise_floor_runs: list[str] = doc("The repeat runs the noise-floor file was measured from; empty when none "
                                      "applied.", default_factory=list, max_len=80)
    cases: list[DiffCase] = doc("One record per case measured ok in both runs.", default_factory=list)
    only_a: list[UnmatchedCase] = doc("Cases measured ok in A only.", default_factory=list)
    only_b: list[UnmatchedCase] = doc("Cases measured ok in B only.", default_factory=list)
    notes: list[str] = doc("What the reader should know about the comparison.", default_factory=list, **TEXT)
