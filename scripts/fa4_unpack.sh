# Unpack FlashAttention-4 on the GPU machine and put it on PYTHONPATH. Source it in the call that
# carries the last part, after calls that carried the others (scripts/fa4_wheels.sh made them):
#
#   calls 1 .. N-1 (carry .fa4/stageK):  mkdir -p /tmp/fa4stage && cp .fa4/stageK/part.* /tmp/fa4stage/
#   call N (carry .fa4/stageN):          . scripts/fa4_unpack.sh && make collect PROFILE=full
#
# A warm machine is handed back after about 30 s idle and /tmp goes with it, so the calls must follow
# one another at once. Without every part this prints what is missing and changes nothing: FA4's rows
# then say it is not installed.
_fa4_dir=${FA4_DIR:-/tmp/fa4}
_fa4_stage=${FA4_STAGE:-/tmp/fa4stage}
_fa4_sum=$(ls "${FA4_PARTS:-.fa4}"/stage*/sha256 2>/dev/null | head -n 1)
if [ -d "$_fa4_dir/flash_attn" ]; then
    echo "fa4_unpack: already unpacked in $_fa4_dir" >&2
elif [ -z "$_fa4_sum" ]; then
    echo "fa4_unpack: this call carries no last part (a .fa4/stageN with its sha256; see scripts/fa4_wheels.sh);" \
         "FlashAttention-4 stays uninstalled" >&2
else
    mkdir -p "$_fa4_stage"
    cp "${_fa4_sum%/*}"/part.* "$_fa4_stage"/
    # split names the parts part.aa, part.ab, ...: the glob's order is the archive's.
    cat "$_fa4_stage"/part.* > /tmp/fa4.tar.xz
    if [ "$(sha256sum /tmp/fa4.tar.xz | cut -d' ' -f1)" != "$(cat "$_fa4_sum")" ]; then
        echo "fa4_unpack: the parts in $_fa4_stage ($(ls "$_fa4_stage" | tr '\n' ' ')) do not make the packed" \
             "archive (sha256 differs): carry every stage again, one call each, back to back" >&2
    else
        mkdir -p "$_fa4_dir"
        tar -C "$_fa4_dir" -xJf /tmp/fa4.tar.xz && echo "fa4_unpack: unpacked into $_fa4_dir" >&2
    fi
    rm -f /tmp/fa4.tar.xz
fi
if [ -d "$_fa4_dir/flash_attn" ]; then
    export PYTHONPATH="$_fa4_dir:$_fa4_dir/nvidia_cutlass_dsl/dsl_packages${PYTHONPATH:+:$PYTHONPATH}"
fi
unset _fa4_dir _fa4_stage _fa4_sum
