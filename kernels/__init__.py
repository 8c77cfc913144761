"""GPU kernels and their PyTorch references. No file I/O, no plotting."""

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
