"""The words, colours and named shapes several pages share, so that no page imports another.

Every label and outcome word a page prints about an implementation, a dtype or a shape comes from
here, and so does the threshold that decides between "faster", "slower" and "on par".
"""
from __future__ import annotations

from typing import NamedTuple

from collect.pace import HOST_BOUND, host_bound  # noqa: F401  (re-exported: every page judges pace so)
from collect.schema.limiter import STALL_PREFIX, UNITS

from . import fmt
from .figures import BROWN, PALETTE, PURPLE

IMPL_LABELS = {
    "naive": "naive PyTorch", "sdpa-flash": "FlashAttention-2 (SDPA)", "sdpa-cudnn": "SDPA cuDNN",
    "sdpa-efficient": "SDPA mem-efficient", "sdpa-math": "SDPA math", "sdpa": "SDPA (PyTorch's choice)",
    "fa4": "FlashAttention-4", "triton": "Triton (ours)", "triton-portable": "Triton (ours, portable path)",
}
# One colour per implementation (Okabe-Ito, then render.figures' purple and brown), and a line style that
# tells the two Triton paths and PyTorch's own SDPA choice apart even in greyscale.
IMPL_COLORS = {
    "naive": PALETTE[7], "sdpa-flash": PALETTE[0], "sdpa-cudnn": PALETTE[5], "sdpa-efficient": PALETTE[2],
    "sdpa-math": PALETTE[4], "sdpa": PALETTE[1], "triton": PALETTE[3], "triton-portable": PURPLE,
    "fa4": BROWN,
}
IMPL_DASH = {"sdpa": "dot", "triton-portable": "dash"}

OTHER_COLOR = PALETTE[6]

# Implementations that write the N x N score matrix to memory; every other one keeps it on chip.
MATERIALISING = {"naive", "sdpa-math"}


def is_ours(impl: str) -> bool:
    """Whether an implementation (a bench, iterations or correctness impl, or a decode variant) runs our code: our
    Triton kernel and its held or ported paths, a kernel version, our decode loops. The others are baselines:
    every SDPA option, FlashAttention-4, naive PyTorch and transformers' decode loops (hf-*)."""
    return not (impl.startswith(("sdpa", "hf")) or impl in ("fa4", "naive"))


def is_rival(impl: str) -> bool:
    """Whether ours is judged against an implementation ("the fastest other implementation", defined on the
    Benchmarks page): every baseline attention a user can pick that keeps the scores on chip. SDPA's math backend
    and naive PyTorch write them to memory (context, never a rival); transformers' loops are decode, not attention."""
    return not is_ours(impl) and not impl.startswith("hf") and impl not in MATERIALISING


DTYPE_SHORT = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32"}
ELEMENT_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4}

# The published study's shape: pages compare at it when a run has it.
STUDY = dict(batch=2, heads=8, head_dim=64, dtype="float16", causal=False)
STUDY_N = 2048

# Two times within this factor either way are "on par": timing noise on a busy GPU is a few percent.
EVEN = 1.05
# Two calls compared whose median SM clock readings differ by more than this share: a compute-bound call is quicker at a
# higher clock, so the pages name such comparisons (by which call read higher, not by how much: a reading is of the
# rest before the call, and times follow it far less than inversely, Hardware page).
CLOCK_GAP = 0.03


# What a comparison's spread is, in the words every page uses for it (render/bench_data.py spread computes it).
SPREAD_WORDS = "the ratio of the two calls' p10s and that of their p90s"
# Whether the host set a loop's pace (HOST_BOUND, host_bound) is collect/pace.py's rule, imported above: the pages,
# `python -m collect diff` and the noise floor judge pace by that one definition, and the pages read it from here.


# What sets occupancy where no resource does, in every page's "Limited by": a persistent kernel launches one block
# per SM that loops over the tiles, so a second block would find no work; at full occupancy nothing limits it (the
# resources that tie at the maximum are no limit).
PERSISTENT_LIMIT = "one block per SM by design (persistent grid)"
FULL_OCCUPANCY = "none (full occupancy)"


def clock_gap(clock, reference) -> float | None:
    """How far a call's median SM clock lies from the one it is compared against, as a share of that one;
    None where either was not recorded. Every page measures a gap this one way."""
    if clock is None or reference is None or clock != clock or reference != reference or not reference:
        return None
    return abs(clock / reference - 1)


