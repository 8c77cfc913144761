# Unpack FlashAttention-4 on the GPU machine and put it on PYTHONPATH. Source it, in the call that
# carries the second part, after a call that carried the first:
#
#   call 1 (carry .fa4/stage1):  mkdir -p /tmp/fa4stage && cp .fa4/stage1/part.aa /tmp/fa4stage/
#   call 2 (carry .fa4/stage2):  . scripts/fa4_unpack.sh && make collect PROFILE=full
#
# A warm machine is handed back after about 30 s idle and /tmp goes with it, so call 2 must follow at
# once. Without the parts this prints why and changes nothing: FA4's rows then say it is not installed.
_fa4_dir=${FA4_DIR:-/tmp/fa4}
_fa4_first=${FA4_STAGE:-/tmp/fa4stage}/part.aa
_fa4_second=${FA4_PARTS:-.fa4}/stage2/part.ab
if [ -d "$_fa4_dir/flash_attn" ]; then
    echo "fa4_unpack: already unpacked in $_fa4_dir" >&2
elif [ ! -f "$_fa4_first" ] || [ ! -f "$_fa4_second" ]; then
    echo "fa4_unpack: missing $([ -f "$_fa4_first" ] || echo "$_fa4_first ")$([ -f "$_fa4_second" ] || echo "$_fa4_second")" \
         "(see scripts/fa4_wheels.sh); FlashAttention-4 stays uninstalled" >&2
else
    mkdir -p "$_fa4_dir"
    cat "$_fa4_first" "$_fa4_second" > /tmp/fa4.tar.xz
    if [ -f "${_fa4_second%/*}/sha256" ] && [ "$(sha256sum /tmp/fa4.tar.xz | cut -d' ' -f1)" != "$(cat "${_fa4_second%/*}/sha256")" ]; then
        echo "fa4_unpack: the two parts do not make the packed archive (sha256 differs): carry both again" >&2
    else
        tar -C "$_fa4_dir" -xJf /tmp/fa4.tar.xz && echo "fa4_unpack: unpacked into $_fa4_dir" >&2
    fi
    rm -f /tmp/fa4.tar.xz
fi
if [ -d "$_fa4_dir/flash_attn" ]; then
    export PYTHONPATH="$_fa4_dir:$_fa4_dir/nvidia_cutlass_dsl/dsl_packages${PYTHONPATH:+:$PYTHONPATH}"
fi
unset _fa4_dir _fa4_first _fa4_second
