"""
The journey of the Hopper kernel: every version tried, with its prediction and its outcome
=========================================================================================

Each :class:`KernelVersion` is a callable with the settings of one step (a kernel path, the
Hopper kernel's :class:`~kernels.attention.hopper.Features`, fixed tile configs) and its story:
the change it made, the prediction written (and dated) before it was first measured, and what
the measurement then showed. The ``iterations`` collect phase times them side by side; the
report's "Kernel iterations" page shows the journey. A recorded version stays runnable as it
was recorded, so the switches it uses stay in the kernel.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

from .hopper import SPLIT_FROM_SEQ_LEN, Features, best_features, compile_spec, configs_for, hopper_attention
from .dispatch import ShapeRule, flash_attention, rule_route


@dataclass(frozen=True)
class KernelVersion:
    """One step of the optimisation journey: a callable with its settings, and its story.

    `prediction` was written, on `predicted_at`, before the version was first measured, and so
    was its number: `predicted_speedup[masking] = (low, high)`, the factor expected on TFLOP/s
    (geometric mean over the goal cases) against `baseline` (a version name, or "sdpa" for the
    fastest SDPA backend). The report sets both beside the measurement, whichever way it went.
    `outcome` is written after measuring, never before. `in_phase`: timed by the iterations
    phase by default (leaving one out keeps the phase short; the registry keeps its story).
    """

    name: str
    change: str
    prediction: str
    predicted_at: str
    path: str | None  # a flash_attention path name ("portable", "hopper", "gluon"); None: its own choice per shape
    baseline: str = ""
    predicted_speedup: dict = field(default_factory=dict)  # "non-causal"/"causal" -> (low, high)
    # None: hopper_attention's own choice per shape; a function (causal, seq_len) -> Features: this
    # version's own choice per shape.
    features: object = field(default_factory=Features)
    # Fixed tile configs keyed by causal (None: the path's own tuning). Fixed configs keep the
    # iterations phase inside its time budget: no tuning at collect time.
    configs: dict = field(default_factory=dict)
    outcome: str = ""
    in_phase: bool = True
    role: str = ""  # "t4-fix": the version that tries the fix the published T4 study left open
    maskings: tuple = ("non-causal", "causal")  # what the version changes (and is timed on)
    # path None: a function (head_dim, causal, seq_len) -> (path, config) pins this version's own
    # per-shape choice; None leaves the choice to flash_attention (kernels/attention/dispatch.py SHAPE_RULES).
    routes: object = None
    head_dims: tuple = (64, 128)  # the head sizes the version changes (the iterations phase times it there)

    def config_for(self, causal: bool):
        """The fixed tile config for this masking; None lets the path choose (see `features`)."""
        return self.configs.get(bool(causal))

    def __call__(self, q, k, v, causal=False, sm_scale=None, config=None):
        cfg = config if config is not None else self.config_for(causal)
        if self.path is None and self.routes is not None:
            path, routed = self.routes(q.shape[-1], bool(causal), q.shape[2])
            return flash_attention(q, k, v, causal, sm_scale, path=path, config=cfg if cfg is not None else routed)
        if self.path == "hopper":
            return hopper_attention(q, k, v, causal, sm_scale, config=cfg,
                                    features=self.features_for(causal, q.shape[2]))
        return flash_attention(q, k, v, causal, sm_scale, path=self.path, config=cfg)

    def features_for(self, causal, seq_len):
        """The Features this version runs at one shape (None: hopper_attention's own choice)."""
        return self.features(bool(causal), seq_len) if callable(self.features) else self.features

    def features_label(self):
        if self.path == "portable":
            return ""
        if self.path == "gluon":
            return f"gluon {self.configs.get(False, {}).get('version', '')}".strip()
        if self.features is None or callable(self.features):
            return "per shape"
        return self.features.label()

    @property
    def requires_hopper(self) -> bool:
        """Every path but the portable one (the Hopper kernel, a Gluon one) needs compute capability 9.x."""
        return self.path != "portable"


def v7_features(causal, seq_len):
    """v7's per-shape choice (kept so v7 can still be timed as it was): non-causal persistent;
    causal v4, with the split schedule from SPLIT_FROM_SEQ_LEN."""
    if not causal:
        return Features(warp_spec=True, persistent=True)
    return Features(warp_spec=True, causal_split=seq_len >= SPLIT_FROM_SEQ_LEN)


# The rules v15 shipped with (kept so v15 can still be timed as it was after the rules moved on): the
# Gluon kernel's g3 at d=128; at d=64 the portable kernel non-causal from N=2048 and causal up to 1024
# and from 8192; the Triton Hopper kernel everywhere else.
V15_RULES = (
    ShapeRule("gluon", 128, False, config=(("version", "g3"),)),
    ShapeRule("gluon", 128, True, config=(("version", "g3"),)),
    ShapeRule("portable", 64, False, min_len=2048),
    ShapeRule("portable", 64, True, max_len=1024),
    ShapeRule("portable", 64, True, min_len=8192),
)
# The rules v17 shipped with, likewise: d=128 g3 non-causal and g5 causal; d=64 non-causal the
# portable kernel at N=2048 and g1 above; d=64 causal g5 at N=2048-8192, the portable kernel elsewhere.
V17_RULES = (
    ShapeRule("portable", 64, True, max_len=1024),
    ShapeRule("gluon", 64, True, min_len=2048, max_len=8192, config=(("version", "g5"),)),
    ShapeRule("portable", 64, True, min_len=8193),
    ShapeRule("portable", 64, False, min_len=2048, max_len=2048),
    ShapeRule("gluon", 64, False, min_len=2049, config=(("version", "g1"),)),
    ShapeRule("gluon", 128, False, config=(("version", "g3"),)),
    ShapeRule("gluon", 128, True, config=(("version", "g5"),)),
)


def _cfg(bm, bn, w, s):
    return dict(BLOCK_M=bm, BLOCK_N=bn, num_warps=w, num_stages=s)


def _both(low, high):
    return {"non-causal": (low, high), "causal": (low, high)}


VERSIONS = {v.name: v for v in [
    KernelVersion(
        name="v0-portable",
        change="The portable kernel (kernels/attention/portable.py): pointer loads through cp.async, "
               "software-pipelined by Triton; 128x64 tiles on two warpgroups.",
        prediction="Baseline: its first H200 run measured 0.82x cuDNN non-causal and 0.87x causal (fp16, "
                   "N=4096); expect the same within a few percent.",
        predicted_at="2026-11-29",
        path="portable",
        baseline="sdpa",
        predicted_speedup={"non-causal": (0.78, 0.86), "causal": (0.82, 0.90)},
        # What the portable autotuner chose on the H200 in its first run.
        configs={False: _cfg(128, 64, 8, 4), True: _cfg(128, 64, 8, 3)},
        outcome="2026-11-29, on an H200: 0.76-0.83x cuDNN non-causal, 0.76-0.86x causal (lowest at N=4096). "
                "cuDNN measured faster here (656 TFLOP/s fp16 non-causal at N=4096) than in a first check on the same GPU that "
                "day (579), so the ratios sit below that check's.",
    ),
    KernelVersion(
        name="v1-tma",
        change="Q, K, V and O move by TMA through host-built 4-D tensor descriptors: one bulk copy per "
               "tile, waited on through an mbarrier; the ragged tail is zero-filled by the copy engine, so "
               "no load or store masks. Same 128x64 tiles as v0.",
        prediction="+3 to +8% over v0: the loop stops spending registers and issue slots on addresses and "
                   "cp.async (its compiled register count drops from 188 to ~138), but the warpgroups "
                   "still meet at CTA-wide barriers every step and run softmax and matmul in turn.",
        predicted_at="2026-11-29",
        path="hopper",
        baseline="v0-portable",
        predicted_speedup=_both(1.03, 1.08),
        configs={False: _cfg(128, 64, 8, 3), True: _cfg(128, 64, 8, 3)},
        outcome="2026-11-29, on an H200: 0.91-0.95x of v0, slower, not faster. TMA in a loop Triton does not "
                "warp-specialize brings CTA-wide barriers around each copy (three per step in the sm90 SASS), "
                "and this config pipelines 3 stages to v0's 4.",
    ),
    KernelVersion(
        name="v2-wide",
        change="Fewer, wider loads, the fix the published T4 study left open: 128 keys per step instead "
               "of 64. Each TMA copy moves 32 KB, the loop runs half as many steps (half the barriers "
               "and waits), and the score matmul asks ~96 instead of ~128 shared-memory bytes per cycle "
               "(the SM serves 128).",
        prediction="+4 to +10% over v1 if shared-memory bandwidth and per-step overhead stall it; the "
                   "bigger score tile (187 registers, no spills in the sm90 compile) should not hurt.",
        predicted_at="2026-11-29",
        path="hopper",
        baseline="v1-tma",
        predicted_speedup=_both(1.04, 1.10),
        role="t4-fix",
        configs={False: _cfg(128, 128, 8, 2), True: _cfg(128, 128, 8, 2)},
        outcome="2026-11-29, on an H200: 0.97-1.01x of v1 non-causal, 0.92-0.93x causal. With both "
                "warpgroups held in step by the barriers, a 128-key tile doubles each softmax phase, during which "
                "the tensor cores idle; relieving shared memory buys nothing while that serialisation dominates. "
                "Under warp specialization (v4) the same widening pays: v4 with 64-key tiles ran at 0.89x of v4 "
                "non-causal and 0.84x causal at N=4096 (measured the same day).",
    ),
    KernelVersion(
        name="v3-overlap",
        change="Hand software-pipelining: the scores of tile j+1 are requested before the softmax of "
               "tile j, for the tensor cores to work during the exponentials. 128x64 tiles (at 128x128 "
               "the two live score tiles need all 255 registers).",
        prediction="No gain, likely a small loss: the sm90 compile shows Triton waits for the early "
                   "wgmma right after issuing it (its pipeliner keeps a wgmma in flight only when the "
                   "next use is another wgmma), so nothing overlaps and 30 more registers are live.",
        predicted_at="2026-11-29",
        path="hopper",
        baseline="v1-tma",
        predicted_speedup=_both(0.95, 1.00),
        features=Features(overlap=True),
        configs={False: _cfg(128, 64, 8, 3), True: _cfg(128, 64, 8, 3)},
        outcome="2026-11-29, on an H200: 0.91-0.93x of v1, a larger loss than predicted; kept as the record of "
                "an overlap Triton's wgmma pipelining does not perform.",
    ),
    KernelVersion(
        name="v4-warpspec",
        change="Triton's warp specialization (tl.range(warp_specialize=True)): a producer warpgroup "
               "issues the TMA copies; two consumer warpgroups of 64 rows compute, synchronised by "
               "mbarriers instead of CTA-wide barriers, with registers moved to them (setmaxnreg). "
               "Needs per-head descriptors built on the device and a single key loop, so causal masks "
               "every tile. 128x128 tiles, 12 warps.",
        prediction="The largest step: +12 to +25% over v2 non-causal, reaching 0.9-1.0x cuDNN, because one "
                   "consumer's softmax can now run under the other's matmuls. Causal gains less (+5 to "
                   "+15%): every tile pays the mask.",
        predicted_at="2026-11-29",
        path="hopper",
        baseline="v2-wide",
        predicted_speedup={"non-causal": (1.12, 1.25), "causal": (1.05, 1.15)},
        features=Features(warp_spec=True),
        configs={False: _cfg(128, 128, 4, 2), True: _cfg(128, 128, 4, 2)},
        outcome="2026-11-29, on an H200: non-causal 1.16-1.27x of v2, 0.86-0.90x cuDNN; causal outputs were "
                "wrong: the split gave both consumers the first one's tl.arange row positions for the mask. The "
                "positions now come through a descriptor load, which the split handles. Measured again after that fix: causal "
                "1.12-1.15x of v2, 0.76-0.78x cuDNN at N=4096 and 0.85x at 16384; non-causal 0.84-0.87x at 4096, "
                "0.90-0.92x at 16384.",
    ),
    KernelVersion(
        name="v5-causal-split",
        change="Causal only, in two launches: the warp-specialized kernel runs the key tiles wholly below "
               "the diagonal with no mask and leaves a normalised partial output and its log-sum-exp; a "
               "second kernel computes the masked diagonal block and merges the two. (Triton's Hopper "
               "warp specialization fails to compile any diagonal code next to its loop.)",
        prediction="+3 to +12% over v4 causal: the mask leaves all but the diagonal tiles, for the price of a "
                   "second launch and one extra pass over O (~0.1 ms at N=4096, ~0.5 ms at 16384).",
        predicted_at="2026-11-29",
        path="hopper",
        baseline="v4-warpspec",
        predicted_speedup={"causal": (1.03, 1.12)},
        features=Features(warp_spec=True, causal_split=True),
        configs={True: _cfg(128, 128, 4, 2)},
        maskings=("causal",),
        outcome="2026-11-29, on an H200: 0.93-0.94x of v4 at N=4096, 1.05-1.06x at 16384. The second launch and "
                "the extra pass over O cost more than the masks save until the sequence is long; at N=16384 it "
                "reaches 0.89-0.91x cuDNN.",
    ),
    KernelVersion(
        name="v6-persistent",
        change="v4 as a persistent kernel: one program per SM walks the (head, query tile) list, so the "
               "last partial wave of programs (N=4096: 4096 tiles on 132 SMs, 31.03 waves) no longer idles "
               "most SMs, and the four descriptors are built once per program over all heads instead of "
               "once per tile (contiguous inputs, N a multiple of 128). Causal as in v4, with each head's "
               "query tiles longest first.",
        prediction="+2 to +6% over v4 at N=4096 (the tail wave and per-tile descriptor set-up are ~3% each "
                   "there), ~0 to +2% at N=16384; about +1 to +5% as a geometric mean over both lengths.",
        predicted_at="2026-11-29",
        path="hopper",
        baseline="v4-warpspec",
        predicted_speedup=_both(1.01, 1.05),
        features=Features(warp_spec=True, persistent=True),
        configs={False: _cfg(128, 128, 4, 2), True: _cfg(128, 128, 4, 2)},
        outcome="2026-11-29, H200 full collect: non-causal 1.13-1.14x of v4 at both lengths, 0.95-0.97x "
                "cuDNN: better than predicted, so more than the tail wave and the descriptors (a program's "
                "producer can start its next tile while the consumers finish the last). Causal 0.98-1.00x of v4 "
                "at N=4096 and 0.89-0.90x at 16384: persistence does not suit the masked, uneven loops.",
    ),
    KernelVersion(
        name="v7-default",
        change="What hopper_attention ran, given no config and no features, until v9: non-causal, the persistent "
               "kernel (v6); causal, v4, with the split schedule (v5) from N=8192. One tile config per head_dim, "
               "so nothing to tune.",
        prediction="The better of v4, v5 and v6 in each case, within noise: non-causal as v6 (+10 to +16% over "
                   "v4), causal as v4 at N=4096 and as v5 at 16384 (0 to +6% over v4). Written after the full "
                   "collect measured v4-v6, before v7 itself ran.",
        predicted_at="2026-11-29",
        path="hopper",
        baseline="v4-warpspec",
        predicted_speedup={"non-causal": (1.10, 1.16), "causal": (1.0, 1.06)},
        features=v7_features,
        in_phase=False,  # superseded by v10; its numbers are in the outcome
        outcome="2026-11-29, on an H200: non-causal 0.98-1.01x cuDNN (as v6); causal 0.77-0.79x at N=4096 "
                "(as v4) and 0.88-0.91x at 16384 (as v5).",
    ),
    KernelVersion(
        name="v8-causal-pairs",
        change="Causal only: the persistent kernel deals out units of two query tiles, i and n-1-i, which "
               "together see n+1 key tiles whatever i is. Every program then does the same work and they stay "
               "in step on the same heads. v6 dealt out single tiles of 1 to n key tiles with a stride, which "
               "left programs up to 9% apart at N=4096 and, we suspect, let them drift onto more heads than L2 holds.",
        prediction="Written before it was first measured: near the non-causal persistent kernel's efficiency "
                   "less the mask, 0.90-1.0x cuDNN at N=4096; at N=16384, at least v4.",
        predicted_at="2026-11-29",
        path="hopper",
        baseline="v4-warpspec",
        predicted_speedup={"causal": (1.15, 1.28)},
        features=Features(warp_spec=True, persistent=True, causal_pairs=True),
        configs={True: _cfg(128, 128, 4, 2)},
        maskings=("causal",),
        outcome="2026-11-29, on an H200: 1.07-1.10x of v4 at N=4096 (0.84-0.86x cuDNN), short of the "
                "prediction; 0.93-0.95x of v4 at N=16384. Other causal attempts measured that day did not pay: a cheaper "
                "mask (-inf into the raw scores) 0.96-0.98x of v4, longest-first order over groups of 8 heads "
                "0.94-0.98x, and an unmasked and a masked loop in one warp-specialized kernel does not compile "
                "with Triton 3.6 for sm90.",
    ),
    KernelVersion(
        name="v9-lean-mask",
        change="v8 with the causal mask as arithmetic: each raw score is capped, min(score, bound), by a bound "
               "that is 5e19 or more for a visible key and -5e19 for a future one, computed with one fused "
               "multiply-add per score from the row's and the column's positions. The boolean mask tile is gone: "
               "in the sm90 SASS the compiler had packed it into bit masks (ISETP, SEL, IMAD and LOP3 per score), "
               "737 instructions per consumer step against 451 without a mask; now 598.",
        prediction="Written before it was first measured: if the consumers are issue-bound (two consumers x 737 "
                   "instructions is about 1470 issue cycles per SM sub-partition per step, against about 980 "
                   "tensor-core cycles), 598 instructions could give up to +23%; expected +10 to +20% over v8.",
        predicted_at="2026-11-29",
        path="hopper",
        baseline="v8-causal-pairs",
        predicted_speedup={"causal": (1.10, 1.20)},
        features=Features(warp_spec=True, persistent=True, causal_pairs=True, lean_mask=True),
        configs={True: _cfg(128, 128, 4, 2)},
        maskings=("causal",),
        outcome="2026-11-29, on an H200: 1.00-1.04x of v8 at N=4096 (0.84-0.88x cuDNN), 0.92-1.01x at 16384. "
                "The issue-bound model was wrong: Nsight Compute on the H200 shows issue slots 40% busy in v8 and "
                "39% in cuDNN's causal kernel; v8's warps wait instead (30% of their stall cycles on L1TEX "
                "scoreboard), and its tensor pipe is 52% busy to cuDNN's 66%.",
    ),
    KernelVersion(
        name="v10-default",
        change="What flash_attention ships on Hopper (hopper_attention given no config and no features): "
               "non-causal, the persistent kernel (v6); causal, v9 below N=8192 and the split schedule (v5) from "
               "there. One tile config per head_dim, so nothing to tune.",
        prediction="The better of v5, v6 and v9 in each case, within noise: non-causal as v6, causal as v9 at "
                   "N=4096 (+8 to +12% over v4) and as v5 at 16384 (+3 to +6% over v4). Written after v9 was measured, "
                   "before v10 itself ran.",
        predicted_at="2026-11-29",
        path="hopper",
        baseline="v4-warpspec",
        predicted_speedup={"non-causal": (1.10, 1.16), "causal": (1.05, 1.10)},
        features=None,
    ),
]}


# The Gluon kernel's journey (kernels/attention/gluon.py records each step with the prediction
# written before it ran and the outcome measured after), as versions of this one: the same story
# fields, run through flash_attention's Gluon path with the version named in the config.
_GLUON_STEPS = (("v11-gluon", "g1", False), ("v12-gluon-ws", "g2", False), ("v13-gluon-overlap", "g3", True),
                ("v14-gluon-pingpong", "g4", True))
# Written after v15 shipped; v17 then shipped its causal walk.
_LATER_GLUON_STEPS = (("v16-gluon-balanced", "g5", True),)
# Written after v17 shipped; v21 then shipped g7's walk and g8's tile.
_AFTER_V17_GLUON_STEPS = (("v18-gluon-l2", "g6", True), ("v19-gluon-scheduled", "g7", True),
                          ("v20-gluon-one-warpgroup", "g8", True))
_GLUON_NAMES = {step: name for name, step, _ in _GLUON_STEPS + _LATER_GLUON_STEPS + _AFTER_V17_GLUON_STEPS}


def _gluon_versions(steps=_GLUON_STEPS) -> list[KernelVersion]:
    from .gluon import GLUON_VERSIONS

    by_name = {g.name: g for g in GLUON_VERSIONS}
    out = []
    for name, step, timed in steps:
        g = by_name[step]
        out.append(KernelVersion(
            name=name, change=f"Gluon {step}: {g.change}", prediction=g.prediction, predicted_at=g.predicted_at,
            path="gluon", baseline=_GLUON_NAMES.get(g.baseline, g.baseline), predicted_speedup=dict(g.predicted_speedup),
            configs={False: {"version": step}, True: {"version": step}}, outcome=g.outcome,
            in_phase=timed, maskings=tuple(g.maskings), head_dims=tuple(g.head_dims)))
    return out


VERSIONS.update((v.name, v) for v in _gluon_versions())
VERSIONS["v15-per-shape"] = KernelVersion(
    name="v15-per-shape",
    change="What flash_attention shipped on Hopper until v17: the path chosen per shape from measurements "
           "(kernels/attention/dispatch.py SHAPE_RULES): the Gluon kernel (g3) at d=128; at d=64 the portable kernel, except "
           "causal at N=2048-8191 where the Triton Hopper kernel runs. The launch cache replays the Triton paths "
           "without Triton's per-call binding. (First shipped with v10 for d=128 causal from N=8192; moved to g3 "
           "there when the first full collect with v15 measured g3 at 0.90x cuDNN against v10's 0.88x at N=16384.)",
    prediction="Each shape at the best of the three paths as measured on 2026-11-30: d=128 non-causal at "
               "1.01-1.04x cuDNN (g3), causal 0.95x at N=4096 (g3) and about 0.89x at 16384 (v10); d=64 "
               "non-causal about 0.93-0.97x (portable), causal about 1.15x at N=2048 and 0.97x at 4096 (Hopper), "
               "0.90-0.95x from 8192 (portable). Geometric means about 0.93-1.00x non-causal and 0.90-1.00x "
               "causal: the median over the goal shapes near but probably below 1.0, so the goal is likely "
               "missed at d=64 and at d=128 causal. Written before v15 itself ran.",
    predicted_at="2026-11-30",
    path=None,
    baseline="sdpa",
    predicted_speedup={"non-causal": (0.93, 1.00), "causal": (0.90, 1.00)},
    features=None,
    routes=partial(rule_route, V15_RULES),
    outcome="2026-11-30, H200 run h200-20261130c (bench phase, 24 goal shapes): median 0.953x the fastest SDPA "
            "backend, lowest 0.882x (d=128 causal N=16384 fp16); by class d=128 non-causal 1.01-1.02x, d=128 causal "
            "0.88-0.95x, d=64 non-causal 0.93-0.96x, d=64 causal 0.94-1.11x. Inside the predicted range; the goal "
            "was missed, as predicted.",
)

VERSIONS.update((v.name, v) for v in _gluon_versions(_LATER_GLUON_STEPS))
VERSIONS["v17-per-shape"] = KernelVersion(
    name="v17-per-shape",
    change="What flash_attention shipped on Hopper until v21 (its rules are kept as V17_RULES): the paths and "
           "Gluon steps of v15 re-chosen per shape from device time measured side by side. d=128: g3 "
           "non-causal, g5 (the balanced causal walk) causal. d=64 non-causal above N=2048: g1, the Gluon kernel's "
           "first step, whose 128-row programs fit two to an SM; at N=2048 the portable kernel, whose host time "
           "per call is half the Gluon path's. d=64 causal: g5 at N=2048-8192, the portable kernel from 16384 and "
           "up to 1024. The Gluon path now replays through the launch cache like the Triton paths.",
    prediction="From the H200 measurements that chose the rules (device time, every path beside cuDNN and "
               "flash in one process): d=128 non-causal 1.01-1.03x the fastest SDPA backend; d=128 causal about "
               "1.02x at N=4096 and 0.98x at 16384; d=64 non-causal about 0.96x at N=2048 (portable) and "
               "0.96-1.00x above; d=64 causal about 1.24x at N=2048, 1.10x at 4096, 1.02x at 8192 and 0.93-0.96x "
               "at 16384. Twelve of the 24 goal shapes at or above 1.0, so the median about 1.00-1.01x: the median "
               "target met by a hair, or missed within noise; about seven shapes below 0.97 (d=64 non-causal at "
               "N=2048-8192, d=64 causal at 16384). Written before v17 ran in a collect.",
    predicted_at="2026-11-30",
    path=None,
    baseline="sdpa",
    predicted_speedup={"non-causal": (0.96, 1.02), "causal": (1.00, 1.08)},
    features=None,
    outcome="2026-11-30, H200 run h200-20261130d (bench phase, 24 goal shapes): median 0.996x the fastest SDPA "
            "backend, up from v15's 0.953x; 12 shapes at or above 1.0 and 7 below 0.97; lowest 0.934x (d=64 causal "
            "N=16384 fp16, the portable kernel). Geometric means 0.981x non-causal and 1.042x causal, inside the "
            "predicted ranges. By class: d=128 non-causal 1.00-1.02x, d=128 causal 1.02x at N=4096 and 0.96-0.97x at "
            "16384, d=64 non-causal 0.94-0.95x at N=2048 (portable) and 0.95-0.99x above (g1), d=64 causal "
            "1.22x at N=2048 down to 1.02x at 8192 (g5) and 0.93-0.97x at 16384 (portable). The median target "
            "missed within noise, as the prediction allowed.",
    routes=partial(rule_route, V17_RULES),
)
VERSIONS.update((v.name, v) for v in _gluon_versions(_AFTER_V17_GLUON_STEPS))
VERSIONS["v21-per-shape"] = KernelVersion(
    name="v21-per-shape",
    change="What flash_attention ships on Hopper from 2026-11-30 (kernels/attention/dispatch.py SHAPE_RULES), re-chosen from "
           "device time measured side by side after g7 and g8 were written. d=128: g3 non-causal, g7 (the "
           "list-scheduled causal walk) causal. d=64 non-causal from N=2048: g8 (g1's tile on one warpgroup), "
           "which also takes over N=2048 from the portable kernel now that a replayed Gluon call keeps its "
           "tensor maps and costs the host what the portable kernel does. d=64 causal: g7 at N=2048-8192, g8 "
           "from 16384, the portable kernel up to 1024.",
    prediction="From the H200 measurements that chose the rules (device time, every candidate beside cuDNN "
               "and flash in one process): d=128 non-causal 1.00-1.02x the fastest SDPA backend (g3, as v17); "
               "d=128 causal 1.04-1.06x (g7); d=64 non-causal 1.05-1.08x (g8); d=64 causal 1.23x at N=2048, "
               "1.14x at 4096, 1.04-1.05x at 8192 (g7) and 1.04-1.05x at 16384 (g8). Every goal shape at or "
               "above 1.0 but within the noise for d=128 non-causal; the median about 1.03-1.07x, so the "
               "target (median at least 1.0, none below 0.97) met, and the stretch's d=64 causal at 1.0x or "
               "better everywhere met too; the stretch's 1.1x median missed. Geometric means about 1.02-1.07x "
               "non-causal and 1.05-1.12x causal. Written before v21 ran in a collect.",
    predicted_at="2026-11-30",
    path=None,
    baseline="sdpa",
    predicted_speedup={"non-causal": (1.02, 1.07), "causal": (1.05, 1.12)},
    features=None,
    outcome="2026-11-30, H200 run h200-20261130e (bench phase, 24 goal shapes): median 1.063x the fastest SDPA "
            "backend, up from v17's 0.996x; all 24 shapes at or above 1.0, the lowest 1.009x (d=128 non-causal "
            "N=4096 fp16, g3). Geometric means 1.054x non-causal and 1.088x causal, inside the predicted ranges. By "
            "class: d=128 non-causal 1.01-1.04x (g3), d=128 causal 1.06x at N=4096 and 1.03-1.04x at 16384 (g7), d=64 "
            "non-causal 1.07-1.08x (g8), d=64 causal 1.23x at N=2048, 1.14x at 4096, 1.04x at 8192 (g7) and 1.04x "
            "at 16384 (g8). The goal is met (median at least 1.0, none below 0.97), and the stretch's d=64 causal at "
            "1.0x or better everywhere; the stretch's 1.1x median is not. Run h200-20261130f, the next collect: median "
            "1.059x, all 24 at or above 1.0, the lowest 1.006x (d=128 non-causal N=16384 bf16).",
)
FINAL_VERSION = "v21-per-shape"


def get_version(name):
    if name not in VERSIONS:
        raise ValueError(f"unknown kernel version {name!r}; valid: {', '.join(VERSIONS)}")
    return VERSIONS[name]


def compile_specs(target):
    """Compute capability 9.x only: every Hopper-path version the iterations phase times, with its own
    features and config, at the goal lengths, in both half dtypes (kernels/aot.py). Core: float16 at
    the first goal length, and at the split length where a version's features change there."""
    if target.capability[0] != 9:
        return []
    import torch

    out = []
    for dtype in (torch.float16, torch.bfloat16):
        half = dtype == torch.float16
        for v in VERSIONS.values():
            if v.path != "hopper":
                continue
            for causal in (m == "causal" for m in v.maskings):
                for n in (4096, 16384):
                    feats = v.features_for(causal, n) or best_features(causal, n)
                    cfgs = configs_for(v.config_for(causal), 128, dtype, causal, n, feats, target.smem_per_block)
                    changes = feats != (v.features_for(causal, 4096) or best_features(causal, 4096))
                    out += [compile_spec(dtype, 128, causal, n, c, feats, v.name, half and (n == 4096 or changes))
                            for c in cfgs]
    return out