def impl_label(impl: str) -> str:
    return IMPL_LABELS.get(impl, impl)


def impl_color(impl: str) -> str:
    return IMPL_COLORS.get(impl, OTHER_COLOR)


def dtype_short(dtype: str) -> str:
    return DTYPE_SHORT.get(dtype, dtype)


def masking(causal: bool) -> str:
    return "causal" if causal else "non-causal"


def shape_label(shape) -> str:
    b, h, d = shape
    return f"B={b}, H={h}, d={d}"


def facet_label(dtype: str, causal: bool) -> str:
    return f"{dtype_short(dtype)}, {masking(causal)}"


def join(items, word: str = "and") -> str:
    """'a', 'a and b', 'a, b and c'."""
    items = [str(i) for i in items]
    if not items:
        return ""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + f" {word} " + items[-1]


def plural(n: int, word: str, words: str | None = None, none: bool = False) -> str:
    """'1 block', '2 blocks'; with none=True, 'no block' for zero (a count in a sentence reads better so)."""
    if none and n == 0:
        return f"no {word}"
    return f"{n} {word if n == 1 else (words or word + 's')}"


def _par_ratio(s: float) -> str:
    """s as an 'on par' verdict prints it: against the threshold on its side of 1, so that a figure just
    inside the band never prints as one just outside it ('1.047×', not the '1.05×' of a 1.053× win)."""
    return fmt.ratio_vs(s, EVEN if s >= 1 else 1 / EVEN)


def speedup_words(s: float) -> str:
    """How ours compares when the other takes s times as long: '2.00× faster', '8.06× slower', 'on par (1.02×)'.
    The figure gets the digits that tell it apart from the threshold (fmt.ratio_vs), so one printed figure
    never carries two verdicts."""
    if s >= EVEN:
        return f"{fmt.ratio_vs(s, EVEN)} faster"
    if s <= 1 / EVEN:
        return f"{fmt.ratio_vs(1 / s, EVEN)} slower"
    return f"on par ({_par_ratio(s)})"


def side(s: float) -> str:
    """'win', 'loss' or 'par' for a speedup s (other time over ours)."""
    return "win" if s >= EVEN else "loss" if s <= 1 / EVEN else "par"


def versus(s: float, other: str) -> str:
    """'2.00× faster than X', 'on par with X (1.02×)'."""
    words = speedup_words(s)
    return f"on par with {other} ({_par_ratio(s)})" if words.startswith("on par") else f"{words} than {other}"


# --- a timed case's verdict: the medians with the calls' spread (the Benchmarks page's words) ------------
# Here rather than on that page so that another page quoting a timed case gives it the same verdict and words.

def band_words() -> str:
    """The "on par" band in words: every standing on the site is judged against it."""
    return f"within {fmt.pct(100 * (EVEN - 1), 2)} either way"


def edge_of(s: float, sp: tuple[float, float] | None) -> bool:
    """Whether a speedup s past the "on par" band by the medians has both ends of the calls' spread (the ratio
    of their p10s and of their p90s) inside the band: then the medians' verdict rests on where each median fell
    inside its calls' own noise, not on the kernels, and the case counts as on par. One end inside is not enough:
    taking whichever end is kinder would tilt every verdict toward "on par"."""
    if sp is None or side(s) == "par":
        return False
    return all(side(r) == "par" for r in sp)


def case_side(s: float, sp: tuple[float, float] | None = None) -> str:
    """side(s), with a verdict neither end of the calls' spread carries (edge_of) counted as on par."""
    return "par" if edge_of(s, sp) else side(s)


def case_words(s: float, sp: tuple[float, float] | None = None) -> str:
    """speedup_words(s), or, where both ends of the calls' spread fall inside the band though the medians do
    not, 'on par at the edge' with the medians' figure."""
    if not edge_of(s, sp):
        return speedup_words(s)
    word = "faster" if s >= 1 else "slower"
    return (f"on par at the edge ({fmt.ratio_vs(max(s, 1 / s), EVEN)} {word} by the medians, "
            f"{band_words()} by both the calls' p10s and their p90s)")


