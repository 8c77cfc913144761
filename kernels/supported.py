"""The torch and Triton releases the kernels are tested on, and the one their choices were measured on.

A collect runs on whatever torch and Triton the GPU box has (a hosted T4 runtime brings its own), so
the kernels are tested on a range of releases (`make test-range`: each Triton below imports, compiles
for sm75, sm80 and sm90, and passes the portable kernel's interpreter tests). Their speed was measured
on one: flash_attention takes the Hopper and Gluon paths by itself only on a Triton in
MEASURED_TRITON, since a newer compiler can make a measured rule untrue; on the others it runs the
portable kernel and says why (a path asked for by name still runs).
"""
from __future__ import annotations

import functools

# (torch, the Triton its PyPI wheel depends on), oldest first: the releases of the last three torch
# minor versions and the Triton the H200 measurements ran on. Tests run each Triton beside the test
# install's CPU torch (torch's CPU wheel does not depend on Triton).
SUPPORTED = (
    ("2.11.0", "3.6.0"),
    ("2.13.0", "3.7.1"),
    ("2.14.1", "3.8.0"),
    ("2.15.0", "3.9.0"),
)
SUPPORTED_TRITON = tuple(triton for _, triton in SUPPORTED)

# The Triton every measured rule in kernels/attention/dispatch.py (SHAPE_RULES) was measured with, on the H200.
MEASURED_TRITON = ("3.6.0",)


@functools.lru_cache(maxsize=None)
def triton_version() -> str:
    import triton

    return triton.__version__


def unmeasured_reason(version: str | None = None) -> str | None:
    """Why flash_attention keeps to the portable path by itself on this Triton, or None where its
    rules were measured."""
    version = version or triton_version()
    if version in MEASURED_TRITON:
        return None
    return (f"Triton {version}: the Hopper and Gluon paths are taken by themselves only on Triton "
            f"{', '.join(MEASURED_TRITON)}, the release they were measured on; path='hopper' or 'gluon' runs one here")
