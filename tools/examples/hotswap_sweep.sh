#!/bin/sh
# A per-tensor re-quantization sweep with live swap (ik_llama.cpp's workflow), as the
# pre-reload script of `tools/run perplexity --hotswap`:
#
#   cp model.gguf live.gguf
#   SWEEP_MODEL=live.gguf SWEEP_ORIG=model.gguf SWEEP_TYPE=Q4_0 \
#   SWEEP_TENSORS="blk.0.ffn_up.weight blk.1.ffn_up.weight" \
#     tools/run perplexity -m live.gguf -f text.txt --hotswap --json \
#       --pre-reload-script tools/examples/hotswap_sweep.sh
#
# Round 0 measures the model as it is. After round r (SLUICE_HOTSWAP_ROUND=r) this script puts
# back the original file and re-quantizes the (r+1)-th tensor of SWEEP_TENSORS to SWEEP_TYPE,
# so round r+1 measures that one tensor's cost; after the last tensor it restores the original
# (whose round must reproduce round 0's PPL exactly) and then changes nothing, which ends the
# loop. Files are replaced by rename, so the running model never reads half a file.
set -eu
: "${SWEEP_MODEL:?}" "${SWEEP_ORIG:?}" "${SWEEP_TYPE:=Q4_0}" "${SWEEP_TENSORS:?}"
SLUICE=${SLUICE:-tools/run}
r=${SLUICE_HOTSWAP_ROUND:-0}
n=$(echo "$SWEEP_TENSORS" | wc -w)
next=$((r + 1))
state="$SWEEP_MODEL.sweep-done"
if [ "$next" -le "$n" ]; then
    t=$(echo "$SWEEP_TENSORS" | tr -s ' ' '\n' | sed -n "${next}p")
    $SLUICE requant -m "$SWEEP_ORIG" --tensor "$t" --type "$SWEEP_TYPE" -o "$SWEEP_MODEL.new" >&2
    mv "$SWEEP_MODEL.new" "$SWEEP_MODEL"
elif [ ! -e "$state" ]; then
    cp "$SWEEP_ORIG" "$SWEEP_MODEL.new" && mv "$SWEEP_MODEL.new" "$SWEEP_MODEL"
    touch "$state"
fi