def case_versus(s: float, sp: tuple[float, float] | None, other: str) -> str:
    """case_words against a named implementation: '1.20× faster than X', 'on par with X (1.04×)'."""
    words = case_words(s, sp)
    return words.replace("on par", f"on par with {other}", 1) if words.startswith("on par") else f"{words} than {other}"


def clocks_apart(clock, reference) -> bool:
    """Whether two calls' median SM clock readings lie more than CLOCK_GAP apart. Only a mark: a reading is the clock of
    the rest before a call, not the call's own (collect/timing.py, render/clock_reading.py), so no ratio is rescaled
    by it; a run's own readings and times show how little the one follows the other (Hardware page)."""
    gap = clock_gap(clock, reference)
    return gap is not None and gap > CLOCK_GAP


def clock_caveat(clock, reference, who: str = "") -> str:
    """' at a higher clock reading': where two calls' clock readings lie apart (clocks_apart), which call had the
    higher one; '' otherwise. `who` names our call where the clause follows another's name ('ours'), so it is not read
    as theirs. The words Home's headline table and Device comparison's history cells share."""
    if not clocks_apart(clock, reference):
        return ""
    return f" {who + ' ' if who else ''}at a {'higher' if clock > reference else 'lower'} clock reading"


class DecodeWords(NamedTuple):
    """A decode variant in words: its label in the Decode page's legends and tables, a short one where
    space is tight, how Home's prose names it, and its panel title on Device comparison (None: not said
    there). "{f}" stands for the float type of the run's cache, filled in by decode_words()."""

    label: str
    short: str
    prose: str | None
    panel: str | None


# Every decode variant, in the order Device comparison draws its panels.
DECODE_VARIANTS = {
    "eager": DecodeWords("our loop, {f} cache, eager", "{f} eager", "our eager loop", "{f}, eager loop"),
    "graph": DecodeWords("our step, {f} cache, CUDA graph", "{f} graph", "our step in a CUDA graph",
                         "{f}, CUDA graph"),
    "persistent": DecodeWords("our persistent step, {f} cache, CUDA graph", "{f} persistent",
                              "our persistent step in a CUDA graph", "{f}, persistent step"),
    "int8-graph": DecodeWords("our step, int8 cache, CUDA graph", "int8 graph", "our int8 cache in a CUDA graph",
                              "int8, CUDA graph"),
    "int8-kernel": DecodeWords("int8 cache, Triton kernel, eager", "int8 kernel", "int8 cache read by our kernel",
                               "int8, kernel"),
    "int8-dequant": DecodeWords("int8 cache, dequantized in full each step", "int8 dequant-all",
                                "int8 cache dequantized every step", "int8, dequantize all"),
    "hf-eager": DecodeWords("transformers, eager loop (host-bound)", "transformers eager", "transformers' loop",
                            "transformers loop"),
    "hf": DecodeWords("transformers, eager loop (host-bound)", "transformers eager", "transformers' loop",
                      "transformers loop"),
    "hf-compiled": DecodeWords("transformers, StaticCache + torch.compile", "transformers compiled",
                               "transformers compiled with a static cache", "transformers compiled"),
    "hf-generate": DecodeWords("transformers, model.generate", "transformers generate", None, None),
}


def decode_float(dtype: str | None) -> str:
    """The float type of a run's decode caches in words (decode.json's dtype: bf16 where the GPU computes it,
    fp16 on a T4); bf16 where the run has no decode data."""
    return DTYPE_SHORT.get(dtype, dtype) if dtype else "bf16"


def decode_words(variant, form: str, f: str = "bf16") -> str | None:
    """A decode variant's label, short label, prose or panel title (DecodeWords) with the cache's float type
    filled in; None for a variant this module does not know, or a form it has no words for. Only our own
    words are templates: a name from the data is never formatted."""
    words = DECODE_VARIANTS.get(variant)
    text = getattr(words, form) if words is not None else None
    return text.format(f=f) if text is not None else None


# Each int8-cache decode loop and the bf16-cache loop it differs from by the cache alone.
INT8_PAIRS = (("int8-graph", "graph"), ("int8-dequant", "eager"), ("int8-kernel", "eager"))

