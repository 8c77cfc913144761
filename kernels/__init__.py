"""GPU kernels and their PyTorch references. No file I/O, no plotting."""

# Importing a kernel path registers it with kernels/dispatch.py, which flash_attention consults.
from . import attention_gluon  # noqa: F401 - registers the Gluon path
from . import attention_hopper  # noqa: F401 - registers the Hopper path
from . import turing_path  # noqa: F401 - registers the Turing path (its Gluon kernel loads on first use)
from .attention import (
    HEAD_DIMS,
    IMPLEMENTATIONS,
    SDPA_BACKENDS,
    candidate_configs,
    get_impl,
    naive_attention,
    reference_attention,
    sdpa_attention,
)
from .dispatch import flash_attention, kernel_config_of_last_call

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
