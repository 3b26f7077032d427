#!/usr/bin/env bash
# tests/tools/cuda_lazy_test.sh SLUICE: CUDA is loaded when a CUDA device is asked for, not at
# start-up (third_party/cuda.BUILD, kernels/cuda/blas.h).
#
# - `sluice --help` and a CPU-only `sluice generate --device sim` initialise no CUDA shared
#   object (libcuda, libcudart, libcublas, libcublasLt), and the sim run does not even look for
#   the driver;
# - without a GPU: the default device (auto) falls back to sim loading no CUDA library, and
#   `--device cuda` / SLUICE_DEVICE=cuda exit 1 with CUDA's own message, not a crash.
# What the dynamic loader initialised comes from LD_DEBUG=libs ("calling init: PATH" for every
# object loaded, at start-up or by dlopen), written to files by LD_DEBUG_OUTPUT.
set -uo pipefail
sluice="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
tmp="$(mktemp -d "${TEST_TMPDIR:-/tmp}/cuda-lazy.XXXXXX")"
fails=0
cuda_libs='lib(cuda|cudart|cublas|cublasLt)\.so'

expect() { # expect COND-STATUS MESSAGE
    if (($1 == 0)); then
        echo "ok   $2"
    else
        echo "FAIL $2"
        fails=$((fails + 1))
    fi
}

# run NAME ARGS...: runs sluice under LD_DEBUG=libs; sets rc, and leaves stdout, stderr and the
# loader's log in $tmp/NAME.{out,err,ld}.
run() {
    local name="$1"
    shift
    rm -f "$tmp/$name".ld.*
    LD_DEBUG=libs LD_DEBUG_OUTPUT="$tmp/$name.ld" "$sluice" "$@" >"$tmp/$name.out" \
        2>"$tmp/$name.err"
    rc=$?
    cat "$tmp/$name".ld.* >"$tmp/$name.ld" 2>/dev/null
}

# no_cuda_loaded NAME: the run initialised objects (the log works) and no CUDA one.
no_cuda_loaded() {
    local inits cuda
    inits="$(grep -c 'calling init:' "$tmp/$1.ld")"
    cuda="$(grep -E "calling init: .*/$cuda_libs" "$tmp/$1.ld" | sed 's/.*calling init: //' |
        sort -u | tr '\n' ' ')"
    [[ "$inits" -gt 0 ]]
    expect $? "$1: LD_DEBUG=libs logged the loader's work ($inits inits)"
    [[ -z "$cuda" ]]
    expect $? "$1: no CUDA library loaded${cuda:+ (loaded: $cuda)}"
}

# clean_exit NAME: no sanitizer report and no signal.
clean_exit() {
    ! grep -qE 'AddressSanitizer|LeakSanitizer|runtime error:|Segmentation|Aborted' "$tmp/$1.err"
    expect $? "$1: no crash or sanitizer report"
}

run help --help
expect $((rc != 0)) "--help exits 0 (rc=$rc)"
no_cuda_loaded help

run mkmodel mkmodel -o "$tmp/m.gguf"
expect $((rc != 0)) "mkmodel exits 0 (rc=$rc: $(tail -c 300 "$tmp/mkmodel.err"))"
no_cuda_loaded mkmodel

run sim generate -m "$tmp/m.gguf" -p hi -n 2 --temp 0 --device sim
expect $((rc != 0)) "generate --device sim exits 0 (rc=$rc: $(tail -c 300 "$tmp/sim.err"))"
no_cuda_loaded sim
! grep -q 'find library=libcuda\.so' "$tmp/sim.ld"
expect $? "generate --device sim does not look for the CUDA driver"

if [[ -e /dev/nvidiactl ]]; then
    echo "note: a GPU driver is present: the no-GPU checks (auto, --device cuda) are skipped"
else
    run auto generate -m "$tmp/m.gguf" -p hi -n 2 --temp 0
    expect $((rc != 0)) "generate (device auto, no GPU) exits 0 on sim (rc=$rc)"
    no_cuda_loaded auto

    for how in flag env; do
        if [[ "$how" == flag ]]; then
            run "cuda-$how" generate -m "$tmp/m.gguf" -p hi -n 2 --device cuda
        else
            SLUICE_DEVICE=cuda run "cuda-$how" generate -m "$tmp/m.gguf" -p hi -n 2
        fi
        msg="$(head -c 400 "$tmp/cuda-$how.err")"
        expect $((rc != 1)) "cuda ($how), no GPU: exits 1 (rc=$rc)"
        grep -qE 'cudaGetDeviceCount: .+' "$tmp/cuda-$how.err"
        expect $? "cuda ($how), no GPU: names the CUDA call and CUDA's reason ($msg)"
        clean_exit "cuda-$how"
        ! grep -qE "calling init: .*/lib(cudart|cublas|cublasLt)\.so" "$tmp/cuda-$how.ld"
        expect $? "cuda ($how), no GPU: loads neither cuBLAS nor a shared CUDA runtime"
    done
fi

rm -rf "$tmp"
echo "cuda_lazy_test: $fails failed"
((fails == 0))
