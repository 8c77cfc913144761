#!/usr/bin/env bash
# Pack FlashAttention-4 and its CuTe DSL runtime for a GPU machine that has no package index.
#
#   scripts/fa4_wheels.sh [OUT_DIR]          (default .fa4; run where pip can reach PyPI)
#   scripts/fa4_wheels.sh --split [OUT_DIR]  split the archive an earlier run kept again, to the room the tree
#                                            leaves now (no download)
#
# The wheels unpacked together come to ~265 MB, xz brings them to ~69 MB: more than one device call
# carries (64 MiB with the working tree, whose committed runs grow by about 2 MB a collect), so the
# archive is split into parts, OUT_DIR/stage1 .. stageN, to be carried in calls back to back (each but the last
# leaves its part in /tmp there; see scripts/fa4_unpack.sh). A part travels beside the working tree, so by default
# it takes the room the tracked files leave under 64 MiB, less 1 MiB (PART_SIZE overrides it): parts of 16M no
# longer fitted beside the 51 MB of plain runs of 2026-12-05 (compacted since: make compact). Re-split (--split)
# when the tree has grown. Wheels are unzipped into one folder rather than pip-installed: the DSL's
# wheels share the nvidia_cutlass_dsl folder, which `pip install --target` does not merge.
set -euo pipefail
SPLIT_ONLY=0
if [ "${1:-}" = "--split" ]; then SPLIT_ONLY=1; shift; fi
OUT=${1:-.fa4}
PY=${PYTHON:-python3}
# The versions the committed runs measured; pyproject's [fa4] extra names the same two.
WHEELS=(flash-attn-4==4.0.0b36 nvidia-cutlass-dsl==4.8.1 nvidia-cutlass-dsl-libs-base==4.8.1
        nvidia-cutlass-dsl-libs-core==4.8.1 nvidia-cutlass-dsl-libs-cu13==4.8.1 'apache-tvm-ffi<0.2'
        torch-c-dlpack-ext quack-kernels einops)
ARCHIVE="$OUT/fa4.tar.xz"  # kept beside the parts (git ignores OUT), so a re-split needs no download

part_size() {
    if [ -n "${PART_SIZE:-}" ]; then echo "$PART_SIZE"; return; fi
    local tree room
    tree=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -n 1 | cut -f1)
    room=$(( 64 * 1024 * 1024 - tree - 1024 * 1024 ))
    if [ "$room" -lt $(( 4 * 1024 * 1024 )) ]; then
        echo "fa4_wheels: the tracked files take $tree bytes, which leaves under 4 MiB of a device call's 64 MiB for" \
             "a part; make room in the tree (the committed runs are most of it) or set PART_SIZE" >&2
        exit 1
    fi
    echo "$room"
}

if [ "$SPLIT_ONLY" = 0 ]; then
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    echo "fa4_wheels: downloading ${#WHEELS[@]} wheels (CPython 3.12, x86-64 Linux)" >&2
    "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
        -d "$work/wheels" "${WHEELS[@]}"
    mkdir -p "$work/tree"
    for w in "$work"/wheels/*.whl; do "$PY" -m zipfile -e "$w" "$work/tree/"; done
    echo "fa4_wheels: compressing $(du -sh "$work/tree" | cut -f1) with xz -9e (a few minutes on two cores)" >&2
    mkdir -p "$OUT"
    tar -C "$work/tree" -cf - . | xz -9e -T0 > "$ARCHIVE.partial"
    mv "$ARCHIVE.partial" "$ARCHIVE"
elif [ ! -f "$ARCHIVE" ]; then
    echo "fa4_wheels: no $ARCHIVE to split; run scripts/fa4_wheels.sh without --split first" >&2
    exit 1
fi
size=$(part_size)
rm -rf "$OUT"/stage*
split -b "$size" "$ARCHIVE" "$OUT/part."
n=0
for part in "$OUT"/part.*; do
    n=$((n + 1))
    mkdir -p "$OUT/stage$n"
    mv "$part" "$OUT/stage$n/"
done
# The last stage holds the checksum: the call that carries it is the one that unpacks.
sha256sum "$ARCHIVE" | cut -d' ' -f1 > "$OUT/stage$n/sha256"
grep -qxF "/$OUT/" .git/info/exclude 2>/dev/null || echo "/$OUT/" >> .git/info/exclude
echo "fa4_wheels: $OUT/stage1 .. stage$n, parts of $((size / 1024)) KiB beside a tree that leaves that room;" \
     "git ignores $OUT" >&2
