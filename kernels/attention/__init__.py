"""Prefill attention: ``flash_attention`` and the kernel paths it picks between.

A reader starts at ``dispatch.py``: ``flash_attention``, the measured rules (``SHAPE_RULES``)
that pick a path per shape, and the table of which kernel serves which shape class. Then the
paths, each one file:

- ``portable.py``: the portable Triton kernel (every GPU from sm75, and the CPU interpreter),
  and the implementations it is measured against (naive, SDPA, the float64 reference), with
  the name -> function registry ``IMPLEMENTATIONS``;
- ``hopper.py``: the Triton kernel with TMA and warp specialization (compute capability 9.x);
- ``gluon.py``: the launcher of the Gluon kernels (explicit warpgroup MMA), which serve Hopper's shapes:
  the tile kernel in ``gluon_tile.py``, the warp-specialized kernel in ``gluon_ws.py``, and the
  jitted pieces they share in ``gluon_parts.py`` (and ``fma_exp2.py``, exponentials on the FMA pipes);
  ``gluon_versions.py``: their steps g1-g35 and the tiles
  each kernel runs with; ``gluon_schedule.py``: the causal walks planned on the host;
- ``turing.py`` and ``turing_path.py``: the Turing tensor-core kernel and the first-call
  self-check in front of it (compute capability 7.5);
- ``flash_attn4.py``: FlashAttention-4, a yardstick only.

Beside them: ``launcher.py`` replays recorded launches without Triton's per-call host work, and
``versions.py`` keeps every version tried on the way (the Kernel iterations page).

Importing this package registers each path with dispatch.py. The Hopper and Gluon paths lean on
Triton APIs that move between releases (Gluon is experimental): on a Triton where one does not
import, its path is refused with the reason, and the rest still runs.
"""

import importlib as _importlib

from . import dispatch as _dispatch

for _name, _title in (("gluon", "Gluon"), ("hopper", "Hopper")):
    try:
        _importlib.import_module(f"{__name__}.{_name}")
    except Exception as _exc:  # noqa: BLE001 - any failure to import is the same fact about this Triton
        _dispatch.register_missing(_name, _title, _exc)
from . import turing_path  # noqa: E402,F401 - registers the Turing path (its Gluon kernel loads on first use)
from .dispatch import (  # noqa: E402
    flash_attention,
    hopper_path_runs,
    kernel_config_of_last_call,
    resolve_path,
)
from .portable import (  # noqa: E402
    DTYPES,
    HEAD_DIM_TILES,
    HEAD_DIMS,
    IMPLEMENTATIONS,
    SDPA_BACKENDS,
    candidate_configs,
    check_dtype_supported,
    fa4_attention,
    get_impl,
    head_dim_tile,
    naive_attention,
    portable_attention,
    reference_attention,
    sdpa_attention,
)

__all__ = [
    "DTYPES",
    "HEAD_DIM_TILES",
    "HEAD_DIMS",
    "IMPLEMENTATIONS",
    "SDPA_BACKENDS",
    "candidate_configs",
    "check_dtype_supported",
    "fa4_attention",
    "flash_attention",
    "get_impl",
    "head_dim_tile",
    "hopper_path_runs",
    "kernel_config_of_last_call",
    "naive_attention",
    "portable_attention",
    "reference_attention",
    "resolve_path",
    "sdpa_attention",
]
