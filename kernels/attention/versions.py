"""
The journey of the Hopper kernel: every version tried, with its prediction and its outcome
=========================================================================================

Each :class:`KernelVersion` is a callable with the settings of one step (a kernel path, the
Hopper kernel's :class:`~kernels.attention.hopper.Features`, fixed tile configs) and its story:
the change it made, the prediction written (and dated) before it was first measured, and what
the measurement then showed (the words in kernels/attention/notes.md, the settings here, one record
per version). The ``iterations`` collect phase times them side by side; the
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
            path, routed = self.routes(q.shape[-1], bool(causal), q.shape[2], batch_heads=q.shape[0] * q.shape[1])
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


def _cfg(bm, bn, w, s):
    return dict(BLOCK_M=bm, BLOCK_N=bn, num_warps=w, num_stages=s)


def _story(name, prefix=""):
    """A version's words (change, prediction, predicted_at, outcome): kernels/attention/notes.md. A
    version that runs a Gluon step reads that step's notes, its change prefixed "Gluon gN: "."""
    from ..notes import story

    return story(__package__, name, prefix)


# d=64 as v29 to v44 shipped it: g10 causal and below N=2048, g8 from there.
_D64_G10_G8 = (
    ShapeRule("gluon", 64, True, config=(("version", "g10"),)),
    ShapeRule("gluon", 64, False, max_len=2047, config=(("version", "g10"),)),
    ShapeRule("gluon", 64, False, min_len=2048, config=(("version", "g8"),)),
)


def _shipped_gluon_routes(d128_step):
    """The per-shape routes v29 and v32 shipped with: d=64 on g10 (causal, and non-causal below N=2048) and g8,
    the d=128 tile (d=72-128) on `d128_step`, every other shape on the Hopper path."""
    return partial(rule_route, (
        *_D64_G10_G8,
        ShapeRule("gluon", 128, False, config=(("version", d128_step),)),
        ShapeRule("gluon", 128, True, config=(("version", d128_step),)),
    ))


def _v44_routes():
    """The per-shape routes v44 shipped with: v32's, with g27 at d=72-96 non-causal and d=72-128 causal."""
    return partial(rule_route, (
        *_D64_G10_G8,
        ShapeRule("gluon", 128, False, head_sizes=(72, 96), config=(("version", "g27"),)),
        ShapeRule("gluon", 128, False, config=(("version", "g15"),)),
        ShapeRule("gluon", 128, True, config=(("version", "g27"),)),
    ))


def _v49_routes():
    """The per-shape routes v49 shipped with: g31 at d=64 from 2^18 query rows (causal from N=16384), g28 at the rest
    of d=64 causal, g30 at d=72-80 and d=104-128 non-causal and d=72-80 causal, v44's kernels elsewhere."""
    return partial(rule_route, (
        ShapeRule("gluon", 64, True, min_len=16384, min_rows=2 ** 18, config=(("version", "g31"),)),
        ShapeRule("gluon", 64, True, config=(("version", "g28"),)),
        ShapeRule("gluon", 64, False, max_len=2047, config=(("version", "g10"),)),
        ShapeRule("gluon", 64, False, min_len=2048, min_rows=2 ** 18, config=(("version", "g31"),)),
        ShapeRule("gluon", 64, False, min_len=2048, config=(("version", "g8"),)),
        ShapeRule("gluon", 128, False, head_sizes=(72, 80), config=(("version", "g30"),)),
        ShapeRule("gluon", 128, False, head_sizes=(88, 96), config=(("version", "g27"),)),
        ShapeRule("gluon", 128, False, config=(("version", "g30"),)),
        ShapeRule("gluon", 128, True, head_sizes=(72, 80), config=(("version", "g30"),)),
        ShapeRule("gluon", 128, True, config=(("version", "g27"),)),
    ))


