"""GPU kernels and their PyTorch references. No file I/O, no plotting."""

# Importing a kernel path registers it with kernels/dispatch.py, which flash_attention consults.
# The Hopper and Gluon paths lean on Triton APIs that move between releases (Gluon is experimental):
# on a Triton where one does not import, its path is refused with the reason, and the rest still runs.
from . import dispatch as _dispatch

for _name, _title in (("gluon", "Gluon"), ("hopper", "Hopper")):
    try:
        __import__(f"{__name__}.attention_{_name}")
    except Exception as _exc:  # noqa: BLE001 - any failure to import is the same fact about this Triton
        _dispatch.register_missing(_name, _title, _exc)
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
