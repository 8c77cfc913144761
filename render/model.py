"""The byte arithmetic of attention: pure functions, forward pass only, bytes crossing DRAM.

N is the sequence length, d the head dimension, e the bytes per element, heads the number of
(batch, head) pairs B*H. Per head, the score matrix S is N x N; the naive path writes S, reads it
for the softmax, writes P and reads P again for P @ V (four passes of e*N^2), and both paths read
Q, K, V and write O once (4*e*N*d). A fused kernel keeps S and P on chip. The model assumes S and P
are stored in the input dtype; an implementation that keeps them in fp32 moves more.
"""
from __future__ import annotations

import math

from collect.schema.common import attention_flops

from .fmt import known
from .vocab import ELEMENT_BYTES


def s_matrix_bytes(n: int, e: int = 2, heads: int = 1) -> int:
    """One N x N score matrix per head."""
    return heads * e * n * n


def output_bytes(n: int, d: int, e: int = 2, heads: int = 1) -> int:
    """O written once: what every attention call must write, fused or not."""
    return heads * e * n * d


def endpoint_bytes(n: int, d: int, e: int = 2, heads: int = 1) -> int:
    """Q, K, V read and O written once."""
    return heads * 4 * e * n * d


def naive_traffic_bytes(n: int, d: int, e: int = 2, heads: int = 1) -> int:
    """4eNd + 4eN^2 per head: the endpoints plus four passes over S and P."""
    return endpoint_bytes(n, d, e, heads) + 4 * s_matrix_bytes(n, e, heads)


# kernels/attention.naive_attention as written, non-causal: the product writes S; the scaling, a kernel
# of its own, reads and writes it; the softmax reads it and writes P in fp32; the cast reads that and
# writes P in the input dtype; P @ V reads P. Six passes at e bytes an element, two at four.
NAIVE_AS_WRITTEN_PASSES = 6
NAIVE_AS_WRITTEN_FP32_PASSES = 2


def naive_as_written_bytes(n: int, d: int, e: int = 2, heads: int = 1) -> int:
    """What this report's naive code moves if every pass reaches DRAM: the endpoints, then S and P as above."""
    return endpoint_bytes(n, d, e, heads) + heads * n * n * (NAIVE_AS_WRITTEN_PASSES * e + NAIVE_AS_WRITTEN_FP32_PASSES * 4)


def fused_traffic_bytes(n: int, d: int, e: int = 2, heads: int = 1) -> int:
    """4eNd per head: S never reaches DRAM."""
    return endpoint_bytes(n, d, e, heads)


def traffic_ratio(n: int, d: int) -> float:
    """naive / fused = 1 + N/d; the element size and the head count cancel."""
    return 1 + n / d


def flops(n: int, d: int, heads: int = 1, causal: bool = False) -> float:
    """4*N^2*d per head (QK^T and PV, 2*N^2*d each); the causal convention halves it."""
    return attention_flops(1, heads, n, d, causal)


