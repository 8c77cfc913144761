"""The table "shape class -> path -> version -> kernel function" of dispatch.py's docstring, made
from SHAPE_RULES: ``python -m kernels.attention.route_table`` prints it, and
tests/test_route_table.py checks that the docstring holds exactly what it prints.

It covers the automatic choice on compute capability 9.x (float16 and bfloat16, on the Triton the
rules were measured with, kernels/supported.py); elsewhere flash_attention takes the Turing path
(7.5, float16) or the portable kernel, whatever the shape.
"""
from __future__ import annotations

from ..common import HEAD_DIMS, head_dim_tile
from . import gluon_versions
from .dispatch import SHAPE_RULES, rule_route

# Where no rule matches, the first path of AUTO_ORDER available on 9.x (rule_route's `otherwise`).
FALLBACK_PATH = rule_route((), 0, False, 0)[0]
# The kernel functions each path launches, where its version does not name one.
PATH_KERNELS = {
    "portable": "portable._attn_fwd",
    # hopper.best_features: persistent below SPLIT_FROM_SEQ_LEN (and always without a mask), the
    # split causal schedule and its merge from there.
    "hopper": "hopper._hopper_fwd_ws_persistent, or hopper._hopper_fwd_ws + hopper._diag_merge "
              "(causal from hopper.SPLIT_FROM_SEQ_LEN)",
}


def _lengths(rule) -> str:
    if rule.max_len is None:
        lengths = "any N" if rule.min_len <= 1 else f"N >= {rule.min_len}"
    else:
        lengths = f"N <= {rule.max_len}" if rule.min_len <= 1 else f"{rule.min_len} <= N <= {rule.max_len}"
    if not rule.min_rows:
        return lengths
    power = rule.min_rows.bit_length() - 1
    return lengths + f", B*H*N >= {f'2^{power}' if rule.min_rows == 1 << power else rule.min_rows}"


def _head_sizes(rule, earlier) -> str:
    """The head sizes the rule takes: its tile's, within its own range, less those an earlier rule for the
    same tile, masking and lengths takes (first match wins)."""
    def takes(r, d):
        return head_dim_tile(d) == r.head_dim and (r.head_sizes is None or r.head_sizes[0] <= d <= r.head_sizes[1])

    same = [r for r in earlier if (r.head_dim, r.causal, r.min_len, r.max_len, r.min_rows) ==
            (rule.head_dim, rule.causal, rule.min_len, rule.max_len, rule.min_rows)]
    sizes = [d for d in HEAD_DIMS if takes(rule, d) and not any(takes(r, d) for r in same)]
    return f"d {sizes[0]}-{sizes[-1]}" if len(sizes) > 1 else f"d {sizes[0]}"


# The module of each Gluon kernel a record names ("g1": the tile kernel, "ws": the warp-specialized one).
GLUON_KERNEL_MODULES = {"g1": "gluon_tile", "ws": "gluon_ws"}


def _gluon_kernel(version: str) -> str:
    kernel = gluon_versions.get_version(version).kernel
    return f"{GLUON_KERNEL_MODULES[kernel]}._{kernel}_kernel"


def rows() -> list[tuple[str, str, str, str]]:
    """(shape class, path, version, kernel function), one per rule in SHAPE_RULES' order (first
    match wins), then the fallback for every shape no rule matches."""
    out = []
    for i, rule in enumerate(SHAPE_RULES):
        version = dict(rule.config).get("version", "")
        masking = "causal" if rule.causal else "non-causal"
        kernel = _gluon_kernel(version) if rule.path == "gluon" else PATH_KERNELS[rule.path]
        out.append((f"{_head_sizes(rule, SHAPE_RULES[:i])}, {masking}, {_lengths(rule)}", rule.path, version or "-",
                    kernel))
    out.append(("any other shape", FALLBACK_PATH, "-", PATH_KERNELS[FALLBACK_PATH]))
    return out


def table() -> str:
    """rows() as the plain-text table dispatch.py's docstring holds, four spaces in."""
    head = ("shape class", "path", "version", "kernel function (kernels/attention/)")
    body = rows()
    widths = [max(len(r[i]) for r in (head, *body)) for i in range(3)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r[:3], widths)) + "  " + r[3] for r in (head, *body)]
    lines.insert(1, "  ".join("-" * w for w in widths) + "  " + "-" * len(head[3]))
    return "\n".join("    " + line.rstrip() for line in lines)


if __name__ == "__main__":
    print(table())
