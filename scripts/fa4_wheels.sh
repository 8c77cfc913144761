#!/usr/bin/env bash
# Pack FlashAttention-4 and its CuTe DSL runtime for a GPU machine that has no package index.
#
#   scripts/fa4_wheels.sh [OUT_DIR]        (default .fa4; run where pip can reach PyPI)
#
# The wheels unpacked together come to ~265 MB, xz brings them to ~69 MB: more than one device call
# carries (64 MiB with the working tree, whose committed runs grow by about 2 MB a collect), so the
# archive is split into parts of PART_SIZE (default 16M: five parts), OUT_DIR/stage1 .. stageN, to be
# carried in calls back to back (each but the last leaves its part in /tmp there; see
# scripts/fa4_unpack.sh). Wheels are unzipped into one folder rather than pip-installed: the DSL's
# wheels share the nvidia_cutlass_dsl folder, which `pip install --target` does not merge.
set -euo pipefail
OUT=${1:-.fa4}
PY=${PYTHON:-python3}
# The versions the committed runs measured; pyproject's [fa4] extra names the same two.
WHEELS=(flash-attn-4==4.0.0b36 nvidia-cutlass-dsl==4.8.1 nvidia-cutlass-dsl-libs-base==4.8.1
        nvidia-cutlass-dsl-libs-core==4.8.1 nvidia-cutlass-dsl-libs-cu13==4.8.1 'apache-tvm-ffi<0.2'
        torch-c-dlpack-ext quack-kernels einops)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "fa4_wheels: downloading ${#WHEELS[@]} wheels (CPython 3.12, x86-64 Linux)" >&2
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
    -d "$work/wheels" "${WHEELS[@]}"
mkdir -p "$work/tree"
for w in "$work"/wheels/*.whl; do "$PY" -m zipfile -e "$w" "$work/tree/"; done
echo "fa4_wheels: compressing $(du -sh "$work/tree" | cut -f1) with xz -9e (a few minutes on two cores)" >&2
tar -C "$work/tree" -cf - . | xz -9e -T0 > "$work/fa4.tar.xz"
rm -rf "$OUT"/stage*
split -b "${PART_SIZE:-16M}" "$work/fa4.tar.xz" "$work/part."
n=0
for part in "$work"/part.*; do
    n=$((n + 1))
    mkdir -p "$OUT/stage$n"
    mv "$part" "$OUT/stage$n/"
done
# The last stage holds the checksum: the call that carries it is the one that unpacks.
(cd "$work" && sha256sum fa4.tar.xz | cut -d' ' -f1) > "$OUT/stage$n/sha256"
grep -qxF "/$OUT/" .git/info/exclude 2>/dev/null || echo "/$OUT/" >> .git/info/exclude
echo "fa4_wheels: $OUT/stage1 .. stage$n ($(du -sh "$OUT" | cut -f1)); git ignores $OUT" >&2