# A decode step's time over its bandwidth floor: at or below NEAR_FLOOR the bytes set the pace, above
# FAR_FLOOR the kernels do.
NEAR_FLOOR, FAR_FLOOR = 1.5, 3.0


# Far from its floor, a step whose GPU idled for at most FEW_GAPS of it is paced by kernels that run below copy
# bandwidth (a CUDA graph leaves no launch gaps to speak of); one idle for at least MANY_GAPS, by the gaps.
FEW_GAPS, MANY_GAPS = 0.1, 0.5


def floor_pace(r: float, idle: float | None = None) -> str:
    """What a decode step at r times its bandwidth floor is bound by, in words (Home and Decode). `idle`, the share
    of the step its GPU sat idle where it was profiled, says which of the kernels' two costs sets the pace far from
    the floor; without it both are named."""
    if r <= NEAR_FLOOR:
        return "close enough that moving bytes sets the pace"
    if r <= 2.0:  # the floor is at least half of the step
        return "moving the bytes takes most of the step, but not all of it"
    if r <= FAR_FLOOR:
        return ("moving the bytes at copy bandwidth would take less than half of the step; the rest is what its "
                "kernels cost beyond their bytes")
    if idle is None:
        return ("not the bytes but the kernels set the pace (idle gaps between them, or kernels that run far below "
                "the copy bandwidth)")
    share = fmt.pct(100 * idle)
    if idle <= FEW_GAPS:
        return (f"not the bytes but the kernels set the pace; the GPU idles for only {share} of the step, so its "
                "kernels run far below the copy bandwidth")
    if idle >= MANY_GAPS:
        return f"not the bytes but the kernels set the pace; the GPU sits idle between them for {share} of the step"
    return (f"not the bytes but the kernels set the pace, with idle gaps between them ({share} of the step) and "
            "kernels that run below the copy bandwidth")


# --- what limits a kernel (collect/schema/limiter.py judges; these are the words pages print) ------

# Each stall reason as Nsight Compute names it, in words a reader knows.
STALL_WORDS = {
    "barrier": "waiting at a barrier for the other warps",
    "wait": "a fixed-latency wait on a previous instruction",
    "long_scoreboard": "waiting for data from memory (or an asynchronous-copy barrier)",
    "short_scoreboard": "waiting for shared memory or the special-function unit",
    "mio_throttle": "queued for the shared-memory and special-function pipe",
    "lg_throttle": "queued for global-memory instructions",
    "math_pipe_throttle": "queued for a busy math pipe",
    "dispatch_stall": "held at dispatch",
    "not_selected": "ready, but another warp issued",
    "no_instruction": "waiting for instructions to be fetched",
    "gmma": "waiting for the warpgroup MMA",
    "warpgroup_arrive": "waiting for the warpgroup MMA's operands to be fenced",
    "branch_resolving": "waiting for a branch to resolve",
    "imc_miss": "waiting for the constant cache",
    "drain": "draining memory writes at exit",
    "membar": "waiting at a memory fence",
    "sleeping": "sleeping",
    "tex_throttle": "queued for the texture unit",
    "misc": "other",
}
# What the instructions of a SASS hot spot do (collect/ncu_source.py's roles).
HOTSPOT_ROLES = {
    "mma": "matrix multiply (tensor cores)", "mma-wait": "waiting for its own asynchronous MMAs",
    "exp": "exponentials (MUFU)", "barrier": "barrier", "async-wait": "waiting on an asynchronous copy",
    "tma": "TMA copy", "load": "load", "store": "store", "convert": "conversion", "math": "arithmetic",
    "control": "branch or control", "other": "other",
}


def stall_words(reason: str) -> str:
    """'barrier' -> 'barrier (waiting at a barrier for the other warps)'."""
    words = STALL_WORDS.get(reason)
    return f"{reason} ({words})" if words else reason


# A stall reason is what the warps "chiefly" wait for only above this share (percent) of the stalls: "chiefly" and
# "mostly" say more than half, and the rule names the largest share, which may be a third of them.
CHIEFLY_PCT = 50.0


def stall_lead(share: float | None) -> str:
    """How a stall verdict's reason stands among the stalls, from its share (percent, 'selected' left out): 'chiefly'
    above CHIEFLY_PCT, else 'led by', which the rule makes true whatever the share (so too where it is not known);
    'the largest share of them wait' read as a verb."""
    return "chiefly" if share is not None and share > CHIEFLY_PCT else "led by"