def _v52_routes():
    """The per-shape routes v52 shipped with: g33 at d=64 causal from N=8192 and 2^17 query rows and at d=64
    non-causal from 2^18, g28 at the rest of d=64 causal, g32 at d=104-128 non-causal and d=72-128 causal, v49's
    kernels elsewhere."""
    return partial(rule_route, (
        ShapeRule("gluon", 64, True, min_len=8192, min_rows=2 ** 17, config=(("version", "g33"),)),
        ShapeRule("gluon", 64, True, config=(("version", "g28"),)),
        ShapeRule("gluon", 64, False, max_len=2047, config=(("version", "g10"),)),
        ShapeRule("gluon", 64, False, min_len=2048, min_rows=2 ** 18, config=(("version", "g33"),)),
        ShapeRule("gluon", 64, False, min_len=2048, config=(("version", "g8"),)),
        ShapeRule("gluon", 128, False, head_sizes=(72, 80), config=(("version", "g30"),)),
        ShapeRule("gluon", 128, False, head_sizes=(88, 96), config=(("version", "g27"),)),
        ShapeRule("gluon", 128, False, config=(("version", "g32"),)),
        ShapeRule("gluon", 128, True, config=(("version", "g32"),)),
    ))


# The per-shape rules v58 shipped with: the lean mask where it won its sweep (g36 at d=64 causal from N=8192 and 2^17
# query rows, g38 at the rest of d=64 causal, g37 at d=72-128 causal and d=104-128 non-causal below N=2048), g32 at
# d=104-128 non-causal from N=2048, v52's kernels elsewhere.
_V58_RULES = (
    ShapeRule("gluon", 64, True, min_len=8192, min_rows=2 ** 17, config=(("version", "g36"),)),
    ShapeRule("gluon", 64, True, config=(("version", "g38"),)),
    ShapeRule("gluon", 64, False, max_len=2047, config=(("version", "g10"),)),
    ShapeRule("gluon", 64, False, min_len=2048, min_rows=2 ** 18, config=(("version", "g33"),)),
    ShapeRule("gluon", 64, False, min_len=2048, config=(("version", "g8"),)),
    ShapeRule("gluon", 128, False, head_sizes=(72, 80), config=(("version", "g30"),)),
    ShapeRule("gluon", 128, False, head_sizes=(88, 96), config=(("version", "g27"),)),
    ShapeRule("gluon", 128, False, max_len=2047, head_sizes=(104, 128), config=(("version", "g37"),)),
    ShapeRule("gluon", 128, False, min_len=2048, head_sizes=(104, 128), config=(("version", "g32"),)),
    ShapeRule("gluon", 128, True, config=(("version", "g37"),)),
)


def _v58_routes():
    return partial(rule_route, _V58_RULES)


def _v63_routes():
    """The per-shape routes v63 shipped with: v58's, with g42 (the counted release) at d=72-128 causal."""
    return partial(rule_route, (*_V58_RULES[:-1], ShapeRule("gluon", 128, True, config=(("version", "g42"),))))


def _unrouted_gluon_step(name, step, baseline):
    """A Gluon step no per-shape version routes: its words, prediction, maskings and head sizes are its record's
    (gluon_versions.py), its baseline the version of the step it changed; the iterations phase skips it."""
    from .gluon_versions import get_version as gluon_step

    g = gluon_step(step)
    return KernelVersion(name=name, **_story(step, prefix=f"Gluon {step}: "), path="gluon", baseline=baseline,
                         predicted_speedup=dict(g.predicted_speedup), configs={False: {"version": step}, True: {"version": step}},
                         maskings=g.maskings, head_dims=g.head_dims, in_phase=False)


