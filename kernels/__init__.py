"""GPU kernels and their PyTorch references. No file I/O, no plotting.

Two families that never import each other, and what they share:

- ``kernels/attention/``: prefill attention, ``flash_attention`` and the paths it picks between
  (portable, Hopper, Gluon, Turing), with the references it is measured against. Start at its
  ``__init__``.
- ``kernels/decode/``: one decode step of GPT-2: split-KV decode attention, the int8 cache, the
  fused step and the loops that run it. Start at its ``__init__``.
- here: ``common.py`` (dtypes, head sizes, device facts), ``aot.py`` (compile for a GPU that is
  not here), ``retarget.py`` (run an older GPU's build on this one), ``supported.py`` (the Triton
  range), ``gluon_compat.py`` (Gluon's names across releases) and ``membench.py`` (the env
  phase's L2 and shared-memory read rates).
"""

from .attention import (
    HEAD_DIMS,
    IMPLEMENTATIONS,
    SDPA_BACKENDS,
    candidate_configs,
    flash_attention,
    get_impl,
    kernel_config_of_last_call,
    naive_attention,
    reference_attention,
    sdpa_attention,
)

__all__ = [
    "HEAD_DIMS",
    "IMPLEMENTATIONS",
    "SDPA_BACKENDS",
    "candidate_configs",
    "flash_attention",
    "get_impl",
    "kernel_config_of_last_call",
    "naive_attention",
    "reference_attention",
    "sdpa_attention",
]