def max_n_s_fits(cache_bytes: int, e: int = 2, heads: int = 1) -> int:
    """Largest N whose S matrices, one per head, fit together in `cache_bytes` (heads=1: one head alone)."""
    return math.isqrt(cache_bytes // (heads * e))


def max_n_before_oom(memory_bytes: int, heads: int, e: int = 2, live_s_tensors: float = 2) -> int:
    """Largest N at which `live_s_tensors` score-sized tensors (heads*e*N^2 bytes each) fit in memory together.

    How many are live at the naive path's peak is its code's doing, so the caller gives the count. As written
    (kernels/attention/portable.naive_attention) the scores stay alive, a named variable, while softmax writes its
    output in fp32 and the cast writes that back in the input dtype: 2e + 4 bytes an element, four score-sized
    tensors in fp16. In bf16 PyTorch's softmax first copies the scores to fp32 (its fused half-to-float kernel takes
    fp16 only), so at the softmax the scores, that copy and the fp32 output are live: e + 8 bytes, five. The measured
    peaks of every naive bench row are exactly those multiples. The default, two (the scores and the softmax output
    in the input dtype), is the fewest an out-of-place softmax holds; a measured multiple may be fractional.
    Everything else on the device is ignored, so the real limit is lower.
    """
    if live_s_tensors <= 0:
        raise ValueError(f"live_s_tensors must be positive, got {live_s_tensors}")
    return math.isqrt(int(memory_bytes // (live_s_tensors * heads * e)))


def naive_intensity(n: int, d: int, e: int = 2) -> float:
    """FLOP per DRAM byte of the naive path: 4N^2 d / (4eNd + 4eN^2) = N d / (e (N + d)); N d / (2(N + d)) in fp16."""
    return flops(n, d) / naive_traffic_bytes(n, d, e)


def naive_intensity_limit(d: int, e: int = 2) -> float:
    """What naive_intensity tends to as N grows: d/e (d/2 in fp16). No sequence length gets past it."""
    return d / e


def fused_intensity(n: int, d: int, e: int = 2) -> float:
    """FLOP per DRAM byte of a fused kernel: 4N^2 d / 4eNd = N/e (N/2 in fp16), unbounded in N."""
    return flops(n, d) / fused_traffic_bytes(n, d, e)


def ridge_point(flops_per_s: float, bytes_per_s: float) -> float:
    """FLOP per byte where the bandwidth roof meets the compute roof."""
    if flops_per_s <= 0 or bytes_per_s <= 0:
        raise ValueError(f"ceilings must be positive, got {flops_per_s} FLOP/s and {bytes_per_s} B/s")
    return flops_per_s / bytes_per_s


def fused_crosses_ridge_n(ridge: float, e: int = 2) -> float:
    """N from which a fused kernel's intensity N/e is at or past the ridge point."""
    return ridge * e


def naive_crosses_ridge_n(ridge: float, d: int, e: int = 2) -> float | None:
    """N from which the naive path would be compute-bound, or None: it never is when d/e <= ridge.

    Solves N d / (e (N + d)) = ridge for N.
    """
    if naive_intensity_limit(d, e) <= ridge:
        return None
    return ridge * e * d / (d - ridge * e)


def attainable_flops(intensity: float, peak_flops_per_s: float, bytes_per_s: float) -> float:
    """The roofline: min(compute roof, intensity x bandwidth)."""
    return min(peak_flops_per_s, intensity * bytes_per_s)


def causal_fraction(t: int) -> float:
    """Share of key blocks a causal kernel visits with T query and key blocks of equal size: (T+1)/(2T)."""
    if t < 1:
        raise ValueError(f"the number of blocks T must be >= 1, got {t}")
    return (t + 1) / (2 * t)


def _causal_query_blocks(n: int, block_m: int, block_n: int):
    """Per query block: (key blocks it visits, how many of those lie wholly below the diagonal).

    Query block i covers rows [i*BM, (i+1)*BM) and visits every key block starting before row (i+1)*BM.
    """
    if min(n, block_m, block_n) < 1:
        raise ValueError(f"n, block_m and block_n must be >= 1, got {n}, {block_m}, {block_n}")
    k_blocks = -(-n // block_n)
    for i in range(-(-n // block_m)):
        visited = min(k_blocks, -(-min(n, (i + 1) * block_m) // block_n))
        yield visited, min(visited, (i * block_m) // block_n)


def causal_blocks_visited(n: int, block_m: int, block_n: int) -> tuple[int, int]:
    """(visited, total) key-block visits of a causal kernel that skips the blocks above the diagonal."""
    visits = list(_causal_query_blocks(n, block_m, block_n))
    return sum(v for v, _ in visits), len(visits) * -(-n // block_n)


def causal_diagonal_visits(n: int, block_m: int, block_n: int) -> int:
    """Key-block visits that straddle the diagonal: computed in full, then partly masked away."""
    return sum(v - below for v, below in _causal_query_blocks(n, block_m, block_n))


def predicted_causal_speedup(n: int, block_m: int, block_n: int) -> float:
    """Non-causal time over causal time if time were proportional to the key blocks visited."""
    visited, total = causal_blocks_visited(n, block_m, block_n)
    return total / visited


def dram_moved_bytes(read: float, written: float | None, output_bytes: float) -> float:
    """A profiled call's DRAM traffic as Nsight Compute counted it, the writes at least the call's output:
    the counters stop when the kernel ends, and an output small enough to sit in L2 has not reached DRAM
    yet (at B=2, H=8, N=2048, d=64 the fused kernel's 4 MiB output showed as about a kilobyte written)."""
    return read + max(written or 0.0, output_bytes)


def call_dram_bytes(row) -> float | None:
    """A profiled call's DRAM bytes on the report's one basis (dram_moved_bytes), from its profile row: read plus
    written, the writes at least the call's output; a published profile's total (dram_bytes), which gives no split,
    as published; None where neither was recorded. Every page that shows a call's DRAM bytes reads them here."""
    if not known(row.get("dram_read_bytes")):
        total = row.get("dram_bytes")
        return float(total) if known(total) else None
    written = row.get("dram_write_bytes")
    out = output_bytes(row["seq_len"], row["head_dim"], ELEMENT_BYTES.get(row["dtype"], 2), row["batch"] * row["heads"])
    return dram_moved_bytes(float(row["dram_read_bytes"]), float(written) if known(written) else None, float(out))
