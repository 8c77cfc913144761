"""Some of the softmax's exponentials on the FMA pipes instead of the special-function unit.

At d=64 a 64 x 128 key step asks the tensor cores for 2 x 64 x 128 x 64 x 2 flops (512 cycles of an
H100/H200 SM's 4,096 dense bf16 flops a cycle) and the special-function unit for 8,192 exponentials
(512 cycles at 16 a cycle): the two are equal, so the softmax can only hide behind the matmuls if
nothing else slows either. An FMA pipe does 32 lanes a cycle per scheduler, so 2^x written as
2^floor(x) * p(x - floor(x)), with p a cubic, costs nine plain instructions (about nine issue cycles a
warp) where ex2 holds the unit's four lanes for eight. Moving one exponential in four to the FMA pipes
takes the unit's share of a step from 512 to 384 cycles for about 100 more issue cycles per warp.
FlashAttention-4 does this on Blackwell, where the unit is slower still against the tensor cores
(Tri Dao et al., 2025); the polynomial, its fit and the code here are our own.

The split is fixed per element by position in a thread's registers: `exp2_shared` hands each group
of four consecutive register elements to one inline-assembly block that sends `emulated` of them to
the polynomial. Which elements a block receives does not matter: the function is elementwise.
"""
from __future__ import annotations

import numpy as np
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

# p(f) = c0 + c1 f + c2 f^2 + c3 f^3 fitted to 2^f on [0, 1) by iteratively reweighted least squares on
# the relative error, with c0 = 1 so that 2^0 and every whole power of two come out exact. Its largest
# relative error, evaluated in float32, is 8.6e-5: below half an ulp of fp16 (4.9e-4) and of bf16
# (3.9e-3), the dtypes P is rounded to before its matmul.
EX2_POLY = (1.0, 0.69511657, 0.22764593, 0.07706618)
EX2_MAX_REL_ERROR = 8.6e-5
GROUP = 4  # register elements per assembly block
_ROUND = float(2**23 + 2**22)  # adding this, rounding down, leaves floor(x) in the low mantissa bits


def _f32_hex(x: float) -> str:
    return "0f%08X" % int(np.float32(x).view(np.uint32))


def _poly_block(src: str, dst: str) -> str:
    c0, c1, c2, c3 = (_f32_hex(c) for c in EX2_POLY)
    return "\n".join([
        "{",
        ".reg .b32 c, r, rb, f, q, e;",
        f"max.ftz.f32 c, {src}, {_f32_hex(-127.0)};",  # 2^-127 and below are 0 (or a denormal) anyway
        f"add.rm.ftz.f32 r, c, {_f32_hex(_ROUND)};",
        f"sub.rn.ftz.f32 rb, r, {_f32_hex(_ROUND)};",  # floor(x), exactly
        "sub.rn.ftz.f32 f, c, rb;",  # x - floor(x), in [0, 1)
        f"fma.rn.ftz.f32 q, f, {c3}, {c2};",
        f"fma.rn.ftz.f32 q, q, f, {c1};",
        f"fma.rn.ftz.f32 q, q, f, {c0};",
        # floor(x) sits in r's low bits; shifted into the exponent field it scales p(f) by 2^floor(x)
        # (an integer add: the wrap-around makes floor(x) = -127 give exactly 0).
        "shl.b32 e, r, 23;",
        f"add.s32 {dst}, q, e;",
        "}",
    ])


def exp2_asm(emulated: int) -> str:
    """The PTX of one block: outputs $0-$3, inputs $4-$7; the last `emulated` of the four by the
    polynomial, the rest by ex2.approx."""
    if not 0 <= emulated <= GROUP:
        raise ValueError(f"exp2_asm: emulated must be 0..{GROUP}, got {emulated}")
    lines = [f"ex2.approx.ftz.f32 ${i}, ${i + GROUP};" for i in range(GROUP - emulated)]
    lines += [_poly_block(f"${i + GROUP}", f"${i}") for i in range(GROUP - emulated, GROUP)]
    return "\n".join(lines)


def emulated_exp2(x: np.ndarray) -> np.ndarray:
    """What the polynomial block computes, in numpy float32 (for tests): 2^floor(x) * p(x - floor(x))."""
    x = np.maximum(np.asarray(x, dtype=np.float32), np.float32(-127.0))
    fl = np.floor(x)
    f = (x - fl).astype(np.float32)
    c0, c1, c2, c3 = (np.float32(c) for c in EX2_POLY)
    q = ((c3 * f + c2) * f + c1) * f + c0
    bits = (q.view(np.uint32).astype(np.int64) + (fl.astype(np.int64) << 23)) & 0xFFFFFFFF
    return bits.astype(np.uint32).view(np.float32)


EX2_ONE_OF_FOUR = gl.constexpr(exp2_asm(1))
EX2_TWO_OF_FOUR = gl.constexpr(exp2_asm(2))


@gluon.jit
def exp2_shared(x, EMULATED: gl.constexpr):
    """2^x of a float32 tensor, EMULATED (1 or 2) of every four elements by the polynomial. With none, callers
    write gl.exp2 themselves (gluon_parts.softmax_update says why)."""
    gl.static_assert(EMULATED == 1 or EMULATED == 2, "exp2_shared: EMULATED is 1 or 2 of every 4")
    if EMULATED == 1:
        y = gl.inline_asm_elementwise(EX2_ONE_OF_FOUR, "=r,=r,=r,=r,r,r,r,r", [x], dtype=gl.float32,
                                      is_pure=True, pack=4)
    else:
        y = gl.inline_asm_elementwise(EX2_TWO_OF_FOUR, "=r,=r,=r,=r,r,r,r,r", [x], dtype=gl.float32,
                                      is_pure=True, pack=4)
    return y