# Every version's settings, one record each, in the order of the journey. What each changed, predicted
# and measured is in kernels/attention/notes.md. v11-v14, v16 and v18-v20 run a Gluon step of
# kernels/attention/gluon_versions.py (GLUON_VERSIONS) by name; v15, v17 and v21 are what flash_attention
# shipped per shape at the time (v15's and v17's rules are kept here, so they still run as shipped).
VERSIONS = {v.name: v for v in [
    KernelVersion(
        name="v0-portable", **_story("v0-portable"),
        path="portable",
        baseline="sdpa",
        predicted_speedup={"non-causal": (0.78, 0.86), "causal": (0.82, 0.90)},
        # What the portable autotuner chose on the H200 in its first run.
        configs={False: _cfg(128, 64, 8, 4), True: _cfg(128, 64, 8, 3)},
    ),
    KernelVersion(
        name="v1-tma", **_story("v1-tma"),
        path="hopper",
        baseline="v0-portable",
        predicted_speedup={"non-causal": (1.03, 1.08), "causal": (1.03, 1.08)},
        configs={False: _cfg(128, 64, 8, 3), True: _cfg(128, 64, 8, 3)},
    ),
    KernelVersion(
        name="v2-wide", **_story("v2-wide"),
        path="hopper",
        baseline="v1-tma",
        predicted_speedup={"non-causal": (1.04, 1.10), "causal": (1.04, 1.10)},
        configs={False: _cfg(128, 128, 8, 2), True: _cfg(128, 128, 8, 2)},
        role="t4-fix",
    ),
    KernelVersion(
        name="v3-overlap", **_story("v3-overlap"),
        path="hopper",
        baseline="v1-tma",
        predicted_speedup={"non-causal": (0.95, 1.00), "causal": (0.95, 1.00)},
        features=Features(overlap=True),
        configs={False: _cfg(128, 64, 8, 3), True: _cfg(128, 64, 8, 3)},
    ),
    KernelVersion(
        name="v4-warpspec", **_story("v4-warpspec"),
        path="hopper",
        baseline="v2-wide",
        predicted_speedup={"non-causal": (1.12, 1.25), "causal": (1.05, 1.15)},
        features=Features(warp_spec=True),
        configs={False: _cfg(128, 128, 4, 2), True: _cfg(128, 128, 4, 2)},
    ),
    KernelVersion(
        name="v5-causal-split", **_story("v5-causal-split"),
        path="hopper",
        baseline="v4-warpspec",
        predicted_speedup={"causal": (1.03, 1.12)},
        features=Features(warp_spec=True, causal_split=True),
        configs={True: _cfg(128, 128, 4, 2)},
        maskings=("causal",),
    ),
    KernelVersion(
        name="v6-persistent", **_story("v6-persistent"),
        path="hopper",
        baseline="v4-warpspec",
        predicted_speedup={"non-causal": (1.01, 1.05), "causal": (1.01, 1.05)},
        features=Features(warp_spec=True, persistent=True),
        configs={False: _cfg(128, 128, 4, 2), True: _cfg(128, 128, 4, 2)},
    ),
    KernelVersion(
        name="v7-default", **_story("v7-default"),
        path="hopper",
        baseline="v4-warpspec",
        predicted_speedup={"non-causal": (1.10, 1.16), "causal": (1.00, 1.06)},
        features=v7_features,
        in_phase=False,  # superseded by v10; its numbers are in the outcome
    ),
    KernelVersion(
        name="v8-causal-pairs", **_story("v8-causal-pairs"),
        path="hopper",
        baseline="v4-warpspec",
        predicted_speedup={"causal": (1.15, 1.28)},
        features=Features(warp_spec=True, persistent=True, causal_pairs=True),
        configs={True: _cfg(128, 128, 4, 2)},
        maskings=("causal",),
    ),
    KernelVersion(
        name="v9-lean-mask", **_story("v9-lean-mask"),
        path="hopper",
        baseline="v8-causal-pairs",
        predicted_speedup={"causal": (1.10, 1.20)},
        features=Features(warp_spec=True, persistent=True, lean_mask=True, causal_pairs=True),
        configs={True: _cfg(128, 128, 4, 2)},
        maskings=("causal",),
    ),
    KernelVersion(
        name="v10-default", **_story("v10-default"),
        path="hopper",
        baseline="v4-warpspec",
        predicted_speedup={"non-causal": (1.10, 1.16), "causal": (1.05, 1.10)},
        features=None,
    ),
    KernelVersion(
        name="v11-gluon", **_story("g1", prefix="Gluon g1: "),
        path="gluon",
        baseline="sdpa",
        predicted_speedup={"non-causal": (0.60, 0.80), "causal": (0.55, 0.75)},
        configs={False: {"version": "g1"}, True: {"version": "g1"}},
        in_phase=False,
    ),
    KernelVersion(
        name="v12-gluon-ws", **_story("g2", prefix="Gluon g2: "),
        path="gluon",
        baseline="sdpa",
        predicted_speedup={"non-causal": (0.75, 0.92), "causal": (0.70, 0.90)},
        configs={False: {"version": "g2"}, True: {"version": "g2"}},
        in_phase=False,
    ),
    KernelVersion(
        name="v13-gluon-overlap", **_story("g3", prefix="Gluon g3: "),
        path="gluon",
        baseline="sdpa",
        predicted_speedup={"non-causal": (0.82, 1.00), "causal": (0.78, 0.97)},
        configs={False: {"version": "g3"}, True: {"version": "g3"}},
    ),
    KernelVersion(
        name="v14-gluon-pingpong", **_story("g4", prefix="Gluon g4: "),
        path="gluon",
        baseline="sdpa",
        predicted_speedup={"non-causal": (0.88, 1.06), "causal": (0.82, 1.00)},
        configs={False: {"version": "g4"}, True: {"version": "g4"}},
    ),
    KernelVersion(
        name="v15-per-shape", **_story("v15-per-shape"),
        path=None,
        baseline="sdpa",
        predicted_speedup={"non-causal": (0.93, 1.00), "causal": (0.90, 1.00)},
        features=None,
        # The rules v15 shipped with: g3 at d=128; at d=64 the portable kernel non-causal from N=2048 and
        # causal up to 1024 and from 8192; the Triton Hopper kernel everywhere else.
        routes=partial(rule_route, (
            ShapeRule("gluon", 128, False, config=(("version", "g3"),)),
            ShapeRule("gluon", 128, True, config=(("version", "g3"),)),
            ShapeRule("portable", 64, False, min_len=2048),
            ShapeRule("portable", 64, True, max_len=1024),
            ShapeRule("portable", 64, True, min_len=8192),
        )),
    ),
    KernelVersion(
        name="v16-gluon-balanced", **_story("g5", prefix="Gluon g5: "),
        path="gluon",
        baseline="v13-gluon-overlap",
        predicted_speedup={"causal": (1.00, 1.10)},
        configs={False: {"version": "g5"}, True: {"version": "g5"}},
        maskings=("causal",),
    ),
    KernelVersion(
        name="v17-per-shape", **_story("v17-per-shape"),
        path=None,
        baseline="sdpa",
        predicted_speedup={"non-causal": (0.96, 1.02), "causal": (1.00, 1.08)},
        features=None,
        # The rules v17 shipped with: d=128 g3 non-causal and g5 causal; d=64 non-causal the portable
        # kernel at N=2048 and g1 above; d=64 causal g5 at N=2048-8192, the portable kernel elsewhere.
        routes=partial(rule_route, (
            ShapeRule("portable", 64, True, max_len=1024),
            ShapeRule("gluon", 64, True, min_len=2048, max_len=8192, config=(("version", "g5"),)),
            ShapeRule("portable", 64, True, min_len=8193),
            ShapeRule("portable", 64, False, min_len=2048, max_len=2048),
            ShapeRule("gluon", 64, False, min_len=2049, config=(("version", "g1"),)),
            ShapeRule("gluon", 128, False, config=(("version", "g3"),)),
            ShapeRule("gluon", 128, True, config=(("version", "g5"),)),
        )),
    ),
    KernelVersion(
        name="v18-gluon-l2", **_story("g6", prefix="Gluon g6: "),
        path="gluon",
        baseline="v16-gluon-balanced",
        predicted_speedup={"causal": (0.99, 1.03)},
        configs={False: {"version": "g6"}, True: {"version": "g6"}},
        maskings=("causal",),
    ),
    KernelVersion(
        name="v19-gluon-scheduled", **_story("g7", prefix="Gluon g7: "),
        path="gluon",
        baseline="v18-gluon-l2",
        predicted_speedup={"causal": (0.99, 1.12)},
        configs={False: {"version": "g7"}, True: {"version": "g7"}},
        maskings=("causal",),
    ),
    KernelVersion(
        name="v20-gluon-one-warpgroup", **_story("g8", prefix="Gluon g8: "),
        path="gluon",
        baseline="sdpa",
        predicted_speedup={"non-causal": (1.04, 1.09), "causal": (0.90, 1.06)},
        configs={False: {"version": "g8"}, True: {"version": "g8"}},
        head_dims=(64,),
    ),
    KernelVersion(
        name="v21-per-shape", **_story("v21-per-shape"),
        path=None,
        baseline="sdpa",
        predicted_speedup={"non-causal": (1.02, 1.07), "causal": (1.05, 1.12)},
        features=None,
        # The rules v21 shipped with: v24's, but d=64 causal on g7 at N=2048-8192 and g8 from 16384.
        routes=partial(rule_route, (
            ShapeRule("portable", 64, True, max_len=1024),
            ShapeRule("gluon", 64, True, min_len=2048, max_len=8192, config=(("version", "g7"),)),
            ShapeRule("gluon", 64, True, min_len=8193, config=(("version", "g8"),)),
            ShapeRule("gluon", 64, False, min_len=2048, config=(("version", "g8"),)),
            ShapeRule("gluon", 128, False, config=(("version", "g3"),)),
            ShapeRule("gluon", 128, True, config=(("version", "g7"),)),
        )),
    ),
    # The Gluon steps after v21: the iterations phase times each at the goal shapes it changes (d=64 causal)
    # beside its baseline. The factors are the steps' own (gluon_versions.py).
    KernelVersion(
        name="v22-gluon-lpt", **_story("g9", prefix="Gluon g9: "),
        path="gluon",
        baseline="v20-gluon-one-warpgroup",
        predicted_speedup={"causal": (1.13, 1.18)},
        configs={False: {"version": "g9"}, True: {"version": "g9"}},
        maskings=("causal",),
        head_dims=(64,),
    ),
    KernelVersion(
        name="v23-gluon-lpt64", **_story("g10", prefix="Gluon g10: "),
        path="gluon",
        baseline="v22-gluon-lpt",
        predicted_speedup={"causal": (1.05, 1.10)},
        configs={False: {"version": "g10"}, True: {"version": "g10"}},
        maskings=("causal",),
        head_dims=(64,),
    ),
    KernelVersion(
        name="v24-per-shape", **_story("v24-per-shape"),
        path=None,
        baseline="sdpa",
        # Against the fastest other implementation at the goal shapes (FlashAttention-4 where it runs): d=128
        # non-causal as v21 (0.92-0.95x in run h200-20261203b); d=64 non-causal and d=128 causal as v21;
        # d=64 causal 0.91-1.04x. Geometric means over the goal shapes, from the notes' per-class ranges.
        predicted_speedup={"non-causal": (0.98, 1.02), "causal": (0.95, 1.01)},
        features=None,
        # The rules v24 shipped with: v21's, with every d=64 causal shape from N=2048 on g10.
        routes=partial(rule_route, (
            ShapeRule("portable", 64, True, max_len=1024),
            ShapeRule("gluon", 64, True, min_len=2048, config=(("version", "g10"),)),
            ShapeRule("gluon", 64, False, min_len=2048, config=(("version", "g8"),)),
            ShapeRule("gluon", 128, False, config=(("version", "g3"),)),
            ShapeRule("gluon", 128, True, config=(("version", "g7"),)),
        )),
    ),
    # The Gluon steps after v24. g11 is timed at the journey shape beside g3 (v13); g12-g14 lost in the sweeps
    # that measured them (scripts/sweep_versions.py, their outcomes in the notes) and are not timed again.
    KernelVersion(
        name="v25-gluon-named-turns", **_story("g11", prefix="Gluon g11: "),
        path="gluon",
        baseline="v13-gluon-overlap",
        predicted_speedup={"non-causal": (1.00, 1.05)},
        configs={False: {"version": "g11"}, True: {"version": "g11"}},
        maskings=("non-causal",),
        head_dims=(128,),
    ),
    KernelVersion(
        name="v26-gluon-three-warpgroups", **_story("g12", prefix="Gluon g12: "),
        path="gluon",
        baseline="v23-gluon-lpt64",
        predicted_speedup={"causal": (0.95, 1.08)},
        configs={False: {"version": "g12"}, True: {"version": "g12"}},
        maskings=("causal",),
        head_dims=(64,),
        in_phase=False,
    ),
    KernelVersion(
        name="v27-gluon-named-release", **_story("g13", prefix="Gluon g13: "),
        path="gluon",
        baseline="v25-gluon-named-turns",
        predicted_speedup={"non-causal": (1.02, 1.06)},
        configs={False: {"version": "g13"}, True: {"version": "g13"}},
        maskings=("non-causal",),
        head_dims=(128,),
        in_phase=False,
    ),
    KernelVersion(
        name="v28-gluon-three-named", **_story("g14", prefix="Gluon g14: "),
        path="gluon",
        baseline="v26-gluon-three-warpgroups",
        predicted_speedup={"causal": (1.05, 1.12)},
        configs={False: {"version": "g14"}, True: {"version": "g14"}},
        maskings=("causal",),
        head_dims=(64,),
        in_phase=False,
    ),
    KernelVersion(
        name="v29-per-shape", **_story("v29-per-shape"),
        path=None,
        baseline="sdpa",
        # Against the fastest other implementation at the goal shapes (FlashAttention-4 where it runs), from the
        # notes' per-class ranges: d=128 non-causal up from v24's 0.94-0.96x by g11's 1.01-1.03x, the rest as v24.
        predicted_speedup={"non-causal": (0.98, 1.03), "causal": (0.95, 1.01)},
        features=None,
        # v32 runs the same kernels at every shape the iterations phase times (g15 is g11 at d=64 and d=128),
        # so timing both would spend the collect's minutes twice on one kernel; run h200-20261203g timed v29.
        in_phase=False,
        # The rules v29 shipped with: v32's, with g11 where v32 runs g15 (d=72-128).
        routes=_shipped_gluon_routes("g11"),
    ),
    # g15 changes d=72-96 alone, which the iterations phase does not time (its d=128 shapes run g11's kernel
    # under g15); the bench phase times d=80 and d=96 with what ships.
    KernelVersion(
        name="v30-gluon-split-head", **_story("g15", prefix="Gluon g15: "),
        path="gluon",
        baseline="v25-gluon-named-turns",
        predicted_speedup={"non-causal": (1.12, 1.30), "causal": (1.08, 1.25)},
        configs={False: {"version": "g15"}, True: {"version": "g15"}},
        head_dims=(128,),
        in_phase=False,
    ),
    # g16 lost to g10 in its sweep (the notes), so no per-shape version routes it and the iterations phase skips it.
    KernelVersion(
        name="v31-gluon-overlap64", **_story("g16", prefix="Gluon g16: "),
        path="gluon",
        baseline="v23-gluon-lpt64",
        predicted_speedup={"non-causal": (1.00, 1.08), "causal": (1.02, 1.08)},
        configs={False: {"version": "g16"}, True: {"version": "g16"}},
        head_dims=(64,),
        in_phase=False,
    ),
    KernelVersion(
        name="v32-per-shape", **_story("v32-per-shape"),
        path=None,
        baseline="sdpa",
        # At the goal shapes v32 runs v29's kernels (g15 is g11 at d=64 and d=128): v29's ranges.
        predicted_speedup={"non-causal": (0.98, 1.03), "causal": (0.95, 1.01)},
        features=None,
        # v44 runs v32's kernels at every shape the iterations phase times but d=128 causal, where g27 is g15 with
        # P packed early; runs h200-20261203h to h200-20261204b timed v32.
        in_phase=False,
        # The rules v32 shipped with: v44's, with g15 where v44 runs g27 (d=72-96 non-causal, d=72-128 causal).
        routes=_shipped_gluon_routes("g15"),
    ),
    # g17-g23 changed the softmax's arithmetic and each ran slower than the step it changed (the notes), so no
    # per-shape version routes them and the iterations phase skips them.
    _unrouted_gluon_step("v33-gluon-fma-exp2", "g17", "v23-gluon-lpt64"),
    _unrouted_gluon_step("v34-gluon-fma-exp2-128row", "g18", "v20-gluon-one-warpgroup"),
    _unrouted_gluon_step("v35-gluon-fma-exp2-split", "g19", "v30-gluon-split-head"),
    _unrouted_gluon_step("v36-gluon-fma-exp2-half", "g20", "v33-gluon-fma-exp2"),
    _unrouted_gluon_step("v37-gluon-tree64", "g21", "v23-gluon-lpt64"),
    _unrouted_gluon_step("v38-gluon-tree-128row", "g22", "v20-gluon-one-warpgroup"),
    _unrouted_gluon_step("v39-gluon-tree-split", "g23", "v30-gluon-split-head"),
    # g24-g25: three consumer warpgroups at a split head (d=72-96); both lost to g15 in their sweep (the notes).
    _unrouted_gluon_step("v40-gluon-split-three", "g24", "v30-gluon-split-head"),
    _unrouted_gluon_step("v41-gluon-split-three-128", "g25", "v40-gluon-split-three"),
    # g26-g27: P packed in pairs, after the wait for the previous P V (g26, which lost at d=128 non-causal in its
    # sweep) or before it (g27, which v44-per-shape routes at d=72-96 non-causal and d=72-128 causal).
    _unrouted_gluon_step("v42-gluon-packed-p", "g26", "v30-gluon-split-head"),
    _unrouted_gluon_step("v43-gluon-packed-p-early", "g27", "v30-gluon-split-head"),
    KernelVersion(
        name="v44-per-shape", **_story("v44-per-shape"),
        path=None,
        baseline="sdpa",
        # Against the fastest other implementation at the goal shapes: v32's ranges, causal up by g27's 1.01-1.02x
        # at d=128 (d=64 causal unchanged).
        predicted_speedup={"non-causal": (0.98, 1.03), "causal": (0.96, 1.02)},
        features=None,
        # v49 and v52 run v44's kernels with later changes (row sums per lane, three consumers, late stores) at the
        # shapes the iterations phase times; run h200-20261204c timed v44.
        in_phase=False,
        # The rules v44 shipped with, frozen here so that it still runs as shipped after v49.
        routes=_v44_routes(),
    ),
    # g28-g31: the softmax's row sums per lane (g28 in g10, g29 in g8, g30 in g27) and three consumer warpgroups at
    # d=64 with P packed (g31). v49-per-shape routes g28, g30 and g31; g29 ran within noise of g8 (the notes).
    _unrouted_gluon_step("v45-gluon-lane-sums-64", "g28", "v23-gluon-lpt64"),
    _unrouted_gluon_step("v46-gluon-lane-sums-128row", "g29", "v20-gluon-one-warpgroup"),
    _unrouted_gluon_step("v47-gluon-lane-sums-split", "g30", "v43-gluon-packed-p-early"),
    _unrouted_gluon_step("v48-gluon-three-packed", "g31", "v23-gluon-lpt64"),
    KernelVersion(
        name="v49-per-shape", **_story("v49-per-shape"),
        path=None,
        baseline="sdpa",
        # Against the fastest other implementation at the goal shapes: v44's, with d=64 causal N=16384 up by g31's
        # 1.03-1.05x, d=64 non-causal N=16384 by 1.04-1.07x and d=128 non-causal by g30's 1.015-1.02x.
        predicted_speedup={"non-causal": (0.99, 1.04), "causal": (0.96, 1.02)},
        features=None,
        # The rules v49 shipped with, frozen here so that it still runs as shipped after v52. Run h200-20261204d
        # timed v49; v52 runs its kernels with each tile's store left in flight at the shapes that changed.
        in_phase=False,
        routes=_v49_routes(),
    ),
    # g32-g33: each tile's output store left in flight until the next tile's first scores (g32 on g30's kernel, g33
    # on g31's). v52-per-shape routes both.
    _unrouted_gluon_step("v50-gluon-late-release", "g32", "v47-gluon-lane-sums-split"),
    _unrouted_gluon_step("v51-gluon-three-late", "g33", "v48-gluon-three-packed"),
    KernelVersion(
        name="v52-per-shape", **_story("v52-per-shape"),
        path=None,
        baseline="sdpa",
        # Against the fastest other implementation at the goal shapes: v49's, with d=64 causal from N=8192 up by
        # g33's 1.02-1.04x and d=128 by g32's 1.00-1.01x.
        predicted_speedup={"non-causal": (0.99, 1.04), "causal": (0.97, 1.03)},
        features=None,
        # The rules v52 shipped with, frozen here so that it still runs as shipped after v58. Runs h200-20261204e-g
        # timed v52; v58 runs its kernels with the lean mask at the shapes that changed.
        in_phase=False,
        routes=_v52_routes(),
    ),
    # g34-g35: each tile's last P V run beside the next tile's first scores (g34 on g32's kernel, g35 on g33's);
    # wrong at every odd place of a program's walk of tiles (the notes), so gluon_attention refuses them.
    _unrouted_gluon_step("v53-gluon-chained", "g34", "v50-gluon-late-release"),
    _unrouted_gluon_step("v54-gluon-three-chained", "g35", "v51-gluon-three-late"),
    # g36-g38: the lean mask (g36 on g33's kernel, g37 on g32's, g38 on g28's). v58-per-shape routes all three.
    _unrouted_gluon_step("v55-gluon-three-lean", "g36", "v51-gluon-three-late"),
    _unrouted_gluon_step("v56-gluon-lean", "g37", "v50-gluon-late-release"),
    _unrouted_gluon_step("v57-gluon-lean64", "g38", "v45-gluon-lane-sums-64"),
    KernelVersion(
        name="v58-per-shape", **_story("v58-per-shape"),
        path=None,
        baseline="sdpa",
        # Against the fastest other implementation at the goal shapes: v52's, with d=64 causal up by g36's and g38's
        # 1.02-1.04x and d=128 causal by g37's 1.00-1.015x.
        predicted_speedup={"non-causal": (0.99, 1.04), "causal": (0.98, 1.04)},
        features=None,
        # The rules v58 shipped with, frozen here so that it still runs as shipped after v63. Run h200-20261205a
        # timed v58; v63 runs its kernels with the counted release at the shapes that changed.
        in_phase=False,
        routes=_v58_routes(),
    ),
    # g39-g40: g34 and g35's walk two tiles a pass, to find where their fault lies; not measured yet.
    _unrouted_gluon_step("v59-gluon-chained-pairs", "g39", "v56-gluon-lean"),
    _unrouted_gluon_step("v60-gluon-three-chained-pairs", "g40", "v55-gluon-three-lean"),
    # g41-g42: K/V slots released by counted arrives (g41 on g32's kernel, g42 on g37's). v63-per-shape routes g42 at
    # d=72-128 causal; v64-per-shape g42 at d=104-128 causal and g41 at d=88-96 non-causal from N=2048.
    _unrouted_gluon_step("v61-gluon-counted", "g41", "v50-gluon-late-release"),
    _unrouted_gluon_step("v62-gluon-lean-counted", "g42", "v56-gluon-lean"),
    KernelVersion(
        name="v63-per-shape", **_story("v63-per-shape"),
        path=None,
        baseline="sdpa",
        # Against the fastest other implementation at the goal shapes: v58's, with d=128 non-causal up by g41's
        # 1.01-1.04x and d=128 causal by g42's 1.01-1.04x (d=64 unchanged).
        predicted_speedup={"non-causal": (0.99, 1.04), "causal": (0.98, 1.05)},
        features=None,
        # The rules v63 shipped with, frozen here so that it still runs as shipped after v64. Run h200-20261205b
        # timed v63; v64 moves g42 off the split head and g41 onto it.
        in_phase=False,
        routes=_v63_routes(),
    ),
    KernelVersion(
        name="v64-per-shape", **_story("v64-per-shape"),
        path=None,
        baseline="sdpa",
        # Against the fastest other implementation at the goal shapes: v63's (no goal shape changes kernel).
        predicted_speedup={"non-causal": (0.99, 1.04), "causal": (0.98, 1.05)},
        features=None,
    ),
    # g43: g32 with the output's rescale between the next step's two matmuls; measured 2026-12-05 at 0.97-1.00x g32
    # at d=128 non-causal (kernels/attention/notes.md), so no per-shape version routes it.
    _unrouted_gluon_step("v65-gluon-deferred-rescale", "g43", "v50-gluon-late-release"),
]}
FINAL_VERSION = "v64-per-shape"


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