def limiter_words(word: str | None, share: float | None = None) -> str:
    """A limiter verdict as the pages say it: 'the tensor pipe', 'stalls, chiefly barrier (waiting at ...)' where the
    reason's share of the stalls (`share`, percent; Verdict.stall_pct) is over half, 'stalls, the largest share
    of them wait (...)' otherwise."""
    if not word:
        return "not judged"
    units = {w: name for w, _, name in UNITS}
    if word in units:
        return f"the {units[word]}"
    if word.startswith(STALL_PREFIX):
        return f"stalls, {stall_lead(share)} " + stall_words(word[len(STALL_PREFIX):])
    return word


def verdict_words(v) -> str:
    """limiter_words for a Verdict (collect/schema/limiter.py), its stall share carried with it."""
    return limiter_words(v.word if v is not None else None, getattr(v, "stall_pct", None))


# --- our kernel's public names ---------------------------------------------------------------------
# flash_attention (kernels/attention/dispatch.py) runs one of these kernels per shape. Each is one kernel function;
# a recorded version or a Gluon step is a configuration or an earlier state of one of them, so the pages
# name the kernel by these words and keep version ids and step names for the Kernel iterations journey.
KERNELS = {
    "portable": "portable kernel",
    "hopper": "Hopper TMA kernel",
    "gluon-tile": "Gluon tile kernel",
    "gluon-ws": "Gluon warp-specialized kernel",
    "turing": "Turing tensor-core kernel",
}
# The compiled kernel functions (as Nsight Compute names them) and the Gluon steps, by kernel.
KERNEL_FUNCTIONS = {"_attn_fwd": "portable", "_hopper_fwd": "hopper", "_hopper_fwd_ws": "hopper",
                    "_hopper_fwd_ws_persistent": "hopper", "_diag_merge": "hopper", "_g1_kernel": "gluon-tile",
                    "_ws_kernel": "gluon-ws", "_attn_fwd_turing": "turing"}
GLUON_STEP_KERNEL = {**{f"g{i}": "gluon-tile" for i in (1, 8, 9, 10, 16, 17, 18, 20, 21, 22, 28, 29, 38)},
                     **{f"g{i}": "gluon-ws" for i in (*range(2, 8), *range(11, 16), 19, *range(23, 28), *range(30, 38), 39, 40, 41, 42, 43)}}


def kernel_key(path: str | None, step: str | None = None) -> str | None:
    """Which of KERNELS a path (and, for Gluon, a step such as 'g8') runs; None where it is not ours."""
    if path == "gluon":
        return GLUON_STEP_KERNEL.get(step or "", "gluon-ws") if step else None
    return path if path in KERNELS else None


def kernel_name(path: str | None, step: str | None = None) -> str:
    """The public name of the kernel a path and step ran: 'Gluon tile kernel'. An unknown path is shown as
    it is (plain text: the caller escapes)."""
    key = kernel_key(path, step)
    if key:
        return KERNELS[key]
    return "Gluon kernel" if path == "gluon" else f"{path} kernel"  # a Gluon path whose step was not recorded


def path_label(path: str | None) -> str:
    """A recorded path as bench_data.paths gives it ('gluon g7', 'portable') under the kernel's public name,
    the Gluon step kept as the configuration it is: 'Gluon warp-specialized kernel (g7)'."""
    p, _, step = str(path or "").partition(" ")
    return kernel_name(p, step or None) + (f" ({step})" if step else "")


def kernel_function_name(function: str) -> str | None:
    """The public name of a compiled kernel function ('_g1_kernel' -> 'Gluon tile kernel'), None if not ours."""
    key = KERNEL_FUNCTIONS.get(str(function).split("(")[0].strip())
    return KERNELS[key] if key else None


def version_kernel(path: str | None, features: str | None = None) -> str:
    """The public name of the kernel a recorded version ran ('flash_attention's per-shape choice' for the
    versions that shipped a rule per shape)."""
    if path in (None, "per-shape"):
        return "per-shape choice"
    step = str(features or "").split()[-1] if path == "gluon" and features else None
    return kernel_name(path, step)
